"""Network by allow-list (``run.network``, ``run.netproxy``, ``run.netbridge``) and keyed model doubles.

A listener on the host's 127.0.0.1 stands for "everything the run should not reach" (a sibling's model double, a
local service, the metadata service); a custom agent of kind ``plain`` (allowed nothing by default) tries to reach it
directly, through the proxy its environment names, and through an abstract unix socket of the host.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script
from helpers.double import call, recorded

from pytest_agentrace.model_double import netns
from pytest_agentrace.model_double.script import parse_script
from pytest_agentrace.model_double.server import ModelDouble
from pytest_agentrace.run import network
from pytest_agentrace.run.netproxy import Rule
from pytest_agentrace.run.sandbox import probe

needs_netns = pytest.mark.skipif(netns.probe()[0] is None, reason=f"no network namespace here: {netns.probe()[1]}")
needs_sandbox = pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")

PROBER = r"""
import json, os, socket, urllib.request
port = int(os.environ["TARGET_PORT"])
got = {}
def tcp(host, port):
    try:
        with socket.create_connection((host, port), timeout=3) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            data = s.recv(200).decode()
            return "REACHED" if "REACHED" in data else "connected: " + data
    except Exception as exc:
        return "failed: " + type(exc).__name__
def via_proxy(url):
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode()
    except urllib.error.HTTPError as exc:
        return f"failed: HTTP {exc.code}"
    except Exception as exc:
        return "failed: " + type(exc).__name__
got["direct"] = tcp("127.0.0.1", port)
os.environ.pop("no_proxy", None); os.environ.pop("NO_PROXY", None)
got["proxy"] = via_proxy(f"http://127.0.0.1:{port}/") if os.environ.get("HTTP_PROXY") else "no proxy"
try:
    u = socket.socket(socket.AF_UNIX)
    u.settimeout(3)
    u.connect("\0" + os.environ["ABSTRACT"])
    got["abstract"] = u.recv(100).decode() or "connected"
except Exception as exc:
    got["abstract"] = "failed: " + type(exc).__name__
print("RESULT " + json.dumps(got))
"""


class _Reached(threading.Thread):
    """An HTTP server on the host's loopback that answers REACHED, and an abstract unix socket that does too."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.name_abstract = f"agentrace-test-{os.getpid()}-{self.port}"
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind("\0" + self.name_abstract)
        self.unix.listen()
        self.stopped = False

    def _serve(self, sock: socket.socket, http: bool) -> None:
        sock.settimeout(0.2)
        while not self.stopped:
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            if http:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nREACHED")
            else:
                conn.sendall(b"REACHED")
            conn.close()

    def run(self) -> None:
        threading.Thread(target=self._serve, args=(self.unix, False), daemon=True).start()
        self._serve(self.tcp, True)

    def close(self) -> None:
        self.stopped = True
        self.tcp.close()
        self.unix.close()


@pytest.fixture
def reached():
    server = _Reached()
    server.start()
    yield server
    server.close()


def probe_task(pytester: pytest.Pytester, reached: _Reached, network_key: str = "") -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(pytester.path / "prober.py", PROBER)
    (pytester.path / "task.yaml").write_text(
        "name: net\ndescription: probe\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        f"env: {{TARGET_PORT: '{reached.port}', ABSTRACT: {reached.name_abstract}}}\n"
        f"agents:\n  - {{name: prober, command: '{pytester.path / 'prober.py'}'{network_key}}}\n")


def results(pytester: pytest.Pytester) -> list[tuple[dict, dict]]:
    out = []
    for run in sorted((pytester.path / "out" / "runs").glob("net/default/prober/*/run.json")):
        raw = (run.parent / "raw.out").read_text()
        got = next(json.loads(line[7:]) for line in raw.splitlines() if line.startswith("RESULT "))
        out.append((got, json.loads(run.read_text())))
    return out


# --- the proxy and the bridge, without a session -------------------------------------------------------------------

