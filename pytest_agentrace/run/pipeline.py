"""One run, task or trial alike: workspace -> setup -> agent -> change accounting -> judge -> decide -> run.json.

What differs between a task and a trial is its ``Judge`` (``run.task.TaskJudge``: test / lint / hidden verify
checks; ``run.trial.TrialJudge``: answer key, ``uses``, verify, verification claim): how the workspace is made
and set up, the environment, the prompt, and what the finished workspace and answer are checked against.
Everything else, and the status rule, is here once.

The status rule (``decide``), first match wins; ``error`` is our side's fault and never a sample:

1. ``failed``: the agent hit a resource limit (``run.limits``; reason ``resource limit: memory`` / ``processes`` /
   ``disk`` / ``cpu``): first, since what a CLI reports after the kernel refused it is a consequence; its checks
   do not run, its output and diff are kept. A check (tests, lint, verify: they run the agent's code, within the
   same limits) that hits one fails the run the same way, after rule 2's missing tool (``... in the tests check``);
2. ``error``: the workspace could not be made or set up (clone, overlay, prepare, setup), the agent could not
   be started, a replayed run sent a request its cassette does not hold (``cassette mismatch``), its CLI
   reported a fault of its environment (no login, model provider down), it did not finish and the network proxy
   reached none of the allowed hosts it asked for (``network: cannot reach ...``: a CLI that retries until its time
   is up), its output stops without a terminal event although it exited 0, or a check could not run its tool
   (``checks.missing_tool``);
3. ``timeout``: the agent ran out of time (its checks still run and are recorded);
4. ``failed``: the agent left the workspace unreadable to git, or changed a protected file (``tampered``);
5. ``failed``: the case's checks say no (task: tests or verify; trial: answer key or verify);
6. ``failed``: the agent crashed (a non-zero exit code or a signal) or reported a failure itself (claude
   ``is_error``, codex ``turn.failed``), even when its checks pass: the agent did not finish its work;
7. ``passed``.

A fault in this code is recorded as an ``error`` run with its traceback in ``harness-error.log`` (``execute``
never raises, except ``KeyboardInterrupt``, which leaves no ``run.json``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import shutil
import signal
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_agentrace.errors import WorkspaceError
from pytest_agentrace.record import attempts
from pytest_agentrace.record.manifest import record_run
from pytest_agentrace.record.model import (
    AgentStatus,
    CheckResult,
    Outcome,
    Status,
    Usage,
)
from pytest_agentrace.record.redact import redact, redact_outcome, secret_values
from pytest_agentrace.record.runfile import RUN_FILE, write_run
from pytest_agentrace.record.safefile import signals_held, write_text
from pytest_agentrace.record.trajectory import write_trajectory
from pytest_agentrace.run import cleantree, network, outbox, snapshot, workspace
from pytest_agentrace.run.agent import BOX_SCRATCH, AgentRun, make_context, run_agent, run_limits
from pytest_agentrace.run.checks import Box
from pytest_agentrace.run.discard import discard, remove
from pytest_agentrace.run.harbor import NEEDS_SANDBOX, HarborJudge
from pytest_agentrace.run.judge import Judge, Judgement
from pytest_agentrace.run.limits import confine
from pytest_agentrace.run.runspec import RunOptions, RunSpec
from pytest_agentrace.run.sandbox import Sandbox, overlay_bwrap, writable_mounts
from pytest_agentrace.run.task import TaskJudge
from pytest_agentrace.run.trial import TrialJudge

HARNESS_LOG = "harness-error.log"
CLEAN, REPORTS, CHECK_GIT = "clean", "reports", "check.git"  # scratch folders of the checks (run.cleantree)
CLEAN_LAYERS = "clean.layers"  # the clean tree's changes layer, per-run base layer and checks' upper folders
CHECK_BOX = "check-box"  # the checks' /tmp and /dev/shm


def judge_for(spec: RunSpec, out: Path, session_id: str, options: RunOptions) -> Judge:
    """The ``Judge`` of ``spec``'s kind (``task``, a Harbor task folder, or ``trial``)."""
    if spec.kind == "trial":
        return TrialJudge(spec, out, session_id, options)
    judge = HarborJudge if getattr(spec.spec, "harbor", None) is not None else TaskJudge
    return judge(spec, out, session_id, options)


