"""Codex CLI: ``codex exec --json -s workspace-write ... <prompt>`` (JSON lines), stdin closed.

Invocation (Codex docs "Non-interactive mode"; behaviour of 0.171.0 in ``model-double.md``): ``-s
workspace-write`` lets the agent edit the workspace, ``-s read-only`` when the run may not edit (an agent's
``sandbox:`` value replaces either); ``--disable plugins --disable remote_plugin --disable apps -c
analytics.enabled=false`` stop the curated-plugin sync and the metrics push that otherwise stall each run for
about 5 s at exit. Older builds reject a feature name they do not know (0.100.0: "Unknown feature flag: plugins";
``remote_plugin`` arrived after 0.122.0), so ``--disable`` is passed only for the features that ``codex features
list`` of the installed build names (probed once per executable and process, ``known_features``); a build without
that subcommand gets none. ``--model`` when given. ``CODEX_HOME`` is ``<per-run HOME>/.codex``.

Parsing (``cli-formats.md``; samples ``captured-0.171.0-*``, fullsend 0.152.1, agentcmd 0.46.0, takopi):
- item format: ``thread.started``, ``turn.started``, ``item.started|updated|completed {item}``,
  ``turn.completed {usage}``, ``turn.failed {error}``, ``error {message}``. ``turn.completed.usage`` is
  cumulative for the thread: the **last** one is the total (never summed). Its counters nest (OpenAI style):
  ``input_tokens`` includes ``cached_input_tokens`` and ``cache_write_input_tokens``, ``output_tokens``
  includes ``reasoning_output_tokens``; this adapter subtracts the cached shares from the input. No cost, no
  model and no turn count are reported. The final answer is the last ``agent_message``.
- an ``error`` item and a top-level ``error`` event are warnings, not failures; only ``turn.failed`` fails.
  A stream whose last ``turn.started`` has no ``turn.completed``/``turn.failed`` is **incomplete**.
- the session log: ``exec --json`` leaves out tool calls that failed to run (0.171.0: a command refused by the
  read-only sandbox, or one whose sandbox helper could not start, prints no ``command_execution`` item) and
  has no turn count. Codex writes every session to ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread
  id>.jsonl`` (``{timestamp, type, payload}`` lines): ``response_item`` payloads ``function_call {name,
  arguments, call_id}``, ``custom_tool_call {name, input, call_id}``, ``local_shell_call {action{command}}``
  and ``web_search_call``; ``event_msg`` payloads ``token_count {info{total_token_usage, last_token_usage}}``,
  one after each model response; ``turn_context {model}``. After a run the adapter copies that file (found by
  the ``thread.started`` id, secrets redacted) into the run folder as ``codex-session.jsonl``; from it come the
  tool calls (every call, in order; shell tools named ``command_execution``, ``apply_patch`` ``file_change``,
  as in ``--json``), the turns (model responses: the ``token_count`` events whose running total grew) and the
  model served.
- legacy format ``{"id", "msg": {"type": ...}}`` (older ``exec --json`` and ``codex proto``): ``token_count``
  with ``info.total_token_usage`` (cumulative: the last one) or, in older builds, the counters directly in
  ``msg`` for one request each (summed; per request as in codex-rs before ``TokenUsageInfo``),
  ``agent_message``, ``exec_command_begin``, ``patch_apply_begin``, ``mcp_tool_call_begin``,
  ``task_complete {last_agent_message}``, ``error``. Turns are the number of ``token_count`` events there.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pytest_agentrace import untrusted
from pytest_agentrace.agents import auth
from pytest_agentrace.agents.base import RunContext
from pytest_agentrace.agents.cliadapter import (
    CliAdapter,
    prompt_positional,
)
from pytest_agentrace.agents.parsing import (
    Collector,
    add,
    as_int,
    load_events,
    mapping,
    one_line,
    sub,
    summarize,
)
from pytest_agentrace.model_double.environment import codex_env
from pytest_agentrace.record.model import AgentStatus, Usage
from pytest_agentrace.record.redact import redact, secret_values
from pytest_agentrace.record.safefile import read_text, write_text
from pytest_agentrace.run import process

DISABLED_FEATURES = ("plugins", "remote_plugin", "apps")
FEATURE_LINE = re.compile(r"^([a-z][a-z0-9_]*)\s{2,}(stable|beta|experimental|under development|deprecated|removed)\s+(true|false)\s*$")
FEATURES_TIMEOUT = 30.0  # seconds
_FEATURES: dict[str, frozenset[str]] = {}  # resolved executable -> feature names it accepts
SESSION_FILE = "codex-session.jsonl"  # the run's session log, copied into the run folder
# session-log tool names -> the item type ``exec --json`` reports for them
SESSION_TOOL_NAMES = {
    "exec_command": "command_execution", "shell": "command_execution", "shell_command": "command_execution",
    "container.exec": "command_execution", "local_shell_call": "command_execution", "apply_patch": "file_change",
    "web_search_call": "web_search", "update_plan": "todo_list",
}
TOOL_ITEMS = {"command_execution", "file_change", "mcp_tool_call", "web_search", "todo_list", "collab_tool_call"}
OTHER_ITEMS = {"agent_message", "reasoning", "error"}
NEW_EVENTS = {"thread.started", "turn.started", "turn.completed", "turn.failed", "item.started", "item.updated", "item.completed", "error"}
LEGACY_QUIET = {
    "task_started", "agent_message_delta", "agent_reasoning", "agent_reasoning_delta", "agent_reasoning_raw_content",
    "agent_reasoning_section_break", "exec_command_output_delta", "exec_command_end", "patch_apply_end",
    "mcp_tool_call_end", "web_search_end", "background_event", "turn_diff", "plan_update", "user_message",
    "exec_approval_request", "apply_patch_approval_request", "get_history_entry_response", "shutdown_complete",
}


class Codex(CliAdapter):
    """OpenAI Codex CLI (see the module docstring for argv and output format)."""

    name: ClassVar[str] = "codex"
    env_keep: ClassVar[tuple[str, ...]] = ("OPENAI_", "CODEX_", "AZURE_OPENAI_")
    executable: ClassVar[str] = "codex"
    offline = staticmethod(codex_env)  # how the model double drives it
    home_dirs: ClassVar[dict[str, str]] = {"CODEX_HOME": ".codex"}
    side_files: ClassVar[dict[str, str]] = {"session": SESSION_FILE}
    sandbox_flag: ClassVar[str] = "-s"

    def argv(self, ctx: RunContext) -> list[str]:
        # inside the harness's sandbox, Codex's own (bwrap, landlock) cannot nest: ours bounds what it may touch
        own = "danger-full-access" if ctx.options.sandbox is not None else "workspace-write"
        sandbox = self.sandbox_args(ctx, own if ctx.edits else "read-only")
        return [self.executable, "exec", "--json", *sandbox, *self.quiet_flags(ctx), *self.model_args(ctx), *prompt_positional(ctx.prompt)]

    def quiet_flags(self, ctx: RunContext) -> list[str]:
        """``--disable F`` for each of ``DISABLED_FEATURES`` this build knows, then ``-c analytics.enabled=false``."""
        known = known_features(self.executable, ctx.env)
        return ([arg for f in DISABLED_FEATURES if f in known for arg in ("--disable", f)] + ["-c", "analytics.enabled=false"]
                + self.shell_env_flags(ctx))

    @staticmethod
    def shell_env_flags(ctx: RunContext) -> list[str]:
        """``-c shell_environment_policy...``: Codex builds its shell tool's environment from this policy (Codex
        config reference, ``[shell_environment_policy]``: ``inherit``, ``set``), and without it the tool's PATH
        lost the run's toolchain (``python: command not found``). The tool inherits the run's environment and its
        PATH is set to the run's PATH (a TOML string)."""
        flags = ["-c", 'shell_environment_policy.inherit="all"']
        path = (ctx.env or {}).get("PATH")
        if path:
            flags += ["-c", f"shell_environment_policy.set.PATH={json.dumps(path)}"]
        return flags

    def cli_env(self, ctx: RunContext) -> dict[str, str]:
        """``TMPDIR`` inside the per-run HOME (when HOME is per run): codex 0.171.0 refuses to create its sandbox
        helper (``codex-linux-sandbox``, which bwrap starts) under the temp folder, where the per-run CODEX_HOME
        then lies, and every command fails ("bwrap: execvp codex-linux-sandbox: No such file or directory")."""
        if not ctx.options.isolated_home:
            return {}
        tmp = Path(ctx.home) / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return {"TMPDIR": str(tmp)}

    def parse(self, stdout: str, stderr: str, ctx: RunContext | None = None) -> Usage:
        """Copy the run's session log into the run's record folder (``copy_session_log``) and parse the stream
        with that copy (the harness's own file, not one the agent left in its outbox)."""
        if ctx is None:
            return super().parse(stdout, stderr, ctx)
        session = copy_session_log(stdout, ctx)
        if session is None:  # no session log under the run's HOME: the side file where the CLI left one, if any
            return super().parse(stdout, stderr, ctx)
        return parse_codex(stdout, stderr, session)

    def parse_output(self, stdout: str, stderr: str, side: Mapping[str, str] | None = None) -> Usage:
        return parse_codex(stdout, stderr, (side or {}).get("session"))