def test_allow_list_takes_the_adapter_hosts_base_urls_and_extra_entries() -> None:
    rules = network.allow_list("claude", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9999/r/x", "PATH": "/bin"},
                               ["pypi.org"], ["https://gw.example.com/v1"])
    assert Rule("api.anthropic.com", 443) in rules and Rule("127.0.0.1", 9999) in rules
    assert Rule("pypi.org") in rules and Rule("gw.example.com", 443) in rules
    assert network.allow_list("plain", {}) == []
    assert Rule("*.githubcopilot.com", 443).matches("proxy.individual.githubcopilot.com", 443)
    assert not Rule("*.githubcopilot.com", 443).matches("githubcopilot.com.evil.net", 443)


def test_a_bad_network_key_names_file_key_and_fix(tmp_path: Path) -> None:
    from pytest_agentrace.errors import SpecError

    with pytest.raises(SpecError, match="network.mode.*unknown network mode 'open'"):
        network.parse_network(tmp_path / "t.yaml", "network", {"mode": "open"})
    with pytest.raises(SpecError, match=r"network.allow\[0\].*out of range"):
        network.parse_network(tmp_path / "t.yaml", "network", {"allow": ["h:70000"]})
    assert network.parse_network(tmp_path / "t.yaml", "network", "none").mode == "none"


@needs_netns
def test_the_bridge_lets_through_the_allowed_and_counts_every_contact(tmp_path: Path, reached: _Reached) -> None:
    other = _Reached()
    other.start()
    try:
        rules = network.allow_list("plain", {"X_BASE_URL": f"http://127.0.0.1:{reached.port}"}, ["example.test:80"])
        net = network.open_run(rules, {("example.test", 80): ("127.0.0.1", reached.port)})
        child = (
            "import urllib.request as u, socket\n"
            "def get(url, proxy):\n"
            "    try:\n"
            "        h = u.ProxyHandler() if proxy else u.ProxyHandler({})\n"
            "        return u.build_opener(h).open(url, timeout=5).read().decode()\n"
            "    except Exception as e:\n"
            "        return 'failed'\n"
            f"print(get('http://127.0.0.1:{reached.port}/', False), get('http://127.0.0.1:{other.port}/', False),\n"
            f"      get('http://example.test/', True), get('http://127.0.0.1:{other.port}/', True))\n")
        argv, env = net.wrap([sys.executable, "-c", child], dict(os.environ), netns.probe()[0])
        env.pop("no_proxy")
        env["NO_PROXY"] = f"127.0.0.1:{reached.port}"
        res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert res.returncode == 0, res.stderr
        assert res.stdout.split() == ["REACHED", "failed", "REACHED", "failed"]
        contacts = net.close()
        assert {"host": "example.test", "port": 80, "allowed": True, "count": 1} in contacts
        assert {"host": "127.0.0.1", "port": other.port, "allowed": False, "count": 1} in contacts
        assert net.blocked_reason() == f"network: blocked 127.0.0.1:{other.port} (allow it with network.allow)"
        assert not net.gate.path.parent.exists()
    finally:
        other.close()


# --- keyed model doubles ------------------------------------------------------------------------------------------

CLAUDE_TURN_ONE = recorded("claude-code-2.1.197")[1]["body"]  # a real first request, with Claude Code's tools


def _post(url: str, headers: dict[str, str]) -> tuple[int, dict]:
    reply = call(url, "/v1/messages", {**CLAUDE_TURN_ONE, "stream": False}, headers=headers)
    return reply.status, json.loads(reply.body)


def test_a_double_answers_only_its_own_runs_key(tmp_path: Path) -> None:
    """Requests without the run's key get 401 and change nothing: the scripted 429 (counted per conversation) is
    still there for the run's own first request, and the run's request log holds only the run's requests."""
    script = parse_script({"steps": [{"shell": "true", "error": {"status": 429, "times": 1, "retry_after": 0}},
                                     {"text": "ONE"}]}, "<t>")
    log, rejected = tmp_path / "log.jsonl", tmp_path / "rejected.jsonl"
    with ModelDouble(script, log, key="sk-run-a", rejected_log=rejected) as double:
        assert _post(double.url, {})[0] == 401
        assert _post(double.url, {"x-api-key": "sk-run-b"})[0] == 401
        assert _post(double.url, {"authorization": "Bearer sk-run-b"})[0] == 401
        assert not log.exists()  # the run's own request log is untouched
        assert [r["answer"]["status"] for r in map(json.loads, rejected.read_text().splitlines())] == [401] * 3
        assert _post(double.url, {"x-api-key": "sk-run-a"})[0] == 429  # the script's error was not used up
        status, reply = _post(double.url, {"authorization": "Bearer sk-run-a"})
        assert status == 200 and reply["content"][-1]["type"] == "tool_use"  # step 1 of the script, as scripted
        assert len(log.read_text().splitlines()) == 2


