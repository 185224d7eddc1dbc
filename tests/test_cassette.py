"""Cassettes: normalising, first differences, strict and loose matching, scrubbing (secrets, paths, chunks), the
file format, and the recording proxy in front of a real model double, replayed byte for byte by another."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers.double import call, script

from pytest_agentrace.model_double.cassette import (
    HOME,
    LOOSE,
    WORKSPACE,
    Cassette,
    CassetteError,
    Mismatch,
    Replayer,
    Reply,
    Scrubber,
    cassette_path,
    comparable,
    first_difference,
    normalise,
)
from pytest_agentrace.model_double.recorder import KEY_ENV, RecordingProxy, provider_url, record_key, with_key
from pytest_agentrace.model_double.server import ModelDouble

DUMMY = "sk-agentrace-model-double"


def req(text: str, **extra) -> dict:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "stream": True, **extra}
    return {"method": "POST", "path": "/v1/chat/completions", "query": {}, "body": body}


def turn(n: int, text: str, answer: str) -> dict:
    chunks = [f'data: {{"choices":[{{"delta":{{"content":"{answer}"}}}}]}}\n\n', "data: [DONE]\n\n"]
    response = {"status": 200, "headers": {"Content-Type": "text/event-stream"}, "chunks": chunks, "encoding": "utf-8"}
    return {"turn": n, "request": req(text), "response": response}


def raw(r: dict) -> bytes:
    return json.dumps(r["body"]).encode()


def test_normalise_drops_volatile_keys_and_text() -> None:
    body = {"metadata": {"user_id": "u1"}, "prompt_cache_key": "abc", "messages": [
        {"role": "user", "id": "msg_1", "content": [{
            "type": "text", "cache_control": {"type": "ephemeral"},
            "text": "Today is 2026-12-01, Monday, December 1, 2026 at 12:03:44; "
                    "session 1b4e28ba-2fa1-11d2-883f-0016d3cca427",
        }]},
        {"role": "tool", "tool_call_id": "call_9", "content": "Chunk ID: a7c267\nWall time: 0.0123 seconds\nPGID: 77 "
                                                              "on Linux 6.8.0-49-generic"},
        {"role": "assistant",
         "tool_calls": [{"function": {"arguments": '{"command": "sleep 2", "ts": "2026-12-01T12:00:00Z"}'}}]},
    ]}
    assert normalise(body) == {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "Today is <date>, <date> at <time>; session <uuid>"}]},
        {"role": "tool", "content": "Chunk ID: <id>\nWall time: <duration>\nPGID: <pid> on Linux <version>"},
        {"role": "assistant", "tool_calls": [{"function": {"arguments": {"command": "sleep 2", "ts": "<time>"}}}]},
    ]}
    # substance stays: a different count of seconds to sleep is a different request
    assert normalise("sleep 2 seconds") != normalise("sleep 3 seconds")


def test_first_difference_names_the_field() -> None:
    a = {"body": {"messages": [{"content": "Create hello.txt containing hi"}], "tools": ["x", "y"]}}
    assert first_difference(a, json.loads(json.dumps(a))) is None
    b = {"body": {"messages": [{"content": "Create hello.txt containing ho"}], "tools": ["x", "y"]}}
    field, why = first_difference(a, b)
    assert field == "body.messages[0].content"
    assert why == "differs at character 29: recorded ...'llo.txt containing hi', got ...'llo.txt containing ho'"
    c = {"body": {"messages": [{"content": "Create hello.txt containing hi"}], "tools": ["x"]}}
    assert first_difference(a, c) == ("body.tools[1]", "recorded 2 items, got 1")
    assert first_difference({"a": 1}, {"a": 1, "b": 2}) == ("b", "not recorded, now 2")
    assert first_difference({"a": 1, "b": 2}, {"a": 1}) == ("b", "recorded 2, missing now")


def test_strict_replay_ignores_volatile_fields_and_plays_in_order() -> None:
    cas = Cassette("task:t/default/a/r1", [turn(1, "hi", "one"), turn(2, "hi again", "two")])
    rp = Replayer(cas)
    live = req("hi", metadata={"user_id": "someone else"}, user="x", prompt_cache_key="k2")
    got = rp.answer("POST", live["path"], {}, raw(live))
    assert isinstance(got, Reply) and got.turn == 1 and got.stream and got.status == 200
    assert b"".join(got.chunks) == b'data: {"choices":[{"delta":{"content":"one"}}]}\n\ndata: [DONE]\n\n'
    # the same request again is not turn 1 again: turn 2 was recorded with another prompt
    again = rp.answer("POST", live["path"], {}, raw(live))
    assert isinstance(again, Mismatch) and again.turn == 2 and again.field == "body.messages[0].content"
    assert again.message.startswith("cassette mismatch: turn 2: body.messages[0].content: differs at character 2")
    two = req("hi again")
    assert rp.answer("POST", two["path"], {}, raw(two)).turn == 2 and rp.used == 2
    done = rp.answer("POST", two["path"], {}, raw(two))
    assert isinstance(done, Mismatch) and done.turn == 3 and "holds 2 requests, all played" in done.why


def test_strict_mismatch_on_path_and_changed_prompt_loose_by_turn() -> None:
    cas = Cassette("r", [turn(1, "hi", "one")])
    other = Replayer(cas).answer("POST", "/v1/responses", {}, raw(req("hi")))
    assert isinstance(other, Mismatch) and (other.turn, other.field) == (1, "path")
    assert other.why == "recorded '/v1/chat/completions', got '/v1/responses'"
    changed = Replayer(cas).answer("POST", "/v1/chat/completions", {}, raw(req("hello")))
    assert isinstance(changed, Mismatch) and changed.field == "body.messages[0].content"
    loose = Replayer(cas, LOOSE).answer("POST", "/v1/chat/completions", {}, raw(req("hello")))
    assert isinstance(loose, Reply) and loose.turn == 1
    with pytest.raises(ValueError, match="strict, loose"):
        Replayer(cas, "fuzzy")


def test_scrubber_keeps_secrets_out_and_paths_portable(tmp_path: Path) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    s = Scrubber.make([DUMMY, "hunter2-secret-value"], ws, home)
    text = (f"write {ws}/hello.txt from {home}/.claude key {DUMMY} and hunter2-secret-value and "
            "sk-ant-api03-" + "abcdefghijklmnop12" * 6)
    assert s.text(text) == (f"write {WORKSPACE}/hello.txt from {HOME}/.claude key <redacted> and <redacted> and "
                            "<redacted>")
    other = Scrubber.make([], tmp_path / "elsewhere", tmp_path / "h2")
    assert other.restore(s.text(f"{ws}/hello.txt")) == f"{tmp_path / 'elsewhere'}/hello.txt"
    assert s.headers({"X-Api-Key": DUMMY, "Authorization": "Bearer x", "x-goog-api-key": "k", "X-Session-Token": "t",
                      "User-Agent": "claude-cli/2.1", "anthropic-version": "2023-06-01"}) == {
        "User-Agent": "claude-cli/2.1", "anthropic-version": "2023-06-01"}
    assert s.query({"key": ["AIzaXXXX"], "alt": ["sse"]}) == {"alt": ["sse"]}
    # a key split across two stream chunks is still caught; a character split across reads is kept whole
    chunks, enc = s.chunks([b"data: key sk-agentrace-", b"model-double end\n\n"])
    assert enc == "utf-8" and chunks == ["data: key <redacted> end\n\n"]
    chunks, enc = s.chunks(["héllo".encode()[:2], "héllo".encode()[2:]])
    assert (chunks, enc) == (["h", "éllo"], "utf-8")
    assert s.chunks([b"\xff\xfe"]) == (["//4="], "base64")


def test_cassette_file_round_trip_and_errors(tmp_path: Path) -> None:
    path = cassette_path(tmp_path, "task:hello/default/claude/r1")
    assert path.name == "task__hello__default__claude__r1.json"
    Cassette("task:hello/default/claude/r1", [turn(1, "hi", "one")], {"agent": "claude"}).save(path)
    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["agent"] == "claude" and data["interactions"][0]["turn"] == 1
    back = Cassette.load(path)
    assert back.run_id == "task:hello/default/claude/r1" and back.turns == [turn(1, "hi", "one")]
    assert back.info == {"agent": "claude"}
    with pytest.raises(CassetteError, match="no cassette"):
        Cassette.load(tmp_path / "missing.json")
    path.write_text(json.dumps({**data, "version": 2}))
    with pytest.raises(CassetteError, match="key 'version': cassette version 2"):
        Cassette.load(path)
    path.write_text(json.dumps({**data, "interactions": [{"request": {}}]}))
    with pytest.raises(CassetteError, match="key 'interactions'"):
        Cassette.load(path)


def test_record_key_and_with_key() -> None:
    assert [provider_url(a) for a in ("claude", "gemini", "codex", "opencode", "copilot", "aider")] == [
        "https://api.anthropic.com", "https://generativelanguage.googleapis.com", *["https://api.openai.com"] * 4]
    env = {"ANTHROPIC_API_KEY": "real-anthropic", "OPENAI_API_KEY": "real-openai"}
    assert record_key(None, "https://api.anthropic.com", env) == "real-anthropic"
    assert record_key(None, "https://api.openai.com", env) == "real-openai"
    assert record_key("http://127.0.0.1:9", "http://127.0.0.1:9", env) is None  # a double: the CLI's headers go on
    assert record_key("https://openrouter.ai/api", "https://openrouter.ai/api", {**env, KEY_ENV: "gw"}) == "gw"
    assert with_key({"Authorization": "Bearer dummy", "X-Api-Key": "dummy", "Accept": "*/*"}, "real") == {
        "Authorization": "Bearer real", "X-Api-Key": "real", "Accept": "*/*"}


BASH = {"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}
STREAM_BODY = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "hi"}],
               "tools": [BASH]}


def test_recording_proxy_streams_records_and_replays_the_same_bytes(tmp_path: Path) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    scrub = Scrubber.make([DUMMY], ws, home)
    with ModelDouble(script()) as upstream, RecordingProxy(upstream.url, scrub) as proxy:
        live = call(proxy.url, "/v1/messages", STREAM_BODY, headers={"x-api-key": DUMMY, "x-app": "cli"})
        probe = call(proxy.url, "/", method="HEAD")
    assert live.status == 200 and live.headers["content-type"] == "text/event-stream"
    assert [e for e, _ in live.events()][0] == "message_start" and probe.status == 200
    sent = [{k.lower(): v for k, v in r["headers"].items()} for r in upstream.requests()]
    assert [h.get("x-app") for h in sent] == ["cli", None]  # the CLI's headers went on
    cas = proxy.cassette("task:t/default/claude/r1", {"agent": "claude"})
    path = cas.save(cassette_path(tmp_path / "cassettes", cas.run_id))
    text = path.read_text()
    assert DUMMY not in text and "x-api-key" not in text.lower()
    assert [i["turn"] for i in cas.interactions] == [1, None]
    recorded = cas.interactions[0]["response"]
    assert recorded["status"] == 200 and recorded["stream"] and "".join(recorded["chunks"]).encode() == live.body
    with ModelDouble(replayer=Replayer(Cassette.load(path), scrub=Scrubber.make([DUMMY], ws, home))) as double:
        again = call(double.url, "/v1/messages", STREAM_BODY, headers={"x-api-key": "another"})
        changed = call(double.url, "/v1/messages", {**STREAM_BODY, "messages": [{"role": "user", "content": "ho"}]})
        head = call(double.url, "/", method="HEAD")
    assert again.status == 200 and again.body == live.body and head.status == 200
    assert changed.status == 400 and "cassette mismatch: turn 2: request" in changed.json()["error"]["message"]
    kinds = [(r["answer"]["kind"], r["answer"].get("turn")) for r in double.requests()]
    assert kinds == [("replay", 1), ("mismatch", 2), ("replay", None)]  # the probe as recorded


class _Capture(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def log_message(self, *args) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Capture.seen.append(dict(self.headers.items()))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_recording_proxy_puts_the_real_key_in_place_of_the_dummy_and_never_writes_it(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        real = "gw-real-key-0123456789"
        with RecordingProxy(f"http://127.0.0.1:{server.server_address[1]}", Scrubber.make([DUMMY, real], None, None),
                            key=real) as proxy:
            got = call(proxy.url, "/v1/chat/completions", {"model": "m"}, headers={"Authorization": f"Bearer {DUMMY}"})
    finally:
        server.shutdown()
        server.server_close()
    assert got.status == 200 and got.json() == {"ok": True}
    assert _Capture.seen[-1]["Authorization"] == f"Bearer {real}"
    cas = proxy.cassette("r", {})
    text = json.dumps(cas.to_dict())
    assert real not in text
    assert DUMMY not in text
    assert cas.interactions[0]["response"]["chunks"] == ['{"ok": true}']


def test_recording_proxy_answers_502_when_the_upstream_is_down(tmp_path: Path) -> None:
    with ModelDouble(script()) as gone:
        url = gone.url
    with RecordingProxy(url, Scrubber()) as proxy:
        got = call(proxy.url, "/v1/chat/completions", {"model": "m"})
    assert got.status == 502 and "upstream" in got.json()["error"]["message"]
    assert comparable(proxy.cassette("r", {}).interactions[0]["request"])["path"] == "/v1/chat/completions"
