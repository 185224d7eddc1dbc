"""Fresh workspaces: one git clone per run, overlays, setup commands, change accounting.

A ``repo`` that is a git repository root is cloned with ``git clone --shared`` (the source is never
written to). A plain folder is copied once per session into a cached template repository (one commit
with a fixed author, so no git config is needed) and cloned from there. A URL is cloned as is.
The state after setup is kept as a git tree object (through a temporary index, so HEAD, branches and
the workspace's own index are not touched) and the agent's change is measured against it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from pytest_agentrace.errors import WorkspaceError

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "agentrace",
    "GIT_AUTHOR_EMAIL": "agentrace@localhost",
    "GIT_COMMITTER_NAME": "agentrace",
    "GIT_COMMITTER_EMAIL": "agentrace@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


def git(args: list[str], cwd: Path, env: Mapping[str, str] | None = None, check: bool = True) -> str:
    """Run ``git args`` in ``cwd`` and return stdout; raises ``WorkspaceError`` with stderr on failure."""
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", **GIT_IDENTITY, **(env or {})}
    proc = subprocess.run(
        ["git", "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", *args],
        cwd=str(cwd), env=full_env, capture_output=True, text=True, errors="replace",
    )
    if check and proc.returncode != 0:
        raise WorkspaceError(f"git {' '.join(args)} failed in {cwd} (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


def is_git_root(path: Path) -> bool:
    """True when ``path`` is the top of a git work tree or a bare repository."""
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


def folder_hash(root: Path) -> str:
    """sha256 over relative paths, modes and contents of every file under ``root`` (``.git`` skipped)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            p = Path(dirpath, name)
            rel = p.relative_to(root).as_posix()
            h.update(rel.encode() + b"\0")
            if p.is_symlink():
                h.update(b"L" + os.readlink(p).encode())
            else:
                h.update(b"X" if os.access(p, os.X_OK) else b"F")
                h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def template_repo(source: Path, cache_dir: Path, exclude: Iterable[str] = (), ref: str | None = None) -> tuple[Path, str | None]:
    """A git repository holding one commit: the files of ``source`` without the ``exclude`` paths (relative, POSIX);
    cached by content. Returns ``(template, source commit)``.

    A plain folder gives its files as they are (source commit None). A git repository gives the tree of ``ref``
    (default ``HEAD``), never its history: a workspace borrows the template's objects (``clone --shared``), so
    what the source's history holds (a task file committed beside its repo, hidden verify files) stays out of the
    agent's reach. Safe across processes (pytest-xdist workers): built in a temp dir under a file lock, renamed.
    Raises ``WorkspaceError`` when ``ref`` is not a commit of the source.
    """
    exclude = sorted(set(exclude))
    commit = None
    if is_git_root(source):
        commit = git(["rev-parse", "--verify", "-q", f"{ref or 'HEAD'}^{{commit}}"], source, check=False).strip()
        if not commit:
            raise WorkspaceError(f"{ref or 'HEAD'} is not a commit of {source}")
        digest = hashlib.sha256(f"{commit}\0{chr(0).join(exclude)}".encode()).hexdigest()[:20]
    else:
        digest = hashlib.sha256(f"{folder_hash(source)}\0{chr(0).join(exclude)}".encode()).hexdigest()[:20]
    target = cache_dir / digest
    if (target / ".git").is_dir():
        return target, commit
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir / f"{digest}.lock")):
        if (target / ".git").is_dir():
            return target, commit
        tmp = Path(tempfile.mkdtemp(prefix=f"{digest}.", dir=cache_dir))
        if commit:  # the tree of the commit, through a scratch index: the source's index and files are not touched
            index = tmp.with_name(tmp.name + ".index")
            try:
                git(["--work-tree", str(tmp), "checkout", commit, "--", "."], source, {"GIT_INDEX_FILE": str(index)})
            finally:
                index.unlink(missing_ok=True)
        else:
            shutil.copytree(source, tmp, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
        for rel in exclude:
            p = tmp / rel
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif p.exists() or p.is_symlink():
                p.unlink()
        git(["init", "-q", "-b", "main"], tmp)
        git(["add", "-A", "--force"], tmp)
        git(["commit", "-q", "--allow-empty", "-m", f"agentrace: {source.name}"], tmp)
        os.replace(tmp, target)
    return target, commit


_TEMPLATE_TREES: dict[str, str] = {}  # template folder -> its commit's tree: a template never changes once built


def template_tree(template: Path) -> str:
    """The tree sha of the one commit of ``template`` (from ``template_repo``), looked up once per process: a
    template's folder name is its content's digest, so its tree never changes."""
    key = str(template)
    if key not in _TEMPLATE_TREES:
        _TEMPLATE_TREES[key] = git(["rev-parse", "HEAD^{tree}"], template).strip()
    return _TEMPLATE_TREES[key]


@dataclass(frozen=True)
class Clone:
    """A fresh workspace: ``commit`` is the source commit (or the clone's HEAD); ``tree`` the tree of its checked
    out files when known without reading them (a clone of a local template), else None. A clone's files are its
    HEAD's tree, so until anything is written into it ``tree`` equals what ``snapshot_tree`` would hash."""

    commit: str
    tree: str | None = None


def create(repo: str | None, dest: Path, cache_dir: Path, ref: str | None = None, exclude: Iterable[str] = ()) -> str:
    """``clone(...).commit``: make ``dest`` a fresh clone of ``repo`` and return the source commit (see ``clone``)."""
    return clone(repo, dest, cache_dir, ref, exclude).commit


def clone(repo: str | None, dest: Path, cache_dir: Path, ref: str | None = None, exclude: Iterable[str] = ()) -> Clone:
    """Make ``dest`` a fresh clone of ``repo`` (path, URL or None for an empty repository) with no remote.

    A local repository or folder is cloned from its template (``template_repo``: its files at ``ref``, without
    ``exclude``); a URL is cloned as is and ``ref`` checked out. Returns a ``Clone`` (source commit or the clone's
    HEAD; the template's tree). Raises ``WorkspaceError`` when the source is missing or git fails.
    """
    if repo is None:
        dest.mkdir(parents=True, exist_ok=True)
        git(["init", "-q", "-b", "main"], dest)
        git(["commit", "-q", "--allow-empty", "-m", "agentrace: empty start"], dest)
        return Clone(git(["rev-parse", "HEAD"], dest).strip())
    is_url = "://" in repo or ("@" in repo and ":" in repo and not Path(repo).exists())
    parent = dest.parent if dest.parent.exists() else Path.cwd()
    if is_url:
        git(["clone", "-q", repo, str(dest)], parent)
        if ref:
            git(["checkout", "-q", "--detach", ref], dest)
        commit, tree = None, None
    else:
        path = Path(repo)
        if not path.is_dir():
            raise WorkspaceError(f"repo {repo} does not exist or is not a directory")
        template, commit = template_repo(path, cache_dir, exclude, ref)
        git(["clone", "-q", "--shared", str(template), str(dest)], parent)
        tree = template_tree(template)
    git(["remote", "remove", "origin"], dest)  # nothing to push to: the source is never reachable from the clone
    return Clone(commit or git(["rev-parse", "HEAD"], dest).strip(), tree)


def borrowed_objects(ws: Path) -> list[Path]:
    """The object folders a ``clone --shared`` workspace reads (its ``objects/info/alternates``)."""
    alternates = ws / ".git" / "objects" / "info" / "alternates"
    try:
        lines = alternates.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [Path(line.strip()) for line in lines if line.strip() and not line.startswith("#")]


def inside(root: Path, path: Path) -> str | None:
    """``path`` relative to ``root`` (POSIX) when it lies inside it, else None."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return None


def overlay(src: Path, dest: Path) -> None:
    """Copy the folder ``src`` over the workspace ``dest`` (files replaced, others kept)."""
    if not src.is_dir():
        raise WorkspaceError(f"overlay {src} is not a directory")
    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))


def write_files(dest: Path, files: Mapping[str, str]) -> None:
    """Write ``{relative path: content}`` into ``dest`` (parents created, existing files overwritten)."""
    for rel, content in files.items():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_symlink() or (p.exists() and not p.is_file()):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        p.write_text(content, encoding="utf-8")


def exclude(ws: Path, patterns: Iterable[str]) -> None:
    """Add gitignore ``patterns`` to the workspace's ``.git/info/exclude`` (local to the clone, invisible in its
    tree), so tool caches a CLI writes into the workspace are not counted as changes."""
    patterns = [p for p in patterns if p]
    if not patterns:
        return
    info = git_dir(ws) / "info"
    info.mkdir(exist_ok=True)
    with open(info / "exclude", "a", encoding="utf-8") as fh:
        fh.write("".join(f"{p}\n" for p in patterns))


def git_dir(ws: Path) -> Path:
    """The git folder of the workspace ``ws``: ``ws/.git`` when that is a real folder (a clone's own; no git
    process), else what ``git rev-parse --absolute-git-dir`` finds. Raises ``WorkspaceError`` when there is none."""
    own = ws / ".git"
    if own.is_dir() and not own.is_symlink():
        return own.absolute()
    return Path(git(["rev-parse", "--absolute-git-dir"], ws).strip())


def snapshot_tree(ws: Path, git_folder: Path | None = None) -> str:
    """Record the workspace's files (tracked and untracked, ignored ones excluded) as a git tree; return its sha.

    ``git_folder``: the workspace's git folder when already looked up (``git_dir``). Uses a temporary index file,
    so HEAD, branches and ``.git/index`` stay as the agent left them. Raises ``WorkspaceError`` when git fails.
    """
    folder = git_folder if git_folder is not None else git_dir(ws)
    try:
        fd, tmp_index = tempfile.mkstemp(prefix="agentrace-index.", dir=folder)
    except OSError as exc:  # the git folder is gone or is no folder any more (an agent removed or replaced it)
        raise WorkspaceError(f"cannot write a scratch index into {folder}: {exc}") from exc
    os.close(fd)
    try:
        real = folder / "index"
        if real.exists():
            # copy2 keeps the index file's mtime: git's racy-clean check (an entry as new as the index is
            # re-hashed) only works against the real index time; a fresh mtime hid same-size edits made in
            # the same second as the checkout (e.g. "a - b" -> "a + b" by a fast agent)
            try:
                shutil.copy2(real, tmp_index)
            except OSError as exc:
                raise WorkspaceError(f"cannot read the index {real}: {exc}") from exc
        else:
            os.unlink(tmp_index)
        env = {"GIT_INDEX_FILE": tmp_index}
        git(["add", "-A"], ws, env)
        return git(["write-tree"], ws, env).strip()
    finally:
        if os.path.exists(tmp_index):
            os.unlink(tmp_index)


@dataclass(frozen=True)
class Change:
    """Lines added/removed (text files) and files changed (text and binary) between two trees."""

    lines_added: int
    lines_removed: int
    files_changed: int
    binary_files: int
    patch: str

    @property
    def lines_changed(self) -> int:
        return self.lines_added + self.lines_removed


def change(ws: Path, before: str, after: str) -> Change:
    """Compare two trees from ``snapshot_tree``; binary files count as changed files with 0 lines.

    One git process: ``git diff -z --numstat -p --binary`` prints the NUL-terminated numstat records, one more
    NUL, then the patch (the same bytes as ``git diff --binary``). Raises ``WorkspaceError`` when git fails.
    """
    added = removed = files = binary = 0
    out = git(["diff", "-z", "--numstat", "-p", "--binary", "--no-renames", before, after], ws)
    pos = 0
    while pos < len(out) and out[pos] != "\0":
        end = out.index("\0", pos)
        a, r, _ = out[pos:end].split("\t", 2)
        pos = end + 1
        files += 1
        if a == "-":
            binary += 1
        else:
            added, removed = added + int(a), removed + int(r)
    return Change(added, removed, files, binary, out[pos + 1:])


def _matches(rel: str, pattern: str) -> bool:
    """gitignore-like: a pattern without '/' matches the file name at any depth; ``**/`` may match nothing."""
    if "/" not in pattern:
        return fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], pattern)
    if fnmatch.fnmatchcase(rel, pattern):
        return True
    return pattern.startswith("**/") and _matches(rel, pattern[3:])


def protected_state(ws: Path, patterns: Iterable[str]) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``ws`` matching a protected glob (``.git`` skipped)."""
    patterns = tuple(patterns)
    state: dict[str, str] = {}
    if not patterns:
        return state
    for dirpath, dirnames, filenames in os.walk(ws):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath, name)
            rel = p.relative_to(ws).as_posix()
            if any(_matches(rel, pat) for pat in patterns):
                try:
                    state[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
                except OSError:
                    state[rel] = "unreadable"
    return state


def tampered(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Paths created, changed or deleted between two ``protected_state`` results, sorted."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
