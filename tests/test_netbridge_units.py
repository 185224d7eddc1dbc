"""The network bridge's failure branches (``run.netbridge``), without a session or a namespace.

Real sockets throughout (socket pairs, 127.0.0.1 listeners on port 0, a unix socket in ``tmp_path`` standing for
the session's gate); only the call that fails is replaced: ``threading.Thread.start`` raising ``RuntimeError`` as at
the run's process limit, or a listening socket whose ``accept`` runs a script (``EMFILE`` once, the server closed).
Every read has a timeout and every thread is joined with one, so a wrong behaviour fails instead of hanging.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_agentrace.run import netbridge

_RealThread = threading.Thread
WAIT = 3.0  # seconds any read or join may take before the test calls it a hang


def _until_end(sock: socket.socket, timeout: float = WAIT) -> tuple[bytes, str]:
    """What ``sock`` gives until its peer ends it: ``(bytes, how)``, ``how`` one of ``eof``, ``reset``, or
    ``timeout`` when it had not ended after ``timeout`` seconds."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return data, "timeout"
    except ConnectionResetError:
        return data, "reset"
    return data, "eof"


def _recv_exactly(sock: socket.socket, size: int, timeout: float = WAIT) -> bytes:
    """``size`` bytes from ``sock``, or fewer when it ends or ``timeout`` seconds pass."""
    sock.settimeout(timeout)
    data = b""
    try:
        while len(data) < size and (chunk := sock.recv(size - len(data))):
            data += chunk
    except TimeoutError:
        pass
    return data


def _no_thread_for(monkeypatch: pytest.MonkeyPatch, target: Callable[..., object], times: int) -> list[str]:
    """Make ``threading.Thread(target=target).start()`` raise ``RuntimeError("can't start new thread")`` the next
    ``times`` times (threads of other targets start as usual); the list returned gets ``"refused"`` or
    ``"started"`` for each start of ``target``."""
    starts: list[str] = []

    class Flaky(_RealThread):
        def __init__(self, *args, target=None, **kwargs) -> None:
            super().__init__(*args, target=target, **kwargs)
            self.flaky_target = target

        def start(self) -> None:
            if self.flaky_target is target:
                if starts.count("refused") < times:
                    starts.append("refused")
                    raise RuntimeError("can't start new thread")
                starts.append("started")
            super().start()

    monkeypatch.setattr(threading, "Thread", Flaky)
    return starts


class _Scripted:
    """A listening socket whose ``accept`` calls run ``steps`` in turn, each given the real socket; an ``accept``
    past the last step raises ``AssertionError`` (not an ``OSError``: it leaves ``_accept``'s loop and fails the
    test)."""

    def __init__(self, real: socket.socket, steps: list[Callable[[socket.socket], tuple[socket.socket, object]]]):
        self.real, self.steps = real, list(steps)

    def accept(self) -> tuple[socket.socket, object]:
        if not self.steps:
            raise AssertionError("accept called again after the script ended (the loop did not return)")
        return self.steps.pop(0)(self.real)

    def fileno(self) -> int:
        return self.real.fileno()


def _closed_then_accept(real: socket.socket) -> tuple[socket.socket, object]:
    """The server closed (as by its owner), then ``accept`` on it: ``OSError`` (EBADF)."""
    real.close()
    return real.accept()


def _in_thread(fn: Callable[..., object], *args: object) -> tuple[threading.Thread, list[BaseException]]:
    """``fn(*args)`` started in a real thread; the list gets what it raised, if anything."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            fn(*args)
        except BaseException as exc:  # handed to the test, which asserts there was none
            raised.append(exc)

    thread = _RealThread(target=run, daemon=True)
    thread.start()
    return thread, raised


def _serve_and_close(conn: socket.socket) -> None:
    with conn:
        conn.sendall(b"served")


# --- _accept -------------------------------------------------------------------------------------------------------

def test_accept_closes_a_connection_no_thread_starts_for_and_serves_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first connection's handler thread cannot start: that connection is closed at once (its client sees EOF
    before the loop accepts again, so not by a later garbage collection), and the next connection is served."""
    starts = _no_thread_for(monkeypatch, _serve_and_close, times=1)
    seen_before_second_accept: list[tuple[bytes, str]] = []

    def check_first_then_accept(real: socket.socket) -> tuple[socket.socket, object]:
        seen_before_second_accept.append(_until_end(first, timeout=1.0))
        return real.accept()

    with socket.create_server(("127.0.0.1", 0)) as real:
        port = real.getsockname()[1]
        first = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        second = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        with first, second:
            netbridge._accept(_Scripted(real, [lambda s: s.accept(), check_first_then_accept, _closed_then_accept]),
                              _serve_and_close)
            assert seen_before_second_accept == [(b"", "eof")]
            assert _until_end(second) == (b"served", "eof")
    assert starts == ["refused", "started"]


