"""Walking and deleting folder trees an agent (or the code a check runs) may have made, at any depth.

On Python 3.11 ``os.walk`` and ``shutil.rmtree`` recurse once per folder level: a chain of a few thousand empty
folders (a few kilobytes) raised ``RecursionError`` in the harness, which charged its own fault to the run, or lost
the session's report when the run's scratch folders were deleted at its end. ``walk`` is ``os.walk`` without the
recursion (Python 3.12's loop, top-down, links never entered); ``rmtree`` falls back to ``rm -rf`` (coreutils:
``fts`` without following links, any depth) where ``shutil.rmtree`` cannot go.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path


def walk(top: str | os.PathLike[str]) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(top)`` (top-down; ``followlinks=False``: a link to a folder is listed in ``dirnames`` and not
    entered; a folder that cannot be listed is skipped, as ``os.walk`` without ``onerror`` skips it), as a loop over
    a stack instead of a recursion: the same ``(dirpath, dirnames, filenames)`` in the same order, and the caller may
    prune ``dirnames`` in place. Folders deeper than the system's path limit cannot be listed by path: skipped."""
    stack: list[str] = [os.fspath(top)]
    while stack:
        here = stack.pop()
        dirs: list[str] = []
        nondirs: list[str] = []
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else nondirs).append(entry.name)
        except OSError:  # cannot be listed (its mode, gone, a path too long), or failed on the way: skipped
            continue
        yield here, dirs, nondirs
        for name in reversed(dirs):
            path = os.path.join(here, name)
            if not os.path.islink(path):
                stack.append(path)


def rmtree(path: str | os.PathLike[str], dir_fd: int | None = None) -> None:
    """Delete the folder ``path`` (relative to the open folder ``dir_fd`` when given) and everything below it without
    following a link; never raises, what cannot be deleted stays. ``shutil.rmtree`` first (in-process); where it
    stops at the interpreter's recursion limit, or leaves the folder, ``rm -rf --one-file-system`` (coreutils), which
    walks by file descriptor to any depth and never crosses into a filesystem mounted below."""
    try:
        shutil.rmtree(path, ignore_errors=True, dir_fd=dir_fd)
    except RecursionError:
        pass
    try:
        if not stat.S_ISDIR(os.lstat(path, dir_fd=dir_fd).st_mode):
            return
    except OSError:  # gone
        return
    target = f"/proc/self/fd/{dir_fd}/{os.fspath(path)}" if dir_fd is not None else os.fspath(Path(path).absolute())
    try:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", target], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False, timeout=600, pass_fds=() if dir_fd is None else (dir_fd,))
    except (OSError, subprocess.SubprocessError):
        pass