def execute(spec: RunSpec, tmp: Path, out: Path, options: RunOptions, session_id: str,
            manifest: bool = True) -> Outcome:
    """Run ``spec`` end to end in the scratch folder ``tmp`` and write its records under ``spec.run_dir(out)``
    (``run.json`` last, atomically; ``trajectory.json`` (``record.trajectory``), ``prompt.txt``, ``argv.json``,
    ``raw.out``, ``raw.err``, ``diff.patch`` and the check logs before it). Returns the Outcome. Never raises but
    ``KeyboardInterrupt``. A finished record already in the run's folder is never lost (``record.attempts``): an
    ``error`` run over it is written as this session's attempt beside it, and an interrupt puts it back.

    ``manifest``: hash the record into the session's manifest (``record.manifest.record_run``) before returning,
    with SIGINT and SIGTERM held from the settling to the manifest line, so an interrupted run either has both its
    ``run.json`` and its manifest line or no ``run.json`` (one written before the interrupt is removed: a record no
    manifest names would be unverifiable). Race mode hashes after it adds the race to the record (False here)."""
    run_dir = spec.run_dir(out)
    keeper = attempts.Keeper(out, run_dir, session_id)
    keeper.set_aside()
    recorded = False
    try:
        outcome = _execute_safely(spec, tmp, out, options, session_id)
        with signals_held():
            keeper.settle(outcome.status)
            if manifest:
                record_run(out, session_id, spec.id, attempts.recorded_dir(out, session_id, run_dir))
            recorded = True
    except BaseException:
        if keeper.active:
            keeper.restore()
        elif not recorded and manifest:  # interrupted between its run.json and its manifest line
            (run_dir / RUN_FILE).unlink(missing_ok=True)
        raise
    return outcome


def _execute_safely(spec: RunSpec, tmp: Path, out: Path, options: RunOptions, session_id: str) -> Outcome:
    try:
        return _execute(spec, tmp, out, options, session_id)
    except Exception as exc:  # noqa: BLE001 - a fault of ours must not lose the run: an error run with its traceback
        run_dir = spec.run_dir(out)
        if run_dir.is_symlink() or not run_dir.is_dir():
            fresh_run_dir(run_dir)
        write_text(run_dir / HARNESS_LOG, redact(traceback.format_exc(), secret_values()))
        outcome = Outcome(**base_outcome(spec, session_id), status=str(Status.ERROR),
                          reason=f"harness fault: {type(exc).__name__}: {exc} (traceback in {HARNESS_LOG})")
        outcome = redact_outcome(outcome)
        write_trajectory(run_dir, outcome)
        write_run(run_dir, outcome)
        return outcome


def _execute(spec: RunSpec, tmp: Path, out: Path, options: RunOptions, session_id: str) -> Outcome:
    try:
        return _run(spec, tmp, out, options, session_id)
    finally:  # nothing of a finished run stays where a later agent could read it: renamed away now, deleted behind
        discard(tmp, ("ws", "ws.git", "home", "check-home", "check-home.setup", "input", "harbor", CLEAN, CLEAN + ".src",
                      CLEAN_LAYERS, REPORTS, CHECK_GIT, outbox.NAME, BOX_SCRATCH, CHECK_BOX))