def thread_id(stdout: str) -> str | None:
    """The ``thread.started`` id of an ``exec --json`` stream (None when there is none)."""
    for line in stdout.splitlines():
        if '"thread.started"' in line:
            try:
                tid = untrusted.loads(line).get("thread_id")
            except ValueError:
                continue
            if isinstance(tid, str) and re.fullmatch(r"[0-9A-Za-z-]{8,80}", tid):
                return tid
    return None


def copy_session_log(stdout: str, ctx: RunContext) -> str | None:
    """Copy the session log of the run (``rollout-*-<thread id>.jsonl`` under ``$CODEX_HOME/sessions``, the
    per-run one unless HOME is the user's) to ``ctx.run_dir / SESSION_FILE`` with secrets redacted; returns
    the copy's text, or None when the stream names no thread or no such regular file exists."""
    tid = thread_id(stdout)
    if tid is None:
        return None
    if ctx.options.isolated_home:
        codex_home = Path(ctx.home) / ".codex"
    else:
        codex_home = Path(ctx.env.get("CODEX_HOME") or Path(ctx.env.get("HOME") or Path.home()) / ".codex")
    found = sorted((codex_home / "sessions").glob(f"*/*/*/rollout-*{tid}.jsonl"))
    if not found:
        return None
    text = read_text(found[-1])  # under the agent's HOME: a link is never followed, only a regular file read
    if text is None:
        return None
    text = redact(text, secret_values(ctx.env))
    write_text(Path(ctx.run_dir) / SESSION_FILE, text)
    return text


