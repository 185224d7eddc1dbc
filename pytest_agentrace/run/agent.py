"""Start one run's agent and read what it did: the adapter's argv and environment, the model double and the
offline namespace when asked for, a process group with a timeout (``process.run``), then the adapter's parser.

Also the checks made before a run: whether the agent's executable exists (``missing_executable``: a skip) and
whether a custom command names a path that does not (``agent_path_error``: a configuration error).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentrace.agents import get_adapter
from pytest_agentrace.agents.base import ADAPTER_ENV, RunContext, version_from
from pytest_agentrace.agents.command import expand_template
from pytest_agentrace.agents.pricing import apply_pricing
from pytest_agentrace.errors import AgentError, WorkspaceError
from pytest_agentrace.model_double import netns
from pytest_agentrace.record.model import Usage
from pytest_agentrace.record.redact import redact, secret_values
from pytest_agentrace.record.safefile import write_text
from pytest_agentrace.run import network, process, workspace
from pytest_agentrace.run.launch import StartChannel, Wrapped
from pytest_agentrace.run.limits import Hit, Limits, confine, diagnose
from pytest_agentrace.run.network import RunNetwork
from pytest_agentrace.run.runspec import RunOptions, RunSpec
from pytest_agentrace.run.sandbox import exit_code as sandbox_exit_code
from pytest_agentrace.run.sandbox import hidden_paths, needed_paths, writable_mounts

# what a run with the model double, a cassette or --agentrace-offline needs (``start_session``): loaded by name for
# such a run only, as an adapter is (``agents.get_adapter``), so a session whose runs use none never imports the
# double's server, its wire formats and cassettes
DOUBLE_RUNS = "pytest_agentrace.model_double.runs"
BOX_SCRATCH = "box"  # the run's scratch folder backing the agent's /tmp and /dev/shm


@dataclass(frozen=True)
class AgentRun:
    """What running the agent gave: exit code (None: killed or not started), seconds, parsed usage."""

    exit_code: int | None
    seconds: float
    timed_out: bool
    usage: Usage
    error: str | None = None  # our side could not start it
    output_bytes: dict[str, int] | None = None  # {"stdout": n, "stderr": n}: all it printed, also what was dropped
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # for the record's extra (replay, cassette)
    limit: Hit | None = None  # the resource limit it hit (run.limits.diagnose)
    limits: dict[str, Any] | None = None  # how each limit was enforced (run.json extra.limits)
    box_files: tuple[str, ...] = ()  # files the harness's double wrote into the outbox (AgentSession.box_files)


def run_limits(spec: RunSpec, base: Limits) -> Limits:
    """The limits of ``spec``'s run: the agent entry's ``limits``, then its task/trial file's, then ``base`` (the
    session's, from the options)."""
    file_level = getattr(spec.spec, "limits", None) or Limits()
    agent_level = getattr(spec.agent, "limits", None) or Limits()
    return agent_level.over(file_level.over(base))


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


def anchored(part: str, source: Path) -> str:
    """A custom command's argument ``part`` as the run passes it: a relative path with ``/`` naming a file beside the
    task/trial file ``source`` (``python3 ../agents/mine.py``) becomes that file's absolute path, as the command's
    first word does (``resolve_executable``) and as the box shows it (``named_files``); the agent runs in its
    workspace, where the relative path would name nothing. Any other argument (a placeholder, an option, a word
    with spaces, a path to no file there) is passed as written."""
    if ("/" not in part or os.path.isabs(part) or "{" in part or part.startswith("-")
            or any(c.isspace() for c in part)):
        return part
    cand = Path(source).parent / part
    return str(cand.resolve()) if cand.is_file() else part


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


class NotStarted(Exception):
    """The harness could not start the agent (its argv, the model double, the network or the cgroup): the run's
    ``AgentRun.error``, never charged to the agent."""


@dataclass
class Launch:
    """A CLI agent made ready to start: the adapter's (or custom command's) ``argv`` and the ``run_argv`` wrapped
    by the model double, the network and the box; ``env``; ``stdin`` text (None: closed); the model double's
    ``session`` and the run's network (``net_mode``, ``net``: None for ``host``/``none``), both closed after it;
    ``scratch``: the folder backing the box's /tmp and /dev/shm."""

    argv: list[str]
    run_argv: list[str]
    env: dict[str, str]
    stdin: str | None
    session: Any
    net_mode: str
    net: RunNetwork | None
    scratch: Path


