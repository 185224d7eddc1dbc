"""Execute one trial RunSpec: clone -> overlay -> prepare (once) -> setup -> agent -> answer key -> verify -> claim.

Each run gets a fresh clone of its question's repo (or the repo the arm maps it to), the arm's overlay copied
over it, then:

- ``prepare`` runs once per session per arm (file lock + a marker under ``<out>/.sessions/<session id>``, so it
  also holds across pytest-xdist workers, which share the controller's session id); cwd is the trial file's
  folder; a failed prepare is remembered and every run of that arm reports it without re-running it;
- ``setup`` runs in the clone, one run at a time across the whole session (a ``FileLock`` under
  ``<out>/.locks``) unless the arm says ``parallel_setup = true``;
- the agent runs through ``runner.run_agent`` with ``edits`` from the agent entry (default ``False``);
- the answer is scored (``answers.score_answer``), ``uses`` is matched over the tool calls, ``verify`` runs
  in the clone, and a verification claim is judged against it.

Environment of prepare, setup, verify (and the agent): ``TRIAL_OUT`` (the results folder, ``--agentrace-out``),
``TRIAL_DIR`` (the clone), ``TRIAL_ID`` (unique per run and session; ``[a-z0-9_]``, starts with a letter,
at most 51 characters: safe as a database name), ``TRIAL_QUESTION``, ``TRIAL_ARM``, ``TRIAL_AGENT``,
``TRIAL_REP``.

Statuses (ARCHITECTURE.md: ``error`` = our side): clone/overlay/prepare/setup failures and a missing verify
command are ``error`` (recorded in ``run.json``, never a sample, re-run by ``--agentrace-retry-failed``); a
timed-out agent is ``timeout``; a crashed agent (non-zero exit), a wrong answer or a failed verify is
``failed``; otherwise ``passed``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_agentrace.errors import WorkspaceError
from pytest_agentrace.record.model import AgentStatus, CheckResult, Outcome, Status
from pytest_agentrace.record.runfile import write_atomic, write_run
from pytest_agentrace.run import process, workspace
from pytest_agentrace.run.checks import NOT_FOUND_EXIT, clean_env, run_check
from pytest_agentrace.run.pipeline import (
    agent_failure,
    base_outcome,
    fresh_run_dir,
    make_context,
    run_agent,
    with_denials,
)
from pytest_agentrace.spec.matrix import RunSpec
from pytest_agentrace.stats.answers import (
    CLAIM_REQUEST,
    judge_claim,
    parse_claim,
    score_answer,
    tool_used,
)

SETUP_LOCK = Path(".locks") / "setup.lock"
SESSION_MARKER_MAX_AGE = 24 * 3600.0  # seconds: older sessions' prepare markers are removed


def trial_id(spec: RunSpec, session_id: str) -> str:
    """``TRIAL_ID``: a readable slug of question/arm/agent/rep plus 8 hex digits of sha256(session id, run id)."""
    slug = re.sub(r"[^a-z0-9]+", "_", f"{spec.case}_{spec.arm}_{spec.agent.id}_r{spec.rep}".lower()).strip("_")[:40].rstrip("_")
    digest = hashlib.sha256(f"{session_id}\0{spec.id}".encode()).hexdigest()[:8]
    return f"t_{slug}_{digest}"


def trial_env(spec: RunSpec, out: Path, ws: Path, session_id: str) -> dict[str, str]:
    """The environment for prepare, setup, verify and the agent: ``clean_env`` + the agent's ``env`` + ``TRIAL_*``."""
    return clean_env(extra={
        **spec.agent.env,
        "TRIAL_OUT": str(out), "TRIAL_DIR": str(ws), "TRIAL_ID": trial_id(spec, session_id),
        "TRIAL_QUESTION": spec.case, "TRIAL_ARM": spec.arm, "TRIAL_AGENT": spec.agent.id, "TRIAL_REP": str(spec.rep),
    })


def compose_prompt(trial: Any, arm: Any, question: Any) -> str:
    """The exact text sent: arm ``prompt_prefix``, the question's ``prompt``, the suffix (the arm's
    ``prompt_suffix`` when set, else ``[defaults].prompt_suffix``), and the claim request when ``claim = true``.

    Parts are stripped of surrounding whitespace and joined by a blank line; empty parts are left out.
    """
    suffix = arm.prompt_suffix if arm.prompt_suffix is not None else trial.prompt_suffix
    parts = [arm.prompt_prefix, question.prompt, suffix, CLAIM_REQUEST if trial.claim else None]
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def _run_commands(name: str, commands: tuple[str, ...], cwd: Path, env: Mapping[str, str], timeout: float, log: Path, secrets) -> CheckResult:
    """Run ``commands`` in order (stop at the first failure); one log with every command's output.

    Returns one ``CheckResult`` named ``name`` whose ``command`` is the failing (or last) command and whose
    ``seconds`` is the total.
    """
    texts, total, res = [], 0.0, None
    for command in commands:
        res = run_check(name, command, cwd, env, timeout, log, secrets)
        texts.append(log.read_text(encoding="utf-8"))
        total += res.seconds
        if not res.passed:
            break
    log.write_text("".join(texts), encoding="utf-8")
    assert res is not None
    return CheckResult(name, res.command, res.exit_code, round(total, 3), log.name, res.timed_out)


