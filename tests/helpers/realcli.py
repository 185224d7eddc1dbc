"""Helpers for the end-to-end tests that drive the real agent CLIs against the model double (marker ``realcli``).

The CLIs come from ``scripts/install-clis.sh`` (``.tools/bin``) or PATH. A missing CLI skips its tests, unless
``AGENTRACE_REQUIRE_REAL_CLIS=1`` (set by CI), where it fails them.

Per-CLI rules for what its output reports (``model-double.md``; checked against the double's request log):
Gemini CLI's totals include its model-router request (one JSON-schema side request per prompt); OpenCode, which
never reports its session-title request, runs with ``--title`` and so makes none; the others make no side
requests; Aider has no tool calls (edits are parsed from text).
"""

from __future__ import annotations

import getpass
import json
import os
import platform
import re
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from helpers.atif import check_folder
from pytest_agentrace.model_double.script import TurnUsage, load_script

ROOT = Path(__file__).parents[2]
TOOLS_BIN = ROOT / ".tools" / "bin"
SCRIPTS = ROOT / "example_suites" / "offline" / "scripts"
SOLVE = SCRIPTS / "solve-fibonacci.yaml"
NOTHING = SCRIPTS / "do-nothing.yaml"
CLIS = ("claude", "codex", "gemini", "opencode", "copilot", "aider")
# the tool names each adapter reports for the solving script's two tool steps (write fib.py over the starter
# file, which every CLI but aider does with its shell tool, then run the tests)
SOLVE_TOOLS = {
    "claude": ["Bash", "Bash"],
    "codex": ["command_execution", "command_execution"],
    "gemini": ["run_shell_command", "run_shell_command"],
    "opencode": ["bash", "bash"],
    "copilot": ["bash", "bash"],
    "aider": [],
}
COUNTS_SIDE_REQUESTS = {"gemini"}


def require_cli(name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Put ``.tools/bin`` first on PATH and return the CLI's path; skip (or fail under
    ``AGENTRACE_REQUIRE_REAL_CLIS=1``) when it is not installed."""
    if TOOLS_BIN.is_dir():
        monkeypatch.setenv("PATH", f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    found = shutil.which(name)
    if found is None:
        why = f"the {name} CLI is not installed (run scripts/install-clis.sh)"
        if os.environ.get("AGENTRACE_REQUIRE_REAL_CLIS") == "1":
            pytest.fail(f"{why}; AGENTRACE_REQUIRE_REAL_CLIS=1 requires it")
        pytest.skip(why)
    return found


def session_args(pytester: pytest.Pytester) -> list[str]:
    """``pytest --agentrace`` options that keep an inner session's config, rootdir and results (history
    store included) inside ``pytester.path``, whatever paths it is given."""
    ini = pytester.makeini("[pytest]\n")
    return ["--agentrace", "-c", str(ini), "--rootdir", str(pytester.path), "--agentrace-out", "out", "-p", "no:cacheprovider"]


def outcomes(out: Path) -> dict[str, dict[str, Any]]:
    """run.json of every run under ``out`` by run id, after checking each run's ``trajectory.json``: valid ATIF
    (Harbor's schema and validators) with the tool calls, turns and tokens of its ``run.json`` (``helpers.atif``)."""
    if (out / "runs").is_dir():
        check_folder(out)
    found = {}
    for p in (out / "runs").rglob("run.json"):
        data = json.loads(p.read_text())
        data["_dir"] = str(p.parent)
        found[data["run_id"]] = data
    return found


def requests(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The model double's request log of one run."""
    path = Path(run["_dir"]) / "model-double-requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def expected_usage(cli: str, script_path: Path, log: list[dict[str, Any]]) -> TurnUsage:
    """Tokens the CLI must report: the script's sum, plus its side requests for CLIs that count them."""
    total = load_script(script_path).total_usage()
    if cli in COUNTS_SIDE_REQUESTS:
        for r in log:
            if r["answer"]["kind"] in ("side", "json"):
                total = total + TurnUsage(**r["answer"]["usage"])
    return total


def check_log_is_complete(log: list[dict[str, Any]], steps: list[int]) -> None:
    """Every request went to the double on 127.0.0.1 and was answered; each script step was answered once,
    in order (side requests aside)."""
    assert log, "the double saw no request"
    for r in log:
        host = {k.lower(): v for k, v in r["headers"].items()}.get("host", "")
        assert host.startswith("127.0.0.1:"), host
        assert r["answer"]["kind"] not in ("not_found", "none"), r["answer"]
    assert [r["answer"]["step"] for r in log if r["answer"].get("step") is not None] == steps


def check_usage(run: dict[str, Any], want: TurnUsage) -> None:
    u = run["usage"]
    assert (u["input_tokens"], u["output_tokens"]) == (want.input, want.output), u
    assert u["cache_read_tokens"] in (0, None) and u["cache_write_tokens"] in (0, None)
    assert u["total_tokens"] == want.total


def leftover_processes(root: Path) -> list[str]:
    """Processes (other than this one) whose working directory or command line lies under ``root``."""
    mine = {os.getpid(), os.getppid()}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(str(root)) or str(root) in cmd:
            found.append(f"{entry.name} {cwd} {cmd[:200]}")
    return found


def host_facts_in(text: str, paths: list[str]) -> list[str]:
    """This machine's facts found in ``text`` (a cassette): ``paths`` and the user's home as substrings, the
    kernel (``platform.release()``), kernel build (``platform.version()``) and OS name (``/etc/os-release``) as
    substrings, the user and host names (``getpass.getuser()``, ``socket.gethostname()``) as whole words, or,
    for a name that is an everyday word or shorter than 4 characters (``root``, ``vm``: CLIs' prompts say "the
    root cause"), where it stands as a name: a line of its own (``whoami``), a path component, ``pytest-of-NAME``,
    ``NAME@``, ``@NAME``, ``=NAME``, ``Linux NAME`` (``uname -a``)."""
    try:
        pretty = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        pretty = ""
    found = [f"path {p}" for p in (*paths, os.path.expanduser("~")) if len(p) > 5 and p in text]
    found += [f"{what} {v!r}" for what, v in (("kernel", platform.release()), ("kernel build", platform.version()),
                                                ("OS", pretty)) if len(v) >= 5 and v in text]
    for what, name in (("user", getpass.getuser()), ("host", socket.gethostname())):
        n = re.escape(name)
        if len(name) >= 4 and name not in ("root", "admin", "user", "runner", "ubuntu", "test"):
            forms = [rf"(?<![\w-]){n}(?![\w-])"]
        else:
            forms = [rf"(?m)^{n}$", rf"/{n}(?=[/\s\"']|$)", rf"pytest-of-{n}\b", rf"\b{n}@", rf"@{n}\b", rf"={n}\b",
                     rf"Linux {n} "]
        found += [f"{what} {name!r} ({f})" for f in forms if re.search(f, text)]
    return found