# --- sessions ------------------------------------------------------------------------------------------------------

@needs_sandbox
def test_provider_mode_reaches_nothing_of_the_host(pytester: pytest.Pytester, reached: _Reached, xdist) -> None:
    """The default: a plain agent reaches neither a host listener (directly or through its proxy) nor an abstract
    unix socket; the refused contact is in run.json."""
    probe_task(pytester, reached)
    out = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-reps", "2", *xdist).stdout.str()
    assert "agentrace: network: provider (2 runs: its provider's hosts only, none for a plain command); 2 runs had a contact refused" in out
    got = results(pytester)
    assert len(got) == 2
    for res, run in got:
        assert res["direct"].startswith("failed") and res["proxy"] == "failed: HTTP 403", res
        assert res["abstract"].startswith("failed"), res
        assert run["extra"]["network_mode"] == "provider"
        assert {"host": "127.0.0.1", "port": reached.port, "allowed": False, "count": 1} in run["extra"]["network"]
        assert f"network: blocked 127.0.0.1:{reached.port}" in run["reason"]


@needs_sandbox
def test_an_allowed_listener_is_reached_through_the_proxy(pytester: pytest.Pytester, reached: _Reached, xdist) -> None:
    probe_task(pytester, reached, f", network: {{allow: ['127.0.0.1:{reached.port}']}}")
    pytester.runpytest("--agentrace", "--agentrace-out", "out", *xdist)
    (res, run), = results(pytester)
    assert res["proxy"] == "REACHED" and res["direct"] == "REACHED", res  # a forward listens on its port inside
    assert res["abstract"].startswith("failed")
    contacts = run["extra"]["network"]
    assert all(c["allowed"] for c in contacts) and sum(c["count"] for c in contacts) == 2


@needs_sandbox
def test_host_mode_is_the_hosts_network(pytester: pytest.Pytester, reached: _Reached) -> None:
    probe_task(pytester, reached)
    out = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-network", "host").stdout.str()
    assert "agentrace: network: host (1 run: the host's network, unfiltered)" in out
    (res, run), = results(pytester)
    assert res["direct"] == "REACHED" and res["proxy"] == "no proxy"
    assert run["extra"]["network_mode"] == "host" and "network" not in run["extra"]


@needs_netns
def test_none_mode_without_the_sandbox_has_loopback_only(pytester: pytest.Pytester, reached: _Reached) -> None:
    probe_task(pytester, reached, ", network: none")
    pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-sandbox", "off")
    (res, run), = results(pytester)
    assert res["direct"].startswith("failed") and res["abstract"].startswith("failed")
    assert run["extra"]["network_mode"] == "none"


@needs_sandbox
def test_checks_have_loopback_only(pytester: pytest.Pytester, reached: _Reached) -> None:
    """The test command runs the agent's code: by default it reaches nothing of the host either."""
    make_repo(pytester.path / "repo", {**BUGGY_REPO, "test_net.py": (
        "import os, socket\n"
        "def test_reach():\n"
        "    socket.create_connection(('127.0.0.1', int(os.environ['TARGET_PORT'])), timeout=3)\n")})
    (pytester.path / "task.yaml").write_text(
        "name: net\ndescription: probe\nrepo: repo\ntest_command: python -m pytest -q test_net.py\n"
        f"env: {{TARGET_PORT: '{reached.port}'}}\nagents: [oracle]\nsolution_patch: ''\n")
    pytester.runpytest("--agentrace", "--agentrace-out", "out")
    run = json.loads(next((pytester.path / "out" / "runs").glob("net/default/oracle/1/run.json")).read_text())
    assert run["checks"]["tests"]["passed"] is False and run["extra"]["check_network_mode"] == "none"