@dataclass
class Finished:
    """What the agent's process left: its output (bounded, ``cut``: what was dropped), exit ``code`` (None: killed
    or not started, bwrap's 128+N as -N), ``seconds``, a harness ``error`` (could not start), the limit it
    ``hit`` and how each was enforced (``limits``), host paths the box hid that its output names (``hidden``),
    the network's ``contacts`` (None: no provider network); ``start_kind``: whose fault it was when the agent did not
    start (``run.launch.Start.kind``: ``box``, ``helper`` or ``exec``)."""

    stdout: str
    stderr: str
    code: int | None
    timed_out: bool
    error: str | None
    seconds: float
    output_bytes: dict[str, int]
    cut: dict[str, int] = dataclasses.field(default_factory=dict)
    hit: Hit | None = None
    limits: dict[str, Any] | None = None
    hidden: list[str] = dataclasses.field(default_factory=list)
    contacts: Any = None
    start_kind: str | None = None


def run_agent(spec: RunSpec, ctx: RunContext) -> AgentRun:
    """Start the agent (in-process for noop/oracle, else its CLI in a process group) and parse its output, in four
    stages: ``prepare`` (argv, env, the model double, the network, the box), ``start`` (confined, with a timeout,
    and what its process left), then ``write_output`` and ``read_run`` (the adapter's parser, pricing, notes).

    Writes ``raw.out`` / ``raw.err`` (secrets redacted; capture bounded to a head and a tail) to ``ctx.run_dir``;
    ``output_bytes`` counts everything the agent printed (``run.json`` ``extra.output_bytes``). A parser exception
    is recorded as a parse warning, never raised.
    """
    adapter = get_adapter(spec.agent.adapter)
    if spec.agent.command is None and adapter.executable is not None:  # a built-in CLI: its provider's variables too
        ctx = dataclasses.replace(ctx, env={**provider_env(adapter), **ctx.env})
    secrets = secret_values({**os.environ, **ctx.env})  # the session's keys stay out of the records all the same
    if adapter.workspace_excludes:
        try:
            workspace.exclude(ctx.workspace, adapter.workspace_excludes)
        except WorkspaceError:
            pass  # not a git workspace: nothing to exclude from
    launch = None
    if spec.agent.command is None and adapter.executable is None:
        finished = run_inprocess(adapter, ctx)
    else:
        try:
            launch = prepare(spec, ctx, adapter, secrets)
            finished = start(spec, ctx, launch)
        except NotStarted as exc:
            return AgentRun(None, 0.0, False, Usage(), error=str(exc))
    write_text(ctx.run_dir / "raw.out", redact(finished.stdout, secrets))  # a link there is replaced, not followed
    write_text(ctx.run_dir / "raw.err", redact(finished.stderr, secrets))
    if finished.error:
        err = finished.error
        if launch is not None and err.startswith("FileNotFoundError") and shutil.which(launch.argv[0],
                                                                                        path=launch.env.get("PATH")):
            err += " (the program exists: its #! interpreter line names a program that is missing)"
        return AgentRun(None, finished.seconds, False, Usage(), box_files=_box_files(launch),
                        error=err if finished.start_kind in ("box", "helper") else f"could not start agent: {err}")
    return read_run(spec, ctx, adapter, launch, finished)


def _box_files(launch: Launch | None) -> tuple[str, ...]:
    """The files the run's model double wrote into the outbox, for its copy into the record folder's top level."""
    return launch.session.box_files() if launch is not None and launch.session is not None else ()


def run_inprocess(adapter: Any, ctx: RunContext) -> Finished:
    """Run an in-process agent (noop, oracle): its exit code and message as a finished process's."""
    begin = time.monotonic()
    res = adapter.run_inprocess(ctx)
    return Finished(res.stdout, res.stderr, res.exit_code, False, None, time.monotonic() - begin,
                    {"stdout": len(res.stdout.encode()), "stderr": len(res.stderr.encode())})


