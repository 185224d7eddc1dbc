"""The clean tree as overlayfs layers (``run.cleantree``'s overlay form): a read-only checkout of the base tree, a
small layer of the run's changes, and one empty upper folder per check, mounted by the check's box
(``run.sandbox.Overlay``). What the checks see is the combined commit's checkout, file for file, without a checkout
per check.

- ``base_layer``: the base tree checked out (``run.workspace.checkout``, its ``.git`` removed) into a folder of the
  harness's own. A template's tree (the same for every run of a task) is checked out once per process and shared
  (``Bases``), under the session's scratch root that every box hides; another base (setup ran, an overlay, a URL)
  once per run, for all its checks.
- ``changes_layer``: what the combined tree holds that the base does not (``git diff-tree -r -t``): changed and
  added files and links written by the harness from their blobs (``git cat-file --batch``) into folders it has just
  made (``O_CREAT | O_EXCL | O_NOFOLLOW``: no link is ever followed), a folder where the base had a file (an upper
  folder over a lower file hides it), a file where the base had a folder (hides the whole folder), and an overlayfs
  whiteout (a character device 0/0, which an unprivileged process may make since Linux 5.8) for each path the base
  has and the combined tree lacks, at the highest such folder. Its ``.git`` is what ``checkout`` writes (``HEAD``,
  config, the branch at the combined commit, the alternates), with the combined commit's index read without
  checking out (``git read-tree``: its entries are the checkout's; its stat data are zero, so git compares the
  files' content once).
- the checks' upper folder: each check writes into a new empty one (``run.cleantree.CleanTree.fresh``), which the
  disk watch counts like the checkout it replaces; the lower layers are never written.

``Unsupported`` is raised when the layers cannot be the checkout's bytes, and the caller checks out instead: a
``.gitattributes`` in either tree (checkout converts line ends and expands ``ident`` by it; the layers are written
raw) and a submodule entry that changed.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pytest_agentrace.errors import WorkspaceError
from pytest_agentrace.run import linksafe
from pytest_agentrace.run.linksafe import Tampered
from pytest_agentrace.run.workspace import checkout

TREE, LINK, GITLINK = "040000", "120000", "160000"
ATTRIBUTES = ".gitattributes"
Git = Callable[..., bytes]  # run.cleantree._git: (git_dir, args, data=..., cwd=..., **env) -> stdout
Batch = Callable[[Path], subprocess.Popen]  # run.cleantree._cat_batch: ``git cat-file --batch`` of a git folder


class Unsupported(Exception):
    """The layers cannot give the checkout's bytes (see the module docstring): the caller checks out instead."""


def has_attributes(git: Git, git_dir: Path, tree: str) -> bool:
    """Whether ``tree`` holds a ``.gitattributes`` at any depth (``git ls-tree -r``)."""
    out = git(git_dir, ["ls-tree", "-r", "-z", "--name-only", tree])
    return any(p == ATTRIBUTES.encode() or p.endswith(b"/" + ATTRIBUTES.encode()) for p in out.split(b"\0"))


def base_layer(git: Git, git_dir: Path, tree: str, dest: Path) -> Path:
    """Check ``tree`` (of the harness's git folder ``git_dir``) out into ``dest`` (missing or empty) without a
    ``.git``; returns ``dest``. Raises ``Unsupported`` for a tree with a ``.gitattributes``, ``WorkspaceError``."""
    if has_attributes(git, git_dir, tree):
        raise Unsupported(f"{ATTRIBUTES} in the base tree")

    def read_tree(args: list[str], meta: Path, work_tree: Path) -> None:  # as run.cleantree.CleanTree.fresh
        git(meta, args, cwd=work_tree, GIT_WORK_TREE=str(work_tree))

    checkout(dest, [git_dir / "objects"], tree, read_tree)
    shutil.rmtree(dest / ".git")
    return dest


