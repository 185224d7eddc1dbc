"""Pricing: exact names and documented aliases only, task overrides, no made-up rates, estimates labelled."""

from __future__ import annotations

import pytest

from pytest_agentrace.agents.pricing import DEFAULT_PRICES, apply_pricing, default_price
from pytest_agentrace.record.model import AgentStatus, CostSource, Usage
from pytest_agentrace.spec.common import AgentSpec


def _usage(**kw):
    base = {"input_tokens": 1_000_000, "output_tokens": 100_000, "cache_read_tokens": 2_000_000, "cache_write_tokens": 0}
    base.update(kw)
    return Usage(**base)


def test_codex_tokens_priced_by_the_requested_model():
    u = apply_pricing(_usage(), AgentSpec(name="codex", id="codex:gpt-5", model="gpt-5"))
    # 1M input x 1.25 + 0.1M output x 10 + 2M cached x 0.125
    assert u.cost_usd == pytest.approx(1.25 + 1.0 + 0.25) and u.cost_source == CostSource.PRICED


def test_served_model_wins_over_requested_and_aliases_are_exact():
    u = apply_pricing(_usage(cache_read_tokens=0, model="claude-sonnet-4-5"), AgentSpec(name="claude", id="claude:opus", model="opus"))
    assert u.cost_usd == pytest.approx(3 + 1.5)
    assert default_price("claude-sonnet-4-5") == DEFAULT_PRICES["claude-sonnet-4-5-20250929"]
    assert default_price("anthropic/claude-sonnet-4-5") == DEFAULT_PRICES["claude-sonnet-4-5-20250929"]


@pytest.mark.parametrize("name", ["gpt-5-turbo", "claude-sonnet", "sonnet", "gpt-5-codex-preview", "my-gpt-5", "openrouter/openai/gpt-5", "GPT-5"])
def test_no_substring_or_family_matching(name):
    assert default_price(name) is None
    u = apply_pricing(_usage(model=name))
    assert u.cost_usd is None and u.cost_source == CostSource.NONE
    assert any(name in w for w in u.parse_warnings)


def test_reported_cost_is_never_replaced():
    u = apply_pricing(_usage(model="gpt-5", cost_usd=0.5, cost_source=CostSource.REPORTED))
    assert u.cost_usd == 0.5 and u.cost_source == CostSource.REPORTED


def test_task_pricing_by_agent_name_overrides_the_table():
    agent = AgentSpec(name="codex", id="codex:gpt-5", model="gpt-5")
    u = apply_pricing(_usage(), agent, {"codex": {"input": 2, "output": 20, "cache_read": 0.5}})
    assert u.cost_usd == pytest.approx(2 + 2 + 1)


def test_task_pricing_by_model_name_prices_an_unknown_model():
    u = apply_pricing(_usage(cache_read_tokens=None, model="scripted"), None, {"scripted": {"input": 1, "output": 2}})
    assert u.cost_usd == pytest.approx(1 + 0.2) and u.cost_source == CostSource.PRICED


def test_a_missing_rate_for_used_tokens_leaves_the_run_unpriced():
    u = apply_pricing(_usage(model="scripted"), None, {"scripted": {"input": 1, "output": 2}})
    assert u.cost_usd is None and any("no cache_read rate" in w for w in u.parse_warnings)
    u = apply_pricing(_usage(cache_read_tokens=0, model="scripted"), None, {"scripted": {"input": 1}})
    assert u.cost_usd is None and any("no output rate" in w for w in u.parse_warnings)


def test_several_models_are_priced_each_and_all_need_a_price():
    per_model = {
        "gemini-2.5-flash-lite": {"input_tokens": 1_000_000, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": None},
        "gemini-2.5-pro": {"input_tokens": 1_000_000, "output_tokens": 1_000_000, "cache_read_tokens": 0, "cache_write_tokens": None},
    }
    u = apply_pricing(_usage(input_tokens=2_000_000, output_tokens=1_000_000, cache_read_tokens=0, model_usage=per_model))
    assert u.cost_usd == pytest.approx(0.10 + 1.25 + 10)
    per_model["mystery"] = {"input_tokens": 1, "output_tokens": 1, "cache_read_tokens": 0, "cache_write_tokens": None}
    u = apply_pricing(_usage(model_usage=per_model))
    assert u.cost_usd is None and any("'mystery'" in w for w in u.parse_warnings)


def test_unknown_tokens_give_a_labelled_estimate_only():
    u = apply_pricing(Usage(answer="x" * 400, model="gpt-5"), None, None, prompt="p" * 4000)
    assert u.cost_source == CostSource.ESTIMATED and u.input_tokens is None
    assert u.cost_usd == pytest.approx((1000 * 1.25 + 100 * 10) / 1e6)
    assert any("estimated" in w for w in u.parse_warnings)
    assert apply_pricing(Usage(status=AgentStatus.ERROR, model="gpt-5"), None, None, "prompt").cost_usd is None
    assert apply_pricing(Usage(answer="x"), None, None, "p").cost_usd is None  # no model, no price
