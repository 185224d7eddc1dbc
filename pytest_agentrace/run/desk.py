"""The harness's git: hardened git calls and the *desk*, the harness's own git folder beside a workspace.

Every harness git call starts with no system or global config and ``HARDENED`` settings on its command line
(``git``, ``git_process``): nothing a repository's config or attributes name is run, and files are hashed as
bytes. A workspace's snapshots and diffs run in its desk (``desk_dir``: ``<ws>.git``, outside the agent's reach;
``make_desk``, ``desk_git``, ``desk_git_head``) with ``--git-dir``/``--work-tree`` and ``info/attributes``
overriding every ``.gitattributes`` of the tree (``DESK_ATTRIBUTES``); the workspace's ``.git`` is the agent's and is
never read. ``run.workspace`` builds workspaces with these.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from pytest_agentrace.errors import WorkspaceError

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "agentrace",
    "GIT_AUTHOR_EMAIL": "agentrace@localhost",
    "GIT_COMMITTER_NAME": "agentrace",
    "GIT_COMMITTER_EMAIL": "agentrace@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


# Every harness git call starts with no system or global config and these settings on its command line (which
# outrank any config file): nothing a repository's config or attributes name is run, and files are hashed as bytes.
HARDENED = (
    "core.fsmonitor=false", "core.hooksPath=/dev/null", "core.untrackedCache=false", "core.splitIndex=false",
    "core.autocrlf=false", "core.safecrlf=false", "core.symlinks=true", "core.trustctime=true",
    "core.checkStat=default", "core.sparseCheckout=false", "core.pager=cat", "core.askPass=",
    "credential.helper=", "commit.gpgsign=false", "tag.gpgsign=false", "gc.auto=0", "maintenance.auto=false",
    "diff.external=", "diff.noprefix=false", "diff.mnemonicPrefix=false", "diff.relative=false", "color.ui=false",
    "status.showUntrackedFiles=all", "advice.detachedHead=false",
)
HARDENED_ENV = {  # no /etc/gitconfig, no ~/.gitconfig or ~/.config/git/config, no /etc/gitattributes
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_SYSTEM": "/dev/null", "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_LITERAL_PATHSPECS": "1",
}
# $GIT_DIR/info/attributes outranks every .gitattributes of the work tree: no filter (clean/smudge), no diff
# driver (textconv, external), no end-of-line, ident or encoding conversion, whatever the tree's files say
DESK_ATTRIBUTES = "* !filter !diff -text !eol -ident !working-tree-encoding -export-subst !merge\n"
DESK_CONFIG = ("[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = false\n"
               "\thooksPath = /dev/null\n\tautocrlf = false\n\tsymlinks = true\n[gc]\n\tauto = 0\n")


def git(args: list[str], cwd: Path, env: Mapping[str, str] | None = None, check: bool = True,
        user_config: bool = False, stdin: str | None = None, errors: str = "replace") -> str:
    """Run ``git args`` in ``cwd`` (``stdin``: its input) and return stdout; raises ``WorkspaceError`` with stderr on
    failure. ``errors``: as ``git_process``'s.

    Hardened (``HARDENED``, ``HARDENED_ENV``; the session's own ``GIT_*`` variables dropped) unless
    ``user_config``: the clone of a URL keeps the user's global config (credentials, proxies, ``insteadOf``).
    """
    proc = git_process(args, cwd, env, user_config, stdin, errors)
    if check and proc.returncode != 0:
        raise WorkspaceError(f"git {' '.join(args)} failed in {cwd} (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


def git_process(args: list[str], cwd: Path, env: Mapping[str, str] | None = None, user_config: bool = False,
                stdin: str | None = None, errors: str = "replace") -> subprocess.CompletedProcess[str]:
    """``git args`` as ``git`` runs it, its exit code and stderr returned rather than raised (``errors``: how bytes
    that are not UTF-8 are decoded and encoded; ``surrogateescape`` keeps file names as ``os`` gives them)."""
    if user_config:
        full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", **GIT_IDENTITY, **(env or {})}
        flags = ["-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null"]
    else:
        base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        full_env = {**base, **HARDENED_ENV, **GIT_IDENTITY, **(env or {})}
        flags = [part for item in HARDENED for part in ("-c", item)]
    return subprocess.run(["git", *flags, *args], cwd=str(cwd), env=full_env, capture_output=True, text=True,
                          errors=errors, input=stdin)


def desk_git_head(args: list[str], ws: Path, cap: int) -> tuple[str, bool]:
    """``desk_git(args, ws)``'s first ``cap`` bytes of stdout (decoded, bad bytes replaced) and whether there was
    more: git is stopped once ``cap`` bytes are read, so a huge output never sits in the harness's memory. Raises
    ``WorkspaceError`` when git fails before that."""
    desk = desk_dir(ws)
    if not (desk / "HEAD").is_file():
        make_desk(ws)
    base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    argv = ["git", *[part for item in HARDENED for part in ("-c", item)], "--git-dir", str(desk), "--work-tree",
            str(Path(ws).absolute()), *args]
    with tempfile.TemporaryFile() as err, subprocess.Popen(argv, cwd=str(desk), stdout=subprocess.PIPE, stderr=err,
                                                           env={**base, **HARDENED_ENV, **GIT_IDENTITY}) as proc:
        assert proc.stdout is not None
        data = proc.stdout.read(cap + 1)
        cut = len(data) > cap
        if cut:
            proc.kill()
        proc.stdout.close()
        code = proc.wait()
        if code != 0 and not cut:
            err.seek(0)
            text = err.read().decode(errors="replace").strip()[-500:]
            raise WorkspaceError(f"git {' '.join(args)} failed in {desk} (exit {code}): {text}")
    return data[:cap].decode(errors="replace"), cut


def desk_dir(ws: Path) -> Path:
    """The harness's own git folder of the workspace ``ws``: ``<ws>.git`` beside it (outside the workspace, so the
    agent, which writes only inside it, cannot write there). Every harness git call on ``ws`` after the clone uses
    it with ``--git-dir``/``--work-tree``; the workspace's ``.git`` is the agent's and is never read."""
    ws = Path(ws).absolute()
    return ws.with_name(ws.name + ".git")


def make_desk(ws: Path, objects: Iterable[Path] = (), index: Path | None = None, desk: Path | None = None) -> Path:
    """Create ``desk_dir(ws)`` (or ``desk``): harness-written ``config`` and ``info/attributes``
    (``DESK_ATTRIBUTES``), the object folders ``objects`` borrowed read-only (``objects/info/alternates``), and a
    copy of ``index`` (a fresh clone's, with its stat data and mtime: unchanged files are not hashed again). Returns
    the folder; an old one is replaced. Raises ``WorkspaceError`` when it cannot be written."""
    desk = desk_dir(ws) if desk is None else Path(desk)
    try:
        if desk.is_symlink() or desk.is_file():
            desk.unlink()
        elif desk.exists():
            shutil.rmtree(desk)
        for sub in ("objects/info", "refs/heads", "info"):
            (desk / sub).mkdir(parents=True)
        (desk / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
        (desk / "config").write_text(DESK_CONFIG, encoding="utf-8")
        (desk / "info" / "attributes").write_text(DESK_ATTRIBUTES, encoding="utf-8")
        borrowed = [str(Path(o).absolute()) for o in objects]
        if borrowed:
            (desk / "objects" / "info" / "alternates").write_text("".join(f"{o}\n" for o in borrowed), encoding="utf-8")
        if index is not None and index.is_file() and not index.is_symlink():
            shutil.copy2(index, desk / "index")  # copy2 keeps the mtime git's racy-clean check compares with
    except OSError as exc:
        raise WorkspaceError(f"cannot make the harness git folder {desk}: {exc}") from exc
    return desk


def desk_git(args: list[str], ws: Path, env: Mapping[str, str] | None = None, check: bool = True,
             stdin: str | None = None, errors: str = "replace") -> str:
    """``git --git-dir=<desk> --work-tree=<ws> args`` (hardened, run from the desk folder; see ``git``). The desk is
    made (empty) when missing."""
    desk = desk_dir(ws)
    if not (desk / "HEAD").is_file():
        make_desk(ws)
    return git(["--git-dir", str(desk), "--work-tree", str(Path(ws).absolute()), *args], desk, env, check, stdin=stdin,
               errors=errors)


def is_git_root(path: Path) -> bool:
    """True when ``path`` is the top of a git work tree or a bare repository."""
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())
