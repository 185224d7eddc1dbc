"""JSON an agent (or the code a check runs) wrote, parsed so that no document can make the harness fail.

``json.loads`` meets ``[[[[...`` nested past the interpreter's recursion limit with ``RecursionError``, which is no
``ValueError``: a parser that caught only the latter let an agent's garbage become a harness fault. And a document
nested just below that limit parses, but every recursive walk of it afterwards (summaries, redaction, ``json.dumps``
of the run record) can fail. ``loads`` therefore refuses both, as malformed JSON (``ValueError``).
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # arrays and objects nested at most; agents' events nest about ten levels


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``; raises ``ValueError`` for malformed JSON and for a document whose arrays and objects
    nest deeper than ``MAX_DEPTH`` levels (``json.JSONDecodeError`` for the former, as ``json.loads``)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # cannot nest deeper: no walk
        return json.loads(text)
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    if depth(value) > MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


def raw_decode(text: str) -> tuple[Any, int]:
    """``json.JSONDecoder().raw_decode(text)`` under ``loads``' rules: ``(value, end)``; raises ``ValueError``."""
    try:
        value, end = json.JSONDecoder().raw_decode(text)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    if depth(value) > MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return value, end


def depth(value: Any) -> int:
    """How deep ``value``'s lists and dicts nest (0 for a scalar), walked without recursion."""
    deepest = 0
    todo = [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        todo.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest
