"""File access on the desk that never follows a link: every file the harness writes into a record folder, and every
file a report or ``merge`` reads back from one.

Writes (``write_text``, ``write_bytes``) go to a fresh temp name created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` in
the target's folder, opened itself with ``O_DIRECTORY | O_NOFOLLOW``, and are renamed over the target name within
that folder: whatever stood there (a regular file, a symlink, a FIFO; an empty or agent-made folder is removed
first, links inside it never followed) is replaced, never written through. ``write_new`` creates a file that must
not exist yet. A folder that is a link is refused (``UnsafePath``). While a write is between its temp file and the
rename, SIGINT and SIGTERM are held (``signals_held``, main thread) and delivered right after: a Ctrl-C never leaves
a temp file behind.

Reads (``read_bytes``, ``read_text``) open with ``O_NOFOLLOW | O_NONBLOCK`` inside a folder opened without
following a link, and return None unless the file is a regular file (``fstat``): a link, a FIFO, a device or a
folder is never read. ``regular_files`` lists a folder's regular files without descending into linked folders.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from pytest_agentrace import fstree, untrusted

TEMP_PREFIX = ".agentrace-tmp."  # temp names of writes in progress (skipped by the manifests)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(OSError):
    """A folder the harness would write into or read from is a link or no folder (message names it)."""


def open_folder(folder: Path) -> int:
    """A file descriptor of ``folder`` opened without following a link in its last component. Raises
    ``UnsafePath`` when it is a link or not a folder, ``FileNotFoundError`` when it is missing."""
    try:
        return os.open(folder, _DIR_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP: a symlink; ENOTDIR: a file
        raise UnsafePath(exc.errno, f"refused: {folder} is a link or not a folder", str(folder)) from None


def make_folders(root: Path, rel: Path | str) -> Path:
    """``root / rel``, every folder of ``rel`` made when missing, each component opened without following a link
    (``root`` itself is taken as given). Raises ``UnsafePath`` when a component is a link or no folder, and what
    ``os.mkdir`` raises otherwise: a folder from elsewhere (a results folder merged into) never leads a write out
    of ``root``."""
    parts = Path(rel).parts
    if any(part in ("..", "/") for part in parts) or Path(rel).is_absolute():
        raise UnsafePath(errno.EINVAL, f"refused: {rel} is not a path inside {root}", str(rel))
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError:  # ELOOP: a symlink; ENOTDIR: a file
                raise UnsafePath(errno.ELOOP, f"refused: {Path(root, *parts[:i + 1])} is a link or not a folder",
                                 str(Path(root, *parts[:i + 1]))) from None
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    return Path(root, *parts)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the block runs, then deliver each that came (once) through the handler that was
    in place: a ``KeyboardInterrupt`` cannot land between creating a temp file and renaming or removing it. Signal
    handlers can only be changed in the main thread; elsewhere (where Python raises no ``KeyboardInterrupt``
    anyway) the block just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: pending.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


def write_bytes(path: Path, data: bytes, durable: bool = False, mode: int = 0o644) -> Path:
    """Write ``data`` to ``path`` through a temp file and a rename in the same folder (see the module docstring);
    ``durable`` fsyncs the file first (readers see the old or the new file, never half of it, also after a
    crash). Returns ``path``. Raises ``UnsafePath`` when the folder is a link, ``OSError`` when writing fails.
    SIGINT and SIGTERM wait until the temp file is renamed or removed (``signals_held``)."""
    with signals_held():
        return _write_bytes(Path(path), data, durable, mode)


def _write_bytes(path: Path, data: bytes, durable: bool, mode: int) -> Path:
    fd_dir = open_folder(path.parent)
    try:
        tmp = TEMP_PREFIX + secrets.token_hex(8)
        fd = os.open(tmp, _NEW_FLAGS, mode, dir_fd=fd_dir)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                if durable:
                    fh.flush()
                    os.fsync(fh.fileno())
            try:
                os.rename(tmp, path.name, src_dir_fd=fd_dir, dst_dir_fd=fd_dir)
            except OSError:  # EISDIR / ENOTEMPTY: a folder stands where the file goes
                if not os.path.isdir(path) or os.path.islink(path):
                    raise
                fstree.rmtree(path)  # a folder where the file goes: removed without following links inside
                os.rename(tmp, path.name, src_dir_fd=fd_dir, dst_dir_fd=fd_dir)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=fd_dir)
            except OSError:
                pass
            raise
    finally:
        os.close(fd_dir)
    return path


def write_text(path: Path, text: str, durable: bool = False) -> Path:
    """``write_bytes`` of ``text`` in UTF-8 (a lone surrogate, which no UTF-8 file can hold, as U+FFFD:
    ``untrusted.text``)."""
    return write_bytes(path, untrusted.text(text).encode("utf-8"), durable)


def write_new(path: Path, data: bytes, mode: int = 0o644) -> Path:
    """Create ``path`` with ``data``; raises ``FileExistsError`` when anything (a file, a link) is already there,
    ``UnsafePath`` when its folder is a link."""
    path = Path(path)
    fd_dir = open_folder(path.parent)
    try:
        fd = os.open(path.name, _NEW_FLAGS, mode, dir_fd=fd_dir)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    finally:
        os.close(fd_dir)
    return path


def append_bytes(path: Path, data: bytes, durable: bool = False, mode: int = 0o644) -> Path:
    """Append ``data`` to ``path`` (created when missing) with ``O_APPEND | O_NOFOLLOW``: one ``write`` call, so
    lines of several writers do not interleave. Raises ``UnsafePath`` when ``path`` or its folder is a link or
    ``path`` is not a regular file; ``durable`` fsyncs."""
    path = Path(path)
    fd_dir = open_folder(path.parent)
    try:
        try:
            fd = os.open(path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                         mode, dir_fd=fd_dir)
        except OSError as exc:
            raise UnsafePath(exc.errno, f"refused: {path} is a link or cannot be appended to", str(path)) from None
    finally:
        os.close(fd_dir)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePath(0, f"refused: {path} is not a regular file", str(path))
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read_bytes(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of ``path`` (at most ``limit``) when it is a regular file in a folder that is not a link; None
    when it is missing, a link, a FIFO, a device or a folder, or cannot be read."""
    path = Path(path)
    try:
        fd_dir = open_folder(path.parent)
    except OSError:
        return None
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd_dir)
    except OSError:
        return None
    finally:
        os.close(fd_dir)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        try:
            return fh.read() if limit is None else fh.read(limit)
        except OSError:
            return None