class Bases:
    """The base layers shared by the runs of one process (``base_layer`` of a template's tree, by tree id), in a
    private folder made under ``root`` (the session's scratch root, hidden from every box) and removed at exit.
    Thread-safe: race mode runs its members at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folders: dict[Path, Path] = {}
        self._made: dict[tuple[Path, str], Path] = {}

    def get(self, git: Git, git_dir: Path, tree: str, root: Path) -> Path:
        """The shared base layer of ``tree`` under ``root``, made from ``git_dir`` the first time, and again when
        its folder is gone (a later session of the same process, pytest's in-process runs, removed ``root``)."""
        with self._lock:
            key = (root, tree)
            made = self._made.get(key)
            if made is not None and (made.parent / f"{tree}.done").is_file() and _real_folder(made):
                return made
            folder = self._folders.get(root)
            if folder is None or not _real_folder(folder):
                folder = self._folders[root] = Path(tempfile.mkdtemp(prefix="agentrace-bases-", dir=root))
                atexit.register(shutil.rmtree, folder, True)
            shutil.rmtree(folder / tree, ignore_errors=True)
            made = base_layer(git, git_dir, tree, folder / tree)
            (folder / f"{tree}.done").touch()
            self._made[key] = made
            return made


def _real_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


BASES = Bases()


def changes_layer(git: Git, batch: Batch, git_dir: Path, base: str, tree: str, commit: str, dest: Path) -> Path:
    """Write ``dest`` (missing or empty): the layer over ``base``'s checkout that makes it ``tree``'s, with the
    ``.git`` of ``commit`` (see the module docstring); ``git`` and ``batch`` run the harness's hardened git. Returns ``dest``. Raises ``Unsupported`` (the caller checks
    out instead) or ``WorkspaceError``."""
    entries = _diff(git, git_dir, base, tree)
    for path, was, now in entries:
        if path == ATTRIBUTES or path.endswith("/" + ATTRIBUTES):
            raise Unsupported(f"{ATTRIBUTES} in the change")
        if GITLINK in (was and was[0], now and now[0]):
            raise Unsupported("a changed submodule entry")

    def index_only(args: list[str], meta: Path, work_tree: Path) -> None:  # the index, no files
        git(meta, [a for a in args if a != "-u"], cwd=work_tree, GIT_WORK_TREE=str(work_tree))

    checkout(dest, [git_dir / "objects"], commit, index_only)
    gone = {path for path, _was, now in entries if now is None}
    files = {path: now for path, _was, now in entries if now is not None and now[0] != TREE}
    targets: dict[str, list[tuple[Path, str]]] = {}  # blob -> the files and links it becomes
    try:
        for path, was, now in entries:
            parent = path.rpartition("/")[0]
            if now is None:  # a whiteout where the base's entry is gone, unless a folder above it went too
                if not _covered(parent, gone, files):
                    _at(dest, parent).mkdir(parents=True, exist_ok=True)
                    os.mknod(_at(dest, path), stat.S_IFCHR | 0o000, os.makedev(0, 0))
            elif now[0] == TREE:
                if was is None or was[0] != TREE:  # new, or over a base file: an upper folder
                    _at(dest, path).mkdir(parents=True, exist_ok=True)
            else:
                _at(dest, parent).mkdir(parents=True, exist_ok=True)
                targets.setdefault(now[1], []).append((_at(dest, path), now[0]))
        if targets:
            _write_blobs(batch(git_dir), targets)
    except OSError as exc:
        raise WorkspaceError(f"clean tree: cannot write its changes layer {dest}: {exc}") from exc
    return dest


def write_files(layers: Sequence[Path], upper: Path, files: Mapping[str, str]) -> None:
    """``run.linksafe.write_files`` into the tree the ``layers`` (lowest first) and the empty ``upper`` folder show
    (a check's hidden files, written before its box mounts them): each file goes into ``upper``, where it hides what
    the layers hold at its name, and a folder on its way that the layers show as a file is hidden by the folder made
    in ``upper``, as the checkout form removes that file. Raises ``Tampered`` naming every path that has a link on
    its way in the layers' tree (nothing is written for it; the others are), as the checkout form does."""
    refused: list[str] = []
    for rel, content in files.items():
        parts = [part for part in rel.split("/") if part not in ("", ".")]
        try:
            if _link_on_way(tuple(reversed(layers)), parts[:-1]):
                raise Tampered([rel])
            linksafe.write_files(upper, {rel: content})
        except Tampered as exc:
            refused += exc.paths
    if refused:
        raise Tampered(refused)


def _link_on_way(layers: Sequence[Path], parts: list[str]) -> bool:
    """Whether the overlayfs of ``layers`` (topmost first) shows a link at a folder of ``parts``. Walks it as
    overlayfs looks names up: at each name the layers' entries are read top down (``lstat`` in folders already
    found to be real folders, so no link is followed); a whiteout ends the look-up (nothing there), a non-folder
    found first is what is shown (a link: True; a file: the checkout form replaces it by a folder, below which
    nothing of the layers is shown), a folder merges with the folders below it until a non-folder or a whiteout."""
    found = list(layers)
    for name in parts:
        below: list[Path] = []
        for folder in found:
            try:
                st = os.lstat(folder / name)
            except FileNotFoundError:
                continue
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout
                break
            if not stat.S_ISDIR(st.st_mode):
                if not below:
                    return stat.S_ISLNK(st.st_mode)
                break
            below.append(folder / name)
        if not below:
            return False  # nothing, or a file: folders made new from here on
        found = below
    return False


def _covered(parent: str, gone: set[str], files: dict[str, tuple[str, str]]) -> bool:
    """Whether a folder above a removed path is itself removed or replaced by a file (its whiteout or file hides it)."""
    while parent:
        if parent in gone or parent in files:
            return True
        parent = parent.rpartition("/")[0]
    return False


def _at(root: Path, rel: str) -> Path:
    return root / rel if rel else root


LINK_MAX = 64 * 1024  # bytes of a link's target at most (PATH_MAX is 4096 on Linux)
CHUNK = 1024 * 1024


def _write_blobs(proc: subprocess.Popen, targets: dict[str, list[tuple[Path, str]]]) -> None:
    """Write each blob of ``targets`` ({sha: [(path, mode)]}, their folders made by the harness just now) as git
    checks it out: a link's target is the blob; a file's mode 0o777 or 0o666 less the umask, created with
    ``O_EXCL | O_NOFOLLOW`` (nothing there is followed). The blobs are read from ``proc``, a ``git cat-file
    --batch`` started with pipes for its stdin and stdout (ended here), and streamed a megabyte at a time: a large
    file the agent left is never held in memory whole. Raises ``WorkspaceError`` when git fails, ``OSError`` when a file cannot be written."""
    wanted, stdin, stdout = list(targets), proc.stdin, proc.stdout
    if stdin is None or stdout is None:
        raise ValueError("git cat-file --batch needs pipes for its stdin and stdout")

    def feed() -> None:  # in a thread: the list may fill the pipe while git's answers fill the other
        try:
            stdin.write("".join(f"{sha}\n" for sha in wanted).encode())
            stdin.close()
        except OSError:
            pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        for sha in wanted:
            header = stdout.readline().split()
            if len(header) != 3 or header[1] != b"blob":
                raise WorkspaceError(f"clean tree: {sha} is not a blob ({b' '.join(header).decode(errors='replace')})")
            _stream(stdout, int(header[2]), targets[sha])
            stdout.read(1)  # the newline after each object
    finally:
        stdout.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        feeder.join()


def _stream(out, size: int, targets: list[tuple[Path, str]]) -> None:
    """``size`` bytes of ``out`` into every file and link of ``targets`` (see ``_write_blobs``)."""
    links = [path for path, mode in targets if mode == LINK]
    if links and size > LINK_MAX:
        raise WorkspaceError(f"clean tree: the target of the link {links[0]} is {size} bytes long")
    fds = [os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                   0o777 if mode == "100755" else 0o666) for path, mode in targets if mode != LINK]
    target = b""
    try:
        left = size
        while left:
            chunk = out.read(min(CHUNK, left))
            if not chunk:
                raise WorkspaceError("clean tree: git cat-file --batch ended early")
            left -= len(chunk)
            for fd in fds:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
            if links:
                target += chunk
    finally:
        for fd in fds:
            os.close(fd)
    for path in links:
        os.symlink(os.fsdecode(target), path)


def _diff(git: Git, git_dir: Path, base: str, tree: str) -> list[tuple[str, tuple[str, str] | None,
                                                                        tuple[str, str] | None]]:
    """``[(path, (mode, sha) in base or None, in tree or None)]``: ``git diff-tree -r -t`` (folders too), parents
    before their entries."""
    if base == tree:
        return []
    out = git(git_dir, ["diff-tree", "-r", "-t", "-z", "--no-renames", base, tree]).split(b"\0")
    merged: dict[str, list] = {}  # a folder <-> file swap is two lines of one path: its deletion and its addition
    for meta, path in zip(out[0:-1:2], out[1::2], strict=True):
        old_mode, new_mode, old_sha, new_sha, _status = meta.decode().lstrip(":").split(" ")
        entry = merged.setdefault(path.decode("utf-8", "surrogateescape"), [None, None])
        if old_mode != "000000":
            entry[0] = (old_mode, old_sha)
        if new_mode != "000000":
            entry[1] = (new_mode, new_sha)
    return sorted(((path, was, now) for path, (was, now) in merged.items()), key=lambda e: e[0].count("/"))
