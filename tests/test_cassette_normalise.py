"""The cassette normalisers (``model_double/normalise.py``), one by one: each volatile-text mark, volatile keys and
headers, the run's paths and the host's facts as placeholders and back, and a cassette recorded on one machine
and session matched strictly on another; a cassette recorded through the recording proxy holds none of this
machine's facts."""

from __future__ import annotations

import getpass
import json
import platform
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.double import call, script
from helpers.realcli import host_facts_in

from pytest_agentrace.model_double.cassette import Cassette, Mismatch, Replayer, Reply, Scrubber, comparable
from pytest_agentrace.model_double.normalise import (
    HostFacts,
    Portable,
    dashed,
    normalise,
    normalise_headers,
    normalise_text,
)
from pytest_agentrace.model_double.recorder import RecordingProxy
from pytest_agentrace.model_double.runs import session_paths
from pytest_agentrace.model_double.server import ModelDouble

MARKS = [
    # timestamps and dates
    ("at 2026-12-01T12:03:44.123+00:00 ok", "at <time> ok"),
    ("Today's date: 2026-12-01.", "Today's date: <date>."),
    ("Monday, December 1, 2026", "<date>"),
    ("Dec 1st, 2026", "<date>"),
    ("Wed Dec  2 00:23:55 UTC 2026", "<date> <time> UTC 2026"),  # date(1)
    ("Date: Wed, 02 Dec 2026 00:23:55 GMT", "Date: <date> <time> GMT"),  # RFC 2822
    ("took 12:03:44 PM", "took <time>"),
    # ids
    ("session 1b4e28ba-2fa1-11d2-883f-0016d3cca427.", "session <uuid>."),
    ("commit 3f2a9c1d4b5e6f708192a3b4c5d6e7f8", "commit <hex>"),
    ("x-session-id: ses_dcbdcd3afffe8Z4gXGjwH7FtpP", "x-session-id: <session>"),
    ("Chunk ID: a7c267\n", "Chunk ID: <id>\n"),
    ("Process Group PGID: 4242", "Process Group PGID: <pid>"),
    # object addresses, in a repr and in pytest's output
    ("<object object at 0x7f6a085a49e0>", "<object object at 0x<addr>>"),
    ("<function fib at 0x000001D2C3B4A5F0>", "<function fib at 0x<addr>>"),
    # durations and Codex's output size
    ("Wall time: 0.0123 seconds", "Wall time: <duration>"),
    ("in 1.25s (0:00:01)", "in <duration> (<time>)"),
    ("Original token count: 73\nOutput:", "Original token count: <n>\nOutput:"),
    # temp-folder numbers
    ("/tmp/pytest-of-alice/pytest-123/test_x0/ws", "/tmp/pytest-of-<user>/pytest-<n>/test_x0/ws"),
    ("/tmp/pytest-of-root/pytest-7/popen-gw1/t0", "/tmp/pytest-of-<user>/pytest-<n>/popen-gw<n>/t0"),
    ("made /tmp/tmp.uIzUHrcRvn", "made /tmp/tmp.<x>"),
    ("made /tmp/tmpk3j_x9a2/f.txt", "made /tmp/tmp<x>/f.txt"),
    # kernel and platform lines of system prompts
    ("OS Version: Linux 6.8.0-49-generic", "OS Version: Linux <version>"),
    (" - Platform: linux\n - Shell: bash", " - Platform: <platform>\n - Shell: <shell>"),
    ("OS: darwin, Shell: /bin/zsh", "OS: <platform>, Shell: <shell>"),
    ("* Operating System: linux", "* Operating System: <platform>"),
    ("My operating system is: linux", "My operating system is: <platform>"),
]


@pytest.mark.parametrize(("text", "want"), MARKS, ids=[m[0][:30] for m in MARKS])
def test_each_volatile_text_mark(text: str, want: str) -> None:
    assert normalise_text(text) == want
    assert normalise_text(want) == want  # idempotent: a stored (normalised) request normalises to itself


@pytest.mark.parametrize("text", [
    "sleep 2 seconds", "0x1F is 31", "the root cause", "linux kernels", "a tmp folder", "pytest-7", "Debian",
    "Shell: a bash script", "version 2.1.197",
])
def test_substance_is_not_marked(text: str) -> None:
    assert normalise_text(text) == text


