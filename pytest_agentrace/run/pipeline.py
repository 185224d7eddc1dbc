"""Execute one RunSpec: workspace -> agent -> change accounting -> checks -> Outcome (+ run.json).

``run_agent`` (shared with trials) starts the agent through its adapter and parses its output;
``run_task`` is the task pipeline. Infrastructure faults become ``status = error`` outcomes, agent faults
(crash, garbage output, timeout) become samples; nothing here raises for an agent's behaviour.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentrace.agents import get_adapter
from pytest_agentrace.agents.base import RunContext
from pytest_agentrace.errors import AgentError, WorkspaceError
from pytest_agentrace.record.model import (
    AgentStatus,
    CheckResult,
    Outcome,
    Status,
    Usage,
)
from pytest_agentrace.record.runfile import write_run
from pytest_agentrace.run import process, workspace
from pytest_agentrace.run.checks import NOT_FOUND_EXIT, clean_env, run_check
from pytest_agentrace.spec.matrix import RunSpec

RUN_FILES = ("run.json", "raw.out", "raw.err", "prompt.txt", "diff.patch", "tests.log", "verify.log", "lint.log", "setup.log")


@dataclass(frozen=True)
class AgentRun:
    """What running the agent gave: exit code (None: killed or not started), seconds, parsed usage."""

    exit_code: int | None
    seconds: float
    timed_out: bool
    usage: Usage
    error: str | None = None  # our side could not start it
    output_bytes: dict[str, int] | None = None  # {"stdout": n, "stderr": n}: all it printed, also what was dropped


def resolve_executable(spec: RunSpec) -> str | None:
    """The executable an agent needs (``None`` for in-process agents). Relative paths with ``/`` in a custom
    command resolve against the task/trial file's folder."""
    agent = spec.agent
    if agent.command:
        exe = agent.command[0]
        if "/" in exe and not os.path.isabs(exe):
            cand = (spec.source.parent / exe).resolve()
            if cand.exists():
                return str(cand)
        return exe
    try:
        return get_adapter(agent.adapter).executable
    except KeyError:
        return agent.name


def agent_path_error(spec: RunSpec) -> str | None:
    """Configuration error when a custom agent command names a path (with ``/``) that does not exist or is not
    executable: a typo in the task/trial file, reported as an error of the item (not a skip, not a run)."""
    command = spec.agent.command
    if not command or "/" not in command[0]:
        return None
    exe = resolve_executable(spec)
    if os.path.isfile(exe) and os.access(exe, os.X_OK):
        return None
    where = os.path.abspath(exe) if os.path.isabs(exe) else str((spec.source.parent / command[0]).resolve())
    what = "is not executable (chmod +x it)" if os.path.exists(where) else "does not exist"
    return (f"{spec.source}: key 'agents' (agent '{spec.agent.label}'): command {command[0]!r} {what}: {where} "
            "(a relative path resolves against the file's folder)")


def missing_executable(spec: RunSpec) -> str | None:
    """Skip reason when the agent's executable is not on PATH (``None`` when it is, or not needed). Check
    ``agent_path_error`` first: a custom path that is missing is an error, not a skip."""
    exe = resolve_executable(spec)
    if exe is None:
        return None
    if os.path.isabs(exe):
        return None if os.access(exe, os.X_OK) else f"agent '{spec.agent.label}' executable {exe} not found or not executable"
    if shutil.which(exe):
        return None
    return f"agent '{spec.agent.label}' not found on PATH" + ("" if exe == spec.agent.name else f" (looked for {exe})")


def fresh_run_dir(run_dir: Path) -> None:
    """Remove the files an earlier run of the same RunSpec left, so a run's folder holds only its own files."""
    if run_dir.exists():
        for entry in run_dir.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)


