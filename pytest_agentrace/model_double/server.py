"""The model double: one stateless HTTP server on 127.0.0.1 that plays model scripts for real agent CLIs.

It serves, at once and routed by path (``model-double.md``, "Notes for whoever rebuilds the harness"):

==========================================================  ===========================================
``POST …/v1/messages`` (stream or JSON)                     Anthropic Messages (Claude Code)
``POST …/v1/messages/count_tokens``                         ``{"input_tokens": N}``
``POST …/v1/responses`` (stream or JSON)                    OpenAI Responses (Codex)
``POST …/v1/chat/completions`` (stream with/without usage)  OpenAI Chat Completions (OpenCode, Copilot, Aider)
``POST …/models/<m>:generateContent``                       Gemini (also the JSON-schema router request)
``POST …/models/<m>:streamGenerateContent?alt=sse``         Gemini streaming
``POST …/models/<m>:countTokens``                           ``{"totalTokens": N}``
``GET …/models``                                            a one-model list
``HEAD`` anything                                           200, empty (Claude Code's connectivity probe)
==========================================================  ===========================================

Which script answers: a path starting ``/r/<token>/`` belongs to the run registered under ``token``
(``register``); any other path uses the server's default script. Which step answers: the number of tool
results in the request (``tools.count_tool_results``), so the server keeps no conversation state and parallel
runs are safe. The one exception is ``error.times``: failures are counted per conversation (``conversation_key``)
and step, so "a 429 then success" works.

A route can play a cassette instead of a script (``cassette.Replayer``): each request gets its recorded reply,
status, headers and chunks as recorded, or, when it does not match, HTTP 400 with ``cassette mismatch: turn N:
FIELD: ...`` (logged as answer kind ``mismatch``; answer kind ``replay`` for a match).

A double made with ``key`` answers only requests that carry that key (``x-api-key``, ``Authorization: Bearer KEY``,
``x-goog-api-key``, ``api-key`` or a ``key`` query parameter: the places the CLIs put their provider key). Any other
request gets HTTP 401 and a line in ``rejected`` (and the ``rejected_log`` file), and touches nothing else: no script
step, no error counter, no line in the run's request log. Each run's double gets a random key that only its own CLI
is given, so a run that finds a sibling's double (its port shows in ``/proc/net/tcp``) cannot play its script.

Every request is appended to the route's JSONL log (``routes.Route``): ``{ts, method, path, query, headers, body, protocol,
answer}`` with auth headers replaced by ``<redacted>``, strings longer than ``LOG_STRING_LIMIT``
characters shortened (``"...<N chars>"``, as in the recorded samples), every string (and key) redacted
(``secrets``: the run's secret values; secret assignments and key shapes always), and a body past the route's
``BODIES_KEPT`` bytes replaced by its size. A body over ``MAX_REQUEST`` bytes is refused unread (HTTP 413). The log
is for people: what the harness judges a run by is the double's own record in memory, ``routes.report_of`` (``ModelDouble.report``), never the file, which
may lie where the agent can write.
"""

from __future__ import annotations

import hmac
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from pytest_agentrace import untrusted
from pytest_agentrace.model_double import wire
from pytest_agentrace.model_double.cassette import Mismatch, Replayer
from pytest_agentrace.model_double.decide import Decider
from pytest_agentrace.model_double.routes import (
    REDACT_QUERY,
    Route,
    path_model,
    protocol_of,
    redact_headers,
    report_of,
    shorten,
)
from pytest_agentrace.model_double.script import Script, parse_script
from pytest_agentrace.model_double.tools import CHAT, GEMINI
from pytest_agentrace.model_double.wire import MAX_REQUEST

# seconds a scripted HTTP error asks the client to wait (``retry-after`` rounded up, ``retry-after-ms`` exact):
# clients that honour them (Anthropic and OpenAI SDKs, OpenCode) then retry at once instead of backing off for
# a minute or more; a script's ``error.retry_after`` overrides it
DEFAULT_RETRY_AFTER = 0.2
_ROUTE_RE = re.compile(r"^/r/([A-Za-z0-9_-]+)(/.*)?$")


