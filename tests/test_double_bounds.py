"""What the harness's model double and recording proxy take from an agent: nothing but the upstream's own origin is
reached through the proxy, no request body over the limit is read, the bodies a run keeps are bounded, and every
record kept or logged is redacted, keys included."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers.double import call, script

from pytest_agentrace.model_double import recorder, routes, server
from pytest_agentrace.model_double.cassette import Scrubber
from pytest_agentrace.model_double.recorder import RecordingProxy
from pytest_agentrace.model_double.server import ModelDouble

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}


def raw_request(port: int, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send ``head`` (request line and headers, no blank line) and ``body`` over one connection: the status and
    the whole answer (the server closes the connection)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode() + b"\r\nConnection: close\r\n\r\n" + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data


class _Seen(BaseHTTPRequestHandler):
    seen: list[str] = []

    def log_message(self, *args: object) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Seen.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


@pytest.fixture
def listener():
    """A server that notes every request it gets (its port >= 10, so ``port // 10`` glued to its last digit names it)."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Seen)
    _Seen.seen = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("target", ["{digit}/v1/chat/completions", ".example.invalid/v1/chat/completions", "*"])
def test_a_request_target_that_is_no_path_never_leaves_the_upstreams_origin(listener: int, target: str) -> None:
    """``http://127.0.0.1:<port // 10>`` + ``<last digit>/v1/...`` was a request to ``<port>``, with the real key."""
    port = listener
    with RecordingProxy(f"http://127.0.0.1:{port // 10}", Scrubber(), key="real-key-0123456789") as proxy:
        status, answer = raw_request(int(proxy.url.rsplit(':', 1)[1]), f"POST {target.format(digit=port % 10)} HTTP/1.1\r\nContent-Length: 2", b"{}")
    assert status == 400 and b"must be a path" in answer
    assert _Seen.seen == []


def test_the_proxy_sends_the_path_to_the_upstream_and_its_base_path(listener: int) -> None:
    with RecordingProxy(f"http://127.0.0.1:{listener}/gateway", Scrubber()) as proxy:
        assert call(proxy.url, "/v1/chat/completions?x=1", BODY).status == 200
        assert call(proxy.url, "//elsewhere.invalid/v1/chat/completions", BODY).status == 200
    # http.server makes a target's leading "//" one "/": the rest is a path under the upstream's base path
    assert _Seen.seen == ["/gateway/v1/chat/completions?x=1", "/gateway/elsewhere.invalid/v1/chat/completions"]


def test_a_body_over_the_limit_is_refused_unread(listener: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder, "MAX_REQUEST", 1000)
    monkeypatch.setattr(server, "MAX_REQUEST", 1000)
    with RecordingProxy(f"http://127.0.0.1:{listener}", Scrubber()) as proxy:
        status, _ = raw_request(int(proxy.url.rsplit(':', 1)[1]), "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5000000000")
        assert status == 413
        assert call(proxy.url, "/v1/chat/completions", {"x": "y" * 2000}).status == 413
        assert call(proxy.url, "/v1/chat/completions", BODY).status == 200
    assert _Seen.seen == ["/v1/chat/completions"]
    with ModelDouble(script()) as d:
        status, answer = raw_request(d.port, "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5000000000")
        assert status == 413 and b"request_too_large" in answer
        assert raw_request(d.port, "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: -1")[0] == 400
        assert d.requests() == []  # nothing read, nothing recorded, no answer decided
        assert call(d.url, "/v1/chat/completions", BODY).status == 200
        assert len(d.requests()) == 1


def test_the_bodies_a_run_keeps_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``BODIES_KEPT`` bytes a record keeps its body's size and model (what the double's report reads), in
    memory and in the log; the answers and the report are those of a double that keeps every body."""
    big = {**BODY, "messages": [{"role": "user", "content": "x" * 3000}]}

    def three(log: Path):
        with ModelDouble(script(), log) as d:
            answers = [call(d.url, "/v1/chat/completions", big).json()["choices"] for _ in range(3)]
            return answers, d.requests(), d.report()

    whole = three(tmp_path / "whole.jsonl")
    monkeypatch.setattr(routes, "BODIES_KEPT", 6000)
    answers, records, report = three(tmp_path / "cut.jsonl")
    assert (answers, report) == (whole[0], whole[2]) and report["served"]["m"][0] > 0
    assert records[0]["body"]["messages"][0]["content"] == "x" * 3000
    assert records[2]["body"]["model"] == "m" and "past the 6000 bytes" in records[2]["body"]["_omitted"]
    lines = (tmp_path / "cut.jsonl").read_text().splitlines()
    assert [json.loads(line)["body"] for line in lines] == [r["body"] for r in records]


def test_every_record_is_redacted_keys_and_query_too(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    body = {**BODY, "messages": [{"role": "user", "content": f"value:{SECRET}"}], SECRET: 1}
    with ModelDouble(script(), log, secrets=(SECRET,)) as d:
        assert call(d.url, f"/v1/chat/completions?{SECRET}=1&q={SECRET}", body).status == 200
        kept = json.dumps(d.requests())
    assert SECRET not in kept and SECRET not in log.read_text()
    record = json.loads(log.read_text())
    assert record["query"] == {"<redacted>": ["1"], "q": ["<redacted>"]}
    assert record["body"]["<redacted>"] == 1 and record["body"]["messages"][0]["content"] == "value:<redacted>"


def test_a_cassette_keeps_no_secret_in_a_body_key_or_query_key(tmp_path: Path) -> None:
    s = Scrubber.make([SECRET], None, None)
    assert s.data({SECRET: {"k": SECRET}}) == {"<redacted>": {"k": "<redacted>"}}
    assert s.query({SECRET: ["1"], "alt": [SECRET]}) == {"<redacted>": ["1"], "alt": ["<redacted>"]}
    with ModelDouble(script()) as upstream, RecordingProxy(upstream.url, s) as proxy:
        call(proxy.url, f"/v1/chat/completions?{SECRET}=1", {**BODY, SECRET: 1})
    assert SECRET not in json.dumps(proxy.cassette("r", {}).to_dict())


def test_a_client_that_resets_its_connection_leaves_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    """A CLI that drops a connection (reset, not closed) is its own business: nothing on stderr, which the double
    shares with the run's ``raw.err``; the double keeps answering."""
    import struct

    with ModelDouble(script()) as d:
        port = int(d.url.rsplit(":", 1)[1].split("/")[0])
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")  # a request cut short
            s.close()
        assert call(d.url, "/v1/models", method="GET").status == 200
    assert "Traceback" not in capfd.readouterr().err
