"""Redaction field by field (``record.redact.redact_fields``): an outcome redacted without a dict round trip equals
the one redacted through its dict (``redact_data`` of ``to_dict``, then ``from_dict``), keeps its types, and is not
copied when it holds no secret."""

from __future__ import annotations

import json
import math

from helpers.report import outcome

from pytest_agentrace.record.model import CheckResult, Outcome, Status, ToolCall, Usage
from pytest_agentrace.record.redact import MARK, redact_data, redact_fields, redact_outcome, secret_values

SECRET = "sk-fields-0123456789abcdef"


def leaky() -> Outcome:
    return outcome(
        status=Status.FAILED, reason=f"tests failed: {SECRET}", extra={"note": [SECRET, 1, {"env": "API_KEY=abcdefgh123"}], "pair": ("a", SECRET)},
        usage=Usage(total_tokens=5, answer=f"the key is {SECRET}", tool_calls=(ToolCall("bash", f"curl -H 'x-key: {SECRET}'"),),
                    parse_warnings=(SECRET,), model_usage={"m": {"input_tokens": 1}, SECRET: {"input_tokens": 2}}, status="completed"),
        checks={"tests": CheckResult("tests", f"pytest --key {SECRET}", 1, 0.5, "tests.log")},
        machinery=({"path": SECRET},), tampered=(SECRET,))


def test_field_by_field_equals_the_dict_round_trip() -> None:
    o = leaky()
    every = sorted({SECRET, *secret_values()}, key=len, reverse=True)
    through_dict = Outcome.from_dict(redact_data(o.to_dict(), every))
    redacted = redact_outcome(o, [SECRET])
    # the same record once written (a tuple in ``extra`` stays a tuple here, a list there: the same JSON)
    assert json.dumps(redacted.to_dict(), sort_keys=True) == json.dumps(through_dict.to_dict(), sort_keys=True)
    assert SECRET not in repr(redacted) and redacted.reason == f"tests failed: {MARK}"
    assert redacted.extra["note"][2] == {"env": f"API_KEY={MARK}"}


def test_types_are_kept_and_a_clean_record_is_not_copied() -> None:
    redacted = redact_outcome(leaky(), [SECRET])
    assert redacted.status is Status.FAILED  # a member whose text did not change stays the member
    assert isinstance(redacted.usage.tool_calls, tuple) and isinstance(redacted.usage.tool_calls[0], ToolCall)
    assert isinstance(redacted.extra["pair"], tuple) and redacted.extra["pair"] == ("a", MARK)
    clean = outcome()
    assert redact_outcome(clean, [SECRET]) is clean


def test_finite_makes_nan_none() -> None:
    o = outcome(score=math.nan, seconds=math.inf)
    assert redact_fields(o, finite=False) is o
    shown = redact_fields(o, finite=True)
    assert (shown.score, shown.seconds, shown.usage.total_tokens) == (None, None, 1000)


def test_dict_keys_are_redacted_and_no_value_is_lost() -> None:
    """A secret an agent used as a key (a usage entry named after a key it read) is redacted as a value is; keys that
    meet once redacted are told apart (``#2``), also when one of them was ``<redacted>`` already."""
    redacted = redact_outcome(leaky(), [SECRET])
    assert redacted.usage.model_usage == {"m": {"input_tokens": 1}, MARK: {"input_tokens": 2}}
    other = "sk-other-0123456789abcdef"
    data = {SECRET: 1, MARK: 2, other: 3, "plain": {SECRET: [other]}}
    want = {MARK: 1, f"{MARK}#2": 2, f"{MARK}#3": 3, "plain": {MARK: [MARK]}}
    assert redact_data(data, [SECRET, other]) == want
    assert redact_fields(data, [SECRET, other]) == want
    clean = {"a": {"b": 1}}
    assert redact_fields(clean, [SECRET]) is clean


def test_shown_text_has_no_escape_sequence_or_bidirectional_override() -> None:
    o = outcome(reason="tests failed \x1b]52;c;ZXZpbA==\x07 \u202ecod.exe", extra={"\u202ekey": "\x1b[2J"})
    shown = redact_fields(o, show=True)
    assert shown.reason == "tests failed \\x1b]52;c;ZXZpbA==\\x07 \\u202ecod.exe"
    assert shown.extra == {"\\u202ekey": "\\x1b[2J"}
    assert redact_fields(o) is o  # only what is shown to people is made printable