def known_features(executable: str, env: Mapping[str, str]) -> frozenset[str]:
    """Feature names (not ``removed``) that ``codex features list`` prints for the ``executable`` found on
    ``env['PATH']``: lines ``<name>  <stage>  <true|false>``. Run once per resolved executable and process, in a
    scratch folder with a scratch ``CODEX_HOME``; empty when the CLI is missing or the subcommand fails."""
    import os
    import shutil
    import tempfile

    found = shutil.which(executable, path=env.get("PATH"))
    if found is None:
        return frozenset()
    key = os.path.realpath(found)
    if key not in _FEATURES:
        names: set[str] = set()
        with tempfile.TemporaryDirectory(prefix="agentrace-codex-features-") as scratch:
            res = process.run([found, "features", "list"], cwd=Path(scratch), env={**env, "HOME": scratch, "CODEX_HOME": scratch},
                              timeout=FEATURES_TIMEOUT)
            if res.exit_code == 0:
                names = {m.group(1) for line in res.stdout.splitlines() if (m := FEATURE_LINE.match(line.strip())) and m.group(2) != "removed"}
        _FEATURES[key] = frozenset(names)
    return _FEATURES[key]


class _State:
    def __init__(self, col: Collector) -> None:
        self.col = col
        self.answer: str | None = None
        self.usage: dict[str, Any] | None = None  # last cumulative usage
        self.flat: list[dict[str, Any]] = []  # legacy per-request counters
        self.requests = 0
        self.turn = 0
        self.started = False
        self.terminal: str | None = None
        self.error: str | None = None
        self.errors: list[str] = []
        self.model: str | None = None
        self.legacy = False