def test_volatile_keys_and_headers() -> None:
    body = {"metadata": {"user_id": "u"}, "prompt_cache_key": "k", "input": [
        {"id": "fc_1", "call_id": "c1", "type": "function_call", "arguments": '{"cmd": "date", "ts": "2026-12-01"}'}]}
    assert normalise(body) == {"input": [{"type": "function_call", "arguments": {"cmd": "date", "ts": "<date>"}}]}
    assert normalise(normalise(body)) == normalise(body)
    headers = {"X-Claude-Code-Session-Id": "755a2181-c33c-4c0e-a957-7279f8513b6b", "x-session-affinity": "ses_x",
               "x-client-request-id": "r1", "x-codex-turn-metadata": '{"installation_id": "i"}',
               "thread-id": "01a23422-fc9f-7053-8c60-5aca2fcfd5c5", "User-Agent": "claude-cli/2.1.197",
               "x-meta": '{"session_id": "s", "n": 1}'}
    assert normalise_headers(headers) == {
        "X-Claude-Code-Session-Id": "<id>", "x-session-affinity": "<id>", "x-client-request-id": "<id>",
        "x-codex-turn-metadata": "<id>", "thread-id": "<uuid>", "User-Agent": "claude-cli/2.1.197",
        "x-meta": '{"n":1}'}


ALICE = HostFacts(user="alice", host="alice-laptop", kernel="6.8.0-49-generic",
                  os_version="#50-Ubuntu SMP PREEMPT_DYNAMIC Wed Nov 6 12:00:00 UTC 2024",
                  platform="Linux-6.8.0-49-generic-x86_64-with-glibc2.39",
                  os_names=("Ubuntu 24.04.1 LTS",), os_short="Ubuntu 24.04", user_homes=("/home/alice",))
BOB = HostFacts(user="bob", host="ci", kernel="5.15.0-1071-azure", os_version="#80-Ubuntu SMP Wed Oct 2 2024",
                platform="Linux-5.15.0-1071-azure-x86_64-with-glibc2.35", os_names=("Ubuntu 22.04.5 LTS",),
                os_short="Ubuntu 22.04", user_homes=("/home/runner",))


def test_paths_become_placeholders_and_come_back(tmp_path: Path) -> None:
    base = tmp_path / "pytest-of-alice" / "pytest-12"
    ws, home, out = base / "t_claude_r1_0" / "ws", base / "t_claude_r1_0" / "home", tmp_path / "results"
    p = Portable.make(ws, home, basetemp=base, results=out, facts=ALICE)
    text = (f"cd {ws} && cat {ws}/a.py {ws}.git {ws}2 {home}/.claude/projects/{dashed(str(ws))}/memory "
            f"{base}/other_0/ws {out}/runs/x /home/alice/.bashrc /home/alicex")
    assert p.apply(text) == ("cd {{workspace}} && cat {{workspace}}/a.py {{workspace}}.git {{basetemp}}/t_claude_r1_0/ws2 "
                             "{{home}}/.claude/projects/{{workspace-dashed}}/memory {{basetemp}}/other_0/ws "
                             "{{results}}/runs/x {{user-home}}/.bashrc /home/alicex")
    # another session's folders: the same text, its own values
    base2 = tmp_path / "elsewhere"
    ws2 = base2 / "t_claude_r1_0" / "ws"
    q = Portable.make(ws2, base2 / "h", basetemp=base2, facts=BOB)
    assert q.restore("{{workspace}}/a.py {{home}}/.claude/projects/{{workspace-dashed}}/memory {{user}}@{{host}}") == (
        f"{ws2}/a.py {base2}/h/.claude/projects/{dashed(str(ws2))}/memory bob@ci")
    assert dashed("/tmp/pytest-of-root/pytest-5/t_0/ws") == "-tmp-pytest-of-root-pytest-5-t-0-ws"
    # folders that stand for no one machine are never placeholders, nor is a path inside a tag or another path
    r = Portable.make("/tmp", "/home", facts=HostFacts(user_homes=("/root",)))
    assert r.apply("/tmp/x /home/y /root/.npm <root>/w</root> /x/root") == (
        "/tmp/x /home/y {{user-home}}/.npm <root>/w</root> /x/root")