def prune_sessions(root: Path, keep: str, max_age: float = SESSION_MARKER_MAX_AGE) -> None:
    """Remove other sessions' marker folders under ``root`` untouched for more than ``max_age`` seconds."""
    cutoff = time.time() - max_age
    for d in root.iterdir() if root.is_dir() else ():
        try:
            if d.is_dir() and d.name != keep and d.stat().st_mtime < cutoff:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            continue


def prepare_once(spec: RunSpec, out: Path, env: Mapping[str, str], session_id: str, run_dir: Path, secrets=()) -> CheckResult:
    """Run the arm's ``prepare`` commands once per session (across xdist workers); return their result.

    The first run of the arm in a session takes a file lock, runs the commands in the trial file's folder and
    writes a marker ``<out>/.sessions/<session id>/prepare/<key>.json``; later runs read the marker. The log is
    copied into ``run_dir/prepare.log``. A ``KeyboardInterrupt`` leaves no marker (the next session prepares).
    """
    from filelock import FileLock

    trial, arm = spec.spec, spec.spec.arm(spec.arm)
    key = hashlib.sha256(f"{Path(trial.path).resolve()}\0{arm.name}".encode()).hexdigest()[:16]
    folder = out / ".sessions" / session_id / "prepare"
    if not folder.exists():
        prune_sessions(out / ".sessions", keep=session_id)
    folder.mkdir(parents=True, exist_ok=True)
    marker, log = folder / f"{key}.json", folder / f"{key}.log"
    with FileLock(str(folder / f"{key}.lock")):
        if marker.exists():
            result = CheckResult.from_dict(json.loads(marker.read_text(encoding="utf-8")))
        else:
            result = _run_commands("prepare", arm.prepare, Path(trial.path).parent, env, trial.timeout, log, secrets)
            write_atomic(marker, json.dumps({**result.to_dict(), "run_id": spec.id, "arm": arm.name}))
    if log.exists():
        shutil.copyfile(log, run_dir / "prepare.log")
    return CheckResult(result.name, result.command, result.exit_code, result.seconds, "prepare.log", result.timed_out)


def run_setup(spec: RunSpec, ws: Path, out: Path, env: Mapping[str, str], run_dir: Path, secrets=()) -> CheckResult:
    """Run the arm's ``setup`` commands in the clone; one run at a time per results folder unless ``parallel_setup``."""
    from filelock import FileLock

    trial, arm = spec.spec, spec.spec.arm(spec.arm)
    log = run_dir / "setup.log"
    if arm.parallel_setup:
        return _run_commands("setup", arm.setup, ws, env, trial.timeout, log, secrets)
    lock = out / SETUP_LOCK
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock)):
        return _run_commands("setup", arm.setup, ws, env, trial.timeout, log, secrets)