@needs_sandbox
def test_checks_reach_what_the_tasks_network_allows(pytester: pytest.Pytester, reached: _Reached) -> None:
    make_repo(pytester.path / "repo", {**BUGGY_REPO, "test_net.py": (
        "import os, urllib.request\n"
        "def test_reach():\n"
        "    url = 'http://127.0.0.1:' + os.environ['TARGET_PORT'] + '/'\n"
        "    assert urllib.request.urlopen(url, timeout=5).read() == b'REACHED'\n")})
    (pytester.path / "task.yaml").write_text(
        "name: net\ndescription: probe\nrepo: repo\ntest_command: python -m pytest -q test_net.py\n"
        f"env: {{TARGET_PORT: '{reached.port}'}}\nnetwork: {{allow: ['127.0.0.1:{reached.port}']}}\n"
        "agents: [oracle]\nsolution_patch: ''\n")
    pytester.runpytest("--agentrace", "--agentrace-out", "out")
    run = json.loads(next((pytester.path / "out" / "runs").glob("net/default/oracle/1/run.json")).read_text())
    assert run["checks"]["tests"]["passed"] is True and run["extra"]["check_network_mode"] == "provider"
    assert run["extra"]["check_network"] == [{"host": "127.0.0.1", "port": reached.port, "allowed": True, "count": 1}]


def test_sweep_removes_gone_processes_gate_folders_only(tmp_path: Path) -> None:
    """A gate folder of a process that is gone (a SIGKILLed session) is removed; a live process's, a link, another
    name and a folder of another owner are kept."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    dead = tmp_path / f"agentrace-net-{dead_pid}-abc"
    alive = tmp_path / f"agentrace-net-{os.getpid()}-def"
    legacy = tmp_path / "agentrace-net-1aihe3od"
    for folder in (dead, alive, legacy):
        folder.mkdir()
        (folder / "proxy.sock").write_text("")
    target = tmp_path / "kept"
    target.mkdir()
    os.symlink(target, tmp_path / f"agentrace-net-{dead_pid}-link")
    assert network.sweep(tmp_path) == [dead]
    assert not dead.exists() and alive.is_dir() and legacy.is_dir() and target.is_dir()
    assert (tmp_path / f"agentrace-net-{dead_pid}-link").is_symlink()
    run = network.open_run([])
    try:
        assert run.gate.path.parent.name.startswith(f"agentrace-net-{os.getpid()}-")
    finally:
        run.close()
    assert not run.gate.path.parent.exists()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def test_a_host_the_proxy_cannot_reach_is_counted_and_named(tmp_path: Path, reached: _Reached) -> None:
    """Allowed but unreachable (nothing listens): every request fails with 502 and is counted as ``failed``; the run
    is named unreachable only while no allowed host was reached."""
    port = closed_port()
    rules = network.allow_list("plain", {}, [f"127.0.0.1:{port}", f"127.0.0.1:{reached.port}"])
    child = ("import sys, urllib.request as u\n"
             "for url in sys.argv[1:]:\n"
             "    try:\n"
             "        print(u.build_opener(u.ProxyHandler()).open(url, timeout=5).read().decode())\n"
             "    except Exception as e:\n"
             "        print('failed', getattr(e, 'code', type(e).__name__))\n")
    for urls, unreachable in (([f"http://127.0.0.1:{port}/"] * 3, True),
                              ([f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{reached.port}/"], False)):
        net = network.open_run(rules)
        argv, env = net.wrap([sys.executable, "-c", child, *urls], dict(os.environ), netns.probe()[0])
        env.pop("no_proxy", None)
        env.pop("NO_PROXY", None)
        res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert res.stdout.split("\n")[0] == "failed 502", res.stdout + res.stderr
        contacts = net.close()
        failed = {"host": "127.0.0.1", "port": port, "allowed": True, "count": len(urls) if unreachable else 1,
                  "failed": len(urls) if unreachable else 1}
        assert failed in contacts
        if unreachable:
            assert net.unreachable_reason() == (f"network: cannot reach 127.0.0.1:{port} from this machine (3 requests "
                                                "failed; the provider is unreachable, not the agent at fault)")
        else:
            assert net.unreachable_reason() is None
    # what a run cannot pass off as this machine's fault: a host the harness reaches when it tries again, a port
    # the allow-list does not name, a wildcard's sub-domain
    net = network.open_run(network.allow_list("plain", {}, [f"127.0.0.1:{reached.port}", "*.invalid", "localhost"]))
    try:
        net.gate.failed.update({("127.0.0.1", reached.port): 2, ("nothing.invalid", 443): 1, ("localhost", port): 1})
        assert net.gate.unreachable() == [("127.0.0.1", reached.port)]
        assert net.unreachable_reason() is None  # the harness reaches it now: the run's own failure
    finally:
        net.close()


RETRIER = r"""
import os, sys, time, urllib.request as u
for k in ("no_proxy", "NO_PROXY"):
    os.environ.pop(k, None)
