"""Inside a run's network namespace (``provider`` mode): the only way out, over the unix socket of its ``Gate``.

The namespace has loopback only. Before the agent starts, this module (run as ``python -m
pytest_agentrace.run.netbridge``) brings ``lo`` up and listens, inside the namespace:

- on ``127.0.0.1:PROXY`` (``--proxy``): an HTTP proxy endpoint; each connection is relayed byte for byte to the
  gate's socket, where the session's ``netproxy`` reads the CONNECT or absolute-form request and decides. The agent
  finds it through ``HTTPS_PROXY`` / ``HTTP_PROXY`` (``proxy_env``);
- on ``127.0.0.1:PORT`` for each ``--forward PORT=HOST:HOSTPORT``: a plain TCP forward, sent as ``CONNECT
  HOST:HOSTPORT`` through the gate. A base URL on the host's loopback (``http://127.0.0.1:PORT``: a model double, a
  local gateway) then works unchanged for every CLI, proxy-aware or not, and still passes the allow-list.

Then it runs the agent as its child and exits with the agent's exit code (a signal N as ``128 + N``), passing
SIGTERM and SIGINT on, as ``model_double.netns`` does for offline runs.

Usage (built by ``wrap``)::

    python -m pytest_agentrace.run.netbridge --socket S --proxy 3128 [--forward 8080=127.0.0.1:8080] -- ARGV...
"""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import socket
import struct
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentrace.run.launch import START_FD_ENV, helper_fault, launched, start_child, undumpable
from pytest_agentrace.run.netproxy import relay

if TYPE_CHECKING:  # asyncio is imported in the functions that serve: a run without a network never loads it
    import asyncio

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


async def _join(a: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                b: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
    import asyncio
    try:
        await asyncio.gather(relay(a[0], b[1]), relay(b[0], a[1]))
    finally:
        for w in (a[1], b[1]):
            try:
                w.close()
            except OSError:
                pass


def _serve_proxy(socket_path: str) -> object:
    import asyncio

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            out = await asyncio.open_unix_connection(socket_path)
        except OSError:
            writer.close()
            return
        await _join((reader, writer), out)

    return handle


def _serve_forward(socket_path: str, host: str, port: int) -> object:
    import asyncio

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(socket_path)
            up_writer.write(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            head = await up_reader.readuntil(b"\r\n\r\n")
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        if not head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
            writer.close()  # refused by the gate: the connection just ends
            up_writer.close()
            return
        await _join((reader, writer), (up_reader, up_writer))

    return handle


def _start(socket_path: str, proxy_port: int, forwards: Mapping[int, tuple[str, int]]) -> None:
    """Listen (in a daemon thread's loop) before returning, so the agent never races the bridge."""
    import asyncio
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    errors: list[BaseException] = []

    async def listen() -> None:
        try:
            await asyncio.start_server(_serve_proxy(socket_path), "127.0.0.1", proxy_port)  # type: ignore[arg-type]
            for port, (host, hport) in forwards.items():
                await asyncio.start_server(_serve_forward(socket_path, host, hport), "127.0.0.1", port)  # type: ignore[arg-type]
        except OSError as exc:
            errors.append(exc)
        ready.set()

    def run() -> None:
        loop.run_until_complete(listen())
        loop.run_forever()

    threading.Thread(target=run, name="agentrace-netbridge", daemon=True).start()
    ready.wait(30)
    if errors:
        raise errors[0]


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
