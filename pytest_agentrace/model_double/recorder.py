"""The recording proxy: a local HTTP server on 127.0.0.1 that a CLI's base-URL settings point at (as they point
at the model double), which forwards every request to the real provider, or to an upstream URL, streams each
response back as it arrives and keeps both for the run's cassette (``cassette``).

Where a request goes: ``upstream + path`` (``--agentrace-record-upstream URL``: a gateway such as LiteLLM or
OpenRouter, or a model double; the CLI's path, ``/v1/messages`` say, is appended to it), else the provider of the
agent's CLI (``PROVIDERS``: Anthropic for Claude Code, Google for Gemini CLI, OpenAI for the others). The request
target must be a path: nothing but the upstream's own scheme, host and port is ever reached. A body over
``wire.MAX_REQUEST`` bytes is refused unread.

Credentials: the CLI holds only the dummy key. The proxy puts the real key in its place when the session's
environment has one (``AGENTRACE_RECORD_KEY`` for any upstream; else ``ANTHROPIC_API_KEY`` as ``x-api-key``,
``OPENAI_API_KEY`` as a bearer token, ``GEMINI_API_KEY``/``GOOGLE_API_KEY`` as ``x-goog-api-key`` for the real
providers); without one the CLI's own headers go through (a model double or a keyless gateway). No key
reaches the cassette, nor do the run's paths and the machine's facts (``cassette.Scrubber``, ``normalise``).

Responses: status and headers as received (hop-by-hop headers aside); a body with ``Content-Length`` is read
whole and sent with its length, any other body (SSE) is sent chunk by chunk as it arrives and ends when the
connection closes. ``Accept-Encoding: identity`` is asked of the upstream so chunks are recorded as text.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from pytest_agentrace.model_double.cassette import Cassette, Scrubber, now
from pytest_agentrace.model_double.wire import MAX_REQUEST

ANTHROPIC_URL = "https://api.anthropic.com"
OPENAI_URL = "https://api.openai.com"
GOOGLE_URL = "https://generativelanguage.googleapis.com"
PROVIDERS = {"claude": ANTHROPIC_URL, "gemini": GOOGLE_URL}  # every other adapter: OPENAI_URL
KEY_ENV = "AGENTRACE_RECORD_KEY"
_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
        "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding"}
_AUTH = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
UPSTREAM_TIMEOUT = 600.0  # seconds a silent upstream may take before the request fails (a model's long answer)


def provider_url(adapter: str) -> str:
    """The real provider an adapter's CLI talks to by default."""
    return PROVIDERS.get(adapter, OPENAI_URL)


def record_key(upstream: str | None, base: str, env: Mapping[str, str]) -> str | None:
    """The key the proxy sends in place of the CLI's dummy key (None: the CLI's own headers go through):
    ``AGENTRACE_RECORD_KEY``, else, for a real provider (no ``upstream``), its usual variable."""
    if env.get(KEY_ENV):
        return env[KEY_ENV]
    if upstream:
        return None
    names = {ANTHROPIC_URL: ("ANTHROPIC_API_KEY",), GOOGLE_URL: ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    return next((env[n] for n in names.get(base, ("OPENAI_API_KEY",)) if env.get(n)), None)


def with_key(headers: Mapping[str, str], key: str | None) -> dict[str, str]:
    """``headers`` with ``key`` in every credential header the CLI sent (``Authorization: Bearer KEY``,
    ``x-api-key: KEY``, ...); unchanged when ``key`` is None."""
    if key is None:
        return dict(headers)
    out = {}
    for k, v in headers.items():
        low = k.lower()
        out[k] = (f"Bearer {key}" if low == "authorization" else key) if low in _AUTH else v
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_HEAD(self) -> None:
        self._forward()

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def do_PUT(self) -> None:
        self._forward()

    def do_DELETE(self) -> None:
        self._forward()

    def _forward(self) -> None:
        with self.server.proxy.busy:
            self._exchange()

    def _exchange(self) -> None:
        proxy = self.server.proxy
        parts = urlsplit(self.path)
        value = self.headers.get("Content-Length") or "0"
        length = int(value) if value.isdigit() else -1
        # the upstream's origin is the only one reached: a request target that is no path (``.evil.example/``,
        # ``1/v1``) would otherwise be glued onto its host or port; a body over the limit is never read
        why = ((400, "the request target must be a path") if not parts.path.startswith("/") else
               (413, f"request body over {MAX_REQUEST} bytes") if length > MAX_REQUEST else
               (400, "bad Content-Length") if length < 0 else None)
        if why is not None:
            self.close_connection = True
            body = json.dumps({"error": {"type": "invalid_request_error", "message": f"agentrace recording proxy: {why[1]}"}}).encode()
            self._send(why[0], {"Content-Type": "application/json", "Connection": "close"}, [body], length=len(body))
            return
        raw = self.rfile.read(length) if length else b""
        target = urlsplit(proxy.base)._replace(path=urlsplit(proxy.base).path + parts.path, query=parts.query)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers = with_key(headers, proxy.key)
        headers["Accept-Encoding"] = "identity"
        if raw or self.command in ("POST", "PUT"):
            headers["Content-Length"] = str(len(raw))
        record = {"method": self.command, "path": parts.path, "query": parse_qs(parts.query), "raw": raw,
                  "headers": dict(self.headers.items())}
        conn_cls = http.client.HTTPSConnection if target.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(target.netloc, timeout=proxy.timeout)
        chunks: list[bytes] = []
        try:
            conn.request(self.command, target.path + (f"?{target.query}" if target.query else ""), body=raw or None,
                         headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException, ValueError) as exc:  # ValueError: a path http.client refuses
            body = json.dumps({"error": {"message": f"agentrace recording proxy: upstream {proxy.base} failed: {exc}",
                                         "type": "upstream_error"}}).encode()
            proxy.add(record, 502, {"Content-Type": "application/json"}, [body], stream=False)
            self._send(502, {"Content-Type": "application/json"}, [body], length=len(body))
            return
        out_headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP]
        sized = resp.getheader("Content-Length") is not None and resp.getheader("Transfer-Encoding") is None
        try:
            if sized or self.command == "HEAD":
                data = resp.read() if self.command != "HEAD" else b""
                chunks = [data] if data else []
                self._send(resp.status, out_headers, chunks, length=len(data), head=self.command == "HEAD",
                           upstream_length=resp.getheader("Content-Length"))
            else:
                self.close_connection = True
                self.send_response(resp.status)
                for k, v in out_headers:
                    self.send_header(k, v)
                self.send_header("Connection", "close")
                self.end_headers()
                while True:
                    piece = resp.read1(65536)
                    if not piece:
                        break
                    chunks.append(piece)
                    try:
                        self.wfile.write(piece)
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        break  # the CLI went away: keep reading, so the cassette holds the whole answer
        except (OSError, http.client.HTTPException):
            pass  # the upstream broke off: the cassette holds what came, as the CLI saw it
        finally:
            conn.close()
        proxy.add(record, resp.status, dict(out_headers), chunks, stream=not sized)

    def _send(self, status: int, headers: Any, chunks: list[bytes], length: int, head: bool = False,
              upstream_length: str | None = None) -> None:
        self.send_response(status)
        for k, v in (headers.items() if isinstance(headers, Mapping) else headers):
            self.send_header(k, v)
        self.send_header("Content-Length", upstream_length if head and upstream_length else str(length))
        self.end_headers()
        if not head:
            try:
                for c in chunks:
                    self.wfile.write(c)
            except (BrokenPipeError, ConnectionResetError):
                pass