def prepare(spec: RunSpec, ctx: RunContext, adapter: Any, secrets: Any) -> Launch:
    """The first stage: the argv and environment (a custom command's template, else ``adapter.invocation``), the
    model double and offline namespace when asked for, the run's network (``network_for``), then the box around it
    all (``RunOptions.sandbox``). Writes ``argv.json`` (redacted) to ``ctx.run_dir``. Raises ``NotStarted``."""
    session = None  # the model double and/or --agentrace-offline namespace of this run
    try:
        if spec.agent.command is not None:
            words = [anchored(part, spec.source) for part in spec.agent.command[1:]]
            argv = [resolve_executable(spec), *expand_template(words, ctx), *spec.agent.args]
            env, stdin = dict(ctx.env), None
        else:
            inv = adapter.invocation(ctx)
            argv, env, stdin = [*inv.argv, *spec.agent.args], inv.env, inv.stdin
        wrapped, opts = Wrapped(argv, env), ctx.options
        if spec.agent.calls_model and (spec.agent.model_double or opts.model_double or opts.offline or opts.record or opts.replay):
            session = importlib.import_module(DOUBLE_RUNS).start_session(spec, ctx)
            wrapped = session.apply(argv, env)
    except AgentError as exc:
        if session is not None:
            session.close()
        raise NotStarted(str(exc)) from exc
    try:
        net_mode, net, wrapped = network_for(spec, ctx, wrapped, session)
    except (AgentError, OSError, ValueError) as exc:
        if session is not None:
            session.close()
        raise NotStarted(f"could not make the run's network: {exc}") from exc
    write_text(ctx.run_dir / "argv.json", redact(_json(wrapped.argv), secrets))
    # run.launch's launcher in front of the agent, unless a helper the stages put there (netns, netbridge) starts it
    launch = Launch(argv, wrapped.launchable(), wrapped.env, stdin, session, net_mode, net, Path(ctx.home).parent / BOX_SCRATCH)
    if ctx.options.sandbox is not None:
        box(spec, ctx, launch)
    return launch


def box(spec: RunSpec, ctx: RunContext, launch: Launch) -> None:
    """Wrap ``launch.run_argv`` in the session's bubblewrap profile: writable the workspace and the outbox, HOME
    and the scratch folder; visible besides what the programs, the named files, the prompt, the double and the
    network gate need. A namespace of its own (any mode but ``host``) is loopback only."""
    session, net = launch.session, launch.net
    needs = [*needed_paths(launch.argv[0], launch.env.get("PATH")),
             *needed_paths(launch.run_argv[0], launch.env.get("PATH")), *named_files(spec), Path(ctx.prompt_file),
             *(session.needs() if session is not None else []), *([net.gate.path.parent] if net is not None else [])]
    profile = ctx.options.sandbox
    if launch.net_mode != "host" and not profile.offline:
        profile = dataclasses.replace(profile, offline=True)
    launch.run_argv, launch.env = profile.wrap(launch.run_argv, writable=[ctx.workspace, ctx.agent_dir],
                                               home=Path(ctx.home), env=dict(launch.env), needs=needs,
                                               scratch=launch.scratch)


def start(spec: RunSpec, ctx: RunContext, launch: Launch) -> Finished:
    """The second stage: confine the run (``run_limits``; the disk watch counts the workspace, the box's scratch,
    HOME, the outbox and every other folder the box shows writable, such as a Harbor task's ``/logs/agent``), start it in its process group with the timeout and wait; close the double and the
    network; then read what it left (whether it started, from ``run.launch``'s start channel; the limit it hit; the
    hidden paths its output names). Raises ``NotStarted`` when the run's cgroup cannot be made."""
    limits = run_limits(spec, ctx.options.limits)
    watched = [ctx.workspace, launch.scratch, Path(ctx.home), *([ctx.outbox] if ctx.outbox is not None else []),
               *writable_mounts(ctx.options.sandbox)]
    watched = list(dict.fromkeys(watched))  # a folder shown at two paths is counted once
    try:
        confined = confine(limits, watched, ctx.options.cgroup)
    except OSError as exc:
        if launch.session is not None:
            launch.session.close()
        if launch.net is not None:
            launch.net.close()
        raise NotStarted(f"could not make the run's cgroup: {exc}") from exc
    session = launch.session
    # the box's and the helpers' start-up faults, and the report of a double inside the run's namespace, on pipes
    # the agent never holds; every end is closed when this block is left, also when the run raised
    with StartChannel(report=session is not None and session.reports_on_pipe) as channel:
        try:
            pres = process.run(launch.run_argv, cwd=ctx.workspace, env=channel.env(launch.env), timeout=ctx.timeout,
                               stdin=launch.stdin, on_stdout=ctx.options.on_stdout, preexec_fn=confined.preexec,
                               watch=confined.watch if confined.disk_watch is not None else None,
                               pass_fds=channel.pass_fds, on_start=channel.close_write)
            events = confined.hits()
            stopped = pres.stopped or confined.final_check()
        finally:
            confined.close()
            if session is not None:
                session.close(channel.report())
            contacts = launch.net.close() if launch.net is not None else None
        boxed = ctx.options.sandbox is not None
        started = channel.verdict(pres.stderr, boxed=boxed)  # never from the agent's exit code or output
    code = sandbox_exit_code(pres.exit_code) if boxed else pres.exit_code  # bwrap's 128+N for a signal: -N
    err, kind = pres.error, None
    if started.fault is not None and err is None and not (pres.timed_out or stopped):
        err, kind = started.fault, started.kind
    tail = pres.stderr + "\n" + pres.stdout[-65536:]
    hidden = hidden_paths(tail, [ctx.workspace, ctx.home, launch.scratch, ctx.agent_dir]) \
        if ctx.options.sandbox is not None and code not in (0, None) else []
    return Finished(pres.stdout, pres.stderr, code, pres.timed_out, err, pres.seconds,
                    {"stdout": pres.stdout_bytes, "stderr": pres.stderr_bytes}, pres.cut,
                    diagnose(limits, code, tail, stopped, events, confined.evidence(stopped)), confined.record(), hidden, contacts, kind)