def _run(spec: RunSpec, tmp: Path, out: Path, options: RunOptions, session_id: str) -> Outcome:
    judge = judge_for(spec, out, session_id, options)
    run_dir = spec.run_dir(out)
    fresh_run_dir(run_dir)
    start = time.monotonic()
    fields: dict[str, Any] = {**base_outcome(spec, session_id), **judge.fields}
    checks: dict[str, CheckResult] = {}
    ws = tmp / "ws"
    env = judge.env(ws)
    secrets = secret_values({**os.environ, **env})  # the session's keys stay out of the records all the same
    sandbox = options.sandbox.hiding(tmp.parent, *judge.hidden()) if options.sandbox is not None else None
    if sandbox is not None:  # the task's, the trial's and the agent's sandbox.read / sandbox.write
        sandbox = sandbox.exposing(*exposed(spec))
    fields["extra"] = {**fields["extra"], "sandbox": sandbox.describe() if sandbox is not None else {"on": False}}
    if getattr(spec.agent, "expect", None):  # a baseline's `expect: fail` (or pass): reports read it (xfail)
        fields["extra"]["expect"] = spec.agent.expect
    fields["extra"]["agent_hash"] = spec.agent_hash  # resume reuses the record for this very agent entry only
    box_out: Path | None = None  # the outbox ({run_dir}, $TRIAL_OUT), made before the agent starts
    box_files: tuple[str, ...] = ()  # what the harness's double in the box wrote into the outbox (its request logs)

    def finish(status: Status, reason: str | None = None) -> Outcome:
        reason = with_denials(status, reason, fields.get("usage"))
        if box_out is not None:  # the outbox's regular files into the record's outbox/, never through a link
            taken = outbox.collect(box_out, run_dir, secrets=secrets, harness=box_files)
            if taken != {"copied": 0}:  # what was copied where, and what was left out
                fields["extra"] = {**fields["extra"], "outbox": taken}
        hidden = fields["extra"].get("sandbox_hidden")
        if hidden and status in (Status.FAILED, Status.ERROR):
            note = "; ".join(f"sandbox: {p} is not visible (add it to sandbox.read)" for p in hidden)
            reason = f"{reason}; {note}" if reason else note
        blocked = fields["extra"].get("network_blocked")
        if blocked and status in (Status.FAILED, Status.ERROR, Status.TIMEOUT) and blocked not in (reason or ""):
            reason = f"{reason}; {blocked}" if reason else blocked
        outcome = Outcome(**fields, status=str(status), reason=reason, checks=checks,
                          total_seconds=round(time.monotonic() - start, 3))
        outcome = redact_outcome(outcome, secrets)  # answer, tool calls, errors, reasons: nothing stored in clear
        write_trajectory(run_dir, outcome)  # the ATIF view of the same record (record.trajectory)
        write_run(run_dir, outcome)
        return outcome

    if sandbox is None and judge.needs_sandbox:
        return finish(Status.ERROR, NEEDS_SANDBOX)
    try:
        judge.make_workspace(ws)
    except WorkspaceError as exc:
        return finish(Status.ERROR, f"workspace{judge.where}: {exc}")
    fields["extra"] = with_extra(fields["extra"], {"notes": judge.notes})
    borrowed = workspace.borrowed_objects(ws)  # read before the agent can rewrite the workspace's alternates
    if sandbox is not None:  # the workspace reads its template's objects: shown read-only, like its own files
        sandbox = sandbox.showing(*workspace.borrowed_objects(ws))
        # setup runs before any agent, on the user's own content: it sees the task/trial file's folder (read-only)
        # and the results folder ($TRIAL_OUT); what runs after the agent may run the agent's code: it sees only the
        # workspace and its own run's folder, like the agent
        judge.box = boxed(sandbox.showing(Path(spec.source).resolve().parent), [ws, out], tmp / "check-home")
        options = dataclasses.replace(options, sandbox=sandbox)
    check_limits = run_limits(spec, options.limits)
    # the checks run the agent's code: every folder they write (the clean tree, the box's /tmp and /dev/shm, their
    # HOME, the reports, the outbox, what their box shows writable elsewhere) counts against the disk limit
    shown: list[Path] = []  # the checks' box's writable mounts (a Harbor task's /tests, /logs), once it is made
    judge.limits = lambda: confine(check_limits, list(dict.fromkeys([
        tmp / CLEAN, *(judge.tree.watched() if judge.tree else []), tmp / CHECK_BOX, tmp / "check-home", tmp / REPORTS,
        tmp / outbox.NAME, *shown])), options.cgroup)
    done, error = judge.setup(ws, env, run_dir, secrets)
    checks.update(done)
    if error:
        return finish(Status.ERROR, error)
    if sandbox is not None:  # a Harbor task's /app and /logs for the agent (judge.mounts; none for other cases)
        options = dataclasses.replace(options, sandbox=sandbox.mounting(*judge.mounts("agent", ws)))
    box_out = outbox.make(tmp)
    if "TRIAL_OUT" in env and sandbox is not None:  # the results folder is out of the box's reach: the outbox stands in
        env = {**env, "TRIAL_OUT": str(box_out)}
    try:
        git_folder = workspace.desk_dir(ws)  # the harness's git folder: the workspace's .git is the agent's
        # a clone that setup wrote nothing into holds exactly its commit's tree: no need to hash its files
        unchanged = judge.start_tree if judge.start_tree and not done else None
        before = unchanged or snapshot.snapshot_tree(ws, git_folder)
        base = cleantree.prepare(tmp / CHECK_GIT, ws, unchanged, borrowed)  # the checks' source, before the agent
    except WorkspaceError as exc:
        return finish(Status.ERROR, f"workspace: {exc}")
    guarded = workspace.protected_state(ws, judge.protected_globs)

    ctx = make_context(spec, tmp, run_dir, ws, judge.prompt, env, judge.edits, options, outbox=box_out)
    agent = run_agent(spec, ctx)
    box_files = agent.box_files
    fields["usage"] = agent.usage
    fields["extra"] = with_extra(fields["extra"], agent.extra)
    if agent.error:
        return finish(Status.ERROR, agent.error)
    fields.update(seconds=round(agent.seconds, 3), exit_code=agent.exit_code, timed_out=agent.timed_out)
    fields["extra"] = {**fields["extra"], "output_bytes": agent.output_bytes}
    if agent.limits is not None:
        fields["extra"]["limits"] = agent.limits
    if agent.limit is not None:
        fields["extra"]["limit_hit"] = agent.limit.to_dict()
    unreadable, after = None, None
    try:
        after = snapshot.snapshot_tree(ws, git_folder)
        change = workspace.change(ws, before, after, judge.binary_diffs)
    except WorkspaceError as exc:
        unreadable = f"the agent left the workspace unreadable to git: {exc}"
    else:
        write_text(run_dir / "diff.patch", redact(change.patch, secrets))
        fields.update(lines_added=change.lines_added, lines_removed=change.lines_removed,
                      lines_changed=change.lines_changed, files_changed=change.files_changed)
        if change.binaries:  # path, size and sha256: a binary file's bytes are not in diff.patch
            fields["extra"]["binary_files"] = list(change.binaries)
    tampered = workspace.tampered(guarded, workspace.protected_state(ws, judge.protected_globs))
    fields["tampered"] = tuple(tampered)

    early = (Status.FAILED, agent.limit.reason) if agent.limit is not None else agent_fault(agent)
    if early is None and unreadable:
        early = (Status.FAILED, unreadable)
    if early is None and tampered:
        early = (Status.FAILED, f"tampered: {', '.join(tampered)}")
    if early is not None:
        return finish(*early)
    # in a box whose bwrap mounts overlayfs, the clean tree is layers (run.cleanlayers), not a checkout per check
    layered = sandbox is not None and not isinstance(judge, HarborJudge) and overlay_bwrap() is not None
    try:  # the checks run on the source + the agent's change - the test machinery, never in the workspace
        judge.tree = cleantree.build(base, git_folder / "objects", before, after or before, judge.machinery, tmp / CLEAN,
                                     layers=tmp / CLEAN_LAYERS if layered else None, shared=tmp.parent)
    except WorkspaceError as exc:
        return finish(Status.ERROR, str(exc))
    fields["machinery"] = tuple(judge.tree.machinery)
    overlay = judge.tree.overlay()
    judge.reports = tmp / REPORTS
    check_net = None
    if sandbox is not None:  # the clean tree and the reports read-write; the tree's objects read-only
        writable = [*([] if overlay else [tmp / CLEAN]), tmp / REPORTS, *([box_out] if "TRIAL_OUT" in env else [])]
        (tmp / REPORTS).mkdir(exist_ok=True)
        (tmp / CLEAN).mkdir(exist_ok=True)
        # a Harbor task's /app (the clean tree), /tests, /logs
        check_profile = sandbox.showing(base.git_dir, git_folder / "objects").mounting(*judge.mounts("checks", tmp / CLEAN))
        shown[:] = writable_mounts(check_profile)
        if overlay is not None:  # the clean tree's layers at tmp / CLEAN, by the bwrap that can mount them
            check_profile = dataclasses.replace(check_profile, bwrap=overlay_bwrap(), overlays=(overlay,))
        fields["extra"] = {**fields["extra"], "clean_tree": "overlay" if overlay is not None else "checkout"}
        # the checks run the agent's code: loopback only, unless the task's network says more
        task_net = getattr(spec.spec, "network", None)
        allows = task_net.allow if task_net is not None else ()
        check_mode = network.mode_for("provider" if allows else network.CHECK_MODE, task_net)
        if check_mode != "host":
            check_profile = dataclasses.replace(check_profile, offline=True)
        if check_mode == "provider" and allows:
            try:
                check_net = network.open_run(network.allow_list("plain", {}, allows),
                                             network.parse_resolve(options.network_resolve))
            except (OSError, ValueError) as exc:
                return finish(Status.ERROR, f"could not make the checks' network: {exc}")
        fields["extra"] = {**fields["extra"], "check_network_mode": check_mode if check_net or check_mode != "provider"
                           else "none"}
        # each check starts from the HOME setup left and an empty /tmp: what one check's code wrote there (a
        # usercustomize.py, a .pth in the user site) cannot run in the next
        home0 = tmp / "check-home.setup"
        remove(home0)
        (tmp / "check-home").mkdir(exist_ok=True)
        (tmp / "check-home").rename(home0)
        judge.box = boxed(check_profile, writable, tmp / "check-home", check_net, tmp / CHECK_BOX, fresh=home0)
    try:
        judgement = judge.judge(ws, env, run_dir, secrets, agent.usage)
    finally:
        if check_net is not None:
            fields["extra"] = {**fields["extra"], "check_network": check_net.close()}
    checks.update(judgement.checks)
    fields.update({k: v for k, v in judgement.fields.items() if k != "extra"})
    fields["extra"] = with_extra(fields["extra"], judgement.fields.get("extra", {}))
    return finish(*decide(agent, judgement, spec.timeout))