def test_accept_waits_and_retries_when_out_of_descriptors_then_returns_once_closed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``accept`` failing with EMFILE: a sleep, then ``accept`` again, which serves the waiting connection; an
    ``accept`` failing on a closed server (``fileno() < 0``) ends the loop, without a sleep."""
    events: list[str] = []
    monkeypatch.setattr(netbridge, "time", SimpleNamespace(sleep=lambda secs: events.append(
        "sleep" if 0 < secs <= 1 else f"sleep {secs!r}")))

    def emfile(real: socket.socket) -> tuple[socket.socket, object]:
        events.append("accept: EMFILE")
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    def accept(real: socket.socket) -> tuple[socket.socket, object]:
        events.append("accept")
        return real.accept()

    def closed(real: socket.socket) -> tuple[socket.socket, object]:
        events.append("accept: closed")
        return _closed_then_accept(real)

    with socket.create_server(("127.0.0.1", 0)) as real:
        client = socket.create_connection(real.getsockname(), timeout=WAIT)
        with client:
            netbridge._accept(_Scripted(real, [emfile, accept, closed]), _serve_and_close)
            assert real.fileno() == -1
            assert _until_end(client) == (b"served", "eof")
    assert events == ["accept: EMFILE", "sleep", "accept", "accept: closed"]


# --- _join ---------------------------------------------------------------------------------------------------------

def test_join_closes_both_sockets_when_the_back_direction_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    starts = _no_thread_for(monkeypatch, netbridge._pipe, times=1)
    a, a_peer = socket.socketpair()
    b, b_peer = socket.socketpair()
    with a_peer, b_peer:
        thread, raised = _in_thread(netbridge._join, a, b)
        thread.join(WAIT)
        assert not thread.is_alive(), "_join hung"
        assert raised == [] and starts == ["refused"]
        assert (a.fileno(), b.fileno()) == (-1, -1)
        assert _until_end(a_peer) == (b"", "eof") and _until_end(b_peer) == (b"", "eof")


# --- _serve_forward ------------------------------------------------------------------------------------------------

CONNECT = b"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n"


class _Gate:
    """One connection's stand-in for the session's gate on a unix socket at ``path``: reads the request's head,
    sends ``answer``; then, with ``echo``, answers each piece of data with ``pong:`` + it until EOF; with ``hold``,
    keeps its end open until the bridge ends the connection; else closes at once. ``request`` is the head read,
    ``received`` the pieces echoed, ``end`` how the bridge's side ended (``_until_end``'s ``how``)."""

    def __init__(self, path: Path, answer: bytes, echo: bool = False, hold: bool = True) -> None:
        self.answer, self.echo, self.hold = answer, echo, hold
        self.request, self.received, self.end = b"", [], ""
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(1)
        self.server.settimeout(WAIT)
        self.thread, self.raised = _in_thread(self._serve)

    def _serve(self) -> None:
        with self.server, self.server.accept()[0] as conn:
            conn.settimeout(WAIT)
            while b"\r\n\r\n" not in self.request and (chunk := conn.recv(4096)):
                self.request += chunk
            conn.sendall(self.answer)
            if self.echo:
                while data := conn.recv(65536):
                    self.received.append(data)
                    conn.sendall(b"pong:" + data)
                self.end = "eof"
            elif self.hold:
                self.end = _until_end(conn)[1]

    def finished(self) -> bool:
        self.thread.join(WAIT)
        return not self.thread.is_alive() and self.raised == []


def _forward(gate_path: Path) -> tuple[socket.socket, socket.socket, threading.Thread, list[BaseException]]:
    """``_serve_forward`` for ``example.test:443`` through the gate at ``gate_path`` in a thread of its own:
    ``(conn, client, thread, raised)``, ``conn`` the bridge's end of the connection (held here, so that only
    ``_serve_forward`` can close it, not a garbage collection), ``client`` the client's end."""
    conn, client = socket.socketpair()
    thread, raised = _in_thread(netbridge._serve_forward, str(gate_path), "example.test", 443, conn)
    return conn, client, thread, raised