def read_run(spec: RunSpec, ctx: RunContext, adapter: Any, launch: Launch | None, finished: Finished) -> AgentRun:
    """The last stage: the adapter's parser (a parser exception is a parse warning), the CLI's version, pricing,
    the double's request log, the network's contacts, hidden paths, commands a tool call missed and the output
    that was cut, as the run's ``AgentRun``."""
    stdout, stderr = finished.stdout, finished.stderr
    try:
        usage = adapter.parse(stdout, stderr, ctx)
    except Exception as exc:  # a parser bug must not lose the run
        usage = Usage(parse_warnings=(f"parser failed: {type(exc).__name__}: {exc}",))
    if launch is not None and spec.agent.command is None and usage.cli_version is None:
        usage = dataclasses.replace(usage, cli_version=cli_version(adapter, launch.argv[0], launch.env, ctx.workspace))
    usage = apply_pricing(usage, spec.agent, getattr(spec.spec, "pricing", None), ctx.prompt)
    extra: dict[str, Any] = {}
    fault = None
    if launch is not None:
        if launch.session is not None:  # the double's request log: a script that did not fit, tokens, a mismatch
            usage = launch.session.settle(usage)
            extra, fault = launch.session.extra(), launch.session.fault()
        extra["network_mode"] = launch.net_mode
        if finished.contacts is not None:
            extra["network"] = finished.contacts
            if launch.net is not None and (blocked := launch.net.blocked_reason()):
                extra["network_blocked"] = blocked
            if launch.net is not None and (unreachable := launch.net.unreachable_reason()):
                extra["network_unreachable"] = unreachable  # an unfinished run then errs (pipeline.agent_fault)
    if finished.hidden:  # the run failed on a path the box does not show
        extra["sandbox_hidden"] = finished.hidden
    missing = missing_commands(stdout + "\n" + stderr)
    if missing:  # a tool call met a missing program: the run may pass, but the agent worked without it
        extra = {**extra, "notes": [*extra.get("notes", ()), "a tool call's output says command not found: "
                                    + ", ".join(missing)]}
    if finished.cut:  # raw.out/raw.err lost their middle: the record says so (usage.parse_warnings)
        usage = dataclasses.replace(usage, parse_warnings=(*usage.parse_warnings,
                                                           *process.cut_notes(finished.cut, finished.output_bytes)))
    return AgentRun(finished.code, finished.seconds, finished.timed_out, usage, error=fault,
                    output_bytes=finished.output_bytes, extra=extra, limit=finished.hit, limits=finished.limits,
                    box_files=_box_files(launch))