class _Refused(Exception):
    """A request answered with an error before its body was read (``_Handler._read_raw``)."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the JSONL log is the record
        return

    def _authorised(self) -> bool:
        """Whether the request carries the double's key (always, for a double without one); answers 401 and logs
        the request in ``rejected`` otherwise."""
        key = self.server.double.key
        if key is None:
            return True
        given = [self.headers.get(h, "") for h in ("x-api-key", "x-goog-api-key", "api-key")]
        auth = self.headers.get("Authorization", "")
        if auth[:7].lower() == "bearer ":
            given.append(auth[7:].strip())
        given += parse_qs(urlsplit(self.path).query).get("key", [])
        if any(hmac.compare_digest(g.encode(), key.encode()) for g in given if g):
            return True
        self.server.double.rejected.append({
            "ts": time.time(), "method": self.command, "path": urlsplit(self.path).path,
            "headers": redact_headers(dict(self.headers.items())), "answer": {"kind": "unauthorised", "status": 401},
        })
        if self.command == "POST":
            self._read_raw()  # drain the body: the connection stays usable
        self._send_json(401, {"error": {"type": "authentication_error",
                                        "message": "model double: this run's key is required"}})
        return False

    def _route(self) -> tuple[Route | None, str]:
        parts = urlsplit(self.path)
        m = _ROUTE_RE.match(parts.path)
        if m:
            return self.server.double.route(m.group(1)), m.group(2) or "/"
        return self.server.double.default, parts.path

    def _record(self, route: Route | None, path: str, body: Any, protocol: str | None, answer: dict[str, Any]) -> None:
        parts = urlsplit(self.path)
        query = {k: (["<redacted>"] if k in REDACT_QUERY else v) for k, v in parse_qs(parts.query).items()}
        record = {
            "ts": time.time(), "method": self.command, "path": path, "query": query,
            "headers": redact_headers(dict(self.headers.items())), "body": shorten(body),
            "protocol": protocol, "answer": answer,
        }
        (route or self.server.double.unrouted).append(record)

    def _send_json(self, status: int, data: Any, extra: Mapping[str, str] | None = None) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("request-id", "req_" + uuid.uuid4().hex[:20])
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def _read_raw(self) -> bytes:
        """The request's body (``Content-Length`` bytes). Raises ``_Refused`` after answering HTTP 413 (a body over
        ``MAX_REQUEST``) or 400 (a length that is no number) and closing the connection: the body is never read."""
        value = self.headers.get("Content-Length") or "0"
        length = int(value) if value.isdigit() else -1
        if 0 <= length <= MAX_REQUEST:
            return self.rfile.read(length) if length else b""
        self.close_connection = True
        status, why = (413, f"request body of {length} bytes is over {MAX_REQUEST}") if length > 0 else (400, "bad Content-Length")
        self._send_json(status, {"error": {"type": "request_too_large" if status == 413 else "invalid_request_error",
                                           "message": f"model double: {why}"}}, {"Connection": "close"})
        raise _Refused(why)

    def _read_body(self, raw: bytes | None = None) -> Any:
        raw = self._read_raw() if raw is None else raw
        if self.headers.get("Content-Encoding", "").lower() in ("gzip", "zstd", "br", "deflate"):
            return {"_undecoded": f"{len(raw)} bytes, Content-Encoding {self.headers['Content-Encoding']}"}
        if not raw:
            return None
        try:
            return untrusted.loads(raw)
        except ValueError:
            return raw.decode("utf-8", errors="replace")

    def _replay(self, route: Route, path: str) -> bool:
        """Answer from the route's cassette; False when it holds nothing for this HEAD/GET (answered as usual)."""
        assert route.replayer is not None
        raw = self._read_raw() if self.command == "POST" else b""
        got = route.replayer.answer(self.command, path, parse_qs(urlsplit(self.path).query), raw)
        body = self._read_body(raw) if raw else None
        protocol = protocol_of(path)
        if got is None:
            return False
        if isinstance(got, Mismatch):
            self._record(route, path, body, protocol, {"kind": "mismatch", "turn": got.turn, "field": got.field,
                                                       "error": got.message, "status": 400})
            self._send_json(400, wire.error_body(protocol or CHAT, 400, f"model double: {got.message}"))
            return True
        self._record(route, path, body, protocol, {"kind": "replay", "turn": got.turn, "status": got.status})
        self.send_response(got.status)
        for k, v in got.headers.items():
            self.send_header(k, v)
        if got.stream:
            self.close_connection = True
            self.send_header("Connection", "close")
        else:
            self.send_header("Content-Length", str(sum(len(c) for c in got.chunks)))
        self.end_headers()
        try:
            for chunk in got.chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        return True

    def do_HEAD(self) -> None:
        if not self._authorised():
            return
        route, path = self._route()
        if route is not None and route.replayer is not None and self._replay(route, path):
            return
        self._record(route, path, None, None, {"kind": "probe"})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        if not self._authorised():
            return
        route, path = self._route()
        if route is not None and route.replayer is not None and self._replay(route, path):
            return
        if path.rstrip("/").endswith("/models"):
            data: Any = {"object": "list", "data": [{"id": "test", "object": "model", "created": 0, "owned_by": "agentrace"}],
                         "models": [{"name": "models/test", "displayName": "scripted"}]}
            self._record(route, path, None, None, {"kind": "models"})
            self._send_json(200, data)
            return
        self._record(route, path, None, None, {"kind": "not_found", "status": 404})
        self._send_json(404, {"error": {"message": f"model double: no GET route {path}", "type": "not_found"}})

    def do_POST(self) -> None:
        try:
            self._post()
        except _Refused:  # answered and closed (``_read_raw``)
            return

    def _post(self) -> None:
        if not self._authorised():
            return
        route, path = self._route()
        if route is not None and route.replayer is not None:
            self._replay(route, path)
            return
        body = self._read_body()
        protocol = protocol_of(path)
        if route is None or protocol is None or not isinstance(body, dict):
            why = "unknown run token" if route is None else ("no such endpoint" if protocol is None else "body is not a JSON object")
            self._record(route, path, body, protocol, {"kind": "not_found", "status": 404, "error": why})
            self._send_json(404, wire.error_body(protocol or CHAT, 404, f"model double: {why}: {path}"))
            return
        if path.endswith(("/count_tokens", ":countTokens")):
            n = route.script.side_usage.input
            self._record(route, path, body, protocol, {"kind": "count_tokens", "input_tokens": n})
            self._send_json(200, {"totalTokens": n} if protocol == GEMINI else {"input_tokens": n})
            return
        answer = self.server.double.decider.decide(route, protocol, path, body, dict(self.headers.items()))
        self._record(route, path, body, protocol, answer.to_log())
        if answer.delay:
            time.sleep(answer.delay)
        if answer.error is not None:
            wait = answer.error.retry_after if answer.error.retry_after is not None else DEFAULT_RETRY_AFTER
            extra = {"retry-after": str(math.ceil(wait)), "retry-after-ms": str(round(wait * 1000))}
            self._send_json(answer.error.status, wire.error_body(protocol, answer.error.status, answer.error.message), extra)
            return
        # the model that answers: the request's (Gemini names it in the path; its reply's modelVersion says
        # which model served, and Gemini CLI keys its per-model stats by that, so the router call stays apart)
        model = (path_model(path) if protocol == GEMINI else None) or str(body.get("model") or "scripted")
        stream = bool(body.get("stream")) or (protocol == GEMINI and path.endswith(":streamGenerateContent"))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        data, chunks = wire.encode(protocol, answer, model, stream, include_usage)
        if data is not None:
            if answer.malformed:
                raw = json.dumps(data).encode()[: 40]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
                return
            self._send_json(200, data)
            return
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    double: ModelDouble

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer (a CLI stopping a stream it no longer needs) is the client's business:
        no traceback on the run's stderr; anything else as ``socketserver`` reports it."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)


