"""Inside a run's network namespace (``provider`` mode): the only way out, over the unix socket of its ``Gate``.

The namespace has loopback only. Before the agent starts, this module (run as ``python -m
pytest_agentrace.run.netbridge``) brings ``lo`` up and listens, inside the namespace:

- on ``127.0.0.1:PROXY`` (``--proxy``): an HTTP proxy endpoint; each connection is relayed byte for byte to the
  gate's socket, where the session's ``netproxy`` reads the CONNECT or absolute-form request and decides. The agent
  finds it through ``HTTPS_PROXY`` / ``HTTP_PROXY`` (``proxy_env``);
- on ``127.0.0.1:PORT`` for each ``--forward PORT=HOST:HOSTPORT``: a plain TCP forward, sent as ``CONNECT
  HOST:HOSTPORT`` through the gate. A base URL on the host's loopback (``http://127.0.0.1:PORT``: a model double, a
  local gateway) then works unchanged for every CLI, proxy-aware or not, and still passes the allow-list.

Each listener and each connection is served by a thread of its own over blocking sockets: the bridge starts at
every run, and importing an event loop (asyncio) cost each run about a tenth of a second of CPU.

Then it runs the agent as its child and exits with the agent's exit code (a signal N as ``128 + N``), passing
SIGTERM and SIGINT on, as ``model_double.netns`` does for offline runs.

Usage (built by ``wrap``)::

    python -m pytest_agentrace.run.netbridge --socket S --proxy 3128 [--forward 8080=127.0.0.1:8080] -- ARGV...
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from pytest_agentrace.run.launch import START_FD_ENV, helper_fault, launched, start_child, undumpable

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds pytest_agentrace/
NO_PROXY = "localhost,127.0.0.1,::1"


def loopback_up() -> None:
    """Bring ``lo`` up in the current network namespace (``ip link set lo up`` without needing iproute2)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, _SIOCGIFFLAGS, req))[1]
        if flags & _IFF_UP:  # bwrap --unshare-net brings it up; without capabilities it could not be set again
            return
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def proxy_env(port: int) -> dict[str, str]:
    """The variables that send an agent's HTTP(S) through the bridge's proxy endpoint on ``port``; loopback stays
    direct (the forwards listen there)."""
    url = f"http://127.0.0.1:{port}"
    return {"HTTPS_PROXY": url, "HTTP_PROXY": url, "https_proxy": url, "http_proxy": url,
            "ALL_PROXY": url, "all_proxy": url, "NO_PROXY": NO_PROXY, "no_proxy": NO_PROXY}


def wrap(argv: list[str], socket_path: str, proxy_port: int, forwards: Mapping[int, tuple[str, int]],
         prefix: Iterable[str] = ()) -> list[str]:
    """``argv`` behind a bridge to ``socket_path``: ``prefix`` (``unshare -n`` when no sandbox makes the
    namespace) + this module + ``--`` + ``argv``. ``forwards``: inside port -> ``(host, port)`` reached through the
    gate."""
    # -S: no site-packages scan at start (the bridge needs only the standard library and this module, whose
    # package folder goes first on sys.path)
    boot = f"import sys; sys.path.insert(0, {str(_PACKAGE_ROOT)!r}); from pytest_agentrace.run.netbridge import main; " \
           "sys.exit(main(sys.argv[1:]))"
    inner = [*prefix, sys.executable, "-S", "-c", boot, "--socket", socket_path, "--proxy", str(proxy_port)]
    for port, (host, hport) in sorted(forwards.items()):
        inner += ["--forward", f"{port}={host}:{hport}"]
    return [*inner, "--", *argv]


HEAD_CAP = 65536  # bytes of the gate's answer to a forward's CONNECT read before its blank line, at most
BACKLOG = 100  # pending connections of each listener


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until EOF, then half-close ``dst`` (one direction of a tunnel)."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _join(a: socket.socket, b: socket.socket) -> None:
    """Relay ``a`` and ``b`` both ways (one direction in a thread of its own) until both have ended; then close
    both."""
    back = threading.Thread(target=_pipe, args=(b, a), daemon=True)
    try:
        back.start()
    except RuntimeError:  # can't start new thread: the connection ends
        a.close()
        b.close()
        return
    try:
        _pipe(a, b)
        back.join()
    finally:
        for sock in (a, b):
            sock.close()