def test_host_facts_become_placeholders() -> None:
    p = Portable.make(facts=ALICE)
    text = ("Linux alice-laptop 6.8.0-49-generic #50-Ubuntu SMP PREEMPT_DYNAMIC Wed Nov 6 12:00:00 UTC 2024 x86_64\n"
            "alice\nPlatform: Linux-6.8.0-49-generic-x86_64-with-glibc2.39; codex (Ubuntu 24.04.0; x86_64); "
            "Ubuntu 24.04.1 LTS; alice's files; malice; alice-laptop2")
    assert p.apply(text) == ("Linux {{host}} {{kernel}} {{os-version}} x86_64\n{{user}}\nPlatform: {{platform}}; "
                             "codex ({{os}}; x86_64); {{os}}; {{user}}'s files; malice; alice-laptop2")


def test_a_name_that_is_a_word_is_replaced_only_where_it_stands_as_a_name() -> None:
    p = Portable.make(facts=HostFacts(user="root", host="vm"))
    text = ("Fix the root cause at the root of the repo; <root>x</root>\nroot\nvm\n/var/lib/root/x "
            "/tmp/pytest-of-root/pytest-3 root@vm USER=root Linux vm 6.1 the vm module node:vm")
    assert p.apply(text) == ("Fix the root cause at the root of the repo; <root>x</root>\n{{user}}\n{{host}}\n"
                             "/var/lib/{{user}}/x /tmp/pytest-of-{{user}}/pytest-3 {{user}}@{{host}} USER={{user}} "
                             "Linux {{host}} 6.1 the vm module node:vm")