class _InFlight:
    """Counts exchanges in progress (a context manager per exchange); ``wait_idle`` waits for none."""

    def __init__(self) -> None:
        self._n = 0
        self._cond = threading.Condition()

    def __enter__(self) -> None:
        with self._cond:
            self._n += 1

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._n -= 1
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._n == 0, timeout)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    proxy: RecordingProxy


class RecordingProxy:
    """A recording proxy on 127.0.0.1 (free port) in front of ``base`` (the upstream URL, no trailing slash).

    ``key``: the key put in place of the CLI's dummy key (``record_key``; None: the CLI's own headers go through);
    ``scrub``: what makes a recorded value safe (secrets, the run's paths). ``url`` is what the CLI's base-URL
    settings point at; ``cassette(run_id, info)`` gives the traffic so far as a ``Cassette``. Use as a context
    manager or ``start()``/``stop()``. Thread-safe."""

    def __init__(self, base: str, scrub: Scrubber, key: str | None = None, timeout: float = UPSTREAM_TIMEOUT):
        self.base, self.scrub, self.key, self.timeout = base.rstrip("/"), scrub, key, timeout
        self._records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self.busy = _InFlight()

    def add(self, record: dict[str, Any], status: int, headers: Mapping[str, str], chunks: list[bytes],
            stream: bool) -> None:
        """Keep one exchange (scrubbed at once: nothing secret is held longer than the request)."""
        s = self.scrub
        text, encoding = s.chunks(chunks)
        request = s.request(record["method"], record["path"], record["query"], record["headers"], record["raw"])
        response = {"status": status, "headers": s.headers(headers), "stream": stream, "chunks": text,
                    "encoding": encoding}
        with self._lock:
            self._records.append({"request": request, "response": response})

    def cassette(self, run_id: str, info: Mapping[str, Any]) -> Cassette:
        """The exchanges so far, POSTs numbered as turns 1, 2, ... in the order their requests arrived."""
        with self._lock:
            records = list(self._records)
        turn, out = 0, []
        for rec in records:
            if rec["request"]["method"] == "POST":
                turn += 1
                out.append({"turn": turn, **rec})
            else:
                out.append({"turn": None, **rec})
        return Cassette(run_id, out, {**info, "recorded": now()})

    def start(self) -> Self:
        if self._server is None:
            self._server = _Server(("127.0.0.1", 0), _Handler)
            self._server.proxy = self
            threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                             name="recording-proxy", daemon=True).start()
        return self

    def stop(self, drain: float = 5.0) -> None:
        """Stop serving; an exchange still streaming (the CLI left early) may finish for ``drain`` seconds, so
        the cassette holds its whole answer."""
        if self._server is not None:
            self.busy.wait_idle(drain)
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        if self._server is None:
            raise RuntimeError("the recording proxy is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"


def save_cassette(proxy: RecordingProxy, path: Path, run_id: str, info: Mapping[str, Any]) -> Path:
    """Write the proxy's traffic as ``run_id``'s cassette at ``path``."""
    return proxy.cassette(run_id, info).save(path)