def provider_env(adapter: Any, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``base`` (default ``os.environ``) a built-in CLI gets besides the minimal environment:
    ``agents.base.ADAPTER_ENV`` and those starting with one of its ``env_keep`` prefixes."""
    base = os.environ if base is None else base
    keep = (*ADAPTER_ENV, *adapter.env_keep)
    return {k: v for k, v in base.items() if k.startswith(keep)}


def network_for(spec: RunSpec, ctx: RunContext, wrapped: Wrapped,
                session: Any) -> tuple[str, RunNetwork | None, Wrapped]:
    """``(mode, provider network or None, wrapped)`` of one agent run (``run.network``): the mode from the
    agent's, the file's or the session's setting (``none`` under ``--agentrace-offline``: the namespace
    ``model_double.netns`` already made, ``wrapped`` as given, or, for a run without the double, one made here); for ``provider`` a gate on the session proxy and the
    bridge in front of ``wrapped.argv`` (helper ``netbridge``); without a sandbox, ``unshare -n`` makes the
    namespace (for ``none``, with ``netns``'s helper in front: helper ``netns``). Raises ``AgentError`` when no
    namespace can be made, ``OSError`` when the gate's socket cannot."""
    opts = ctx.options
    argv, env = wrapped.argv, wrapped.env
    mode = network.mode_for(opts.network, getattr(spec.spec, "network", None), spec.agent.network)
    if session is not None and (opts.offline or session.offline):  # the double's namespace (or why it has none)
        return "none", None, wrapped
    if opts.offline:  # a run without the double (a Harbor oracle): no network all the same
        mode = "none"
    elif mode == "host":
        return mode, None, wrapped
    unshare: tuple[str, ...] = ()
    if opts.sandbox is None:
        prefix, why = netns.probe()
        if prefix is None:
            raise AgentError(f"network {mode}: {why} (run with --agentrace-network host to use the host's network)")
        unshare = prefix
    if mode == "none":
        return mode, None, (Wrapped(netns.wrap(argv, unshare=True), env, "netns") if unshare else wrapped)
    allows = [*(getattr(getattr(spec.spec, "network", None), "allow", None) or ()),
              *(spec.agent.network.allow if spec.agent.network is not None else ())]
    urls = [session.base_url] if session is not None and session.base_url else []
    rules = network.allow_list(spec.agent.adapter, env, allows, urls)
    net = network.open_run(rules, network.parse_resolve(opts.network_resolve))
    argv, env = net.wrap(argv, env, unshare)
    return mode, net, Wrapped(argv, env, "netbridge")


_CLI_VERSIONS: dict[str, str | None] = {}  # resolved executable path -> version, probed once per process
VERSION_TIMEOUT = 30.0  # seconds (gemini needs about 6 s to start)


MISSING_COMMAND = re.compile(r"(?:^|[\s\"'])(?:[\w/.-]+: )?(?:line \d+: )?([\w.+-]+): command not found")


def missing_commands(text: str) -> list[str]:
    """The programs a shell said it could not find in ``text`` (an agent's output with its tool calls' output):
    bash's ``NAME: command not found`` (also ``sh: line 1: NAME: ...``, and inside JSON strings), sorted, once each."""
    return sorted(set(MISSING_COMMAND.findall(text)))


BOX_OWN = (Path("/proc"), Path("/sys"), Path("/dev"))  # the box has its own; a host file there is never bound in


def named_files(spec: RunSpec) -> list[Path]:
    """The files a custom command's template names literally (its script, a config): kept visible in the sandbox.
    Relative paths resolve against the task/trial file's folder; files under ``/proc``, ``/sys`` and ``/dev`` are
    left out (the box has its own: ``/proc/self/...`` of the harness cannot be bound in)."""
    found = []
    for part in (spec.agent.command or ())[1:]:
        for word in part.split():
            if "{" in word or word.startswith("-"):
                continue
            p = Path(word) if os.path.isabs(word) else Path(spec.source).parent / word
            if p.is_file() and not any(p.resolve().is_relative_to(own) for own in BOX_OWN):
                found.append(p.resolve())
    return found


def cli_version(adapter: Any, exe: str, env: Mapping[str, str], cwd: Path) -> str | None:
    """The CLI's version from ``adapter.version_argv(exe)`` (e.g. ``codex --version``), probed once per
    executable and process; ``None`` when it cannot be run or prints no version."""
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
    return json.dumps(obj, indent=1)


def make_context(spec: RunSpec, tmp: Path, run_dir: Path, ws: Path, prompt: str, env: Mapping[str, str], edits: bool,
                 options: RunOptions, outbox: Path | None = None) -> RunContext:
    """Build the adapter's ``RunContext``; write the prompt twice: the record's ``prompt.txt`` (secrets redacted) and
    the agent's input (``tmp/input/prompt.txt``, the exact text, what ``{prompt_file}`` names; read-only in the
    sandbox, deleted with the run's scratch folder)."""
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    write_text(run_dir / "prompt.txt", redact(prompt, secret_values(env)))
    prompt_file = tmp / "input" / "prompt.txt"
    prompt_file.parent.mkdir(parents=True, exist_ok=True)
    prompt_file.write_text(prompt, encoding="utf-8")  # the agent gets it as given, as with {prompt}
    return RunContext(
        workspace=ws, run_dir=run_dir, home=home, prompt=prompt, prompt_file=prompt_file,
        model=spec.agent.model, edits=edits, env=env, timeout=spec.timeout, agent=spec.agent,
        case=spec.case_obj, options=options, outbox=outbox,
    )
