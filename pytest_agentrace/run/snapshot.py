"""The agent's workspace recorded as a git tree (``snapshot_tree``): what the harness compares, checks and exports.

Every git call runs in the workspace's desk (``workspace.desk_dir``: the harness's own git folder beside the
workspace, hardened, nothing of the workspace's ``.git`` read). A repository the agent made inside its workspace is
recorded as an ordinary folder's files (``add_nested``), never as a gitlink.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from pytest_agentrace.errors import WorkspaceError
from pytest_agentrace.run import treefiles
from pytest_agentrace.run.desk import desk_dir, desk_git, git_process, make_desk


def snapshot_tree(ws: Path, git_folder: Path | None = None) -> str:
    """Record the workspace's files (tracked and untracked, ignored ones excluded) as a git tree; return its sha.

    Runs in the desk (``desk_dir``; ``git_folder`` when given must be it): its own index (a copy of the fresh
    clone's, so only changed files are hashed), its config and attributes; nothing of the workspace's ``.git``
    (config, hooks, index, ``core.worktree``) is read, and no filter or fsmonitor runs. Raises ``WorkspaceError``
    when git fails (e.g. the agent left a file git cannot read).
    """
    if git_folder is not None and Path(git_folder).absolute() != desk_dir(ws):
        raise WorkspaceError(f"{git_folder} is not the harness git folder of {ws} ({desk_dir(ws)})")
    proc = desk_process(ws, ["add", "-A"])
    if proc.returncode == 0 and EMBEDDED not in proc.stderr:
        return desk_git(["write-tree"], ws).strip()
    if proc.returncode != 0 and NO_COMMIT not in proc.stderr:
        raise WorkspaceError(f"git add -A failed in {ws} (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    add_nested(ws, treefiles.nested_repos(ws), proc.stderr)
    return desk_git(["write-tree"], ws).strip()


def desk_process(ws: Path, args: list[str], stdin: str | None = None,
                 env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``desk_git``'s call with its exit code and stderr returned, file names as ``os`` gives them
    (``surrogateescape``)."""
    desk = desk_dir(ws)
    if not (desk / "HEAD").is_file():
        make_desk(ws)
    return git_process(["--git-dir", str(desk), "--work-tree", str(Path(ws).absolute()), *args], desk, env,
                       stdin=stdin, errors="surrogateescape")


EMBEDDED = "adding embedded git repository"  # git add's warning for a nested repository with a commit
NO_COMMIT = "does not have a commit checked out"  # git add's error for one without


def add_nested(ws: Path, roots: list[str], why: str) -> None:
    """Record the files of the repositories ``roots`` nested in ``ws`` as files of ordinary folders (git would record
    a gitlink, whose files the checks' clean tree lacks, or refuse one with no commit): ``git add -A`` of the rest
    with those folders excluded (the desk's ``info/exclude``, written by the harness), then their files not ignored
    by the workspace's ignore rules (``check-ignore``) added one by one. Raises ``WorkspaceError`` (with git's
    ``why``) when no nested repository is found or a name cannot be written as an ignore pattern (a newline)."""
    if not roots or any(c in root for root in roots for c in "\n\r"):
        raise WorkspaceError(f"git add -A failed in {ws}: {why.strip()[-500:]}")
    exclude = desk_dir(ws) / "info" / "exclude"
    exclude.unlink(missing_ok=True)  # the harness's folder: a new file, never a link the agent could have left
    exclude.write_text("".join(f"{treefiles.ignore_pattern(root)}\n" for root in roots), encoding="utf-8")
    try:
        desk_git(["add", "-A"], ws)
    finally:
        exclude.unlink()
    files = treefiles.nested_files(ws, roots)
    # check-ignore takes no literal pathspecs: magic is off only for this call, and "./" keeps a name's ":" or "*"
    asked = desk_process(ws, ["check-ignore", "--no-index", "-z", "--stdin"], "".join(f"./{f}\0" for f in files),
                         env={"GIT_LITERAL_PATHSPECS": "0"})
    ignored = {line.removeprefix("./") for line in asked.stdout.split("\0")}
    for args, stdin in ((["rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *roots], None),
                        (["update-index", "--add", "-z", "--stdin"], "".join(f"{f}\0" for f in files if f not in ignored))):
        proc = desk_process(ws, args, stdin)
        if proc.returncode != 0:
            raise WorkspaceError(f"git {args[0]} of the repositories nested in {ws} failed: {proc.stderr.strip()[-500:]}")
