"""OpenCode: ``opencode run --format json --auto <prompt>`` (JSON lines).

Invocation (OpenCode docs "CLI"; behaviour of 1.18.33 in ``model-double.md``): ``--auto`` approves the
agent's permission requests; read-only runs use the built-in ``plan`` agent (``--agent plan``) without
``--auto`` **and** ``OPENCODE_PERMISSION={"edit": "deny", "bash": "deny"}``. ``--model provider/model`` when
given. ``--title agentrace`` names the session: without a title OpenCode asks its small model for one, a model
request whose tokens (and cost) its output never reports (1.18.33 against the model double: 300 in / 5 out
served, absent from every ``step_finish`` and from its own session totals), and which added about 10 s per run. ``OPENCODE_CONFIG``/``OPENCODE_CONFIG_DIR`` of the user are dropped when HOME is per run.

Why the permission variable (checked with the real 1.18.33 against the model double,
``tests/test_realcli_readonly.py``): ``--agent plan`` alone is not read-only. The plan agent's permissions
are ``merge(defaults, plan rules, config.permission)``: its only rule is ``edit: deny``, the defaults allow
everything else (``"*": "allow"``), so ``bash`` writes files freely (``printf … > f``, ``python -c …``), and a
``permission.edit: allow`` in any config (the model double's config has one, so may a user's) overrides the
plan rule, so the ``write`` tool wrote too. ``OPENCODE_PERMISSION`` (JSON; not in the docs, but read by the
1.18.33 config loader and merged over every config file) applies to every agent and subagent; with it both
tools are refused and the workspace stays unchanged. Denying ``bash`` also blocks read-only commands (as
Copilot's ``--deny-tool shell`` does).

Parsing (``cli-formats.md``; samples ``captured-1.18.33-*``, takopi, fullsend):
- events ``{type, timestamp, sessionID, part}``: ``step_start``, ``text {part.text}``, ``tool_use {part.tool,
  part.callID, part.state.input}``, ``reasoning``, ``step_finish {part.reason, part.tokens, part.cost}``,
  ``error {error{name, data{message}}}``;
- tokens and cost are **per step**: the run's figures are sums over ``step_finish``. ``tokens.input`` excludes
  the cache, which is in ``tokens.cache.read``/``write``; output = ``output`` + ``reasoning``;
- a step's ``cost`` of 0 with non-zero tokens means "not reported" (subscription/free providers), not free:
  when any such step exists the run's cost is unknown (a warning says how many steps lacked it);
- turns = number of ``step_finish`` events; the answer is the text of the last step that has text;
- status: an ``error`` event with no ``step_finish`` after it is a failed run; a last step finishing with
  reason ``tool-calls`` and nothing after is an incomplete run; otherwise completed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pytest_agentrace.agents import auth
from pytest_agentrace.agents.base import RunContext
from pytest_agentrace.agents.cliadapter import CliAdapter, prompt_positional
from pytest_agentrace.agents.parsing import (
    Collector,
    add,
    as_float,
    as_int,
    load_events,
    mapping,
    one_line,
)
from pytest_agentrace.model_double.environment import opencode_env
from pytest_agentrace.record.model import AgentStatus, CostSource, Usage

# OpenCode permission rules for a read-only run (``OPENCODE_PERMISSION``; docs "Permissions")
READ_ONLY_PERMISSION = '{"edit": "deny", "bash": "deny"}'
SESSION_TITLE = "agentrace"  # ``--title``: no title request to the model (see the module docstring)
KNOWN_EVENTS = {"step_start", "text", "tool_use", "reasoning", "step_finish", "error"}


class OpenCode(CliAdapter):
    """OpenCode CLI (see the module docstring for argv and output format)."""

    name: ClassVar[str] = "opencode"
    env_keep: ClassVar[tuple[str, ...]] = ("OPENCODE_", "ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "OPENROUTER_", "GROQ_", "DEEPSEEK_", "MISTRAL_", "XAI_", "AZURE_", "AWS_")
    executable: ClassVar[str] = "opencode"
    offline = staticmethod(opencode_env)  # how the model double drives it
    user_config_vars: ClassVar[tuple[str, ...]] = ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR")

    def argv(self, ctx: RunContext) -> list[str]:
        mode = ["--auto"] if ctx.edits else ["--agent", "plan"]
        return [
            self.executable, "run", "--format", "json", *mode, "--title", SESSION_TITLE, *self.model_args(ctx),
            *prompt_positional(ctx.prompt),
        ]

    def cli_env(self, ctx: RunContext) -> dict[str, str]:
        """Read-only runs: ``OPENCODE_PERMISSION`` denies edits and bash (see the module docstring)."""
        return {} if ctx.edits else {"OPENCODE_PERMISSION": READ_ONLY_PERMISSION}

    def parse_output(self, stdout: str, stderr: str, side: Mapping[str, str] | None = None) -> Usage:
        return parse_opencode(stdout, stderr)


def parse_opencode(stdout: str, stderr: str = "") -> Usage:
    """Parse ``opencode run --format json`` output into a ``Usage`` (see the module docstring)."""
    loaded = load_events(stdout)
    col = Collector(loaded.warnings)
    sums: dict[str, int | None] = {"input_tokens": None, "output_tokens": None, "cache_read_tokens": None, "cache_write_tokens": None}
    steps = 0
    cost = 0.0
    costed = unpriced = 0
    step_text: list[str] = []
    answer: str | None = None
    last_reason: str | None = None
    error: str | None = None
    errors: list[str] = []
    for event in loaded.events:
        kind = event.get("type")
        part = mapping(event.get("part"))
        if kind == "step_start":
            step_text = []
        elif kind == "text":
            if isinstance(part.get("text"), str) and part["text"]:
                step_text.append(part["text"])
                answer = "".join(step_text)
        elif kind == "tool_use":
            state = mapping(part.get("state"))
            col.tool(part.get("tool") or "?", state.get("input"), part.get("callID") or part.get("id"))
        elif kind == "step_finish":
            steps += 1
            last_reason = part.get("reason")
            error = None
            tokens = mapping(part.get("tokens"))
            cache = mapping(tokens.get("cache"))
            step = {
                "input_tokens": as_int(tokens.get("input")),
                "output_tokens": add(as_int(tokens.get("output")), as_int(tokens.get("reasoning"))),
                "cache_read_tokens": as_int(cache.get("read")),
                "cache_write_tokens": as_int(cache.get("write")),
            }
            for k, v in step.items():
                sums[k] = add(sums[k], v)
            step_cost = as_float(part.get("cost"))
            if step_cost:
                cost += step_cost
                costed += 1
            elif any(step.values()):
                unpriced += 1
        elif kind == "error":
            err = mapping(event.get("error"))
            data = mapping(err.get("data"))
            code = f" ({data['statusCode']})" if data.get("statusCode") else ""
            error = one_line(f"{err.get('name') or 'error'}: {data.get('message') or err.get('message') or ''}{code}", 300)
            errors.append(error)
        elif kind not in KNOWN_EVENTS:
            col.unknown("event type", kind)
    fields: dict[str, Any] = {**sums, "answer": answer, "turns": steps or None}
    if costed and not unpriced:
        fields.update(cost_usd=round(cost, 10), cost_source=CostSource.REPORTED)
    elif costed and unpriced:
        col.warn(f"opencode reported a cost for {costed} of {costed + unpriced} steps; the run's cost is unknown")
    if error is not None:
        status = AgentStatus.FAILED
    elif steps == 0:
        status, error = AgentStatus.INCOMPLETE, "no step_finish event in the output (the run was cut off or crashed)"
    elif last_reason == "tool-calls":
        status, error = AgentStatus.INCOMPLETE, "the last step ended with tool calls and no step followed (cut off)"
    else:
        status = AgentStatus.COMPLETED
    status, error = auth.settle(status, error, [*errors, stderr, *loaded.text_lines])
    return col.usage(status=status, error=error, **fields)
