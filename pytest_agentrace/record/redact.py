"""Redaction: every field that is stored or exported goes through here.

Three kinds of secret become ``<redacted>``:

- the values (``MIN_SECRET`` characters or more) of secret-like variables (``is_secret_name``): a name is split
  into words at ``_``, ``-``, ``.`` and lower-to-upper case changes, and is secret-like when a word is one of
  ``SECRET_WORDS`` (``TOKEN``, ``SECRET``, ``PASSWORD``, ...), or ``KEY`` / ``AUTH`` ends a name of two or more
  words (``OPENAI_API_KEY``, ``HTTP_AUTH``). Words are whole: ``GIT_AUTHOR_NAME``, ``MAX_TOKENS`` and ``KEYBOARD``
  are not secret-like. A name whose last word says it holds metadata (``_PATH``, ``_FILE``, ``_NAME``, ``_URL``,
  ``_ID``, ``_TYPE``, ...) is not secret-like either, nor one where ``TOKEN`` sits beside a word of counting
  (``fallback_token_limit_override``, ``TOKEN_BUDGET_MAX``: ``COUNT_WORDS``);
- assignments in text: ``NAME=value`` / ``NAME: value`` (optionally quoted) for a secret-like ``NAME``, except a
  quoted key's bare number (``"name": 272000`` in JSON: a credential there is a string, a number is a count),
  ``Authorization: Bearer|Basic|Token ...`` headers, bare ``Bearer <12+ chars>`` and the password of a URL's
  ``user:password@``;
- well-known key shapes, each with the format's real prefix and minimum length, and delimited (no letter, digit,
  ``_`` or ``-`` on either side, so ``fix-the-task-scheduler-deadlock`` or ``flask-...`` never match):

  ================  =====================================================  ======================
  provider          shape                                                  source
  ================  =====================================================  ======================
  Anthropic         ``sk-ant-(api|admin|oat|ort)NN-`` + 80 or more         Anthropic console keys
  OpenAI            ``sk-(proj|svcacct|admin)-`` + 40 or more; ``sk-`` +   OpenAI project/legacy
                    32 or more letters and digits (no ``-``)
  GitHub            ``gh[pousr]_`` + 36; ``github_pat_`` + 70 or more      GitHub token formats
  AWS               ``AKIA|ASIA|ABIA|ACCA`` + 16 upper-case letters/digits AWS access key ids
  Google            ``AIza`` + 35                                          Google API keys
  Slack             ``xox[abposr]-`` digit groups ``-`` + 24 or more       Slack tokens
  ================  =====================================================  ======================

``redact`` works on text (logs, raw output, diffs, rendered reports); ``redact_outcome`` on a whole record (answer,
tool-call summaries, errors, reasons, ...), before it is written to ``run.json`` or sent to the controller.
``tests/test_redact_corpus.py`` proves both directions: every shape above is caught, and none of the built-in and
example task names, a dictionary of common identifiers, author names or paths is touched.

Why not ``detect-secrets`` (Yelp, PyPI): it reports *that* a line holds a secret (file, line number and a hash of
the secret), not the span, so it cannot replace a secret inside a line; its entropy detectors flag git hashes,
UUIDs and base64 payloads, which fill agent logs and cassettes, so it would bring the false positives this module
exists to avoid; and its keyword detector is the substring rule (``AUTH`` in ``AUTHOR``) rejected here. The shapes
it knows for the providers above are the same public formats listed in the table.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pytest_agentrace.record.model import Outcome

MARK = "<redacted>"
MIN_SECRET = 8  # characters: shorter values are not searched for (they would blank out ordinary words)
SECRET_WORDS = frozenset({"TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL",
                          "CREDENTIALS", "APIKEY", "AUTHORIZATION", "COOKIE", "PAT"})
TAIL_WORDS = frozenset({"KEY", "AUTH"})  # secret-like only as the last word of a longer name: API_KEY, BASIC_AUTH
META_WORDS = frozenset({"PATH", "FILE", "DIR", "NAME", "URL", "ID", "TYPE", "MODE", "HELPER", "HOST", "PORT", "USER",
                        "USERNAME", "LENGTH", "LEN", "COUNT", "LIMIT", "EXPIRY", "EXPIRES", "VERSION"})
COUNT_WORDS = frozenset({"LIMIT", "LIMITS", "MAX", "MIN", "COUNT", "BUDGET", "USAGE", "USED", "TOTAL", "WINDOW",
                         "THRESHOLD", "OVERRIDE"})  # beside TOKEN: a number of tokens, not a token
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_EDGE_L, _EDGE_R = r"(?<![A-Za-z0-9_\-])", r"(?![A-Za-z0-9_\-])"
_SHAPES = re.compile(_EDGE_L + "(?:" + "|".join((
    r"sk-ant-(?:api|admin|oat|ort)\d{2}-[A-Za-z0-9_\-]{80,}",
    r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,}",
    r"sk-[A-Za-z0-9]{32,}",
    r"gh[pousr]_[A-Za-z0-9]{36}",
    r"github_pat_[A-Za-z0-9_]{70,}",
    r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}",
    r"AIza[0-9A-Za-z_\-]{35}",
    r"xox[abposr]-[0-9]{6,}(?:-[0-9]{6,}){0,2}-[0-9A-Za-z]{24,}",
)) + ")" + _EDGE_R)
# a name is a whole run of name characters, never a piece of one: the look-behind holds every name character and
# the run is taken possessively, so each run is tried once, from its start, and the search stays linear in the text
# ("a.a.a..." was quadratic when a name could start after any dot and give back characters); ``is_secret_name``
# takes its words (``--password``, ``1.api_key``)
_ASSIGN = re.compile(r"(?<![A-Za-z0-9_\-.])([A-Za-z0-9_\-.]++)([\"']?\s*[=:]\s*[\"']?)([^\s\"',;&}\]]+)")
_AUTH_HEADER = re.compile(r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?)"
                          r"([^\s\"',]+)")
_BEARER = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/\-]{12,}=*)")
_SCHEMES = frozenset({"bearer", "basic", "token", "digest"})
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)([^/\s@]+)(@)")


def is_secret_name(name: str) -> bool:
    """Whether a variable, header or key ``name`` names a secret (the whole-word rule of the module docstring):
    ``OPENAI_API_KEY``, ``X-Session-Token``, ``password``, ``apiKey`` are; ``GIT_AUTHOR_NAME``, ``MAX_TOKENS``,
    ``KEY``, ``SSH_KEY_PATH``, ``author`` are not."""
    words = [w.upper() for w in _WORD_SPLIT.split(name) if w]
    if not words or words[-1] in META_WORDS:
        return False
    if "TOKEN" in words and any(w in COUNT_WORDS for w in words):
        return False
    if any(w in SECRET_WORDS for w in words):
        return True
    return len(words) > 1 and words[-1] in TAIL_WORDS


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values (``MIN_SECRET`` characters or more) of secret-like variables of ``env`` (default ``os.environ``),
    longest first, so that a value containing another is replaced whole."""
    env = os.environ if env is None else env
    found = {v for k, v in env.items() if v and len(v) >= MIN_SECRET and is_secret_name(k)}
    return sorted(found, key=len, reverse=True)


