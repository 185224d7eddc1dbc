"""The model double's routes: a registered run's script or cassette and the records of its requests, and what the
double says of a run from them (``report_of``).

A route keeps each request redacted (``secrets``: the run's secret values; secret assignments and key shapes always),
strings longer than ``LOG_STRING_LIMIT`` characters shortened (``shorten``), credentials in headers replaced
(``redact_headers``), and a body past ``BODIES_KEPT`` bytes of the route's records replaced by its size and model.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentrace.model_double.cassette import Replayer
from pytest_agentrace.model_double.script import Script
from pytest_agentrace.model_double.tools import ANTHROPIC, CHAT, GEMINI, RESPONSES
from pytest_agentrace.record.redact import redact_data
from pytest_agentrace.record.safefile import append_bytes

LOG_STRING_LIMIT = 4000
BODIES_KEPT = 16 * 1024 * 1024  # bytes of request bodies (as JSON, strings shortened) a route keeps and logs
REDACT_HEADERS = {"authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie", "proxy-authorization"}
REDACT_QUERY = {"key", "api_key", "access_token"}
_GEMINI_RE = re.compile(r"/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)$")
SERVED_KINDS = ("tool", "text", "none", "edit", "side", "json")  # answers that carry the script's usage
REPORT_TEXT_CAP = 2000  # characters of a message kept in a report
REPORT_MODELS_CAP = 32  # models counted one by one in a report's ``served``; the rest are added to the last


@dataclass
class Route:
    """A registered run: its ``script`` (or ``replayer``: a cassette played in its place), request ``log`` file
    (JSONL; None: memory only), the ``secrets`` redacted from what is kept, and the records."""

    token: str
    script: Script
    log: Path | None = None
    replayer: Replayer | None = None
    secrets: tuple[str, ...] = ()
    records: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    kept: int = 0  # bytes of request bodies kept (their log lines' JSON)

    def append(self, record: dict[str, Any]) -> None:
        """Keep ``record`` (and append it to the log) redacted (``record.redact.redact_data``: the session's secret
        values, secret assignments and key shapes, in keys too); its body only while the route's bodies stay within
        ``BODIES_KEPT`` bytes of JSON, else a stand-in naming its size and model (what ``report_of`` reads)."""
        record = redact_data(record, self.secrets)
        line = json.dumps(record, ensure_ascii=False)
        with self.lock:
            if self.kept + len(line) > BODIES_KEPT:
                body = record.get("body")
                model = body.get("model") if isinstance(body, dict) and isinstance(body.get("model"), str) else None
                record["body"] = {**({"model": model[:200]} if model else {}),
                                  "_omitted": f"{len(line)} bytes: past the {BODIES_KEPT} bytes of request bodies a run keeps"}
                line = json.dumps(record, ensure_ascii=False)
            self.kept += len(line)
            self.records.append(record)
            if self.log is not None:
                self.log.parent.mkdir(parents=True, exist_ok=True)
                try:  # the run's folder: a link left at the log's name is refused, never written through
                    append_bytes(self.log, (line + "\n").encode("utf-8"))
                except OSError:
                    self.log = None


def shorten(value: Any, limit: int = LOG_STRING_LIMIT) -> Any:
    """``value`` with every string longer than ``limit`` cut to ``limit`` characters plus ``...<N chars>``."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"...<{len(value) - limit} chars>"
    if isinstance(value, dict):
        return {k: shorten(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [shorten(v, limit) for v in value]
    return value


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers with credentials (``REDACT_HEADERS``) replaced by ``<redacted>``."""
    return {k: ("<redacted>" if k.lower() in REDACT_HEADERS else v) for k, v in headers.items()}


def path_model(path: str) -> str | None:
    """The model a Gemini path names (``…/models/<m>:generateContent`` -> ``m``), or None."""
    m = _GEMINI_RE.search(path)
    return m.group(1) if m else None


def report_of(records: list[dict[str, Any]], rejected: int = 0) -> dict[str, Any]:
    """What a run's double says of it, from its request ``records`` (``Route.records``, or a request log's lines)
    and the number of ``rejected`` requests (without the run's key):
    ``{"requests": n, "rejected": n, "mismatch": the first cassette mismatch's message or None, "none": the text of
    the first ``none`` answer (a script step the CLI offered no fitting tool for) or None, "played": recorded turns
    replayed, "served": {model: [input, output, cache_read, cache_write]}, "refused": a 401/403 was served,
    "answered": a model turn was served (status < 400), "server_error": a 5xx or malformed answer was served,
    "last_text_step": the highest script step answered with text (status < 400) or None}`` (tokens of the answers in
    ``SERVED_KINDS``, per model that answered: the request's ``model``, or the model in a Gemini path). JSON-able and
    bounded (messages cut to ``REPORT_TEXT_CAP`` characters, at most ``REPORT_MODELS_CAP`` models), so a double in
    the run's namespace can send it on a pipe."""
    out: dict[str, Any] = {"requests": len(records), "rejected": rejected, "mismatch": None, "none": None, "played": 0,
                           "served": {}, "refused": False, "answered": False, "server_error": False,
                           "last_text_step": None}
    served: dict[str, list[int]] = out["served"]
    for rec in records:
        answer = rec.get("answer") if isinstance(rec.get("answer"), Mapping) else {}
        kind = answer.get("kind")
        try:
            status = int(answer.get("status") or 0)
        except (TypeError, ValueError):
            status = 0
        out["refused"] |= status in (401, 403)
        out["server_error"] |= status >= 500 or bool(answer.get("malformed"))
        out["answered"] |= (kind in SERVED_KINDS or kind == "replay") and status < 400
        step = answer.get("step")
        if kind == "text" and status < 400 and isinstance(step, int):
            out["last_text_step"] = max(step, out["last_text_step"] if out["last_text_step"] is not None else step)
        if kind == "mismatch" and out["mismatch"] is None:
            out["mismatch"] = str(answer.get("error"))[:REPORT_TEXT_CAP]
        elif kind == "none" and out["none"] is None:
            out["none"] = str(answer.get("text") or "")[:REPORT_TEXT_CAP]
        elif kind == "replay" and answer.get("turn") is not None:
            out["played"] += 1
        if kind not in SERVED_KINDS:
            continue
        body = rec.get("body") if isinstance(rec.get("body"), Mapping) else {}
        model = (path_model(str(rec.get("path") or "")) or str(body.get("model") or "scripted"))[:200]
        if model not in served and len(served) >= REPORT_MODELS_CAP:
            model = list(served)[-1]
        u = answer.get("usage") if isinstance(answer.get("usage"), Mapping) else {}
        got = [int(u.get(k) or 0) for k in ("input", "output", "cache_read", "cache_write")]
        served[model] = [a + b for a, b in zip(served.get(model, [0, 0, 0, 0]), got, strict=True)]
    return out


def protocol_of(path: str) -> str | None:
    """The wire protocol of a POST path, or None."""
    if path.endswith(("/messages", "/messages/count_tokens")):
        return ANTHROPIC
    if path.endswith("/responses"):
        return RESPONSES
    if path.endswith("/chat/completions"):
        return CHAT
    if _GEMINI_RE.search(path):
        return GEMINI
    return None
