"""What the runner calls for one agent run with ``model_double:`` and/or ``--agentrace-offline``.

``start_session(spec, ctx)`` loads the agent's model script, starts a model double for this run (a server
costs about a millisecond, so every run gets its own and shares nothing), and returns an ``AgentSession``:

- ``apply(argv, env)`` (a ``run.launch.Wrapped``: argv, env and the helper in front) adds the CLI's offline settings (``environment.offline_env``) to the adapter's argv and
  environment and, with ``--agentrace-offline`` where namespaces are permitted, wraps argv so the agent (and
  the double with it) runs in a loopback-only network namespace (``netns``);
- ``close(report)`` stops the double, takes its account of the run (``routes.report_of``) and completes
  ``model-double.json``;
- ``settle(usage)`` checks the parsed ``Usage`` against that account: a script step the CLI offered no tool
  for (the double answered ``none``) makes the run an ``error`` (``AgentStatus.ERROR``: the script does not fit
  the CLI or its mode, which is not the agent's wrong answer), and tokens the CLI reports that differ from what
  the double served get a parse warning (``served_usage``).

The account comes from the double itself, never from its request log, which the agent may be able to write (in its
outbox, or anywhere without the box): from the harness's double's memory (``ModelDouble.report``), or, for a double
inside the run's namespace (``netns``), from the run's report pipe (``run.launch``), which the agent never holds
(``reports_on_pipe``; the runner passes what it read to ``close``). A run without an account (the helper was killed
with the agent) has no mismatch, no misfit and no count.

With ``--agentrace-record DIR`` the CLI is pointed at a recording proxy (``recorder``) in front of
``--agentrace-record-upstream``, the run's own model double when it has a script, or the CLI's provider; ``close()``
writes the run's cassette (``cassette.cassette_path(DIR, run id)``). With ``--agentrace-replay DIR`` the double
plays the run's cassette instead of a script; ``fault()`` then names the first request that did not match
(``cassette mismatch: turn N: FIELD: ...``, which makes the run an ``error``), and ``extra()`` the fields the
run record keeps (``replay``: cassette, match mode, turns played and recorded; ``cassette``: the one recorded).

Files in the run folder (beside ``run.json``): ``model-double-requests.jsonl`` (every request the CLI sent,
auth headers redacted, with the double's answer; for people) and ``model-double.json`` (script, URL, offline mode,
config files written, and the double's own request count). A double inside the run's namespace writes its logs into
the agent's outbox; ``box_files`` names them, so that the outbox's copy puts them here too.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pytest_agentrace import untrusted
from pytest_agentrace.agents import get_adapter
from pytest_agentrace.agents.pricing import NO_PRICE_PREFIXES
from pytest_agentrace.errors import AgentError, SpecError
from pytest_agentrace.model_double import netns
from pytest_agentrace.model_double.cassette import Cassette, CassetteError, Replayer, Scrubber, cassette_path
from pytest_agentrace.model_double.environment import (
    DUMMY_KEY,
    apply_env,
    insert_argv,
    offline_env,
)
from pytest_agentrace.model_double.recorder import RecordingProxy, provider_url, record_key
from pytest_agentrace.model_double.routes import report_of
from pytest_agentrace.model_double.script import TurnUsage, load_script
from pytest_agentrace.model_double.server import ModelDouble
from pytest_agentrace.record.model import AgentStatus, CostSource, Usage
from pytest_agentrace.record.redact import secret_values
from pytest_agentrace.record.safefile import write_text
from pytest_agentrace.run.launch import Wrapped
from pytest_agentrace.run.sandbox import SANDBOX_HOME

REQUEST_LOG = "model-double-requests.jsonl"
REJECTED_LOG = "model-double-rejected.jsonl"  # requests without the run's key (answered 401, nothing else changed)
KEY_ENV = "AGENTRACE_MODEL_DOUBLE_KEY"  # hands the run's key to the double started inside a namespace (netns)
INFO_FILE = "model-double.json"


def read_log(path: Path) -> list[dict[str, Any]]:
    """The request records of a ``model-double-requests.jsonl`` (unreadable lines skipped; [] without a file)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            rec = untrusted.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("answer"), dict):
            out.append(rec)
    return out


