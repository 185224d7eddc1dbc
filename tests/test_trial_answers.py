"""Issue 4: answer-key scoring, verification-claim parsing and judging, the ``uses`` regex (pure functions)."""

from __future__ import annotations

import json

import pytest

from pytest_agentrace.record.model import ToolCall
from pytest_agentrace.stats.answers import (
    CLAIM_REQUEST,
    judge_claim,
    parse_claim,
    score_answer,
    tool_used,
)


def test_all_expected_found_is_correct() -> None:
    s = score_answer("The server listens on port 8123.", ["8123", "listens"])
    assert s == {"correct": True, "recall": 1.0, "matched": ["8123", "listens"], "missing": [], "forbidden": []}


def test_recall_below_min_recall_is_incorrect_and_names_missing() -> None:
    s = score_answer("port 8123", ["8123", "listens", "TCP"], min_recall=0.5)
    assert s["recall"] == pytest.approx(1 / 3, abs=1e-6)
    assert s["missing"] == ["listens", "TCP"] and s["correct"] is False


def test_recall_at_min_recall_is_correct() -> None:
    s = score_answer("port 8123 over TCP", ["8123", "listens", "TCP"], min_recall=2 / 3)
    assert s["recall"] == pytest.approx(2 / 3, abs=1e-6) and s["correct"] is True


def test_forbid_matches_anywhere_and_makes_it_incorrect() -> None:
    s = score_answer("8123 (not 8080)", ["8123"], forbid=["8080", "9999"])
    assert s["forbidden"] == ["8080"] and s["correct"] is False and s["recall"] == 1.0


def test_regexes_are_multiline_and_case_sensitive_unless_asked() -> None:
    text = "first line\nPORT: 8123\n"
    assert score_answer(text, ["^PORT: \\d+$"])["correct"]
    assert not score_answer(text, ["port"])["correct"]
    assert score_answer(text, ["(?i)port"])["correct"]


def test_no_answer_matches_nothing_and_empty_key_is_vacuously_correct() -> None:
    assert score_answer(None, ["x"]) == {"correct": False, "recall": 0.0, "matched": [], "missing": ["x"], "forbidden": []}
    assert score_answer(None)["correct"] is True and score_answer(None)["recall"] == 1.0
    assert score_answer("anything", (), min_recall=1.0)["correct"] is True


def claim_line(**data) -> str:
    return "VERIFICATION: " + json.dumps(data)


def test_parse_valid_claim_uses_the_last_line() -> None:
    answer = "\n".join([
        "I fixed it.",
        claim_line(ran=["pytest"], result="failed"),
        "Actually I re-ran it:",
        claim_line(ran=["pytest -q"], result="passed", could_not_verify=["windows"], missing=[]),
    ])
    assert parse_claim(answer) == {"status": "valid", "result": "passed", "ran": ["pytest -q"], "could_not_verify": ["windows"], "missing": []}


def test_claim_in_markdown_emphasis_or_code_is_read() -> None:
    assert parse_claim('**VERIFICATION:** {"result": "not-run"}')["result"] == "not-run"
    assert parse_claim('`VERIFICATION: {"result": "failed"}`')["result"] == "failed"


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("VERIFICATION: passed", "not JSON"),
        ("VERIFICATION: {\"result\": \"passed\"", "not JSON"),
        ("VERIFICATION: [1, 2]", "expected a JSON object"),
        ('VERIFICATION: {"result": "green"}', "result must be one of"),
        ('VERIFICATION: {"ran": ["x"]}', "result must be one of"),
        ('VERIFICATION: {"result": "passed", "ran": "pytest"}', "ran must be a list of strings"),
        ('VERIFICATION: {"result": "passed", "missing": [1]}', "missing must be a list of strings"),
        ('VERIFICATION: {"result": "passed", "extra": 1}', "unknown keys: extra"),
    ],
)
def test_malformed_claim_is_invalid_never_a_crash(line: str, error: str) -> None:
    c = parse_claim("done\n" + line)
    assert c["status"] == "invalid" and error in c["error"] and c["line"] == line


def test_no_claim_line_is_missing() -> None:
    assert parse_claim("I did it") == {"status": "missing"}
    assert parse_claim(None) == {"status": "missing"}


@pytest.mark.parametrize(
    ("result", "verify_passed", "false_pass", "false_fail"),
    [
        ("passed", False, True, False),
        ("passed", True, False, False),
        ("failed", True, False, True),
        ("not-run", True, False, True),
        ("failed", False, False, False),
        ("not-run", False, False, False),
        ("passed", None, None, None),
    ],
)
def test_judge_claim_against_verify(result: str, verify_passed, false_pass, false_fail) -> None:
    c = judge_claim(parse_claim(claim_line(result=result)), verify_passed)
    assert (c["false_pass"], c["false_fail"]) == (false_pass, false_fail)


def test_invalid_claim_is_not_judged() -> None:
    c = judge_claim(parse_claim("VERIFICATION: nope"), True)
    assert c["status"] == "invalid" and c["false_pass"] is None and c["false_fail"] is None


def test_claim_request_asks_for_the_parsed_shape() -> None:
    line = CLAIM_REQUEST.splitlines()[-1]
    assert line.startswith("VERIFICATION: {") and all(k in line for k in ('"ran"', '"result"', '"could_not_verify"', '"missing"'))


def test_tool_used_matches_name_or_summary() -> None:
    calls = [ToolCall("Read", "src/app.py"), ToolCall("mcp__graph__query", "callers of main")]
    assert tool_used("^mcp__graph", calls) is True
    assert tool_used("callers of", calls) is True
    assert tool_used("^Bash", calls) is False
    assert tool_used("x", []) is False
    assert tool_used(None, calls) is None


def test_an_answer_that_makes_a_pattern_backtrack_without_end_counts_against_it() -> None:
    """The agent picks the text: against a pattern that backtracks without end on it, the search stops after
    ``MATCH_SECONDS`` (it hung the session for good) and counts against the answer: an ``expect`` pattern missing,
    a ``forbid`` pattern found, both named in ``timed_out``; a ``uses`` pattern does not match that call."""
    import time

    from pytest_agentrace.record.model import ToolCall
    from pytest_agentrace.stats import answers

    slow, text = r"(a|a)*$", "a" * 40 + "b"
    began = time.monotonic()
    got = answers.score_answer(text, ["a", slow], [slow])
    assert time.monotonic() - began < 60  # bounded (two searches of about a second), not a timing claim
    assert (got["correct"], got["matched"], got["missing"], got["forbidden"], got["timed_out"]) == (
        False, ["a"], [slow], [slow], [slow])
    assert answers.tool_used(slow, [ToolCall("Bash", text)]) is False
    assert answers.score_answer("port 8123", ["8123"], ["9000"]) == {
        "correct": True, "recall": 1.0, "matched": ["8123"], "missing": [], "forbidden": []}