def run_agent(spec: RunSpec, ctx: RunContext) -> AgentRun:
    """Start the agent (in-process for noop/oracle, else its CLI in a process group) and parse its output.

    Writes ``raw.out`` / ``raw.err`` (secrets redacted; capture bounded to a head and a tail) to ``ctx.run_dir``;
    ``output_bytes`` counts everything the agent printed (``run.json`` ``extra.output_bytes``). A parser exception
    is recorded as a parse warning, never raised.
    """
    adapter = get_adapter(spec.agent.adapter)
    secrets = process.secret_values(ctx.env)
    if adapter.workspace_excludes:
        try:
            workspace.exclude(ctx.workspace, adapter.workspace_excludes)
        except WorkspaceError:
            pass  # not a git workspace: nothing to exclude from
    start = time.monotonic()
    session = None  # the model double and/or --agentrace-offline namespace of this run (issue 7)
    if spec.agent.command is None and adapter.executable is None:
        res = adapter.run_inprocess(ctx)
        stdout, stderr, code, timed_out, err = res.stdout, res.stderr, res.exit_code, False, None
        seconds = time.monotonic() - start
        output_bytes = {"stdout": len(stdout.encode()), "stderr": len(stderr.encode())}
        cut: dict[str, int] = {}
    else:
        try:
            if spec.agent.command is not None:
                from pytest_agentrace.agents.command import expand_template

                exe = resolve_executable(spec)
                argv = [exe, *expand_template(spec.agent.command[1:], ctx), *spec.agent.args]
                inv_env, stdin = dict(ctx.env), None
            else:
                inv = adapter.invocation(ctx)
                argv, inv_env, stdin = [*inv.argv, *spec.agent.args], inv.env, inv.stdin
            run_argv = argv
            if spec.agent.model_double or (ctx.options or {}).get("model_double") or (ctx.options or {}).get("offline"):
                from pytest_agentrace.model_double.runs import start_session

                session = start_session(spec, ctx)
                run_argv, inv_env = session.apply(argv, inv_env)
        except AgentError as exc:
            if session is not None:
                session.close()
            return AgentRun(None, 0.0, False, Usage(), error=str(exc))
        (ctx.run_dir / "argv.json").write_text(process.redact(_json(run_argv), secrets), encoding="utf-8")
        try:
            pres = process.run(run_argv, cwd=ctx.workspace, env=inv_env, timeout=ctx.timeout, stdin=stdin,
                               on_stdout=(ctx.options or {}).get("on_stdout"))  # live progress (issue 8)
        finally:
            if session is not None:
                session.close()
        stdout, stderr, code, timed_out, err, seconds = pres.stdout, pres.stderr, pres.exit_code, pres.timed_out, pres.error, pres.seconds
        output_bytes, cut = {"stdout": pres.stdout_bytes, "stderr": pres.stderr_bytes}, pres.cut
    (ctx.run_dir / "raw.out").write_text(process.redact(stdout, secrets), encoding="utf-8")
    (ctx.run_dir / "raw.err").write_text(process.redact(stderr, secrets), encoding="utf-8")
    if err:
        if err.startswith("FileNotFoundError") and shutil.which(run_argv[0]):
            err += " (the program exists: its #! interpreter line names a program that is missing)"
        return AgentRun(None, seconds, False, Usage(), error=f"could not start agent: {err}")
    try:
        usage = adapter.parse(stdout, stderr, ctx)
    except Exception as exc:  # a parser bug must not lose the run
        usage = Usage(parse_warnings=(f"parser failed: {type(exc).__name__}: {exc}",))
    if spec.agent.command is None and adapter.executable is not None and usage.cli_version is None:
        usage = dataclasses.replace(usage, cli_version=cli_version(adapter, argv[0], inv_env, ctx.workspace))
    from pytest_agentrace.agents.pricing import apply_pricing

    usage = apply_pricing(usage, spec.agent, getattr(spec.spec, "pricing", None), ctx.prompt)
    if session is not None:  # the double's request log: a script that did not fit, tokens it served
        usage = session.settle(usage)
    if cut:  # raw.out/raw.err lost their middle: the record says so (usage.parse_warnings)
        usage = dataclasses.replace(usage, parse_warnings=(*usage.parse_warnings, *process.cut_notes(cut, output_bytes)))
    return AgentRun(code, seconds, timed_out, usage, output_bytes=output_bytes)


_CLI_VERSIONS: dict[str, str | None] = {}  # resolved executable path -> version, probed once per process
VERSION_TIMEOUT = 30.0  # seconds (gemini needs about 6 s to start)