while True:  # as codex does without its provider: "Reconnecting... waiting for network", until it is stopped
    try:
        u.build_opener(u.ProxyHandler()).open(os.environ["PROVIDER_URL"], timeout=5)
    except Exception as exc:
        print("Reconnecting...", exc, flush=True)
    time.sleep(0.3)
"""


@needs_sandbox
def test_an_agent_that_times_out_for_want_of_its_provider_is_an_error(pytester: pytest.Pytester, xdist) -> None:
    """The run's allowed provider cannot be reached (every request through the proxy failed, none connected) and the
    agent retries until its time is up: that is this machine's fault, an ``error`` naming the host, not the agent's
    timeout (a reached host keeps the timeout the agent's: ``Gate.unreachable``, tested above)."""
    port = closed_port()
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(pytester.path / "retrier.py", RETRIER)
    (pytester.path / "task.yaml").write_text(
        "name: net\ndescription: retry\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\ntimeout: 4\n"
        f"env: {{PROVIDER_URL: 'http://127.0.0.1:{port}/v1'}}\n"
        f"agents:\n  - {{name: retrier, command: '{pytester.path / 'retrier.py'}', "
        f"network: {{allow: ['127.0.0.1:{port}']}}}}\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", *xdist)
    res.assert_outcomes(errors=1)
    run = json.loads(next((pytester.path / "out" / "runs").glob("net/default/retrier/1/run.json")).read_text())
    assert run["status"] == "error" and run["reason"].startswith(f"network: cannot reach 127.0.0.1:{port} from this machine (")
    (entry,) = run["extra"]["network"]
    assert entry["allowed"] and entry["failed"] == entry["count"] >= 2


def test_a_run_that_asks_for_thousands_of_hosts_keeps_a_small_record(tmp_path: Path) -> None:
    """Each distinct host a run asks for is an entry of its record up to ``MAX_CONTACTS``; the rest are counted as
    one ``<other hosts>`` entry, and a host name longer than a DNS name can be is a bad request, not an entry."""
    from pytest_agentrace.run import netproxy

    net = network.open_run(network.allow_list("plain", {}, []))

    def ask(host: str) -> bytes:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(10)
            s.connect(str(net.gate.path))
            s.sendall(f"CONNECT {host}:443 HTTP/1.1\r\n\r\n".encode())
            return s.recv(200)

    try:
        assert ask("h" * 300 + ".test").startswith(b"HTTP/1.1 400 ")
        for i in range(netproxy.MAX_CONTACTS + 50):
            assert ask(f"host{i}.test").startswith(b"HTTP/1.1 403 ")
        ask("host0.test")
    finally:
        contacts = net.close()
    assert len(contacts) == netproxy.MAX_CONTACTS + 1
    assert contacts[0] == {"host": "host0.test", "port": 443, "allowed": False, "count": 2}
    assert contacts[-1] == {"host": "<other hosts>", "port": 0, "allowed": False, "count": 50}
    assert not any(len(c["host"]) > netproxy.MAX_HOST for c in contacts)
    assert net.blocked_reason() == f"network: blocked host0.test:443 and {netproxy.MAX_CONTACTS} more (allow it with network.allow)"
