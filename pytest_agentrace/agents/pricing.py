"""Pricing: USD per 1M tokens by kind, a default table keyed by exact model name, task overrides.

``apply_pricing`` fills ``Usage.cost_usd`` when the CLI did not report a cost (``cost_source`` ``none``):

1. a task's ``pricing:`` entry for the agent (its id ``codex:gpt-5``, label or name ``codex``) prices the
   run's total tokens;
2. otherwise each model served (``Usage.model_usage``, else ``Usage.model``, else the model the agent asked
   for) is priced by the task's ``pricing:`` entry for that model name or by ``DEFAULT_PRICES``; every model
   needs a price, or the run stays unpriced (a warning names the model);
3. a price lacking a rate for a token kind the run used (e.g. ``cache_read``) leaves the run unpriced, with a
   warning: no rate is ever made up.

Lookup is by exact name: ``DEFAULT_PRICES`` keys, then the documented ``ALIASES`` (the providers' own alias
ids and dated snapshots), then the same with a provider prefix removed (``anthropic/claude-sonnet-4-5`` as
written for opencode or aider). Nothing else: no substring or family matching, so an unknown model has no price.

When the CLI reports no tokens at all, a price is known and there is a prompt or answer, the cost is
``estimated`` from their sizes (4 characters per token, one request): a floor, labelled as such.

Rates (USD per 1M tokens; checked against the providers' pricing pages, 2026): Anthropic
https://platform.claude.com/docs/en/about-claude/pricing (cache writes at the 5-minute rate; the >200K-token
long-context tier is not modelled); OpenAI https://platform.openai.com/docs/pricing (cache writes cost the
input rate; cache reads are "cached input"); Google https://ai.google.dev/gemini-api/docs/pricing (prompts up
to 200K tokens; Gemini reports no cache writes).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_agentrace.record.model import AgentStatus, CostSource, Usage

KINDS = ("input", "output", "cache_read", "cache_write")
TOKEN_FIELDS = {"input": "input_tokens", "output": "output_tokens", "cache_read": "cache_read_tokens", "cache_write": "cache_write_tokens"}
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens of each kind; ``None``: no rate known for that kind."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


def _anthropic(inp: float, out: float) -> Price:
    return Price(inp, out, cache_read=inp * 0.1, cache_write=inp * 1.25)


def _openai(inp: float, cached: float, out: float) -> Price:
    return Price(inp, out, cache_read=cached, cache_write=inp)


DEFAULT_PRICES: dict[str, Price] = {
    # Anthropic: base input, output; cache hits 0.1x and 5-minute cache writes 1.25x the input rate
    "claude-opus-4-8": _anthropic(5, 25),
    "claude-opus-4-7": _anthropic(5, 25),
    "claude-opus-4-6": _anthropic(5, 25),
    "claude-opus-4-5-20251101": _anthropic(5, 25),
    "claude-opus-4-1-20250805": _anthropic(15, 75),
    "claude-opus-4-20250514": _anthropic(15, 75),
    "claude-sonnet-4-6": _anthropic(3, 15),
    "claude-sonnet-4-5-20250929": _anthropic(3, 15),
    "claude-sonnet-4-20250514": _anthropic(3, 15),
    "claude-3-7-sonnet-20250219": _anthropic(3, 15),
    "claude-haiku-4-5-20251001": _anthropic(1, 5),
    "claude-3-5-haiku-20241022": _anthropic(0.8, 4),
    # OpenAI: input, cached input, output
    "gpt-5": _openai(1.25, 0.125, 10),
    "gpt-5-codex": _openai(1.25, 0.125, 10),
    "gpt-5.1": _openai(1.25, 0.125, 10),
    "gpt-5.1-codex": _openai(1.25, 0.125, 10),
    "gpt-5.1-codex-max": _openai(1.25, 0.125, 10),
    "gpt-5.2": _openai(1.75, 0.175, 14),
    "gpt-5.2-codex": _openai(1.75, 0.175, 14),
    "gpt-5.3-codex": _openai(1.75, 0.175, 14),
    "gpt-5-mini": _openai(0.25, 0.025, 2),
    "gpt-5-nano": _openai(0.05, 0.005, 0.4),
    "gpt-4.1": _openai(2, 0.5, 8),
    "gpt-4.1-mini": _openai(0.4, 0.1, 1.6),
    "o3": _openai(2, 0.5, 8),
    "o4-mini": _openai(1.1, 0.275, 4.4),
    "gpt-4o": _openai(2.5, 1.25, 10),
    "gpt-4o-mini": _openai(0.15, 0.075, 0.6),
    # Google: input (prompts <= 200K tokens), output (thinking included), cached input
    "gemini-2.5-pro": Price(1.25, 10, cache_read=0.125),
    "gemini-2.5-flash": Price(0.30, 2.50, cache_read=0.03),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, cache_read=0.01),
}

# the providers' documented alias ids and dated snapshots -> DEFAULT_PRICES key
ALIASES: dict[str, str] = {
    "claude-opus-4-5": "claude-opus-4-5-20251101",
    "claude-opus-4-1": "claude-opus-4-1-20250805",
    "claude-opus-4-0": "claude-opus-4-20250514",
    "claude-sonnet-4-5": "claude-sonnet-4-5-20250929",
    "claude-sonnet-4-0": "claude-sonnet-4-20250514",
    "claude-3-7-sonnet-latest": "claude-3-7-sonnet-20250219",
    "claude-haiku-4-5": "claude-haiku-4-5-20251001",
    "claude-3-5-haiku-latest": "claude-3-5-haiku-20241022",
    "gpt-5-2025-08-07": "gpt-5",
    "gpt-5-mini-2025-08-07": "gpt-5-mini",
    "gpt-5-nano-2025-08-07": "gpt-5-nano",
    "gpt-4.1-2025-04-14": "gpt-4.1",
    "gpt-4.1-mini-2025-04-14": "gpt-4.1-mini",
    "o3-2025-04-16": "o3",
    "o4-mini-2025-04-16": "o4-mini",
    "gpt-4o-mini-2024-07-18": "gpt-4o-mini",
}
PROVIDER_PREFIXES = ("anthropic/", "openai/", "google/", "gemini/")


def default_price(model: str | None) -> Price | None:
    """The table's price for ``model`` by exact name, documented alias, or either after a provider prefix."""
    if not model:
        return None
    for name in (model, *(model[len(p):] for p in PROVIDER_PREFIXES if model.startswith(p))):
        key = name if name in DEFAULT_PRICES else ALIASES.get(name)
        if key:
            return DEFAULT_PRICES[key]
    return None


