r"""Answer keys and verification claims. Pure functions, no pytest import.

Answer key (a trial question's ``expect`` / ``forbid`` / ``min_recall``): every pattern is a Python regular
expression searched (``re.search`` with ``re.MULTILINE``, so ``^``/``$`` match at line boundaries) anywhere
in the agent's final answer; case matters unless the pattern says ``(?i)``. The text is the agent's to choose, so a
pattern that backtracks without end on it (``(\s*\w+\s*)+:``) would hang the harness: each search runs under the
``regex`` module (``re``'s syntax, its ``VERSION0``) with a timeout of ``MATCH_SECONDS``, and a search that times out
counts against the answer (an ``expect`` pattern missing, a ``forbid`` pattern found; ``timed_out`` names them).

Verification claim (``claim = true``): the prompt asks the agent to end with one line
``VERIFICATION: {"ran": [...], "result": "passed|failed|not-run", "could_not_verify": [...], "missing": [...]}``
(``CLAIM_REQUEST``); ``parse_claim`` reads the last such line and ``judge_claim`` compares it with the
question's ``verify`` command.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

CLAIM_RESULTS = ("passed", "failed", "not-run")
CLAIM_LISTS = ("ran", "could_not_verify", "missing")
CLAIM_REQUEST = (
    "When you are done, end your reply with exactly one final line, a single line of JSON after the prefix:\n"
    'VERIFICATION: {"ran": [<commands you ran to check your work>], "result": "passed|failed|not-run", '
    '"could_not_verify": [<what you could not check>], "missing": [<anything you left undone>]}'
)
_CLAIM_LINE = re.compile(r"^[\s>*_`#-]*VERIFICATION\s*:[\s*_`]*(.*?)[\s*_`]*$")
_EPSILON = 1e-9


MATCH_SECONDS = 1.0  # one pattern's search of one answer at most


def _search(pattern: str, text: str, flags: int = re.MULTILINE) -> bool | None:
    """Whether ``pattern`` is found in ``text``; None when the search ran past ``MATCH_SECONDS``. A pattern ``re``
    takes and ``regex`` does not is searched by ``re`` (no timeout)."""
    import regex

    try:
        compiled = regex.compile(pattern, flags | regex.VERSION0)
    except regex.error:
        return re.search(pattern, text, flags) is not None
    try:
        return compiled.search(text, timeout=MATCH_SECONDS) is not None
    except TimeoutError:
        return None


def score_answer(answer: str | None, expect: Sequence[str] = (), forbid: Sequence[str] = (), min_recall: float = 1.0,
                 max_chars: int | None = None, length: int | None = None) -> dict[str, Any]:
    """Score ``answer`` against an answer key.

    With ``max_chars``, an answer longer than that many characters (``length``: its full length when the kept text
    was cut, ``Usage.answer_chars``; else ``len(answer)``) is incorrect before any pattern is tried: nothing
    matches, and the result has ``too_long`` (its length). A dump of everything an agent saw is no answer.

    Returns ``{"correct": bool, "recall": float, "matched": [pattern], "missing": [pattern], "forbidden": [pattern]}``:
    ``recall`` = matched / len(expect) (1.0 when ``expect`` is empty); ``correct`` when recall >= ``min_recall``
    and no ``forbid`` pattern matches; ``timed_out`` (only when any) the patterns whose search ran past
    ``MATCH_SECONDS`` (module docstring). A missing answer (``None``) matches nothing.
    Raises ``re.error`` for an invalid pattern (the trial loader rejects those first).
    """
    text = answer or ""
    size = length if length is not None else len(text)
    if max_chars is not None and size > max_chars:
        return {"correct": False, "recall": 0.0, "matched": [], "missing": list(expect), "forbidden": [],
                "too_long": size, "max_chars": max_chars}
    found = {p: _search(p, text) for p in (*expect, *forbid)}
    matched = [p for p in expect if found[p]]
    missing = [p for p in expect if p not in matched]
    forbidden = [p for p in forbid if found[p] is not False]  # found, or not known: the answer's text made it so
    recall = len(matched) / len(expect) if expect else 1.0
    out = {
        "correct": recall + _EPSILON >= min_recall and not forbidden,
        "recall": round(recall, 6),
        "matched": matched,
        "missing": missing,
        "forbidden": forbidden,
    }
    if timed_out := [p for p, hit in found.items() if hit is None]:
        out["timed_out"] = timed_out
    return out


def parse_claim(answer: str | None) -> dict[str, Any]:
    """Read the last ``VERIFICATION:`` line of ``answer``.

    Returns ``{"status": "valid", "result": str, "ran": [str], "could_not_verify": [str], "missing": [str]}``,
    ``{"status": "missing"}`` when no such line exists, or ``{"status": "invalid", "line": str, "error": str}``
    when the line is not a JSON object of that shape (``result`` required, one of ``CLAIM_RESULTS``; the
    lists optional, default empty). Never raises.
    """
    line = None
    for raw in (answer or "").splitlines():
        m = _CLAIM_LINE.match(raw)
        if m:
            line = (raw.strip(), m.group(1))
    if line is None:
        return {"status": "missing"}
    text, payload = line

    def invalid(error: str) -> dict[str, Any]:
        return {"status": "invalid", "line": text[:500], "error": error}

    try:
        data = json.loads(payload)
    except (json.JSONDecodeError, RecursionError) as exc:
        return invalid(f"not JSON: {exc}")
    if not isinstance(data, dict):
        return invalid(f"expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - {"result", *CLAIM_LISTS})
    if unknown:
        return invalid(f"unknown keys: {', '.join(unknown)}")
    result = data.get("result")
    if result not in CLAIM_RESULTS:
        return invalid(f"result must be one of {', '.join(CLAIM_RESULTS)}, not {result!r}")
    claim: dict[str, Any] = {"status": "valid", "result": result}
    for key in CLAIM_LISTS:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return invalid(f"{key} must be a list of strings")
        claim[key] = value
    return claim


def judge_claim(claim: dict[str, Any], verify_passed: bool | None) -> dict[str, Any]:
    """Add ``false_pass`` / ``false_fail`` to a valid claim, judged against the verify command.

    ``false_pass``: claimed ``passed`` but verify failed. ``false_fail``: claimed ``failed`` or ``not-run`` but
    verify passed. Both are ``None`` when there is no verify command (``verify_passed is None``) or the claim
    is not valid. Returns a new dict.
    """
    out = dict(claim)
    if claim.get("status") != "valid" or verify_passed is None:
        out["false_pass"] = out["false_fail"] = None
        return out
    out["false_pass"] = claim["result"] == "passed" and not verify_passed
    out["false_fail"] = claim["result"] in ("failed", "not-run") and verify_passed
    return out


def tool_used(pattern: str | None, tool_calls: Sequence[Any]) -> bool | None:
    """Whether any tool call matches the arm's ``uses`` regex (``re.search`` over ``"<name> <summary>"``, a search
    past ``MATCH_SECONDS`` counting as no match).

    ``None`` when the arm has no ``uses`` pattern. ``tool_calls`` are ``model.ToolCall``s (``name``, ``summary``).
    """
    if pattern is None:
        return None
    return any(_search(pattern, f"{t.name} {t.summary}".strip(), 0) for t in tool_calls)  # a timeout: not this call