def parse_codex(stdout: str, stderr: str = "", session: str | None = None) -> Usage:
    """Parse ``codex exec --json`` output (item or legacy format), plus the run's session log text when
    given, into a ``Usage`` (module docstring)."""
    loaded = load_events(stdout)
    st = _State(Collector(loaded.warnings))
    for event in loaded.events:
        if "type" not in event and isinstance(event.get("msg"), dict):
            st.legacy = True
            _legacy(st, event["msg"])
        elif "type" in event:
            _item_event(st, event)
        elif isinstance(event.get("model"), str):  # legacy exec prints its config summary first
            st.model = event["model"]
    if st.terminal == "completed":
        status, error = AgentStatus.COMPLETED, None
    elif st.terminal == "failed":
        status, error = AgentStatus.FAILED, st.error or "turn failed"
    elif st.legacy and st.errors:
        status, error = AgentStatus.FAILED, st.errors[-1]
    else:
        status = AgentStatus.INCOMPLETE
        error = "no terminal event (turn.completed / turn.failed / task_complete): the run was cut off"
        if not st.started and not st.legacy:
            error = "no turn in the output: codex did not start the task"
    status, error = auth.settle(status, error, [*st.errors, stderr, *loaded.text_lines])
    fields: dict[str, Any] = {"answer": st.answer, "model": st.model, "status": status, "error": error}
    fields.update(_tokens(st))
    if st.legacy and st.requests:
        fields["turns"] = st.requests
    if session is not None:
        return _with_session_log(st.col, fields, session)
    return st.col.usage(**fields)


def _with_session_log(col: Collector, fields: dict[str, Any], text: str) -> Usage:
    """``fields`` completed from the session log: its tool calls replace the stream's, turns and model added."""
    loaded = load_events(text)
    log = Collector(f"session log: {w}" for w in loaded.warnings)
    responses, last_total = 0, None
    for line in loaded.events:
        kind, payload = line.get("type"), mapping(line.get("payload"))
        ptype = payload.get("type")
        if kind == "turn_context" and isinstance(payload.get("model"), str):
            fields["model"] = payload["model"]
        elif kind == "event_msg" and ptype == "token_count":
            total = mapping(mapping(payload.get("info")).get("total_token_usage"))
            grown = as_int(total.get("total_tokens")) or add(as_int(total.get("input_tokens")), as_int(total.get("output_tokens")))
            if grown is not None and (last_total is None or grown > last_total):
                responses += 1
                last_total = grown
        elif kind == "response_item" and ptype in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
            raw = ptype if ptype in ("local_shell_call", "web_search_call") else str(payload.get("name") or "?")
            args: Any = payload.get("arguments") if ptype == "function_call" else payload.get("input")
            if ptype == "local_shell_call":
                args = mapping(payload.get("action")).get("command")
            elif ptype == "web_search_call":
                args = mapping(payload.get("action")).get("query")
            log.tool(SESSION_TOOL_NAMES.get(raw, raw), args, payload.get("call_id") or payload.get("id"))
    usage = col.usage(**fields)
    calls = log.usage().tool_calls
    return dataclasses.replace(
        usage, tool_calls=calls or usage.tool_calls,
        turns=responses or usage.turns, parse_warnings=(*usage.parse_warnings, *log.warnings),
    )


def _tokens(st: _State) -> dict[str, Any]:
    """Disjoint token counts from the last cumulative usage (or the summed legacy per-request counters)."""
    if st.usage is None and st.flat:
        keys = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens")
        st.usage = {k: add(*(as_int(f.get(k)) for f in st.flat)) for k in keys}
    if st.usage is None:
        return {}
    u = st.usage
    total_in, cached, written = as_int(u.get("input_tokens")), as_int(u.get("cached_input_tokens")), as_int(u.get("cache_write_input_tokens"))
    output = as_int(u.get("output_tokens"))
    return {
        "input_tokens": sub(total_in, cached, written),
        "cache_read_tokens": cached,
        "cache_write_tokens": written,
        "output_tokens": output,
        "total_tokens": add(total_in, output) if total_in is not None or output is not None else None,
    }


