"""``pytest --agentrace`` sessions run as subprocesses, a few at once, for test modules whose sessions mostly wait
(the real CLIs start slowly, retry with back-off, run into a timeout).

A module names each test's session with ``@session(name)`` (the CLI comes from the test's ``cli`` parameter, or
``@session(name, cli=...)``), defines ``prepare(path, name, cli) -> list[str]`` (writes the session's files into
``path`` and returns its extra pytest arguments), and a module-scoped fixture::

    @pytest.fixture(scope="module")
    def sessions(request, tmp_path_factory):
        yield from start_sessions(request, tmp_path_factory, prepare)

When the module's first test asks for it, the sessions of the module's selected tests (``-k`` picks some) start,
``PARALLEL`` at a time, slowest first as the module orders them; each test waits for its own (``finished``) and
checks it. Each session's config, rootdir, basetemp, results and HOME lie inside its own folder, as a
``pytester`` session's do. Under pytest-xdist a module that does this is one ``xdist_group`` (``pytestmark``), which
``--dist loadgroup`` (as ``.ci/run`` runs the suite) keeps on one worker, so its sessions run once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.realcli import TOOLS_BIN, leftover_processes, require_cli

PARALLEL = 4  # sessions at once: their time is mostly waiting, not CPU (2 cores)
SESSION_LIMIT = 900  # seconds a session may take before it is stopped and its test fails

Key = tuple[str, str]  # (session name, cli)
Prepare = Callable[[Path, str, str], list[str]]


@dataclass
class SessionRun:
    """One finished session: its folder, its result (``res.ret``, ``res.stdout``, ``res.assert_outcomes``) and
    the processes still running under its folder right after it ended (``helpers.realcli.leftover_processes``)."""

    path: Path
    res: pytest.RunResult
    leftovers: list[str]

    def tail(self) -> str:
        """The last 3,000 characters of the session's output (for assertion messages)."""
        return self.res.stdout.str()[-3000:]


def session(name: str, cli: str | None = None) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Mark a test as reading the session ``name`` of its ``cli`` parameter (or of ``cli``)."""
    def mark(fn: Callable[..., None]) -> Callable[..., None]:
        fn.session = (name, cli)  # type: ignore[attr-defined]
        return fn
    return mark


def session_env(path: Path) -> dict[str, str]:
    """A session subprocess's environment, as pytester gives an in-process session: HOME is the session's
    folder, no outer pytest or pytest-xdist variables; the real CLIs (``.tools/bin``) first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TOX_ENV_DIR"))}
    path_var = os.environ.get("PATH", "")
    if TOOLS_BIN.is_dir():
        path_var = f"{TOOLS_BIN}{os.pathsep}{path_var}"
    env.update(HOME=str(path), USERPROFILE=str(path), PY_COLORS="0", PATH=path_var)
    return env


def run_session(path: Path, args: list[str], home: Path | None = None) -> SessionRun:
    """Run ``pytest --agentrace ARGS`` in ``path`` with its own config (an empty ``tox.ini``), rootdir, basetemp
    and results folder (``out``; a later ``--basetemp`` or ``--agentrace-out`` in ``args`` wins), HOME ``path`` or
    ``home``."""
    (path / "tox.ini").write_text("[pytest]\n")
    argv = [sys.executable, "-m", "pytest", "--agentrace", "-c", "tox.ini", "--rootdir", str(path), "--basetemp",
            str(path / "basetemp"), "--agentrace-out", "out", "-p", "no:cacheprovider", *args]
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=path, env=session_env(home or path), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, errors="replace", timeout=SESSION_LIMIT, check=False)
    res = pytest.RunResult(proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines(), time.monotonic() - start)
    return SessionRun(path, res, leftover_processes(path))


def selected(request: pytest.FixtureRequest) -> list[Key]:
    """(session name, cli) of the requesting module's selected tests, in collection order, each once."""
    keys: dict[Key, None] = {}
    for item in request.session.items:
        fn = getattr(item, "function", None)
        if getattr(item, "module", None) is not request.module or not hasattr(fn, "session"):
            continue
        name, cli = fn.session
        keys[(name, cli or item.callspec.params["cli"])] = None
    return list(keys)


def start_sessions(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, prepare: Prepare,
                   slow_first: Iterable[Key] = ()) -> Iterator[dict[Key, Future[SessionRun]]]:
    """Start the selected tests' sessions (``PARALLEL`` at once, ``slow_first`` first) and yield
    ``{(name, cli): Future[SessionRun]}``; at the module's end, wait for them all. A CLI that is not installed
    has no session (its test skips, or fails under ``AGENTRACE_REQUIRE_REAL_CLIS=1``, in ``require_cli``)."""
    first = list(slow_first)
    path_var = session_env(Path.cwd())["PATH"]
    keys = sorted((k for k in selected(request) if shutil.which(k[1], path=path_var)),
                  key=lambda k: first.index(k) if k in first else len(first))

    # the folders are made here, in the main thread: TempPathFactory is not thread-safe (the first call makes
    # the basetemp, removing what is there)
    paths = {key: tmp_path_factory.mktemp(f"{key[0]}-{key[1]}") for key in keys}

    def run(key: Key) -> SessionRun:
        return run_session(paths[key], prepare(paths[key], *key))

    with ThreadPoolExecutor(PARALLEL, thread_name_prefix="agentrace-session") as pool:
        yield {key: pool.submit(run, key) for key in keys}


def finished(sessions: dict[Key, Future[SessionRun]], name: str, cli: str, monkeypatch: pytest.MonkeyPatch) -> SessionRun:
    """The finished session ``name`` of ``cli``, once ``require_cli`` found the CLI (skip or fail as it says)."""
    require_cli(cli, monkeypatch)
    return sessions[(name, cli)].result()
