"""Aider: ``aider --message <prompt> --yes-always --no-auto-commits ... --analytics-log <outbox>/aider-events.jsonl``
(the record keeps it as ``outbox/aider-events.jsonl``, the agent's file).

Invocation (aider docs "Options reference", "Chat modes"; behaviour of 0.86.2 in ``model-double.md``):
``--yes-always --no-auto-commits --no-pretty --no-stream --no-check-update --no-gitignore`` (``--no-stream``
makes aider use the server's token counts; ``--no-gitignore`` keeps it from editing ``.gitignore``),
``--analytics-disable`` (no PostHog client, and no "allow analytics?" question answered yes by
``--yes-always``) with ``--analytics-log`` (a local JSON-lines event log, written also when analytics are
disabled), ``--no-show-release-notes`` (a first run in a fresh HOME would otherwise offer them).
Read-only runs add ``--chat-mode ask``. ``--model`` when given.

Parsing (samples ``captured-0.86.2-*``; aider's ``base_coder.py``):
- the analytics log is the exact source: ``message_send`` events carry ``prompt_tokens``,
  ``completion_tokens``, ``cost`` (this message) and ``total_cost`` (the session so far) and ``main_model``;
  tokens are summed over events, the cost is the last ``total_cost``, turns are the number of events; an
  ``exit`` event ends a run (``Completed --message``), its absence means the run was cut off;
- without the log, stdout's ``Tokens: 12k sent, 1.2k cache write, 3k cache hit, 1.2k received. Cost: $0.02
  message, $0.05 session.`` lines are the fallback (``k``/``M`` suffixes and thousands separators; aider
  rounds these, so a warning says so): tokens summed over lines, the cost is the last ``session`` figure.
  Cache counts are only ever printed there. As aider's own cost code says, "sent" excludes the cache shares.
  Older releases printed other lines (aider's ``base_coder.py`` history): 0.46-0.49 ``Tokens: 1,234 sent, 56
  received. Cost: $0.001234 request, $0.003456 session.``, and 0.7-0.45 ``1234 prompt tokens, 56 completion
  tokens, $0.001234 cost`` (a per-message cost, so the run's cost is their sum; the main branch between 0.45
  and 0.46 added thousands separators and ``, session cost: $X``, as quoted in aider issue 257).
- aider omits ``Cost:`` when the model has no price, and logs a cost of 0: 0 with tokens is "not reported";
- the answer is the text between aider's start-up banner and its last ``Tokens:`` line; ``Aider vX`` gives
  the version and ``Model:``/``Main model:`` the model. Aider has no tool calls (edits are parsed from text).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pytest_agentrace.agents import auth
from pytest_agentrace.agents.base import RunContext, version_from
from pytest_agentrace.agents.cliadapter import CliAdapter
from pytest_agentrace.agents.parsing import (
    Collector,
    add,
    as_float,
    as_int,
    load_events,
    mapping,
    one_line,
)
from pytest_agentrace.model_double.environment import aider_env
from pytest_agentrace.record.model import AgentStatus, CostSource, Usage

ANALYTICS_FILE = "aider-events.jsonl"
_NUM = r"[\d][\d,]*(?:\.\d+)?[kKmM]?"
TOKENS_RE = re.compile(
    rf"^Tokens: (?P<sent>{_NUM}) sent(?:, (?P<cw>{_NUM}) cache write)?(?:, (?P<ch>{_NUM}) cache hit)?, (?P<recv>{_NUM}) received\."
    r"(?: Cost: \$(?P<msg>[\d,]*\.?\d+) (?:message|request), \$(?P<sess>[\d,]*\.?\d+) session\.)?\s*$"
)
# aider 0.7-0.45 (and the main branch just before 0.46): "11,491 prompt tokens, 360 completion tokens, $0.039873 cost"
OLD_TOKENS_RE = re.compile(
    r"^(?P<sent>\d[\d,]*) prompt tokens, (?P<recv>\d[\d,]*) completion tokens"
    r"(?:, \$(?P<msg>[\d,]*\.?\d+) cost)?(?:, (?:session|total) cost: \$(?P<sess>[\d,]*\.?\d+))?\s*$"
)
LITELLM_ERROR_RE = re.compile(r"^litellm\.\w*(Error|Exception)\b")
MODEL_RE = re.compile(r"^(?:Main )?[Mm]odel: (\S+)")
BANNER_RE = re.compile(r"^(Aider v\d|(Main |Weak |Editor )?[Mm]odel: |Git repo: |Repo-map: |Added .* to the chat)")


@dataclass(frozen=True)
class TokenLine:
    """One usage line aider printed: figures as printed (``"1.2k"``), None when the line has no such part."""

    sent: str | None
    recv: str | None
    cw: str | None = None  # cache write
    ch: str | None = None  # cache hit
    msg: str | None = None  # this message's cost, USD
    sess: str | None = None  # the session's cost so far, USD


def token_line(line: str) -> TokenLine | None:
    """The usage line of ``line`` in any of the formats in the module docstring, or None."""
    text = line.strip()
    if m := TOKENS_RE.match(text):
        return TokenLine(m["sent"], m["recv"], m["cw"], m["ch"], m["msg"], m["sess"])
    if m := OLD_TOKENS_RE.match(text):
        return TokenLine(m["sent"], m["recv"], msg=m["msg"], sess=m["sess"])
    return None


class Aider(CliAdapter):
    """Aider (see the module docstring for argv and output format)."""

    name: ClassVar[str] = "aider"
    env_keep: ClassVar[tuple[str, ...]] = ("AIDER_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "OPENROUTER_", "DEEPSEEK_", "GROQ_", "MISTRAL_", "XAI_", "OLLAMA_", "AZURE_")
    executable: ClassVar[str] = "aider"
    offline = staticmethod(aider_env)  # how the model double drives it
    side_files: ClassVar[dict[str, str]] = {"analytics": ANALYTICS_FILE}
    workspace_excludes: ClassVar[tuple[str, ...]] = (".aider*",)  # its repo-map tags cache stays in the repo

    def argv(self, ctx: RunContext) -> list[str]:
        message = [f"--message={ctx.prompt}"] if ctx.prompt.startswith("-") else ["--message", ctx.prompt]
        return [
            self.executable, *message, "--yes-always", "--no-auto-commits", "--no-pretty", "--no-stream",
            "--no-check-update", "--no-gitignore", "--analytics-disable", "--no-show-release-notes",
            "--analytics-log", str(ctx.agent_dir / ANALYTICS_FILE), *self.model_args(ctx),
            *([] if ctx.edits else ["--chat-mode", "ask"]),
        ]

    def cli_env(self, ctx: RunContext) -> dict[str, str]:
        """Aider's chat and input histories go to the run folder (kept as artefacts), not into the workspace."""
        return {
            "AIDER_CHAT_HISTORY_FILE": str(ctx.agent_dir / "aider.chat.history.md"),
            "AIDER_INPUT_HISTORY_FILE": str(ctx.agent_dir / "aider.input.history"),
        }

    def parse_output(self, stdout: str, stderr: str, side: Mapping[str, str] | None = None) -> Usage:
        return parse_aider(stdout, stderr, (side or {}).get("analytics"))


