"""Scratch folders of a finished run, deleted off the run's path: each is renamed away at once (one ``rename(2)``
in the same folder, so nothing of the run stays under its old name), then removed by one background thread.

``fstree.rmtree`` opens every folder with ``O_NOFOLLOW`` (``os.open`` on a dir fd), so a link the agent left is
removed, never followed, at any depth. The thread is joined when the interpreter exits (``concurrent.futures`` registers it), so a
session does not end with a half-deleted folder; ``drain`` waits for it earlier. When more than ``BACKLOG`` runs'
folders wait, the run handing over more waits for the oldest: deletion never falls far behind the runs.
"""

from __future__ import annotations

import itertools
import os
import stat
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from pytest_agentrace import fstree

TRASH = ".discarded"
BACKLOG = 2  # runs' folders waiting to be deleted at most; the next run waits for the oldest  # the folder inside a run's scratch folder its scratch folders are renamed into

_pool: ThreadPoolExecutor | None = None
_pending: list[Future] = []
_lock = threading.Lock()
_count = itertools.count()


def discard(folder: Path, names: Iterable[str]) -> None:
    """Rename ``folder/NAME`` for each existing name into ``folder/.discarded/<n>/`` and delete that in the
    background. A name that cannot be renamed is deleted here and now. Never raises."""
    trash = Path(folder) / TRASH / f"{os.getpid()}-{next(_count)}"
    moved = False
    for name in names:
        path = Path(folder) / name
        if not os.path.lexists(path):
            continue
        try:
            trash.mkdir(parents=True, exist_ok=True)
            os.rename(path, trash / name)  # renames a link itself, never what it points to
            moved = True
        except OSError:
            _remove(path)
    if moved:
        global _pool
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentrace-discard")
            _pending[:] = [f for f in _pending if not f.done()]
            _pending.append(_pool.submit(_remove, trash))
            oldest = _pending[0] if len(_pending) > BACKLOG else None
        if oldest is not None:  # deleting fell behind the runs: wait, so the scratch space does not pile up
            oldest.result()


def drain() -> None:
    """Wait until every folder ``discard`` handed over is deleted."""
    with _lock:
        pending = list(_pending)
    for future in pending:
        future.result()


def remove(path: Path) -> None:
    """Delete ``path`` now: a link or file unlinked (never followed), a folder emptied and removed by ``fstree.rmtree``
    (no link below it followed, at any depth), after ``_open_up`` when it or a folder below it cannot be listed or written
    (a run's ``chmod``; overlayfs's work folder, mode 000). Never raises; what cannot be removed stays."""
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        try:
            os.unlink(path)
        except OSError:
            pass
        return
    fstree.rmtree(path)
    if os.path.isdir(path) and not os.path.islink(path):  # a folder the run made unlistable or read-only (chmod)
        _open_up(path)
        fstree.rmtree(path)


def _remove(path: Path) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        remove(path)
        return
    remove(path)
    try:
        path.parent.rmdir()  # the .discarded folder, once empty
    except OSError:
        pass


def _open_up(top: Path) -> None:
    """Give ``top`` and every folder below it their owner's read, write and search permission (``chmod 700``), so
    ``rmtree`` can list and empty them: an agent of an unprivileged session (the harness's own user) that left a
    folder at ``chmod 300`` or ``500`` left its files behind for good. Each path is checked to be a folder, not a
    link (``lstat``), before it is changed; the run's processes have all ended, so nothing swaps it meanwhile."""
    todo = [str(top)]
    while todo:
        folder = todo.pop()
        try:
            st = os.lstat(folder)
            if not stat.S_ISDIR(st.st_mode):
                continue
            if st.st_mode & 0o700 != 0o700:
                os.chmod(folder, 0o700)
            with os.scandir(folder) as it:
                todo += [e.path for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
