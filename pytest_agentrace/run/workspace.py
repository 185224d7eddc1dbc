"""Fresh workspaces: one git clone per run, overlays, setup commands, change accounting.

A local ``repo`` (a git repository's commit, or a plain folder's files) becomes a cached template repository
once (one commit with a fixed author, so no git config is needed; its objects in one pack; the source is never
written to), and each workspace is a checkout of it that borrows its objects (``checkout``: what ``git clone
--shared`` makes, without an origin, in one ``git read-tree -u``). A URL is cloned as is.
The state after setup is kept as a git tree object and the agent's change is measured against it.

The workspace's ``.git`` is the agent's (it may use git as usual); the harness never reads it after the clone. Its
snapshots and diffs run in the *desk* (``run.desk``), a git folder of its own beside the workspace (``desk_dir``: ``<ws>.git``,
outside the agent's reach), with ``--git-dir``/``--work-tree``, no system or global config, fsmonitor, hooks,
external diff, textconv and filters off on the command line, and ``info/attributes`` overriding every
``.gitattributes`` of the tree (``HARDENED``, ``DESK_ATTRIBUTES``). A template built from a source repository reads
only its refs and objects through a scratch desk the same way: none of the source's config runs.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from pytest_agentrace import fstree
from pytest_agentrace.errors import WorkspaceError
from pytest_agentrace.run import inputs
from pytest_agentrace.run.desk import (
    DESK_ATTRIBUTES,
    HARDENED_ENV,
    desk_dir,
    desk_git,
    desk_git_head,
    git,
    git_process,
    is_git_root,
    make_desk,
)
from pytest_agentrace.run.linksafe import Tampered as Tampered  # kept where callers name them
from pytest_agentrace.run.linksafe import write_files as write_files
from pytest_agentrace.run.treefiles import protected_state as protected_state  # kept where callers name them
from pytest_agentrace.run.treefiles import tampered as tampered

HARNESS_FOLDER = ".agentrace"  # the default results folder and history DB's folder under the rootdir (options.DEFAULT_OUT)


def harness_paths(source: Path, *paths: Path | str | None) -> list[str]:
    """The folders of the harness that lie inside the local source folder ``source`` (relative, POSIX), for
    ``template_repo``'s ``exclude``: each of ``paths`` (the results folder, the template cache) inside it, and
    ``HARNESS_FOLDER`` at its top. A template made with them would hand the agent the history DB and earlier runs'
    records, and copying the cache into itself never ends."""
    found = [rel for p in paths if p and (rel := inside(source, Path(p))) not in (None, ".")]
    if (source / HARNESS_FOLDER).exists():
        found.append(HARNESS_FOLDER)
    return found


def folder_hash(root: Path, skip: Iterable[str] = ()) -> str:
    """sha256 over relative paths, modes and contents of every file under ``root`` (``.git`` and the relative paths
    ``skip`` left out)."""
    h = hashlib.sha256()
    skipped = set(skip)
    for dirpath, dirnames, filenames in fstree.walk(root):
        here = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(d for d in dirnames if d != ".git" and (here / d).as_posix() not in skipped)
        for name in sorted(filenames):
            p = Path(dirpath, name)
            rel = p.relative_to(root).as_posix()
            if rel in skipped:
                continue
            h.update(rel.encode() + b"\0")
            if p.is_symlink():
                h.update(b"L" + os.readlink(p).encode())
            else:
                h.update(b"X" if os.access(p, os.X_OK) else b"F")
                h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


TEMPLATE_LAYOUT = "packed-v1"  # part of a template's cache digest: templates of an older layout are built anew


def template_repo(source: Path, cache_dir: Path, exclude: Iterable[str] = (), ref: str | None = None) -> tuple[Path, str | None]:
    """A git repository holding one commit: the files of ``source`` without the ``exclude`` paths (relative, POSIX);
    cached by content. Returns ``(template, source commit)``.

    Other evaluations' hidden inputs in it (``run.inputs.secret_inputs``: task files with hidden checks, trial files,
    Harbor tests) are left out too. A plain folder gives its files as they are (source commit None). A git repository gives the tree of ``ref``
    (default ``HEAD``), never its history: a workspace borrows the template's objects (``clone --shared``), so
    what the source's history holds (a task file committed beside its repo, hidden verify files) stays out of the
    agent's reach. Safe across processes (pytest-xdist workers): built in a temp dir under a file lock, renamed.
    Raises ``WorkspaceError`` when ``ref`` is not a commit of the source.
    """
    exclude = sorted(set(exclude))
    commit, objects = None, None
    if is_git_root(source):
        commit, objects = source_commit(source, ref)
        digest = hashlib.sha256(f"{commit}\0{chr(0).join(exclude)}\0{inputs.RULE}\0{TEMPLATE_LAYOUT}".encode()).hexdigest()[:20]
    else:
        digest = hashlib.sha256(f"{folder_hash(source, exclude)}\0{chr(0).join(exclude)}\0{inputs.RULE}\0{TEMPLATE_LAYOUT}".encode()).hexdigest()[:20]
    target = cache_dir / digest
    if (target / ".git").is_dir():
        return target, commit
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir / f"{digest}.lock")):
        if (target / ".git").is_dir():
            return target, commit
        tmp = Path(tempfile.mkdtemp(prefix=f"{digest}.", dir=cache_dir))
        if commit:  # the commit's tree through a scratch desk: the source's config, index and files are not used
            try:
                make_desk(tmp, [objects])
                desk_git(["read-tree", "-u", "--reset", commit], tmp)
            finally:
                shutil.rmtree(desk_dir(tmp), ignore_errors=True)
        else:
            def ignore(folder: str, names: list[str]) -> set[str]:  # .git and the excluded paths are never copied
                here = Path(folder).relative_to(source)
                return {n for n in names if n == ".git" or (here / n).as_posix() in exclude}

            shutil.copytree(source, tmp, symlinks=True, dirs_exist_ok=True, ignore=ignore)
        for rel in [*exclude, *inputs.secret_inputs(tmp)]:  # and other tasks' checks, trials' answer keys
            p = tmp / rel
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif p.exists() or p.is_symlink():
                p.unlink()
        git(["init", "-q", "-b", "main", "--template="], tmp)
        (tmp / ".git" / "info").mkdir(exist_ok=True)
        (tmp / ".git" / "info" / "attributes").write_text(DESK_ATTRIBUTES, encoding="utf-8")
        git(["add", "-A", "--force"], tmp)
        git(["commit", "-q", "--allow-empty", "--no-verify", "-m", f"agentrace: {source.name}"], tmp)
        # one pack instead of a loose file per object: every clone of the template (the workspace, through the
        # desk and the clean tree's alternates) reads each blob from one mapped file, not opens two folders per blob
        git(["repack", "-a", "-d", "-q"], tmp)
        os.replace(tmp, target)
    return target, commit


def source_commit(source: Path, ref: str | None = None) -> tuple[str, Path]:
    """``(commit sha of ref (default HEAD), absolute objects folder)`` of the git repository ``source``. Reads only
    its refs and where its objects are (hardened ``git rev-parse``: nothing its config names is run). Raises
    ``WorkspaceError`` when ``ref`` is not a commit of it."""
    out = git(["-c", f"safe.directory={Path(source).absolute()}", "rev-parse", "--path-format=absolute",
               "--git-path", "objects", f"{ref or 'HEAD'}^{{commit}}"], source, check=False).split("\n")
    if len(out) < 2 or not re.fullmatch(r"[0-9a-f]{40,64}", out[1].strip()):
        raise WorkspaceError(f"{ref or 'HEAD'} is not a commit of {source}")
    return out[1].strip(), Path(out[0].strip())


_TEMPLATE_HEADS: dict[str, tuple[str, str]] = {}  # template folder -> (commit, tree): a template never changes once built


def template_head(template: Path) -> tuple[str, str]:
    """``(commit, tree)`` shas of the one commit of ``template`` (from ``template_repo``), looked up once per
    process (one hardened ``git rev-parse``): a template's folder name is its content's digest, so its commit
    never changes."""
    key = str(template)
    if key not in _TEMPLATE_HEADS:
        commit, tree = git(["rev-parse", "HEAD", "HEAD^{tree}"], template).split()
        _TEMPLATE_HEADS[key] = (commit, tree)
    return _TEMPLATE_HEADS[key]


WORK_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"


def checkout(dest: Path, objects: Iterable[Path], commit: str, run=None) -> None:
    """Make ``dest`` (missing or an empty folder) a work tree of ``commit`` on branch ``main``: what ``git clone
    --shared`` of the repository holding ``objects`` leaves once its origin is dropped (``drop_origin``), in one git
    process. The harness writes ``.git`` into the folder it has just made (``HEAD``, ``WORK_CONFIG``, the branch,
    ``objects/info/alternates`` naming ``objects``, empty ``hooks`` and ``info`` folders as ``git init`` leaves
    them, without its sample files); then ``git read-tree -u --reset`` writes the files and the
    index (hardened, ``git``; or through ``run(args, git_dir, work_tree)``, a caller's own hardened git). The
    tree's own ``.gitattributes`` apply to the files written, as they do in a clone. Raises ``WorkspaceError``."""
    dest = Path(dest).absolute()
    meta = dest / ".git"
    try:
        try:
            dest.mkdir(parents=True)
        except FileExistsError:
            if dest.is_symlink() or not dest.is_dir() or any(dest.iterdir()):
                raise WorkspaceError(f"cannot check out into {dest}: it exists and is not an empty folder") from None
        for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags", "hooks", "info"):  # hooks, info: empty
            (meta / sub).mkdir(parents=True)
        for rel, text in (("HEAD", "ref: refs/heads/main\n"), ("config", WORK_CONFIG), ("refs/heads/main", commit + "\n"),
                          ("objects/info/alternates", "".join(f"{Path(o).absolute()}\n" for o in objects))):
            fd = os.open(meta / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:  # new files in folders made just now: no link followed
                fh.write(text)
    except OSError as exc:
        raise WorkspaceError(f"cannot make the git folder of {dest}: {exc}") from exc
    args = ["read-tree", "-u", "--reset", commit]
    if run is not None:
        run(args, meta, dest)
    else:
        git(["--git-dir", str(meta), "--work-tree", str(dest), *args], dest)


@dataclass(frozen=True)
class Clone:
    """A fresh workspace: ``commit`` is the source commit (or the clone's HEAD); ``tree`` the tree of its checked
    out files when known without reading them (a clone of a local template), else None. A clone's files are its
    HEAD's tree, so until anything is written into it ``tree`` equals what ``snapshot.snapshot_tree`` would hash."""

    commit: str
    tree: str | None = None
    uncommitted: tuple[str, ...] = ()  # a local repository's changes its HEAD does not hold (``uncommitted``)


def create(repo: str | None, dest: Path, cache_dir: Path, ref: str | None = None, exclude: Iterable[str] = ()) -> str:
    """``clone(...).commit``: make ``dest`` a fresh clone of ``repo`` and return the source commit (see ``clone``)."""
    return clone(repo, dest, cache_dir, ref, exclude).commit


def clone(repo: str | None, dest: Path, cache_dir: Path, ref: str | None = None, exclude: Iterable[str] = (),
          session: str = "") -> Clone:
    """Make ``dest`` a fresh clone of ``repo`` (path, URL or None for an empty repository) with no remote.

    A local repository or folder is cloned from its template (``template_repo``: its files at ``ref``, without
    ``exclude``); a URL is cloned as is and ``ref`` checked out. Returns a ``Clone`` (source commit or the clone's
    HEAD; the template's tree; a local repository's ``uncommitted`` paths, asked once per ``session``). Raises
    ``WorkspaceError`` when the source is missing or git fails.
    """
    if repo is None:
        dest.mkdir(parents=True, exist_ok=True)
        git(["init", "-q", "-b", "main"], dest)
        git(["commit", "-q", "--allow-empty", "-m", "agentrace: empty start"], dest)
        make_desk(dest)
        return Clone(git(["rev-parse", "HEAD"], dest).strip())
    is_url = "://" in repo or ("@" in repo and ":" in repo and not Path(repo).exists())
    parent = dest.parent if dest.parent.exists() else Path.cwd()
    if is_url:
        git(["clone", "-q", repo, str(dest)], parent, user_config=True)
        if ref:
            git(["checkout", "-q", "--detach", ref], dest)
        commit, tree = None, None
        make_desk(dest)  # its objects are the clone's own (the agent's): the desk hashes the files itself
    else:
        path = Path(repo)
        if not path.is_dir():
            raise WorkspaceError(f"repo {repo} does not exist or is not a directory")
        exclude = list(exclude)
        template, commit = template_repo(path, cache_dir, exclude, ref)
        changed = uncommitted(path, exclude, session) if commit and ref is None else ()
        head, tree = template_head(template)
        checkout(dest, [template / ".git" / "objects"], head)  # no origin: the source is never reachable from it
        # the desk reads the template's objects (the harness's cache) and starts from the checkout's index
        make_desk(dest, [template / ".git" / "objects"], dest / ".git" / "index")
        return Clone(commit or head, tree, changed)
    drop_origin(dest)  # nothing to push to: the source is never reachable from the clone
    return Clone(commit or git(["rev-parse", "HEAD"], dest).strip(), tree)


_UNCOMMITTED: dict[tuple[str, tuple[str, ...], str], tuple[str, ...]] = {}


def uncommitted(source: Path, exclude: Iterable[str] = (), session: str = "") -> tuple[str, ...]:
    """The paths (relative, POSIX, sorted) where the work tree of the git repository ``source`` differs from its
    HEAD: changed, added, deleted or untracked files its ``.gitignore`` files do not ignore, other than the
    ``exclude`` paths and what lies below them; () when git cannot tell. A workspace holds the HEAD's files, so these
    are what a run does not see. Asked once per process, repository and ``session``, through a scratch desk
    (``make_desk``: the harness's config and attributes, the source's objects borrowed, a copy of its index for the
    stat data): nothing the source's config or attributes name runs (no filter, fsmonitor or hook), and nothing in
    it is written."""
    key = (str(Path(source).absolute()), tuple(sorted(exclude)), session)
    if key not in _UNCOMMITTED:
        _UNCOMMITTED[key] = tuple(sorted(p for p in _changed(Path(source))
                                         if not any(p == e or p.startswith(e.rstrip("/") + "/") for e in key[1])))
    return _UNCOMMITTED[key]


def _changed(source: Path) -> list[str]:
    """``uncommitted``'s paths before the exclusions ([] when git cannot tell)."""
    try:
        commit, objects = source_commit(source)
        index = Path(git(["-c", f"safe.directory={Path(source).absolute()}", "rev-parse", "--path-format=absolute",
                          "--git-path", "index"], source).strip())
        with tempfile.TemporaryDirectory(prefix="agentrace-status-") as tmp:
            desk = make_desk(source, [objects], index if index.is_file() and not index.is_symlink() else None,
                             desk=Path(tmp) / "desk")
            (desk / "HEAD").write_text(f"{commit}\n", encoding="utf-8")
            where = ["--git-dir", str(desk), "--work-tree", str(Path(source).absolute())]
            if not (desk / "index").is_file():
                git([*where, "read-tree", commit], desk)
            proc = git_process([*where, "status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all",
                                "--ignore-submodules=all"], desk, errors="surrogateescape")
    except (WorkspaceError, OSError):
        return []
    if proc.returncode != 0:
        return []
    return [entry[3:] for entry in proc.stdout.split("\0") if len(entry) > 3]


def drop_origin(dest: Path) -> None:
    """What ``git remote remove origin`` does to a fresh clone, without a git process: its config cut before the
    first ``[remote``/``[branch`` section, ``refs/remotes`` and its reflogs gone, ``packed-refs`` without them.
    Written by the harness into a clone no agent has seen; a layout it does not know (a reftable) is left to git."""
    meta = dest / ".git"
    config, packed = meta / "config", meta / "packed-refs"
    if meta.is_symlink() or not config.is_file() or (meta / "reftable").exists() or packed.is_symlink():
        git(["remote", "remove", "origin"], dest)
        return
    text = config.read_text(encoding="utf-8")
    config.write_text(re.split(r"(?m)^\[(?:remote|branch)\b", text, maxsplit=1)[0], encoding="utf-8")
    for folder in (meta / "refs" / "remotes", meta / "logs" / "refs" / "remotes"):
        shutil.rmtree(folder, ignore_errors=True)
    if packed.is_file():  # a ref's line, then its peeled "^" line when it is a tag
        refs = re.sub(r"(?m)^[0-9a-f]+ refs/remotes/.*\n(?:\^.*\n)*", "", packed.read_text(encoding="utf-8"))
        packed.write_text(refs, encoding="utf-8")


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


def exclude(ws: Path, patterns: Iterable[str]) -> None:
    """Add gitignore ``patterns`` to the desk's ``info/exclude`` (``desk_dir``: outside the workspace and its tree),
    so tool caches a CLI writes into the workspace are not counted as changes."""
    patterns = [p for p in patterns if p]
    if not patterns:
        return
    desk = desk_dir(ws)
    if not (desk / "HEAD").is_file():
        make_desk(ws)
    with open(desk / "info" / "exclude", "a", encoding="utf-8") as fh:
        fh.write("".join(f"{p}\n" for p in patterns))


def git_dir(ws: Path) -> Path:
    """The agent's git folder of the workspace ``ws``: ``ws/.git`` when that is a real folder (a clone's own; no git
    process), else what ``git rev-parse --absolute-git-dir`` finds. Raises ``WorkspaceError`` when there is none.
    The harness records through ``desk_dir``, never through this one."""
    own = ws / ".git"
    if own.is_dir() and not own.is_symlink():
        return own.absolute()
    return Path(git(["rev-parse", "--absolute-git-dir"], ws).strip())


@dataclass(frozen=True)
class Change:
    """Lines added/removed (text files) and files changed (text and binary) between two trees; ``binaries``: each
    binary file changed as ``{"path", "size" (bytes), "sha256"}`` of its new side (of the old one when deleted,
    with ``"deleted": True``)."""

    lines_added: int
    lines_removed: int
    files_changed: int
    binary_files: int
    patch: str
    binaries: tuple[dict, ...] = ()

    @property
    def lines_changed(self) -> int:
        return self.lines_added + self.lines_removed


PATCH_CAP = 64 * 1024**2  # bytes of diff.patch read from git and recorded
_BINARY_LINE = re.compile(r"(?m)^Binary files .* differ$")


def change(ws: Path, before: str, after: str, binary: bool = False) -> Change:
    """Compare two trees from ``snapshot.snapshot_tree``; binary files count as changed files with 0 lines.

    Two git processes in the desk: ``git diff -z --numstat --no-ext-diff --no-textconv`` prints the NUL-terminated
    numstat records; ``git diff -p`` the patch, of which at most ``PATCH_CAP`` bytes are read (a longer one ends with
    a ``# diff.patch cut at N bytes`` line: a huge change never fills the harness's memory or the record). A binary
    file's bytes are not in the patch: its ``Binary files ... differ`` line is followed by ``# binary <path>: <size>
    bytes, sha256 <hex>`` (``binaries``); with ``binary`` (a task's ``binary_diffs: true``) the patch is ``git diff
    --binary``'s, bytes included. Raises ``WorkspaceError`` when git fails.
    """
    if before == after:  # one tree: nothing changed, no git process
        return Change(0, 0, 0, 0, "")
    added = removed = files = 0
    binary_paths: list[str] = []
    flags = ["--no-renames", "--no-ext-diff", "--no-textconv"]
    # file names as the file system has them (surrogateescape): a binary path that is no UTF-8 is still found below
    out = desk_git(["diff", "-z", "--numstat", *flags, before, after], ws, errors="surrogateescape") + "\0"
    patch, cut = desk_git_head(["diff", "-p", *flags, *(["--binary"] if binary else []), before, after], ws, PATCH_CAP)
    if cut:
        patch += f"\n# diff.patch cut at {PATCH_CAP} bytes: the whole change is larger\n"
    pos = 0
    while pos < len(out) and out[pos] != "\0":
        end = out.index("\0", pos)
        a, r, path = out[pos:end].split("\t", 2)
        pos = end + 1
        files += 1
        if a == "-":
            binary_paths.append(path)
        else:
            added, removed = added + int(a), removed + int(r)
    binaries = blob_facts(ws, before, after, binary_paths) if binary_paths else ()
    if binaries and not binary:
        found = iter(binaries)

        def note(m: re.Match) -> str:
            b = next(found, None)
            return m.group(0) if b is None else f"{m.group(0)}\n# binary {b['path']}: {b['size']} bytes, sha256 {b['sha256']}"

        patch = _BINARY_LINE.sub(note, patch)
    return Change(added, removed, files, len(binary_paths), patch, binaries)


def blob_facts(ws: Path, before: str, after: str, paths: list[str]) -> tuple[dict, ...]:
    """``{"path", "size", "sha256"}`` of each of ``paths`` in the tree ``after`` (in ``before``, with ``"deleted":
    True``, when it is gone), read from the desk's objects (two git processes)."""
    def blobs(tree: str) -> dict[str, str]:
        listing = desk_git(["ls-tree", "-r", "-z", "--full-tree", tree, "--", *paths], ws, errors="surrogateescape")
        found = {}
        for record in filter(None, listing.split("\0")):
            meta, path = record.split("\t", 1)
            found[path] = meta.split()[2]
        return found

    new, old = blobs(after), None
    chosen = []
    for path in paths:
        if path in new:
            chosen.append((path, new[path], False))
        else:
            old = old if old is not None else blobs(before)
            if path in old:
                chosen.append((path, old[path], True))
    if not chosen:
        return ()
    desk = desk_dir(ws)
    proc = subprocess.run(["git", "--git-dir", str(desk), "cat-file", "--batch"], cwd=str(desk),
                          input="".join(f"{sha}\n" for _p, sha, _d in chosen).encode(), capture_output=True,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **HARDENED_ENV})
    if proc.returncode != 0:
        raise WorkspaceError(f"git cat-file failed in {desk}: {proc.stderr.decode(errors='replace')[-500:]}")
    data, pos, facts = proc.stdout, 0, []
    for path, _sha, deleted in chosen:
        nl = data.index(b"\n", pos)
        size = int(data[pos:nl].split()[2])
        body = data[nl + 1:nl + 1 + size]
        pos = nl + 1 + size + 1
        fact = {"path": path, "size": size, "sha256": hashlib.sha256(body).hexdigest()}
        facts.append({**fact, "deleted": True} if deleted else fact)
    return tuple(facts)