def served_usage(log: list[dict[str, Any]] | dict[str, Any]) -> dict[str, TurnUsage]:
    """Tokens the double served, per model that answered (the request's ``model``, or the model in a Gemini
    path): the usage of every answer in ``SERVED_KINDS`` (HTTP errors and token counts carry none). ``log``: request
    records, or a double's report (``routes.report_of``)."""
    report = log if isinstance(log, dict) else report_of(log)
    return {model: TurnUsage(*counts) for model, counts in report["served"].items()}


def script_mismatch(log: list[dict[str, Any]] | dict[str, Any], edits: bool) -> str | None:
    """Why the script could not be played (the first ``none`` answer: a step with no fitting tool), or None.
    ``log``: request records, or a double's report (``routes.report_of``)."""
    report = log if isinstance(log, dict) else report_of(log)
    if report["none"] is None:
        return None
    note = str(report["none"]).removeprefix("scripted model: ")
    mode = "" if edits else " (the agent runs with edits = false: its read-only mode may withhold the tool)"
    return (f"model script does not fit this CLI: {note}{mode}; the run tested the script, not the agent "
            "(change the script's step or the agent's mode)")


def read_report(data: bytes | None) -> dict[str, Any] | None:
    """A double's report as sent on the report pipe (``routes.report_of``, JSON), or None when ``data`` is empty or
    not one such document (anything else on the pipe, which only the helper holds, means no account)."""
    try:
        report = json.loads(data or b"")
    except ValueError:
        return None
    keys = {"requests": int, "rejected": int, "played": int, "served": dict, "refused": bool, "answered": bool,
            "server_error": bool}
    if not isinstance(report, dict) or any(not isinstance(report.get(k), t) for k, t in keys.items()):
        return None
    if report.get("last_text_step") is not None and type(report["last_text_step"]) is not int:
        return None
    if any(report.get(k) is not None and not isinstance(report[k], str) for k in ("mismatch", "none")):
        return None
    try:
        served = {str(m): [int(n) for n in counts][:4] for m, counts in report["served"].items()}
    except (TypeError, ValueError):
        return None
    return {**report, "served": {m: c for m, c in served.items() if len(c) == 4}}