_LITERALS = frozenset({"null", "none", "true", "false", "nil", "undefined"})  # JSON/YAML/TOML words, never a secret
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _assignment(m: re.Match[str]) -> str:
    name, sep, value = m.groups()
    if (value.startswith(MARK) or len(value) < 3 or value.lower() in _SCHEMES or value.lower() in _LITERALS
            or value[0] in "$<%"
            or (sep[:1] in "\"'" and sep[-1:] not in "\"'" and _NUMBER.fullmatch(value))  # a quoted key's bare number
            or any(c in value for c in "([{") or not is_secret_name(name)):
        return m.group(0)  # a reference (``$VAR``, ``f(x)``, ``<placeholder>``), not a value
    return f"{name}{sep}{MARK}"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every literal of ``secrets`` (``MIN_SECRET`` characters or more), every secret assignment,
    authorization header and known key shape replaced by ``<redacted>``."""
    if not text:
        return text
    for s in secrets:
        if s and len(s) >= MIN_SECRET and s in text:
            text = text.replace(s, MARK)
    text = _SHAPES.sub(MARK, text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + (m.group(2) if m.group(2).startswith(MARK) else MARK), text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{MARK}", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{MARK}{m.group(3)}", text)
    return _ASSIGN.sub(_assignment, text)


# what a terminal acts on instead of showing: C0 controls but tab and newline, DEL, C1 controls (0x9b is CSI), and
# the bidirectional overrides and isolates that reorder what is shown (Unicode TR #36's "Trojan Source")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on (an escape sequence's ESC, a carriage return, a bell,
    a C1 control, a bidirectional override) shown as its escape (``\\x1b``, ``\\u202e``); tabs and newlines kept.
    What an agent or its code wrote (a check's log, the agent's error text in a reason) goes through this before it
    reaches a terminal: an OSC 52 sequence would set the user's clipboard, a cursor move rewrite lines above."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                        text)


def redact_data(data: Any, secrets: Iterable[str] = ()) -> Any:
    """A JSON-like value with every string in it, dict keys too (``keyed``), passed through ``redact``."""
    secrets = list(secrets)
    if isinstance(data, str):
        return redact(data, secrets)
    if isinstance(data, dict):
        return keyed(((k, redact_data(v, secrets)) for k, v in data.items()), lambda k: redact(k, secrets))
    if isinstance(data, (list, tuple)):
        return [redact_data(v, secrets) for v in data]
    return data


def keyed(items: Iterable[tuple[Any, Any]], clean: Callable[[str], str]) -> dict[Any, Any]:
    """A dict of ``items`` whose string keys are passed through ``clean`` (a redaction): a key is stored text as much
    as a value is (an agent may name a usage entry after a key it read). A cleaned key that another key already
    took gets ``#2``, ``#3``... so that no value is lost."""
    out: dict[Any, Any] = {}
    for k, v in items:
        new = clean(k) if isinstance(k, str) else k
        if new in out:  # only a cleaned key can meet another (a dict's own keys differ)
            n = 2
            while f"{new}#{n}" in out:
                n += 1
            new = f"{new}#{n}"
        out[new] = v
    return out