def _request(ws: str, home: str, facts: HostFacts, when: str, addr: str) -> dict:
    env = (f"Working directory: {ws}\nMemory: {home}/.claude/projects/{dashed(ws)}/memory/\n"
           f"OS Version: Linux {facts.kernel}\nToday's date is {when}.")
    out = (f"hi\n{ws}\n{home}\n<object object at {addr}>\n{when} 00:23:55 UTC\n"
           f"Linux {facts.host} {facts.kernel} {facts.os_version} x86_64 GNU/Linux\n{facts.user}\n{facts.host}\n")
    return {"model": "m", "metadata": {"user_id": f"session_{addr}"}, "stream": True, "messages": [
        {"role": "user", "content": [{"type": "text", "text": env}, {"type": "text", "text": "make hello.txt"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{addr}", "name": "Bash",
                                           "input": {"command": "cat hello.txt; pwd; uname -a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{addr}", "content": out}]}]}


def test_recorded_on_one_machine_and_session_replays_strictly_on_another(tmp_path: Path) -> None:
    """Alice records; a CI runner (another user, host, kernel, OS, basetemp, workspace, HOME, day) replays."""
    a_base, b_base = tmp_path / "pytest-of-alice" / "pytest-12", tmp_path / "pytest-of-bob" / "pytest-3"
    a_ws, b_ws = a_base / "hello_claude_r1_0" / "ws", b_base / "hello_claude_r1_0" / "ws"
    a = Scrubber.make([], a_ws, "/home/agentrace", basetemp=a_base, facts=ALICE)
    b = Scrubber.make([], b_ws, "/home/agentrace", basetemp=b_base, facts=BOB)
    raw = json.dumps(_request(str(a_ws), "/home/agentrace", ALICE, "2026-12-01", "0x7f6a085a49e0")).encode()
    stored = a.request("POST", "/v1/messages", {"beta": ["true"]}, {"User-Agent": "claude-cli (alice-laptop)"}, raw)
    text = json.dumps(stored)
    for fact in ("alice", "6.8.0-49", "Ubuntu", "PREEMPT", str(tmp_path), "0x7f6a", "session_"):
        assert fact not in text, fact
    assert stored["headers"] == {"User-Agent": "claude-cli ({{host}})"}
    reply = ['data: {"text": "I wrote {{workspace}}/hello.txt on {{host}} as {{user}}"}\n\n']
    cas = Cassette("task:hello/default/claude/r1", [{"turn": 1, "request": stored, "response": {
        "status": 200, "headers": {"Content-Type": "text/event-stream"}, "chunks": reply, "encoding": "utf-8"}}])
    live = json.dumps(_request(str(b_ws), "/home/agentrace", BOB, "2027-01-15", "0x55d0c0ffee10")).encode()
    got = Replayer(cas, scrub=b).answer("POST", "/v1/messages", {"beta": ["true"]}, live)
    assert isinstance(got, Reply), got
    assert b"".join(got.chunks).decode() == f'data: {{"text": "I wrote {b_ws}/hello.txt on ci as bob"}}\n\n'
    # what differs in substance still does not match
    other = json.dumps(_request(str(b_ws / "sub"), "/home/agentrace", BOB, "2027-01-15", "0x55d0c0ffee10")).encode()
    bad = Replayer(cas, scrub=b).answer("POST", "/v1/messages", {"beta": ["true"]}, other)
    assert isinstance(bad, Mismatch) and bad.field == "body.messages[0].content[0].text"
    # the stored request is what matching compares: normalising it again changes nothing
    assert comparable(stored) == comparable(json.loads(text))


def test_a_recorded_cassette_holds_none_of_this_machines_facts(tmp_path: Path, tmp_path_factory) -> None:
    """Through the recording proxy, with this machine's facts read as the recorder reads them and the basetemp
    of this session: a request and a response full of them are stored with placeholders only."""
    basetemp = tmp_path_factory.getbasetemp()
    ws, home = tmp_path / "ws", tmp_path / "home"
    user, host, kernel = getpass.getuser(), socket.gethostname(), platform.release()
    shown = (f"{ws}\n{home}\n{basetemp}/other0/ws\n{user}\n{host}\nLinux {host} {kernel} {platform.version()} x86_64"
             f"\n/tmp/pytest-of-{user}/pytest-9\n{platform.platform()}\n")
    scrub = Scrubber.make([], ws, home, basetemp=basetemp)
    body = {"model": "m", "max_tokens": 5, "stream": False, "messages": [{"role": "user", "content": shown}]}
    with ModelDouble(script({"steps": [{"text": "DONE"}]})) as upstream, RecordingProxy(upstream.url, scrub) as proxy:
        assert call(proxy.url, "/v1/messages", body, headers={"User-Agent": f"cli ({host}; {kernel})"}).status == 200
    path = proxy.cassette("r", {}).save(tmp_path / "c.json")
    text = path.read_text()
    assert host_facts_in(text, [str(basetemp), str(tmp_path)]) == []
    assert host_facts_in(shown, [str(basetemp)]) != []  # the check finds them where they are
    stored = json.loads(text)["interactions"][0]["request"]["body"]["messages"][0]["content"]
    assert stored.startswith("{{workspace}}\n{{home}}\n{{basetemp}}/other0/ws\n{{user}}\n{{host}}\nLinux {{host}} "
                             "{{kernel}}")


def test_session_paths_from_the_run_layout(tmp_path: Path) -> None:
    base = tmp_path / "basetemp"
    ctx = SimpleNamespace(home=base / "hello_claude_r1_0" / "home", run_dir=tmp_path / "out" / "runs" / "hello" /
                          "default" / "claude" / "1")
    assert session_paths(ctx) == {"basetemp": base, "results": tmp_path / "out"}
    assert session_paths(SimpleNamespace(home=tmp_path / "h", run_dir=tmp_path / "r")) == {"basetemp": None,
                                                                                        "results": None}


def test_a_cassette_recorded_before_the_placeholders_still_matches_where_it_was_recorded(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    body = _request(str(ws), "/home/agentrace", ALICE, "2026-12-01", "0x7f6a085a49e0")
    old = Cassette("r", [{"turn": 1, "request": {"method": "POST", "path": "/v1/messages", "query": {}, "body": body},
                          "response": {"status": 200, "headers": {}, "chunks": ["{}"], "encoding": "utf-8"}}])
    here = Scrubber.make([], ws, "/home/agentrace", facts=ALICE)
    assert isinstance(Replayer(old, scrub=here).answer("POST", "/v1/messages", {}, json.dumps(body).encode()), Reply)