def number(text: str | None) -> int | None:
    """An aider token figure: ``"1,234"`` -> 1234, ``"3.2k"`` -> 3200, ``"1.1M"`` -> 1100000."""
    if not text:
        return None
    text = text.replace(",", "")
    scale = {"k": 1000, "m": 1000000}.get(text[-1].lower(), 1)
    if scale != 1:
        text = text[:-1]
    try:
        return round(float(text) * scale)
    except ValueError:
        return None


def parse_aider(stdout: str, stderr: str = "", analytics: str | None = None) -> Usage:
    """Parse aider's stdout plus, when given, its ``--analytics-log`` text (module docstring)."""
    col = Collector()
    lines = (stdout or "").splitlines()
    token_lines = [(i, t) for i, line in enumerate(lines) if (t := token_line(line))]
    fields: dict[str, Any] = {"answer": _answer(lines, token_lines)}
    for line in lines:
        if line.startswith("Aider v") and fields.get("cli_version") is None:
            fields["cli_version"] = version_from(line)
        if fields.get("model") is None and (m := MODEL_RE.match(line)):
            fields["model"] = m.group(1)
    status, error = AgentStatus.COMPLETED, None
    if analytics is not None:
        status, error, sends = _from_analytics(analytics, col, fields)
        litellm = [] if sends else [line.strip() for line in lines if LITELLM_ERROR_RE.match(line.strip())]
        if litellm:  # why no model call completed, in litellm's words (auth.settle reads it)
            error = f"{error}: {one_line(litellm[-1], 200)}"
        token_lines = _own_token_lines(token_lines, sends)
        _add_cache_counts(token_lines, fields)
    elif token_lines:
        _add_cache_counts(token_lines, fields)
        fields["input_tokens"] = sum(number(t.sent) or 0 for _, t in token_lines)
        fields["output_tokens"] = sum(number(t.recv) or 0 for _, t in token_lines)
        fields["turns"] = len(token_lines)
        sessions = [t.sess for _, t in token_lines if t.sess]
        messages = [as_float(t.msg.replace(",", "")) for _, t in token_lines if t.msg]
        cost = as_float(sessions[-1].replace(",", "")) if sessions else None
        if cost is None and messages and len(messages) == len(token_lines) and None not in messages:
            cost = round(sum(messages), 10)  # releases before 0.46 print a per-message cost only
        if cost:
            fields.update(cost_usd=cost, cost_source=CostSource.REPORTED)
        col.warn("token counts from aider's stdout (rounded by aider); no analytics log")
    else:
        tail = [line.strip() for line in [*(stderr or "").splitlines(), *lines] if line.strip()]
        status, error = AgentStatus.FAILED, "aider printed no Tokens: line (no model call completed)" + (f": {one_line(tail[-1], 200)}" if tail else "")
    status, error = auth.settle(status, error, [stderr, stdout])
    return col.usage(status=status, error=error, **fields)