def boxed(profile: Sandbox, writable: list[Path], home: Path, net: network.RunNetwork | None = None,
          scratch: Path | None = None, fresh: Path | None = None) -> Box:
    """A check command's sandbox: ``profile`` with ``writable`` folders read-write and ``home`` as its HOME;
    with ``net``, behind that provider network's bridge (its gate's folder shown); ``scratch`` backs its /tmp and
    /dev/shm. With ``fresh`` (a harness folder), every command's ``home`` is a new copy of it (links copied as
    links) and its ``scratch`` starts empty."""
    home.mkdir(parents=True, exist_ok=True)

    def wrap(argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        if fresh is not None:  # what the last check's code left goes, unlistable or read-only folders too
            for folder in (home, *([scratch] if scratch is not None else [])):
                remove(folder)
            shutil.copytree(fresh, home, symlinks=True)
        needs: list[Path] = []
        if net is not None:
            argv, env = net.wrap(argv, env)
            needs.append(net.gate.path.parent)
        return profile.wrap(argv, writable=writable, home=home, env=env, needs=needs, scratch=scratch)

    return wrap


def exposed(spec: RunSpec) -> tuple[list[str], list[str]]:
    """``(read, write)``: the paths the run's task/trial file and its agent entry add to the sandbox
    (``sandbox: {read: [...], write: [...]}``); the session's own (options) are in its profile already."""
    read: list[str] = []
    write: list[str] = []
    for owner in (spec.spec, spec.agent):
        box = getattr(owner, "box", None)
        if box is not None:
            read += box.read
            write += box.write
    return read, write


def agent_fault(agent: AgentRun) -> tuple[Status, str] | None:
    """Rule 2's agent part: an ``error`` when the agent's CLI reported a fault of its environment, when it did not
    finish and the proxy reached none of the hosts it asked for, or when its output stopped without a terminal
    event although it exited 0 (see the module docstring)."""
    usage = agent.usage
    if usage.status == AgentStatus.ERROR:
        return Status.ERROR, f"agent environment: {usage.error or 'the CLI reported an error on our side'}"
    unfinished = agent.timed_out or agent.exit_code != 0 or usage.status != AgentStatus.COMPLETED
    if unfinished and (unreachable := agent.extra.get("network_unreachable")):
        return Status.ERROR, unreachable  # the proxy reached none of the allowed hosts: no model turn was possible
    if usage.status == AgentStatus.INCOMPLETE and not agent.timed_out and agent.exit_code == 0:
        return Status.ERROR, f"incomplete agent run: {usage.error or 'no terminal event in its output'}"
    return None


def decide(agent: AgentRun, judgement: Judgement, timeout: float) -> tuple[Status, str | None]:
    """Rules 2 (missing check tool), 3, 5, 6 and 7 of the status rule for a run whose agent finished and whose
    workspace was judged: ``(status, reason)``."""
    missing = next((c for c in judgement.checks.values() if c.missing), None)
    if missing is not None:
        return Status.ERROR, f"{missing.name} cannot run here: {missing.missing} is missing (`{missing.command}`)"
    limited = next((c for c in judgement.checks.values() if c.limit), None)
    if limited is not None:  # a check ran the agent's code into a resource limit
        return Status.FAILED, f"{limited.limit} in the {limited.name} check"
    if agent.timed_out:
        return Status.TIMEOUT, f"agent timed out after {timeout:g}s"
    crash = crash_note(agent.exit_code)
    if judgement.failure:
        return Status.FAILED, judgement.failure + (f"; {crash}" if crash else "")
    if crash:
        return Status.FAILED, crash
    if agent.usage.status == AgentStatus.FAILED:
        return Status.FAILED, f"the agent reported a failure: {agent.usage.error or 'its output ends in an error'}"
    return Status.PASSED, None


def crash_note(exit_code: int | None) -> str:
    """``"agent crashed (exit 2)"`` / ``"agent crashed (SIGSEGV)"`` for a non-zero exit code (negative: the
    signal that killed it); ``""`` for 0 or None (not started, or killed by us on timeout)."""
    if not exit_code:
        return ""
    if exit_code > 0:
        return f"agent crashed (exit {exit_code})"
    try:
        name = signal.Signals(-exit_code).name
    except ValueError:
        name = f"signal {-exit_code}"
    return f"agent crashed ({name})"


def with_denials(status: Status, reason: str | None, usage: Usage | None) -> str | None:
    """``reason`` plus ``"; permission_denials: Write, Bash"`` when a run that did not pass had tools refused by
    the CLI (claude lists them in its result, which still ends ``success``), so the reason says why."""
    denied = usage.permission_denials if usage is not None else ()
    if denied and status != Status.PASSED:
        return f"{reason or status}; permission_denials: {', '.join(denied)}"
    return reason


def base_outcome(spec: RunSpec, session_id: str) -> dict[str, Any]:
    """The identifying fields every outcome of ``spec`` carries."""
    return {
        "run_id": spec.id, "kind": spec.kind, "source": str(spec.source), "case": spec.case, "arm": spec.arm,
        "agent": spec.agent.id, "model": spec.agent.model, "rep": spec.rep,
        "content_hash": getattr(spec.spec, "content_hash", ""), "session_id": session_id,
        "started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def fresh_run_dir(run_dir: Path) -> None:
    """Remove the files an earlier run of the same RunSpec left, so a run's folder holds only its own files; the
    folder is made by the harness (a link or file where it belongs is removed, never followed)."""
    if run_dir.is_symlink() or (run_dir.exists() and not run_dir.is_dir()):
        run_dir.unlink()
    elif run_dir.exists():
        for entry in run_dir.iterdir():
            remove(entry)
    run_dir.mkdir(parents=True, exist_ok=True)


def with_extra(extra: dict[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` updated with ``more``, their ``notes`` lists joined (each part of a run adds its own)."""
    notes = [*extra.get("notes", ()), *more.get("notes", ())]
    return {**extra, **more, **({"notes": notes} if notes else {})}