def read_text(path: Path, limit: int | None = None) -> str | None:
    """``read_bytes`` decoded as UTF-8 (undecodable bytes replaced); None as there."""
    data = read_bytes(path, limit)
    return None if data is None else data.decode("utf-8", errors="replace")


def is_regular(path: Path) -> bool:
    """True when ``path`` itself (not what a link names) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def regular_files(folder: Path) -> Iterator[Path]:
    """Every regular file under ``folder`` in sorted order (links, to files or folders, neither listed nor
    followed; temp files of writes in progress skipped)."""
    for root, dirs, names in fstree.walk(folder):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
        for name in sorted(names):
            p = Path(root, name)
            if not name.startswith(TEMP_PREFIX) and is_regular(p):
                yield p


GITIGNORE = "# Created by pytest-agentrace automatically: results, history and caches of agent runs.\n*\n"


def make_own_folder(folder: Path) -> Path:
    """Make ``folder`` (and its parents) when it is missing, with a ``.gitignore`` of ``*`` in it (as pytest's
    ``.pytest_cache``): a results or history folder this package makes stays out of ``git status`` and of commits
    unless the user removes that file. A folder that exists is left as it is. Raises ``OSError``."""
    folder = Path(folder)
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        write_text(folder / ".gitignore", GITIGNORE)
    return folder