def run_trial(spec: RunSpec, tmp: Path, out: Path, options: Mapping[str, Any] | None = None, session_id: str = "") -> Outcome:
    """Run one trial RunSpec end to end in ``tmp``; write ``run.json`` (and ``prompt.txt``, ``raw.out``,
    ``raw.err``, ``verify.log``, ``setup.log``, ``prepare.log``, ``diff.patch``) under ``spec.run_dir(out)``.

    ``options``: ``cache_dir`` (template repos for plain folders). Returns the Outcome; never raises for the
    agent's behaviour. ``KeyboardInterrupt`` propagates (the agent's process group is terminated by
    ``process.run``) and leaves no ``run.json`` for this run.
    """
    options = dict(options or {})
    trial, question = spec.spec, spec.case_obj
    arm = trial.arm(spec.arm)
    session_id = session_id or uuid.uuid4().hex[:12]
    run_dir = spec.run_dir(out)
    fresh_run_dir(run_dir)
    start = time.monotonic()
    repo_name = arm.repos.get(question.repo, question.repo)
    repo = trial.repo(repo_name)
    edits = bool(spec.agent.edits)
    fields = base_outcome(spec, session_id)
    fields["extra"] = {
        "trial": trial.name, "baseline_arm": trial.baseline, "repo": repo_name, "edits": edits,
        "has_verify": question.verify is not None, "claim_requested": trial.claim, "uses": arm.uses,
    }
    ws = tmp / "ws"
    env = trial_env(spec, out, ws, session_id)
    secrets = process.secret_values(env)
    checks: dict[str, CheckResult] = {}

    def finish(status: Status, reason: str | None = None, **more: Any) -> Outcome:
        reason = with_denials(status, reason, more.get("usage", fields.get("usage")))
        outcome = Outcome(**fields, status=str(status), reason=reason, checks=checks, total_seconds=round(time.monotonic() - start, 3), **more)
        write_run(run_dir, outcome)
        return outcome

    try:
        fields["extra"]["commit"] = workspace.create(repo.source, ws, Path(options.get("cache_dir") or out / ".cache" / "repos"), repo.ref)
        if arm.overlay:
            workspace.overlay(Path(arm.overlay), ws)
    except WorkspaceError as exc:
        return finish(Status.ERROR, f"workspace ({repo_name}): {exc}")
    if arm.prepare:
        checks["prepare"] = prepare_once(spec, out, env, session_id, run_dir, secrets)
        if not checks["prepare"].passed:
            return finish(Status.ERROR, f"prepare of arm {arm.name!r} failed ({checks['prepare'].why}): {checks['prepare'].command}")
    if arm.setup:
        checks["setup"] = run_setup(spec, ws, out, env, run_dir, secrets)
        if not checks["setup"].passed:
            return finish(Status.ERROR, f"setup of arm {arm.name!r} failed ({checks['setup'].why}): {checks['setup'].command}")
    try:
        before = workspace.snapshot_tree(ws)
    except WorkspaceError as exc:
        return finish(Status.ERROR, f"workspace: {exc}")

    prompt = compose_prompt(trial, arm, question)
    ctx = make_context(spec, tmp, run_dir, ws, prompt, env, edits, options)
    agent = run_agent(spec, ctx)
    if agent.error:
        return finish(Status.ERROR, agent.error, usage=agent.usage)
    usage = agent.usage
    fields.update(seconds=round(agent.seconds, 3), exit_code=agent.exit_code, timed_out=agent.timed_out, usage=usage)
    fields["extra"]["output_bytes"] = agent.output_bytes
    try:
        change = workspace.change(ws, before, workspace.snapshot_tree(ws))
        (run_dir / "diff.patch").write_text(process.redact(change.patch, secrets), encoding="utf-8")
        fields.update(lines_added=change.lines_added, lines_removed=change.lines_removed, lines_changed=change.lines_changed, files_changed=change.files_changed)
    except WorkspaceError as exc:
        fields["extra"]["change_error"] = str(exc)
    if usage.status == AgentStatus.ERROR:
        return finish(Status.ERROR, f"agent environment: {usage.error or 'the CLI reported an error on our side'}")
    if usage.status == AgentStatus.INCOMPLETE and not agent.timed_out and agent.exit_code == 0:
        return finish(Status.ERROR, f"incomplete agent run: {usage.error or 'no terminal event in its output'}")

    score = score_answer(usage.answer, question.expect, question.forbid, question.min_recall)
    fields["answer_score"] = score
    fields["used_tool"] = tool_used(arm.uses, usage.tool_calls)
    verify = None
    if question.verify is not None:
        verify = checks["verify"] = run_check("verify", question.verify, ws, env, trial.timeout, run_dir / "verify.log", secrets)
        if verify.exit_code == NOT_FOUND_EXIT:
            return finish(Status.ERROR, f"verify command not found: {question.verify}")
    if trial.claim:
        fields["claim"] = judge_claim(parse_claim(usage.answer), None if verify is None else verify.passed)

    if agent.timed_out:
        return finish(Status.TIMEOUT, f"agent timed out after {spec.timeout:g}s")
    if agent.exit_code not in (0, None):
        return finish(Status.FAILED, f"agent crashed (exit {agent.exit_code})")
    if usage.status == AgentStatus.FAILED:
        return finish(Status.FAILED, agent_failure(usage))
    if not score["correct"]:
        why = [f"recall {score['recall']:.2f} < min_recall {question.min_recall:.2f}"] if score["missing"] and score["recall"] + 1e-9 < question.min_recall else []
        if score["forbidden"]:
            why.append("forbidden pattern matched: " + ", ".join(score["forbidden"]))
        return finish(Status.FAILED, "answer incorrect: " + "; ".join(why))
    if verify is not None and not verify.passed:
        return finish(Status.FAILED, f"verify failed ({verify.why})")
    return finish(Status.PASSED)