def _add_cache_counts(token_lines: list[tuple[int, TokenLine]], fields: dict[str, Any]) -> None:
    """Cache write/hit tokens, summed over aider's ``Tokens:`` lines (the only place aider prints them)."""
    if token_lines:
        fields["cache_write_tokens"] = sum(number(t.cw) or 0 for _, t in token_lines)
        fields["cache_read_tokens"] = sum(number(t.ch) or 0 for _, t in token_lines)


def _near(printed: str | None, exact: Any) -> bool:
    """Whether a figure aider printed (rounded: ``"1.2k"``) can be the exact count ``exact`` from its log."""
    value, count = number(printed), as_int(exact)
    return value is not None and count is not None and abs(value - count) <= 0.05 * count + 0.5


def _own_token_lines(token_lines: list[tuple[int, TokenLine]], sends: list[Mapping[str, Any]]) -> list[tuple[int, TokenLine]]:
    """The ``Tokens:`` lines aider printed itself, one per ``message_send`` of its analytics log.

    Aider prints its line after each model answer, so a line the answer merely quotes comes *before* the real
    one: walking back from the end, each send (last first) takes the last unused line above the previous pick
    whose ``sent``/``received`` figures agree with the send's ``prompt_tokens``/``completion_tokens``. A quoted
    line with other figures is never taken; one with the same figures loses to the real line below it.
    """
    own: list[tuple[int, TokenLine]] = []
    candidates = list(token_lines)
    for send in reversed(sends):
        while candidates:
            i, t = candidates.pop()
            if _near(t.sent, send.get("prompt_tokens")) and _near(t.recv, send.get("completion_tokens")):
                own.append((i, t))
                break
    return own[::-1]


def _from_analytics(text: str, col: Collector, fields: dict[str, Any]) -> tuple[str, str | None, list[Mapping[str, Any]]]:
    """Fill tokens, cost, turns and model from the analytics log; return (status, error, message_send properties)."""
    loaded = load_events(text)
    for w in loaded.warnings:
        col.warn(f"analytics log: {w}")
    sends = [mapping(e.get("properties")) for e in loaded.events if e.get("event") == "message_send"]
    exits = [mapping(e.get("properties")) for e in loaded.events if e.get("event") == "exit"]
    if sends:
        fields["input_tokens"] = add(*(as_int(p.get("prompt_tokens")) for p in sends))
        fields["output_tokens"] = add(*(as_int(p.get("completion_tokens")) for p in sends))
        fields["turns"] = len(sends)
        if isinstance(sends[-1].get("main_model"), str):
            fields["model"] = sends[-1]["main_model"]
        cost = as_float(sends[-1].get("total_cost"))
        if cost:
            fields.update(cost_usd=cost, cost_source=CostSource.REPORTED)
    return (*_analytics_status(sends, exits), sends)


def _analytics_status(sends: list[Mapping[str, Any]], exits: list[Mapping[str, Any]]) -> tuple[str, str | None]:
    """(status, error) from the log's ``message_send`` and ``exit`` events."""
    if not exits:
        return AgentStatus.INCOMPLETE, "aider's analytics log has no exit event (the run was cut off or crashed)"
    reason = str(exits[-1].get("reason") or "")
    if not sends:
        return AgentStatus.FAILED, f"aider made no model call (exit: {reason or 'no reason'})"
    if reason and not reason.startswith("Completed"):
        return AgentStatus.FAILED, f"aider exited: {one_line(reason, 200)}"
    return AgentStatus.COMPLETED, None


def _answer(lines: list[str], token_lines: list[tuple[int, Any]]) -> str | None:
    """The reply text: after the start-up banner, before the last ``Tokens:`` line."""
    start = 0
    for i, line in enumerate(lines):
        if BANNER_RE.match(line):
            start = i + 1
        elif token_lines and i >= token_lines[-1][0]:
            break
    end = token_lines[-1][0] if token_lines else len(lines)
    return "\n".join(lines[start:end]).strip() or None
