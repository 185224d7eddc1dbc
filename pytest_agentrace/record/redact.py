"""Redaction: every field that is stored or exported goes through here.

Two kinds of secret become ``<redacted>``:

- the values of secret-like environment variables: names containing KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL or
  AUTH (``secret_values``; values of 8 characters or more, so ``AUTH=1`` style switches do not blank out text);
- well-known key shapes, wherever they appear: Anthropic ``sk-ant-...``, OpenAI ``sk-...`` / ``sk-proj-...``,
  GitHub ``ghp_``/``gho_``/``ghs_``/``ghu_``/``ghr_`` and ``github_pat_...``, AWS access key ids ``AKIA...``, Google
  API keys ``AIza...``, Slack ``xox?-...``, bearer tokens, and ``NAME=value`` for secret-like names.

``redact`` works on text (logs, raw output, diffs, rendered reports); ``redact_outcome`` on a whole record (answer,
tool-call summaries, errors, reasons, ...), before it is written to ``run.json`` or sent to the controller.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_agentrace.record.model import Outcome

MARK = "<redacted>"
SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)")
MIN_SECRET = 8  # characters: shorter values are not searched for (they would blank out ordinary words)
_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]{12,}"
    r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|A(?:KIA|SIA)[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"
)
_ASSIGN = re.compile(r"(?i)\b([A-Z0-9_]*(?:API_KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH)[A-Z0-9_]*)=(\S+)")
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{12,}")


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values (``MIN_SECRET`` characters or more) of secret-like variables of ``env`` (default ``os.environ``),
    longest first, so that a value containing another is replaced whole."""
    env = os.environ if env is None else env
    found = {v for k, v in env.items() if v and len(v) >= MIN_SECRET and SECRET_NAME.search(k)}
    return sorted(found, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every literal of ``secrets`` and every known key shape replaced by ``<redacted>``."""
    if not text:
        return text
    for s in secrets:
        if s and len(s) >= MIN_SECRET and s in text:
            text = text.replace(s, MARK)
    text = _ASSIGN.sub(lambda m: f"{m.group(1)}={MARK}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{MARK}", text)
    return _SHAPES.sub(MARK, text)


def redact_data(data: Any, secrets: Iterable[str] = ()) -> Any:
    """A JSON-like value with every string in it (keys kept) passed through ``redact``."""
    secrets = list(secrets)
    if isinstance(data, str):
        return redact(data, secrets)
    if isinstance(data, dict):
        return {k: redact_data(v, secrets) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(v, secrets) for v in data]
    return data


def redact_outcome(outcome: Outcome, secrets: Iterable[str] = ()) -> Outcome:
    """``outcome`` with every string field redacted (``secrets`` plus the session's own secret variables)."""
    every = sorted({*secrets, *secret_values()}, key=len, reverse=True)
    return Outcome.from_dict(redact_data(outcome.to_dict(), every))