def cli_version(adapter: Any, exe: str, env: Mapping[str, str], cwd: Path) -> str | None:
    """The CLI's version from ``adapter.version_argv(exe)`` (e.g. ``codex --version``), probed once per
    executable and process; ``None`` when it cannot be run or prints no version."""
    from pytest_agentrace.agents.base import version_from

    key = os.path.realpath(shutil.which(exe, path=env.get("PATH")) or exe)
    if key not in _CLI_VERSIONS:
        argv, version = adapter.version_argv(exe), None
        if argv:
            res = process.run(argv, cwd=cwd, env=env, timeout=VERSION_TIMEOUT)
            if res.exit_code == 0:
                version = version_from(res.stdout) or version_from(res.stderr)
        _CLI_VERSIONS[key] = version
    return _CLI_VERSIONS[key]


def _json(obj: Any) -> str:
    import json

    return json.dumps(obj, indent=1)


def make_context(spec: RunSpec, tmp: Path, run_dir: Path, ws: Path, prompt: str, env: Mapping[str, str], edits: bool, options: Mapping[str, Any]) -> RunContext:
    """Build the adapter's ``RunContext`` and write ``prompt.txt`` (the exact text sent)."""
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    prompt_file = run_dir / "prompt.txt"
    prompt_file.write_text(prompt, encoding="utf-8")
    return RunContext(
        workspace=ws, run_dir=run_dir, home=home, prompt=prompt, prompt_file=prompt_file,
        model=spec.agent.model, edits=edits, env=env, timeout=spec.timeout, agent=spec.agent,
        case=spec.case_obj, options=options,
    )


