"""What the harness reads of a workspace's files by walking them itself (never through the workspace's git):
the digests of protected files (``protected_state``, ``tampered``) and the repositories an agent made inside its
workspace (``nested_repos``, ``nested_files``), whose files git would otherwise record as one gitlink, or refuse.

Every walk is ``fstree.walk`` (``os.walk`` without recursion, at any depth) without following a link; a file is read with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO never
blocks the harness)."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from pytest_agentrace import fstree


def nested_repos(ws: Path) -> list[str]:
    """The folders under ``ws`` (relative, POSIX, sorted; not ``ws`` itself) that hold a ``.git`` entry: repositories
    the agent made or left inside its workspace (``git init sub``, ``cargo new sub``), outermost only."""
    found: list[str] = []
    for dirpath, dirnames, filenames in fstree.walk(ws):
        here = Path(dirpath)
        if here != Path(ws) and (".git" in dirnames or ".git" in filenames):
            found.append(here.relative_to(ws).as_posix())
            dirnames[:] = []
            continue
        dirnames[:] = [d for d in dirnames if d != ".git"]
    return sorted(found)


def nested_files(ws: Path, roots: Iterable[str]) -> list[str]:
    """Every regular file and link under the folders ``roots`` of ``ws`` (relative, POSIX, sorted), as git records
    them in an ordinary folder: any ``.git`` entry left out, a link to a folder recorded as a link and not entered."""
    files: list[str] = []
    for root in roots:
        for dirpath, dirnames, filenames in fstree.walk(Path(ws, root)):
            here = Path(dirpath)
            links = [d for d in dirnames if (here / d).is_symlink()]
            dirnames[:] = [d for d in dirnames if d != ".git" and d not in links]
            files += [(here / n).relative_to(ws).as_posix() for n in [*filenames, *links]
                      if n != ".git" and _recordable(here / n)]
    return sorted(files)


def _recordable(path: Path) -> bool:
    """A regular file or a link: what git records (a FIFO, socket or device is left out, as ``git add`` does)."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def ignore_pattern(rel: str) -> str:
    """A gitignore line matching exactly the folder ``rel`` (relative, POSIX) from the top: every character a
    pattern gives meaning to is escaped (gitignore(5))."""
    escaped = "".join(f"\\{c}" if c in "\\*?[]!# " else c for c in rel)
    return f"/{escaped}/"


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
    for dirpath, dirnames, filenames in fstree.walk(ws):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath, name)
            rel = p.relative_to(ws).as_posix()
            if any(_matches(rel, pat) for pat in patterns):
                state[rel] = _file_digest(p)
    return state


def _file_digest(path: Path) -> str:
    """sha256 of a regular file, read in chunks without following a link and without blocking on a FIFO;
    ``"link: <target>"`` for a link, ``"not a regular file"`` for a FIFO, socket or device, ``"unreadable"``."""
    try:
        if path.is_symlink():
            return f"link: {os.readlink(path)}"
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return "unreadable"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return "unreadable"
    finally:
        os.close(fd)


def tampered(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Paths created, changed or deleted between two ``protected_state`` results, sorted."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