T = TypeVar("T")


def redact_fields(value: T, secrets: Sequence[str] = (), finite: bool = False, show: bool = False) -> T:
    """``value`` (a dataclass, dict, list, tuple, string or scalar, nested) with every string in it passed through
    ``redact``, its types kept: a dataclass is copied with ``dataclasses.replace`` (fields with ``init=False`` are
    left as they are), dict keys are redacted too (``keyed``), tuples stay tuples, a ``StrEnum`` whose text does not
    change stays the member. ``finite``: a NaN or infinite float becomes None (what the JSON export prints as null).
    ``show``: every string also passes through ``printable`` (for a page or comment people read: no escape sequence
    or bidirectional override of an agent's text reaches it). The same object is returned wherever nothing changed,
    so a record without secrets is not copied."""
    if isinstance(value, str):
        text = redact(value, secrets)
        text = printable(text) if show else text
        return value if text == value else text  # type: ignore[return-value]
    if isinstance(value, float):
        return None if finite and not math.isfinite(value) else value  # type: ignore[return-value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if f.init:
                old = getattr(value, f.name)
                new = redact_fields(old, secrets, finite, show)
                if new is not old:
                    changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value  # type: ignore[type-var]
    if isinstance(value, dict):
        items = keyed(((k, redact_fields(v, secrets, finite, show)) for k, v in value.items()),
                      lambda k: redact_fields(k, secrets, finite, show))
        same = len(items) == len(value) and all(k in items and items[k] is v for k, v in value.items())
        return value if same else items  # type: ignore[return-value]
    if isinstance(value, (list, tuple)):
        seq = [redact_fields(v, secrets, finite, show) for v in value]
        if all(a is b for a, b in zip(seq, value, strict=True)):
            return value
        return type(value)(seq) if type(value) in (list, tuple) else seq  # type: ignore[return-value]
    return value


def redact_outcome(outcome: Outcome, secrets: Iterable[str] = ()) -> Outcome:
    """``outcome`` with every string field redacted (``secrets`` plus the session's own secret variables), field by
    field (``redact_fields``): no dict is made of the record here, that is done once where it is written."""
    every = sorted({*secrets, *secret_values()}, key=len, reverse=True)
    return redact_fields(outcome, every)