def price_from_mapping(rates: Mapping[str, Any]) -> Price:
    """A ``Price`` from a task's ``pricing:`` entry (``input``/``output``/``cache_read``/``cache_write``).

    A missing ``input`` or ``output`` rate is ``nan``, which makes any run that used that kind unpriced."""
    return Price(
        float(rates.get("input", math.nan)), float(rates.get("output", math.nan)),
        None if rates.get("cache_read") is None else float(rates["cache_read"]),
        None if rates.get("cache_write") is None else float(rates["cache_write"]),
    )


def cost(tokens: Mapping[str, int | None], price: Price, what: str) -> tuple[float | None, str | None]:
    """USD for ``tokens`` (``{input_tokens, output_tokens, cache_read_tokens, cache_write_tokens}``) at
    ``price``; ``(None, warning)`` when a kind with tokens has no rate or input/output tokens are unknown."""
    if tokens.get("input_tokens") is None or tokens.get("output_tokens") is None:
        return None, f"no price applied for {what}: input or output tokens unknown"
    total = 0.0
    for kind in KINDS:
        n = tokens.get(TOKEN_FIELDS[kind]) or 0
        rate = getattr(price, kind)
        if n and (rate is None or math.isnan(rate)):
            return None, f"no price applied for {what}: no {kind} rate"
        if n:
            total += n * rate / 1e6
    return round(total, 10), None


def apply_pricing(
    usage: Usage,
    agent: Any = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    prompt: str | None = None,
) -> Usage:
    """Return ``usage`` with ``cost_usd``/``cost_source`` filled when the CLI reported no cost (module
    docstring). ``agent`` is the ``AgentSpec`` (``id``, ``name``, ``label``, ``model``); ``overrides`` a task's
    ``pricing:`` (None where the file has no ``pricing`` key, as for trials and ``agentrace parse``: a missing price
    is then not told to be added there). Warnings go to ``parse_warnings``; never raises."""
    if usage.cost_usd is not None or usage.cost_source != CostSource.NONE:
        return usage
    advice = "" if overrides is None else PRICING_ADVICE
    overrides = overrides or {}
    for key in dict.fromkeys(x for x in (getattr(agent, "id", None), getattr(agent, "label", None), getattr(agent, "name", None)) if x):
        if key in overrides:
            return _priced(usage, [(dataclasses.asdict(usage), price_from_mapping(overrides[key]), f"agent {key!r}")], prompt)

    def lookup(model: str) -> Price | None:
        return price_from_mapping(overrides[model]) if model in overrides else default_price(model)

    if usage.model_usage:
        items = []
        for model, tokens in usage.model_usage.items():
            price = lookup(model)
            if price is None:
                return _warn(usage, f"no price for model {model!r}{advice}")
            items.append((tokens, price, f"model {model!r}"))
        return _priced(usage, items, prompt)
    model = usage.model or getattr(agent, "model", None)
    price = lookup(model) if model else None
    if price is None:
        return usage if not model else _warn(usage, f"no price for model {model!r}{advice}")
    return _priced(usage, [(dataclasses.asdict(usage), price, f"model {model!r}")], prompt)


def _priced(usage: Usage, items: list[tuple[Mapping[str, Any], Price, str]], prompt: str | None) -> Usage:
    if usage.input_tokens is None and usage.output_tokens is None:
        return _estimated(usage, items[0][1], prompt)
    total = 0.0
    for tokens, price, what in items:
        value, warning = cost(tokens, price, what)
        if value is None:
            return _warn(usage, warning or f"no price applied for {what}")
        total += value
    return dataclasses.replace(usage, cost_usd=round(total, 10), cost_source=CostSource.PRICED)


def _estimated(usage: Usage, price: Price, prompt: str | None) -> Usage:
    """Cost from the prompt and answer sizes when the CLI reported no tokens (never for our-side errors)."""
    if usage.status == AgentStatus.ERROR or not (prompt or usage.answer):
        return usage
    tokens = {
        "input_tokens": math.ceil(len(prompt or "") / CHARS_PER_TOKEN),
        "output_tokens": math.ceil(len(usage.answer or "") / CHARS_PER_TOKEN),
    }
    value, warning = cost(tokens, price, "the estimate")
    if value is None:
        return _warn(usage, warning or "no estimate")
    note = f"cost estimated from prompt and answer sizes ({CHARS_PER_TOKEN} characters per token, one request): a floor"
    return dataclasses.replace(usage, cost_usd=value, cost_source=CostSource.ESTIMATED, parse_warnings=(*usage.parse_warnings, note))


PRICING_ADVICE = "; add it to the task's pricing:"
NO_PRICE_PREFIXES = ("no price for model", "no price applied")  # the warnings of a run left unpriced


def _warn(usage: Usage, message: str) -> Usage:
    if message in usage.parse_warnings:
        return usage
    return dataclasses.replace(usage, parse_warnings=(*usage.parse_warnings, message))