def _gate(socket_path: str) -> socket.socket:
    """A new connection to the gate's unix socket. Raises ``OSError``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(socket_path)
    except OSError:
        sock.close()
        raise
    return sock


def _serve_proxy(socket_path: str, conn: socket.socket) -> None:
    """One connection to the proxy endpoint, relayed byte for byte to the gate (which reads its request)."""
    try:
        out = _gate(socket_path)
    except OSError:
        conn.close()
        return
    _join(conn, out)


def _serve_forward(socket_path: str, host: str, port: int, conn: socket.socket) -> None:
    """One connection to a forward's port: ``CONNECT host:port`` through the gate, then relayed both ways; refused
    by the gate (an answer other than 200), it just ends."""
    try:
        out = _gate(socket_path)
    except OSError:
        conn.close()
        return
    try:
        out.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        buf = b""
        while (end := buf.find(b"\r\n\r\n")) < 0:
            chunk = out.recv(65536)
            if not chunk or len(buf) + len(chunk) > HEAD_CAP:
                raise ConnectionError("no answer to CONNECT")
            buf += chunk
        head, rest = buf[:end + 4], buf[end + 4:]
        if not head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
            raise ConnectionError("refused by the gate")
        if rest:  # what the far side sent right after the answer is the tunnel's first bytes
            conn.sendall(rest)
    except OSError:
        conn.close()
        out.close()
        return
    _join(conn, out)


def _accept(server: socket.socket, handle: Callable[[socket.socket], None]) -> None:
    """Serve each connection to ``server`` in a thread of its own, for as long as the process lives. A connection
    no thread can be started for (the run's process limit counts threads) is closed; an ``accept`` that fails for
    want of descriptors is tried again a little later."""
    while True:
        try:
            conn, _addr = server.accept()
        except (InterruptedError, ConnectionAbortedError):
            continue
        except OSError:
            if server.fileno() < 0:
                return
            time.sleep(0.05)
            continue
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small writes go out at once
        except OSError:
            pass
        try:
            threading.Thread(target=handle, args=(conn,), daemon=True).start()
        except RuntimeError:  # can't start new thread
            conn.close()


def _start(socket_path: str, proxy_port: int, forwards: Mapping[int, tuple[str, int]]) -> None:
    """Listen on every port before returning, so the agent never races the bridge; each port served by a daemon
    thread (blocking sockets, a thread per connection: no event loop to import at every run's start). Raises
    ``OSError`` when a port cannot be listened on."""
    listeners: list[tuple[socket.socket, Callable[[socket.socket], None]]] = []
    try:
        listeners.append((socket.create_server(("127.0.0.1", proxy_port), backlog=BACKLOG),
                          functools.partial(_serve_proxy, socket_path)))
        for port, (host, hport) in forwards.items():
            listeners.append((socket.create_server(("127.0.0.1", port), backlog=BACKLOG),
                              functools.partial(_serve_forward, socket_path, host, hport)))
    except OSError:
        for server, _handle in listeners:
            server.close()
        raise
    for server, handle in listeners:
        threading.Thread(target=_accept, args=(server, handle), name="agentrace-netbridge", daemon=True).start()


def main(args: list[str] | None = None) -> int:
    """Bridge up, then the agent; the agent's exit code (127 when it cannot start, 125 when the bridge cannot)."""
    parser = argparse.ArgumentParser(prog="python -m pytest_agentrace.run.netbridge")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--proxy", type=int, required=True)
    parser.add_argument("--forward", action="append", default=[])
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    ns = parser.parse_args(args)
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
    if not argv:
        parser.error("no agent command after --")
    forwards = {}
    for spec in ns.forward:
        port, _, target = spec.partition("=")
        host, _, hport = target.rpartition(":")
        forwards[int(port)] = (host, int(hport))
    undumpable()  # the agent, its child, cannot open this process's start channel through /proc
    try:
        loopback_up()
        _start(ns.socket, ns.proxy, forwards)
    except OSError as exc:
        helper_fault(f"the run's network: agentrace netbridge: cannot make it: {exc}")
        return 125
    return run_child(argv, "netbridge")


def run_child(argv: list[str], helper: str) -> int:
    """Run ``argv`` as this helper's child, passing SIGTERM and SIGINT on (the runner signals the whole process
    group); its exit code, a signal N as ``128 + N``, 127 when it cannot start (``agentrace HELPER: cannot start``).
    Under a start channel (``run.launch``) the child is the launcher in front of ``argv``, handed the channel."""
    try:
        child = start_child(launched(argv) if os.environ.get(START_FD_ENV) else argv)
    except OSError as exc:
        helper_fault(f"agentrace {helper}: cannot start {argv[0]}: {exc}")
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: child.send_signal(signum))
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