def _without_userinfo(url: str) -> str:
    """``url`` without ``user:password@`` (a gateway URL may carry credentials)."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session_paths(ctx: Any) -> dict[str, Path | None]:
    """The session's folders a cassette writes as placeholders (``normalise.PLACEHOLDERS``): ``basetemp``, pytest's
    basetemp (the parent of the run's scratch folder, which holds ``ctx.home``) and ``results``, the results folder
    (the parent of the ``runs`` folder that holds ``ctx.run_dir``). None where the layout is not that one."""
    home, run_dir = Path(ctx.home), Path(ctx.run_dir)
    basetemp = home.parent.parent if home.name == "home" else None
    results = next((p.parent for p in run_dir.parents if p.name == "runs"), None)
    return {"basetemp": basetemp, "results": results}


class AgentSession:
    """The model double and/or network namespace of one run (see the module docstring)."""

    def __init__(self, spec: Any, ctx: Any):
        self.spec, self.ctx = spec, ctx
        self.run_dir = Path(ctx.run_dir)
        self.script_path: str | None = spec.agent.model_double or ctx.options.model_double
        self.offline = ctx.options.offline
        self.netns_reason = ""
        self.sandboxed = ctx.options.sandbox is not None and ctx.options.sandbox.offline  # bwrap --unshare-net
        if self.offline and not self.sandboxed:
            prefix, self.netns_reason = netns.probe()
            self.offline = prefix is not None
        # the request logs: written by the harness's double (the record folder), or by the double inside the run's
        # namespace, which only reaches the agent's outbox (copied into the record folder after the run)
        self.log_dir = Path(ctx.agent_dir) if self.offline else self.run_dir
        self.double: ModelDouble | None = None
        self.base_url: str | None = None
        self.cost_note: str | None = None
        self.port: int | None = None
        self.info: dict[str, Any] = {}
        self.report: dict[str, Any] | None = None  # the double's account of the run (``close``)
        self.proxy: RecordingProxy | None = None
        self.replayer: Replayer | None = None
        self.key = "sk-agentrace-" + secrets.token_urlsafe(24)  # only this run's CLI is given it (see server.py)
        opts = ctx.options
        # inside the sandbox the CLI's HOME is SANDBOX_HOME: both are scrubbed, the one the CLI sees is restored
        home, homes = (SANDBOX_HOME, [ctx.home]) if opts.sandbox is not None else (ctx.home, [])
        self.paths = session_paths(ctx)
        scrub = Scrubber.make([*secret_values(ctx.env), DUMMY_KEY, self.key], ctx.workspace, home, homes, **self.paths)
        if (opts.offline and spec.agent.command is None and not (self.script_path or opts.replay)
                and getattr(get_adapter(spec.agent.adapter), "offline", None) is not None):
            # the CLI would spend its whole timeout retrying a network it cannot reach: the setup's fault, not the agent's
            raise AgentError(f"--agentrace-offline: agent {spec.agent.label} has no model to reach: give its entry "
                             "`model_double: SCRIPT` (or --agentrace-model-double SCRIPT), or replay a cassette "
                             "(--agentrace-replay DIR)")
        if opts.replay:
            self.cassette = cassette_path(opts.replay, spec.id)
            try:
                self.replayer = Replayer(Cassette.load(self.cassette), opts.replay_match, scrub)
            except CassetteError as exc:
                raise AgentError(f"--agentrace-replay: {exc}") from None
            log = self.log_dir / REQUEST_LOG
            log.unlink(missing_ok=True)
            self.script_path = None
            if self.offline:  # the double starts inside the namespace (netns --cassette), on a port free there
                self.port = _free_port()
            else:
                self.double = ModelDouble(log=log, replayer=self.replayer, key=self.key,
                                          rejected_log=self.log_dir / REJECTED_LOG, secrets=scrub.secrets).start()
                self.port = self.double.port
            self.base_url = f"http://127.0.0.1:{self.port}"
            return
        if self.script_path:
            try:
                self.script = load_script(self.script_path)
            except SpecError as exc:
                raise AgentError(f"model_double: {exc}") from None
            log = self.log_dir / REQUEST_LOG
            log.unlink(missing_ok=True)
            if self.offline:  # the double starts inside the namespace, on a port free there
                self.port = _free_port()
            else:
                self.double = ModelDouble(self.script, log, key=self.key, rejected_log=self.log_dir / REJECTED_LOG,
                                          secrets=scrub.secrets).start()
                self.port = self.double.port
            self.base_url = f"http://127.0.0.1:{self.port}"
        if opts.record:
            upstream = opts.record_upstream or self.base_url or provider_url(spec.agent.adapter)
            key = record_key(opts.record_upstream or self.base_url, upstream, ctx.env)
            scrub = Scrubber.make([*scrub.secrets, *([key] if key else [])], ctx.workspace, home, homes, **self.paths)
            self.proxy = RecordingProxy(upstream, scrub, key).start()
            self.cassette = cassette_path(opts.record, spec.id)
            self.upstream = scrub.text(_without_userinfo(upstream))
            self.base_url = self.proxy.url

    def apply(self, argv: list[str], env: dict[str, str]) -> Wrapped:
        """``argv`` and ``env`` pointed at the double and, with ``--agentrace-offline``, in a namespace, as a
        ``run.launch.Wrapped`` whose ``helper`` is ``netns`` when the namespace's helper is in front of argv.
        Raises ``AgentError`` for a CLI the double cannot drive."""
        files: list[Path] = []
        if self.base_url is not None:
            settings = getattr(get_adapter(self.spec.agent.adapter), "offline", None)
            key = self.key if (self.script_path or self.replayer is not None) else DUMMY_KEY
            extra, updates, files = offline_env(settings, self.ctx, self.base_url, key)
            env = apply_env(env, updates)
            argv = insert_argv(argv, extra, self.ctx.prompt)
        if self.offline:
            log = str(self.log_dir / REQUEST_LOG) if self.script_path or self.replayer else None
            replay = None
            if self.replayer is not None:
                home = SANDBOX_HOME if self.sandboxed else str(self.ctx.home)
                replay = (str(self.cassette), self.replayer.match, str(self.ctx.workspace), home,
                          str(self.paths["basetemp"] or ""), str(self.paths["results"] or ""))
            argv = netns.wrap(argv, self.script_path, log, self.port, unshare=not self.sandboxed, replay=replay)
            env = {**env, KEY_ENV: self.key}
        self.info = {
            "script": self.script_path, "script_name": getattr(getattr(self, "script", None), "name", None),
            "url": self.base_url, "adapter": self.spec.agent.adapter, "offline": self.offline,
            "offline_unavailable": self.netns_reason or None, "files": [str(p) for p in files],
        }
        if self.proxy is not None or self.replayer is not None:
            self.info["cassette"] = str(self.cassette)
        self._write_info()
        return Wrapped(argv, env, "netns" if self.offline else None)

    @property
    def reports_on_pipe(self) -> bool:
        """Whether this run's double runs inside the run's namespace and sends its report on the report pipe
        (``run.launch.StartChannel(report=True)``, read after the run and passed to ``close``)."""
        return self.offline and bool(self.script_path or self.replayer is not None)

    def close(self, report: bytes | None = None) -> None:
        """Stop the double (and recording proxy, writing the run's cassette); take the double's account of the run
        (``self.report``: from the harness's double, or ``report``, what the report pipe gave, for a double inside
        the namespace) and record how many requests it served."""
        if self.proxy is not None:  # first: a stream still in flight may need the double behind it
            self.proxy.stop()
            agent = self.spec.agent
            self.proxy.cassette(self.spec.id, {"agent": agent.id, "adapter": agent.adapter, "model": agent.model,
                                               "upstream": self.upstream}).save(self.cassette)
            self.proxy = None
        if self.double is not None:
            self.double.stop()
            self.report = self.double.report()
            self.double = None
        elif self.reports_on_pipe and report is not None:
            self.report = read_report(report)
        if self.report is not None:
            self.info["requests"] = self.report["requests"]
        self._write_info()

    def needs(self) -> list[Path]:
        """Files the agent's command reads that a sandbox must show: the script or cassette a double in the
        namespace plays."""
        if not self.offline:
            return []
        return [Path(self.cassette)] if self.replayer is not None else ([Path(self.script_path)] if self.script_path else [])

    def fault(self) -> str | None:
        """The first cassette mismatch of a replayed run (``cassette mismatch: turn N: FIELD: ...``) in the double's
        report, or None."""
        if self.replayer is None or self.report is None:
            return None
        return self.report["mismatch"]

    def extra(self) -> dict[str, Any]:
        """Fields for the run record's ``extra``: ``replay`` (``cassette``, ``match``, ``turns_played``,
        ``turns_recorded``) for a replayed run, ``cassette`` (the file written) for a recorded one; ``cost_note``
        when ``settle`` priced the run at 0."""
        note = {"cost_note": self.cost_note} if getattr(self, "cost_note", None) else {}
        if self.replayer is not None:
            played = self.report["played"] if self.report is not None else None
            return {**note, "replay": {"cassette": str(self.cassette), "match": self.replayer.match,
                                       "turns_played": played, "turns_recorded": len(self.replayer.cassette.turns)}}
        if self.ctx.options.record and self.base_url:
            return {**note, "cassette": str(self.cassette)}
        return note

    def settle(self, usage: Usage) -> Usage:
        """``usage`` checked against the double's report (see the module docstring) and its cost labelled: a run on the
        double's script costs 0 USD (``priced``: the double's model is free, whatever list price the CLI applied; a
        warning that its model has no price is dropped);
        aider's own figure under the double's environment is ``harness-priced`` (the harness wrote its per-token
        price, ``environment.aider_env``)."""
        if self.base_url is not None and usage.cost_source == CostSource.REPORTED and self.spec.agent.adapter == "aider":
            usage = dataclasses.replace(usage, cost_source=CostSource.HARNESS_PRICED)
        if not self.script_path:
            return usage
        if usage.cost_usd or usage.cost_source != CostSource.PRICED:  # and no advice to price the double's model
            kept = tuple(w for w in usage.parse_warnings if not w.startswith(NO_PRICE_PREFIXES))
            usage = dataclasses.replace(usage, cost_usd=0.0, cost_source=CostSource.PRICED, parse_warnings=kept)
            self.cost_note = "the model double's model is priced at 0 USD"
        if self.report is None:  # no account of the run from the double (its helper was killed, with the agent or by it)
            return unfounded_fault(usage, None)
        why = script_mismatch(self.report, bool(getattr(self.ctx, "edits", True)))
        if why is not None and usage.status != AgentStatus.ERROR:
            usage = dataclasses.replace(usage, status=AgentStatus.ERROR, error=why)
        script = getattr(self, "script", None)
        last = len(script.steps) - 1 if script is not None and not script.loop else None
        usage = unfounded_fault(usage, self.report, last)
        served = served_usage(self.report)
        total = sum((u for u in served.values()), TurnUsage())
        if usage.total_tokens is not None and served and usage.total_tokens != total.total:
            note = (f"tokens differ from what the model double served: the CLI reported {usage.total_tokens:,}, "
                    f"the double served {total.total:,} ({total.input:,} in, {total.output:,} out, "
                    f"{total.cache_read + total.cache_write:,} cached) in {self.report['requests']} requests")
            usage = dataclasses.replace(usage, parse_warnings=(*usage.parse_warnings, note))
        return usage

    def box_files(self) -> tuple[str, ...]:
        """Names of the files this run's double writes into the agent's outbox (``ctx.agent_dir``): its request logs
        when it runs inside the run's namespace (offline, with a script or a cassette), else none. The outbox's copy
        (``run.outbox.collect``'s ``harness``) puts these at the record folder's top level, where the harness's double
        writes them otherwise; every other file of the outbox goes under ``outbox/`` as the agent's."""
        if self.offline and (self.script_path or self.replayer is not None) and self.log_dir != self.run_dir:
            return (REQUEST_LOG, REJECTED_LOG)
        return ()

    def _write_info(self) -> None:
        if not (self.script_path or self.offline or self.netns_reason or self.info.get("cassette")):
            return
        write_text(self.run_dir / INFO_FILE, json.dumps(self.info, indent=1))


def start_session(spec: Any, ctx: Any) -> AgentSession:
    """Start what ``spec.agent.model_double`` and ``ctx.options.offline`` ask for. Raises ``AgentError``
    for a missing or invalid model script (the run then ends ``error`` with that reason)."""
    return AgentSession(spec, ctx)


def unfounded_fault(usage: Usage, report: dict[str, Any] | None, last_step: int | None = None) -> Usage:
    """``usage`` with what the CLI's output says about its environment or its end turned into the agent's failure
    where the double's own account of the run (``report``: ``routes.report_of``, from the double's memory or the
    run's report pipe, never from a file the agent can write) contradicts it, or where there is no account
    (``report`` None: the double inside the run's namespace is the agent's parent there, which the agent can kill):

    - a login/auth problem (``agents.auth.settle``), yet the double answered this run's key with a model turn and
      refused no request (none without the key, no scripted 401 or 403);
    - a model provider outage, yet the double served no HTTP error (5xx) and no malformed answer;
    - no terminal event (``INCOMPLETE``: the pipeline's "incomplete agent run" when the CLI exited 0), yet the double
      answered the script's last step (``last_step``: its index; None for a looping script or a cassette).

    What the CLI prints is the agent's to write: any process in the box may write to the CLI's stdout and stderr
    (``/proc/<pid>/fd``: a line that glues onto every event of the stream, a forged error) and end it, and an
    ``error`` run is never counted."""
    from pytest_agentrace.agents.auth import AUTH_FAULT, PROVIDER_FAULT  # here: not among --help's imports

    error = usage.error or ""
    claimed = usage.status == AgentStatus.ERROR and error.startswith((AUTH_FAULT, PROVIDER_FAULT))
    if report is None:
        return dataclasses.replace(usage, status=AgentStatus.FAILED, error=(
            f"{error} (not the environment's fault as far as the harness can tell: the model double gave no account "
            "of the run; the CLI's output is the agent's to write)")) if claimed else usage
    if usage.status == AgentStatus.INCOMPLETE and last_step is not None:
        answered_last = report.get("last_text_step") is not None and report["last_text_step"] >= last_step
        if answered_last:
            return dataclasses.replace(usage, status=AgentStatus.FAILED, error=(
                f"{error or 'no terminal event'} (not the environment's fault: the model double answered the script's "
                "last step; the CLI's output is the agent's to write)"))
        return usage
    if not claimed:
        return usage
    if error.startswith(AUTH_FAULT):
        founded = bool(report.get("rejected")) or bool(report.get("refused")) or not report.get("answered")
    else:
        founded = bool(report.get("server_error"))
    if founded:
        return usage
    return dataclasses.replace(usage, status=AgentStatus.FAILED, error=(
        f"{error} (not the environment's fault: the model double's account shows "
        f"{'it answered the run' if error.startswith(AUTH_FAULT) else 'no server error'}; the CLI's output is the "
        "agent's to write)"))