class ModelDouble:
    """A model double server on ``host`` (127.0.0.1) and ``port`` (0: a free port), serving ``script`` on
    paths without a run token and logging those requests to ``log`` (JSONL; None: memory only); with
    ``replayer`` those paths play its cassette instead (``cassette.Replayer``). With ``key``, requests without it
    get HTTP 401 and are logged in ``rejected`` (and appended to ``rejected_log``, JSONL) only. ``secrets``: literal
    values redacted from every record kept and logged.

    Use as a context manager or call ``start()`` / ``stop()``. ``url`` is ``http://127.0.0.1:PORT``;
    ``register(script, log)`` adds a run and returns its base URL (``url + "/r/<token>"``). Requests that name
    an unknown token are logged in ``unrouted``. Thread-safe.
    """

    def __init__(self, script: Script | None = None, log: Path | str | None = None, host: str = "127.0.0.1",
                 port: int = 0, replayer: Replayer | None = None, key: str | None = None,
                 rejected_log: Path | str | None = None, secrets: tuple[str, ...] = ()):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the model double binds to loopback only, not {host!r}")

        default = script or parse_script({"steps": [{"text": "DONE"}]}, "<default>")
        self.secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        self.default = Route("default", default, Path(log) if log else None, replayer, self.secrets)
        self.unrouted = Route("unrouted", default, None, None, self.secrets)
        self.key = key
        self.rejected = Route("rejected", default, Path(rejected_log) if rejected_log else None, None, self.secrets)
        self.decider = Decider()
        self._routes: dict[str, Route] = {}
        self._host, self._port = host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ModelDouble:
        """Bind and serve in a daemon thread. Raises ``OSError`` when the port is taken."""
        if self._server is not None:
            return self
        server = _Server((self._host, self._port), _Handler)
        server.double = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="model-double", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (streams in progress are cut)."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the model double is not started")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    def register(self, script: Script, log: Path | str | None = None, token: str | None = None,
                 replayer: Replayer | None = None) -> str:
        """Serve ``script`` (or the cassette of ``replayer``) under a new run token; returns that run's base URL
        (``url/r/<token>``)."""
        token = token or uuid.uuid4().hex[:16]
        self._routes[token] = Route(token, script, Path(log) if log else None, replayer, self.secrets)
        return f"{self.url}/r/{token}"

    def use(self, script: Script) -> None:
        """Serve ``script`` on paths without a run token from now on."""
        self.default.script = script

    def report(self) -> dict[str, Any]:
        """``report_of`` the requests on paths without a run token (the run's own double): from memory, never from
        the log file."""
        with self.default.lock:
            records = list(self.default.records)
        with self.rejected.lock:
            rejected = len(self.rejected.records)
        return report_of(records, rejected)

    def route(self, token: str) -> Route | None:
        return self._routes.get(token)

    def requests(self, base_url: str | None = None) -> list[dict[str, Any]]:
        """Request records of one run (by its base URL) or of the default route."""
        if base_url is None:
            return list(self.default.records)
        route = self._routes.get(base_url.rstrip("/").rsplit("/", 1)[-1])
        return list(route.records) if route else []
