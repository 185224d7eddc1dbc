"""Check commands (test / verify / lint / setup): run a shell string in the workspace, keep a log."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pytest_agentrace.record.model import CheckResult
from pytest_agentrace.run import process

NOT_FOUND_EXIT = 127  # POSIX shells: command not found
_SCRUB_PREFIXES = ("PYTEST_", "COV_CORE_")


def clean_env(base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for agents and checks: ``base`` (default ``os.environ``) without pytest's own
    variables (``PYTEST_CURRENT_TEST``, ``PYTEST_XDIST_WORKER``, ``PYTEST_ADDOPTS``, ...), plus ``extra``."""
    env = {k: v for k, v in (base if base is not None else os.environ).items() if not k.startswith(_SCRUB_PREFIXES)}
    env.update(extra or {})
    return env


def run_check(name: str, command: str, ws: Path, env: Mapping[str, str], timeout: float, log: Path, secrets=()) -> CheckResult:
    """Run ``command`` through ``/bin/sh -c`` in ``ws`` with ``timeout`` seconds; write its output to ``log``.

    Returns a ``CheckResult``; exit code 127 means the command was not found (an infrastructure error for
    the caller to report). The log starts with the command line and ends with the exit status.
    """
    res = process.run(command, cwd=ws, env=env, timeout=timeout, head=256 * 1024, tail=256 * 1024)
    status = "timed out" if res.timed_out else (res.error or f"exit {res.exit_code}")
    body = f"$ {command}\n{res.stdout}"
    if res.stderr:
        body += f"\n--- stderr ---\n{res.stderr}"
    body += f"\n--- {status} after {res.seconds:.2f}s ---\n"
    log.write_text(process.redact(body, secrets), encoding="utf-8")
    return CheckResult(name, command, res.exit_code, round(res.seconds, 3), log.name, res.timed_out)


def log_tail(run_dir: Path, check: CheckResult | None, lines: int = 20) -> str:
    """The last ``lines`` lines of a check's log (empty when there is none)."""
    if check is None or not check.log:
        return ""
    try:
        text = (run_dir / check.log).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])
