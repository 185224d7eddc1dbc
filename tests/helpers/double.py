"""Helpers for the model double tests: recorded request bodies, a tiny HTTP client, an SSE reader."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pytest_agentrace.model_double.script import parse_script

REQUESTS = Path(__file__).parents[1] / "samples" / "model-double-requests"
HELLO = {
    "steps": [
        {"shell": "printf 'hi\\n' > hello.txt"},
        {"text": "DONE: created hello.txt", "usage": {"input": 1200, "output": 10}},
    ]
}


def recorded(name: str) -> list[dict[str, Any]]:
    """The request records of one recorded CLI (``claude-code-2.1.197`` ...)."""
    return [json.loads(line) for line in (REQUESTS / f"{name}-requests.jsonl").read_text().splitlines() if line.strip()]


def script(data: dict[str, Any] | None = None):
    return parse_script(data or HELLO, "test-script.yaml")


class Reply:
    """An HTTP answer: ``status``, ``headers`` (lower-case names), ``body`` (bytes)."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[tuple[str | None, Any]]:
        """SSE events as ``(event name or None, parsed data)``; a data line that is not JSON stays a string."""
        out = []
        for block in self.body.decode().split("\n\n"):
            if not block.strip():
                continue
            name, data = None, None
            for line in block.splitlines():
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    raw = line[5:].strip()
                    try:
                        data = json.loads(raw)
                    except ValueError:
                        data = raw
            out.append((name, data))
        return out


def call(url: str, path: str, body: Any = None, method: str = "POST", headers: dict[str, str] | None = None, timeout: float = 10) -> Reply:
    """Send one request to the double and return the reply (HTTP errors too)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return Reply(r.status, {k.lower(): v for k, v in r.headers.items()}, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read())


def url_and_path(record: dict[str, Any]) -> str:
    """The recorded path with its query string."""
    query = "&".join(f"{k}={v[0]}" for k, v in (record.get("query") or {}).items())
    return record["path"] + (f"?{query}" if query else "")
