"""JSON an agent (or the code a check runs) wrote, parsed so that no document can make the harness fail.

``json.loads`` meets ``[[[[...`` nested past the interpreter's recursion limit with ``RecursionError``, which is no
``ValueError``: a parser that caught only the latter let an agent's garbage become a harness fault. And a document
nested just below that limit parses, but every recursive walk of it afterwards (summaries, redaction, ``json.dumps``
of the run record) can fail. ``loads`` therefore refuses both, as malformed JSON (``ValueError``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 64  # arrays and objects nested at most; agents' events nest about ten levels
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # ``\ud800``-``\udfff`` in JSON text: maybe a lone surrogate


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``; raises ``ValueError`` for malformed JSON and for a document whose arrays and objects
    nest deeper than ``MAX_DEPTH`` levels (``json.JSONDecodeError`` for the former, as ``json.loads``). A lone
    surrogate escape (``"\ud800"``, which JSON allows and no UTF-8 text can hold: a history or a report written from
    it failed) becomes U+FFFD in every string and key."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return _checked(text, lambda: (json.loads(text), len(text)))[0]


def raw_decode(text: str) -> tuple[Any, int]:
    """``json.JSONDecoder().raw_decode(text)`` under ``loads``' rules: ``(value, end)``; raises ``ValueError``."""
    return _checked(text, lambda: json.JSONDecoder().raw_decode(text))


def _checked(text: str, decode: Callable[[], tuple[Any, int]]) -> tuple[Any, int]:
    """``decode()``'s ``(value, end)`` under ``loads``' rules (depth, lone surrogates) for the JSON ``text``."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # cannot nest deeper: no walk
        value, end = decode()
    else:
        try:
            value, end = decode()
        except RecursionError:
            raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
        if depth(value) > MAX_DEPTH:
            raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return (_whole_text(value) if _SURROGATE_ESCAPE.search(text, 0, end) else value), end


def text(value: str) -> str:
    """``value`` as text every sink takes (UTF-8 files, SQLite, a terminal): itself when it encodes, else with each
    lone surrogate as U+FFFD, and a byte a file name's ``surrogateescape`` kept (``\udcff``) as U+FFFD too."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _whole_text(value: Any) -> Any:
    """``value`` with ``text`` applied to every string and key (nested at most ``MAX_DEPTH``: a recursion is safe)."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, list):
        return [_whole_text(v) for v in value]
    if isinstance(value, dict):
        return {text(k): _whole_text(v) for k, v in value.items()}
    return value


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