def _item_event(st: _State, event: dict[str, Any]) -> None:
    kind = event.get("type")
    if kind == "turn.started":
        st.turn += 1
        st.started = True
        st.terminal = None
    elif kind == "turn.completed":
        st.terminal = "completed"
        if isinstance(event.get("usage"), dict):
            st.usage = event["usage"]
    elif kind == "turn.failed":
        st.terminal = "failed"
        st.error = one_line(mapping(event.get("error")).get("message") or "turn failed", 300)
        if isinstance(event.get("usage"), dict):
            st.usage = event["usage"]
    elif kind == "error":
        message = one_line(event.get("message") or "", 300)
        st.errors.append(message)
        st.col.warn(f"codex error event: {message}")
    elif kind in ("item.started", "item.updated", "item.completed"):
        _item(st, mapping(event.get("item")), kind == "item.completed")
    elif kind not in NEW_EVENTS:
        st.col.unknown("event type", kind)


def _item(st: _State, item: dict[str, Any], completed: bool) -> None:
    kind = item.get("type") or item.get("item_type")  # item_type: builds before the 0.4x rename
    key = f"{st.turn}:{item.get('id')}"
    if kind in TOOL_ITEMS:
        st.col.tool(_tool_name(item, kind), call_id=key, summary=_tool_summary(item, kind))
    elif kind == "agent_message":
        if completed and isinstance(item.get("text"), str):
            st.answer = item["text"]
    elif kind == "error":
        if completed:
            st.col.warn(f"codex error item: {one_line(item.get('message') or '', 300)}")
    elif kind not in OTHER_ITEMS:
        st.col.unknown("item type", kind)


def _tool_name(item: dict[str, Any], kind: str) -> str:
    if kind == "mcp_tool_call" and item.get("tool"):
        return f"mcp:{item.get('server', '?')}.{item['tool']}"
    return kind


def _tool_summary(item: dict[str, Any], kind: str) -> str:
    if kind == "command_execution":
        return summarize(item.get("command"))
    if kind == "file_change":
        return one_line(", ".join(f"{mapping(c).get('kind', '?')} {mapping(c).get('path', '?')}" for c in item.get("changes") or ()))
    if kind == "mcp_tool_call":
        return summarize(item.get("arguments"))
    if kind == "web_search":
        return summarize(item.get("query"))
    if kind == "todo_list":
        return f"{len(item.get('items') or ())} items"
    return summarize({k: v for k, v in item.items() if k not in ("id", "type", "status")})


def _legacy(st: _State, msg: dict[str, Any]) -> None:
    kind = msg.get("type")
    if kind == "token_count":
        st.requests += 1
        info = mapping(msg.get("info"))
        if isinstance(info.get("total_token_usage"), dict):
            st.usage = info["total_token_usage"]
        elif any(k in msg for k in ("input_tokens", "output_tokens")):
            st.flat.append(msg)
    elif kind == "agent_message":
        if isinstance(msg.get("message"), str):
            st.answer = msg["message"]
    elif kind == "exec_command_begin":
        st.col.tool("command_execution", call_id=f"legacy:{msg.get('call_id')}", summary=summarize(msg.get("command")))
    elif kind == "patch_apply_begin":
        changes = mapping(msg.get("changes"))
        st.col.tool("file_change", call_id=f"legacy:{msg.get('call_id')}", summary=one_line(", ".join(changes)))
    elif kind == "mcp_tool_call_begin":
        inv = mapping(msg.get("invocation"))
        st.col.tool(f"mcp:{inv.get('server', '?')}.{inv.get('tool', '?')}", inv.get("arguments"), f"legacy:{msg.get('call_id')}")
    elif kind == "web_search_begin":
        st.col.tool("web_search", call_id=f"legacy:{msg.get('call_id')}", summary=summarize(msg.get("query")))
    elif kind == "session_configured":
        if isinstance(msg.get("model"), str):
            st.model = msg["model"]
    elif kind == "task_complete":
        st.terminal = "completed"
        if isinstance(msg.get("last_agent_message"), str):
            st.answer = msg["last_agent_message"]
    elif kind in ("error", "stream_error", "turn_aborted"):
        message = one_line(msg.get("message") or msg.get("reason") or kind, 300)
        st.errors.append(message)
        st.col.warn(f"codex {kind}: {message}")
    elif kind not in LEGACY_QUIET:
        st.col.unknown("legacy event type", kind)