def base_outcome(spec: RunSpec, session_id: str) -> dict[str, Any]:
    """The identifying fields every outcome of ``spec`` carries."""
    return {
        "run_id": spec.id, "kind": spec.kind, "source": str(spec.source), "case": spec.case, "arm": spec.arm,
        "agent": spec.agent.id, "model": spec.agent.model, "rep": spec.rep,
        "content_hash": getattr(spec.spec, "content_hash", ""), "session_id": session_id,
        "started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def error_outcome(spec: RunSpec, out: Path, session_id: str, reason: str) -> Outcome:
    """Record (and write ``run.json`` for) a run that our side could not carry out: status ``error``."""
    run_dir = spec.run_dir(out)
    run_dir.mkdir(parents=True, exist_ok=True)
    outcome = Outcome(**base_outcome(spec, session_id), status=str(Status.ERROR), reason=reason)
    write_run(run_dir, outcome)
    return outcome


def run_task(spec: RunSpec, tmp: Path, out: Path, options: Mapping[str, Any] | None = None, session_id: str = "") -> Outcome:
    """Run one task RunSpec end to end in ``tmp`` and write ``run.json`` under ``out``. Returns the Outcome.

    ``options``: ``cache_dir`` (template repos). Never raises for agent behaviour; ``KeyboardInterrupt``
    propagates and leaves no ``run.json``.
    """
    options = dict(options or {})
    task = spec.spec
    run_dir = spec.run_dir(out)
    fresh_run_dir(run_dir)
    start = time.monotonic()
    fields = base_outcome(spec, session_id or uuid.uuid4().hex[:12])
    fields["extra"] = {
        "has_verify": bool(task.verify_command), "has_lint": bool(task.lint_command),
        "scoring": task.scoring or None, "difficulty": task.difficulty,
    }
    env = clean_env(extra={**task.env, **spec.agent.env})
    secrets = process.secret_values(env)
    checks: dict[str, CheckResult] = {}

    def finish(status: Status, reason: str | None = None, **more: Any) -> Outcome:
        reason = with_denials(status, reason, more.get("usage", fields.get("usage")))
        outcome = Outcome(
            **fields, status=str(status), reason=reason, checks=checks,
            total_seconds=round(time.monotonic() - start, 3), **more,
        )
        write_run(run_dir, outcome)
        return outcome

    ws = tmp / "ws"
    try:
        workspace.create(task.repo, ws, Path(options.get("cache_dir") or out / ".cache" / "repos"))
    except WorkspaceError as exc:
        return finish(Status.ERROR, f"workspace: {exc}")
    for i, command in enumerate(task.setup):
        res = run_check("setup", command, ws, env, task.timeout, run_dir / "setup.log", secrets)
        checks["setup"] = res
        if not res.passed:
            return finish(Status.ERROR, f"setup command {i + 1} failed ({res.why}): {command}")
    try:
        before = workspace.snapshot_tree(ws)
    except WorkspaceError as exc:
        return finish(Status.ERROR, f"workspace: {exc}")
    guarded = workspace.protected_state(ws, task.protected_globs)

    ctx = make_context(spec, tmp, run_dir, ws, task.description, env, True, options)
    agent = run_agent(spec, ctx)
    if agent.error:
        return finish(Status.ERROR, agent.error, usage=agent.usage)
    fields.update(
        seconds=round(agent.seconds, 3), exit_code=agent.exit_code, timed_out=agent.timed_out, usage=agent.usage,
    )
    fields["extra"]["output_bytes"] = agent.output_bytes
    try:
        change = workspace.change(ws, before, workspace.snapshot_tree(ws))
    except WorkspaceError as exc:
        return finish(Status.FAILED, f"the agent left the workspace unreadable to git: {exc}")
    (run_dir / "diff.patch").write_text(process.redact(change.patch, secrets), encoding="utf-8")
    fields.update(
        lines_added=change.lines_added, lines_removed=change.lines_removed,
        lines_changed=change.lines_changed, files_changed=change.files_changed,
    )
    bad = workspace.tampered(guarded, workspace.protected_state(ws, task.protected_globs))
    if bad:
        return finish(Status.FAILED, f"tampered: {', '.join(bad)}", tampered=tuple(bad))
    if agent.usage.status == AgentStatus.ERROR:
        return finish(Status.ERROR, f"agent environment: {agent.usage.error or 'the CLI reported an error on our side'}")
    if agent.usage.status == AgentStatus.INCOMPLETE and not agent.timed_out and agent.exit_code == 0:
        return finish(Status.ERROR, f"incomplete agent run: {agent.usage.error or 'no terminal event in its output'}")

    checks["tests"] = run_check("tests", task.test_command, ws, env, task.timeout, run_dir / "tests.log", secrets)
    # lint sees the agent's tree, before the hidden verify files are written into it
    if task.lint_command:
        checks["lint"] = run_check("lint", task.lint_command, ws, env, task.timeout, run_dir / "lint.log", secrets)
    if task.verify_command:
        workspace.write_files(ws, task.verify_files)
        checks["verify"] = run_check("verify", task.verify_command, ws, env, task.timeout, run_dir / "verify.log", secrets)
    missing = [c for c in checks.values() if c.name != "setup" and c.exit_code == NOT_FOUND_EXIT]
    if missing:
        return finish(Status.ERROR, f"{missing[0].name} command not found: {missing[0].command}")
    if agent.timed_out:
        return finish(Status.TIMEOUT, f"agent timed out after {spec.timeout:g}s")
    failed = [c for c in (checks.get("tests"), checks.get("verify")) if c is not None and not c.passed]
    if failed:
        return finish(Status.FAILED, f"{failed[0].name} failed ({failed[0].why})" + _crash_note(agent.exit_code))
    if agent.usage.status == AgentStatus.FAILED:
        return finish(Status.FAILED, agent_failure(agent.usage))
    return finish(Status.PASSED)


def with_denials(status: Status, reason: str | None, usage: Usage | None) -> str | None:
    """``reason`` plus ``"; permission_denials: Write, Bash"`` when a run that did not pass had tools refused by
    the CLI (claude lists them in its result, which still ends ``success``), so the reason says why."""
    denied = usage.permission_denials if usage is not None else ()
    if denied and status != Status.PASSED:
        return f"{reason or status}; permission_denials: {', '.join(denied)}"
    return reason


def agent_failure(usage: Usage) -> str:
    """The reason of a run whose agent's own output reported a failure (claude ``is_error``, codex
    ``turn.failed``, ...): the checks may pass, but the agent said it did not finish its work."""
    return f"the agent reported a failure: {usage.error or 'its output ends in an error'}"


def _crash_note(exit_code: int | None) -> str:
    """``"; the agent crashed (SIGSEGV)"`` for an agent killed by a signal (negative exit code), else ``""``."""
    if exit_code is None or exit_code >= 0:
        return ""
    import signal

    try:
        name = signal.Signals(-exit_code).name
    except ValueError:
        name = f"signal {-exit_code}"
    return f"; the agent crashed ({name})"