@pytest.mark.parametrize(("answer", "hold"), [
    (b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", True),
    (b"HTTP/1.1 502 Bad Gateway\r\n\r\n", True),
    (b"x" * (netbridge.HEAD_CAP + 1), True),  # no blank line within HEAD_CAP bytes; the gate still open
    (b"HTTP/1.1 200 OK\r\nX-Pad: " + b"x" * netbridge.HEAD_CAP + b"\r\n\r\n", True),  # its blank line past HEAD_CAP
    (b"HTTP/1.1 200 Connection established\r\n", False),  # the gate ends before its blank line
], ids=["403", "502", "over-cap-no-blank-line", "over-cap-200", "gate-ends-early"])
def test_forward_closes_the_client_when_the_gate_does_not_answer_200(tmp_path: Path, answer: bytes,
                                                                      hold: bool) -> None:
    gate = _Gate(tmp_path / "g.sock", answer, hold=hold)
    conn, client, thread, raised = _forward(tmp_path / "g.sock")
    with client:
        assert _until_end(client) == (b"", "eof")  # nothing of the gate's answer reaches the client
        thread.join(WAIT)
        assert not thread.is_alive() and raised == [] and conn.fileno() == -1
    assert gate.finished() and gate.request == CONNECT
    if hold:
        assert gate.end in ("eof", "reset")  # the bridge closed its connection to the gate too


def test_forward_sends_the_bytes_after_the_gates_200_first_then_relays(tmp_path: Path) -> None:
    """The far side's first bytes, read along with the gate's answer, reach the client before anything relayed;
    then the tunnel carries data both ways, and ends when the client ends it."""
    gate = _Gate(tmp_path / "g.sock", b"HTTP/1.1 200 Connection established\r\n\r\nSSH-2.0-far\r\n", echo=True)
    conn, client, thread, raised = _forward(tmp_path / "g.sock")
    with client:
        assert _recv_exactly(client, 13) == b"SSH-2.0-far\r\n"
        client.sendall(b"ping")
        assert _recv_exactly(client, 9) == b"pong:ping"
        client.shutdown(socket.SHUT_WR)
        assert _until_end(client) == (b"", "eof")
        thread.join(WAIT)
        assert not thread.is_alive() and raised == [] and conn.fileno() == -1
    assert gate.finished() and gate.request == CONNECT and gate.received == [b"ping"]


def test_forward_takes_a_200_answer_of_exactly_head_cap_bytes(tmp_path: Path) -> None:
    """The cap's edge: an answer whose blank line ends at byte HEAD_CAP opens the tunnel."""
    head = b"HTTP/1.1 200 OK\r\nX-Pad: \r\n\r\n"
    answer = head[:-4] + b"x" * (netbridge.HEAD_CAP - len(head)) + b"\r\n\r\n"
    assert len(answer) == netbridge.HEAD_CAP
    gate = _Gate(tmp_path / "g.sock", answer, echo=True)
    conn, client, thread, raised = _forward(tmp_path / "g.sock")
    with client:
        client.sendall(b"hi")
        assert _recv_exactly(client, 7) == b"pong:hi"
        client.shutdown(socket.SHUT_WR)
        assert _until_end(client) == (b"", "eof")
        thread.join(WAIT)
        assert not thread.is_alive() and raised == [] and conn.fileno() == -1
    assert gate.finished() and gate.received == [b"hi"]
