"""``agentrace parse AGENT FILE [--json] [--otel FILE] [--analytics FILE] [--session FILE]``: the parsed ``Usage`` of a saved
agent output (e.g. a run's ``raw.out``), read exactly as a run would read it.

``--otel`` adds Copilot's OTel file export (its token counts), ``--analytics`` aider's ``--analytics-log``,
``--session`` Codex's session log (a run's ``codex-session.jsonl``: every tool call, turns, the model).
Costs the CLI did not report are priced from the default table (``agents.pricing``) when the model is known.
With ``--json`` one object is printed with exactly the keys in ``JSON_KEYS`` (unknown values are ``null``;
``tool_calls`` is a list of ``{name, summary}``; ``status`` is ``completed`` / ``failed`` / ``incomplete``, or
``error`` for a login/auth failure). Exit status 2 with a one-line error for an unknown agent or an unreadable
file; 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_agentrace.agents import CLI_AGENTS, get_adapter
from pytest_agentrace.agents.pricing import apply_pricing
from pytest_agentrace.cli import output_options
from pytest_agentrace.errors import did_you_mean
from pytest_agentrace.record.model import Usage

SIDE_OPTIONS = {"otel": "copilot", "analytics": "aider", "session": "codex"}  # option -> the agent it belongs to
JSON_KEYS = (
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens", "cost_usd",
    "cost_source", "turns", "tool_calls", "answer", "status", "cli_version", "model", "warnings",
)


class ParseInputError(Exception):
    """Bad command input (unknown agent, unreadable file); the message is the one-line error."""


def register(subparsers: Any) -> None:
    """Add the ``parse`` subcommand to the ``agentrace`` parser."""
    p = subparsers.add_parser(
        "parse", help="print the tokens, cost, tool calls and answer parsed from a saved agent output",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("agent", metavar="AGENT", help=f"adapter whose output format FILE is in: {', '.join(CLI_AGENTS)}")
    p.add_argument("file", metavar="FILE", help="the agent's captured stdout (a run's raw.out)")
    output_options(p, json_alias=True)  # --format json (--json): one JSON object
    p.add_argument("--otel", metavar="FILE", help="copilot: its OTel file export (COPILOT_OTEL_FILE_EXPORTER_PATH)")
    p.add_argument("--analytics", metavar="FILE", help="aider: its --analytics-log file")
    p.add_argument("--session", metavar="FILE", help="codex: its session log (a run's codex-session.jsonl)")
    p.set_defaults(func=run)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ParseInputError(f"cannot read {path}: {exc.strerror or exc}") from None


def parse_file(agent: str, path: str, otel: str | None = None, analytics: str | None = None, session: str | None = None) -> Usage:
    """Parse ``path`` as ``agent``'s output (plus side files) and price it from the default table.

    Raises ``ParseInputError`` for an unknown agent, a side file given to the wrong agent, or an unreadable file.
    """
    if agent not in CLI_AGENTS:
        raise ParseInputError(f"unknown agent {agent!r}{did_you_mean(agent, CLI_AGENTS)}; valid: {', '.join(CLI_AGENTS)}")
    side: dict[str, str] = {}
    for key, value in (("otel", otel), ("analytics", analytics), ("session", session)):
        if value is not None:
            if agent != SIDE_OPTIONS[key]:
                raise ParseInputError(f"--{key} is only for {SIDE_OPTIONS[key]}, not {agent}")
            side[key] = _read(value)
    text = _read(path)
    return apply_pricing(get_adapter(agent).parse_output(text, "", side))


def usage_json(usage: Usage) -> dict[str, Any]:
    """The ``--json`` object of a ``Usage`` (exactly ``JSON_KEYS``)."""
    d = usage.to_dict()
    d["warnings"] = d.pop("parse_warnings")
    return {k: d.get(k) for k in JSON_KEYS}


def text_lines(usage: Usage) -> list[str]:
    """A short human-readable report of a ``Usage``."""

    def n(v: int | None) -> str:
        return "-" if v is None else f"{v:,}"

    cost = "-" if usage.cost_usd is None else f"${usage.cost_usd:.6f} ({usage.cost_source})"
    lines = [
        f"status:      {usage.status}" + (f" ({usage.error})" if usage.error else ""),
        (
            f"tokens:      input {n(usage.input_tokens)}, output {n(usage.output_tokens)}, cache read "
            f"{n(usage.cache_read_tokens)}, cache write {n(usage.cache_write_tokens)}, total {n(usage.total_tokens)}"
        ),
        f"cost (USD):  {cost}",
        f"turns:       {n(usage.turns)}",
        f"model:       {usage.model or '-'}",
        f"CLI version: {usage.cli_version or '-'}",
        f"tool calls:  {len(usage.tool_calls)}",
    ]
    lines += [f"  {i}. {t.name}: {t.summary}".rstrip(": ") for i, t in enumerate(usage.tool_calls, 1)]
    lines += [f"denied:      {d}" for d in usage.permission_denials]
    answer = (usage.answer or "-").splitlines() or ["-"]
    lines.append(f"answer:      {answer[0]}" + (f" (+{len(answer) - 1} lines)" if len(answer) > 1 else ""))
    lines += [f"warning:     {w}" for w in usage.parse_warnings]
    return lines


def run(args: argparse.Namespace) -> int:
    """The ``parse`` subcommand: print the parsed usage; 2 with a one-line error on bad input."""
    try:
        usage = parse_file(args.agent, args.file, args.otel, args.analytics, args.session)
    except ParseInputError as exc:
        print(f"agentrace parse: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(usage_json(usage), indent=2, ensure_ascii=False))
    else:
        print("\n".join(text_lines(usage)))
    return 0
