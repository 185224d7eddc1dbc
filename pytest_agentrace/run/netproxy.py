"""The session's network proxy: what a run in ``provider`` network mode can reach, and the record of its contacts.

A run in ``provider`` mode has its own network namespace with only loopback (``netbridge`` inside it, bwrap's
``--unshare-net`` or ``unshare -n`` around it). Its only way out is a unix socket, bound into the box, that this
proxy listens on: one socket (a ``Gate``) per run, so every contact is the run's own. Through it a client speaks the
ordinary HTTP proxy protocol (RFC 9110 section 9.3.6 ``CONNECT host:port``, or a request in absolute form ``GET
http://host:port/path``). The proxy looks at the host and port only:

- allowed (``Gate.allow``: ``host`` or ``host:port`` entries, matched case-insensitively; a ``*.`` prefix matches
  sub-domains): it connects to the host, answers ``200 Connection established`` to a CONNECT, forwards a plain
  request in origin form, then relays bytes both ways until either side closes;
- anything else: ``403`` with ``agentrace: blocked HOST:PORT (allow it with network.allow)``, and nothing is sent.

Every request is counted in ``Gate.contacts`` (``{host, port, allowed, count}``, with ``failed``: the allowed
requests whose host could not be reached, each answered ``502``), which the run records: at most ``MAX_CONTACTS``
distinct entries, the rest counted together as ``<other hosts>``; a host name over ``MAX_HOST`` characters is a
bad request (``400``). TLS stays
end to end (the proxy never sees inside a CONNECT tunnel), as in Anthropic's sandbox-runtime, whose Linux mode
bridges a unix socket to a filtering HTTP proxy in the same way. ``resolve`` maps a ``host:port`` to the address
actually dialled (as curl's ``--resolve`` does): tests put the model double behind a provider's host name.

The proxy is one asyncio loop in a daemon thread of the process that runs the runs (``session_proxy``); a gate
costs one listening socket.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # asyncio is imported in the functions that serve: a run without a network never loads it
    import asyncio

MAX_HEAD = 64 * 1024  # bytes: the longest request head the proxy reads before it refuses
MAX_HOST = 253  # characters of a host name (RFC 1035's limit for a name in text): a longer one is no host
MAX_CONTACTS = 100  # distinct (host, port, allowed) a run's record names; the rest are counted as OTHER_HOSTS
OTHER_HOSTS = "<other hosts>"
CONNECT_TIMEOUT = 30.0  # seconds to reach an allowed host
_BLOCK_REASON = "agentrace: blocked {} (allow it with network.allow)"


def split_host_port(text: str, default_port: int | None = None) -> tuple[str, int | None]:
    """``"host:port"`` / ``"host"`` / ``"[::1]:443"`` as ``(host lower-cased, port or default_port)``.
    Raises ``ValueError`` for a port that is not a number in 1-65535."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not port_text:
        return host.lower(), default_port
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is out of range")
    return host.lower(), port


@dataclass(frozen=True)
class Rule:
    """One allow-list entry: ``host`` (``*.example.com`` matches its sub-domains) and ``port`` (None: any)."""

    host: str
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        """``"host[:port]"`` as a rule. Raises ``ValueError`` for an empty host or a bad port."""
        host, port = split_host_port(text)
        if not host:
            raise ValueError(f"{text!r} names no host")
        return cls(host, port)

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host

    def __str__(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"


@dataclass
class Gate:
    """One run's way out: the unix socket ``path`` it connects to, what it may reach (``allow``), where each
    ``host:port`` is dialled (``resolve``), and what it tried (``contacts``: ``(host, port, allowed) -> count``)."""

    path: Path
    allow: tuple[Rule, ...]
    resolve: Mapping[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    contacts: dict[tuple[str, int, bool], int] = field(default_factory=dict)
    failed: dict[tuple[str, int], int] = field(default_factory=dict)  # allowed host:port -> connections that failed
    reached: set[tuple[str, int]] = field(default_factory=set)  # allowed host:port the proxy connected to
    server: Any = None

    def allowed(self, host: str, port: int) -> bool:
        return any(rule.matches(host, port) for rule in self.allow)

    def count(self, host: str, port: int, ok: bool) -> None:
        """One more request to ``host:port`` in ``contacts``; past ``MAX_CONTACTS`` distinct entries a new one is
        counted under ``OTHER_HOSTS`` (port 0), so a run's record stays small whatever it asks for."""
        key = (host, port, ok)
        if key not in self.contacts and len(self.contacts) >= MAX_CONTACTS:
            key = (OTHER_HOSTS, 0, ok)
        self.contacts[key] = self.contacts.get(key, 0) + 1

    def record(self) -> list[dict[str, Any]]:
        """The contacts as ``[{host, port, allowed, count}]``, in the order first seen (run.json ``network``), an
        allowed one with ``failed``: how many of its requests could not reach the host (when any)."""
        return [{"host": h, "port": p, "allowed": ok, "count": n,
                 **({"failed": self.failed[(h, p)]} if ok and self.failed.get((h, p)) else {})}
                for (h, p, ok), n in self.contacts.items()]

    def named(self, host: str, port: int) -> bool:
        """Whether an allow-list entry names ``host`` itself (not by a ``*.`` wildcard) at ``port``: its own port,
        or 443 / 80 for an entry without one (a provider's API)."""
        return any(r.host == host and (port == r.port if r.port is not None else port in (443, 80)) for r in self.allow)

    def unreachable(self) -> list[tuple[str, int]]:
        """The allowed hosts the run asked for, by name and port (``named``), when the proxy could connect to none of
        the hosts it asked for (every request failed: no route, no name resolution, refused); empty when any allowed
        host was reached. Other failures (a wildcard's unknown sub-domain, another port) are the run's own choice."""
        if self.reached:
            return []
        return [(h, p) for (h, p) in self.failed if h != OTHER_HOSTS and self.named(h, p)]

    def blocked(self) -> list[str]:
        """``host:port`` of every refused contact, in the order first seen (``OTHER_HOSTS`` last when counted)."""
        return [h if h == OTHER_HOSTS else f"{h}:{p}" for (h, p, ok) in self.contacts if not ok]


def _head_end(buf: bytes) -> int:
    end = buf.find(b"\r\n\r\n")
    return -1 if end < 0 else end + 4


async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until EOF, then half-close ``writer`` (one direction of a tunnel)."""
    import asyncio
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError, asyncio.CancelledError):
        pass
    finally:
        try:
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, RuntimeError):
            pass


async def _close(writer: asyncio.StreamWriter) -> None:
    import asyncio
    try:
        writer.close()
        await writer.wait_closed()
    except (OSError, ConnectionError, asyncio.CancelledError):
        pass


def _target(method: str, target: str, headers: list[bytes]) -> tuple[str, int, bytes]:
    """``(host, port, request-target to send upstream)`` of one proxy request. Raises ``ValueError``."""
    if method == "CONNECT":
        host, port = split_host_port(target)
        if port is None:
            raise ValueError("CONNECT needs host:port")
        return host, port, b""
    if not target.lower().startswith("http://"):
        raise ValueError("only CONNECT and absolute http:// requests go through this proxy")
    rest = target[7:]
    authority, slash, path = rest.partition("/")
    host, port = split_host_port(authority.rpartition("@")[2], 80)
    return host, port or 80, ("/" + path if slash else "/").encode()


async def _serve(gate: Gate, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    import asyncio
    upstream_writer = None
    try:
        buf = b""
        while (end := _head_end(buf)) < 0:
            chunk = await reader.read(4096)
            if not chunk or len(buf) > MAX_HEAD:
                return
            buf += chunk
        head, rest = buf[:end], buf[end:]
        lines = head.split(b"\r\n")
        try:
            method, target, version = lines[0].decode("latin-1").split(" ", 2)
            host, port, origin = _target(method.upper(), target, lines[1:])
            if len(host) > MAX_HOST:
                raise ValueError(f"a host name of {len(host)} characters (at most {MAX_HOST})")
        except ValueError as exc:
            body = f"agentrace: bad proxy request: {exc}\n".encode()
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                         + body)
            await writer.drain()
            return
        ok = gate.allowed(host, port)
        gate.count(host, port, ok)
        if not ok:
            body = (_BLOCK_REASON.format(f"{host}:{port}") + "\n").encode()
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n" % len(body) + body)
            await writer.drain()
            return
        dial = gate.resolve.get((host, port), (host, port))
        try:
            up_reader, upstream_writer = await asyncio.wait_for(asyncio.open_connection(*dial), CONNECT_TIMEOUT)
        except (TimeoutError, OSError) as exc:
            where = (host, port) if (host, port) in gate.failed or len(gate.failed) < MAX_CONTACTS else (OTHER_HOSTS, 0)
            gate.failed[where] = gate.failed.get(where, 0) + 1
            body = f"agentrace: cannot reach {host}:{port}: {exc}\n".encode()
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                         + body)
            await writer.drain()
            return
        if len(gate.reached) < MAX_CONTACTS:
            gate.reached.add((host, port))
        if method.upper() == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
        else:  # origin form upstream, without the hop-by-hop proxy headers
            kept = [h for h in lines[1:] if h and not h.lower().startswith((b"proxy-", b"keep-alive"))]
            upstream_writer.write(b" ".join([method.encode(), origin, version.encode()]) + b"\r\n"
                                  + b"".join(h + b"\r\n" for h in kept) + b"\r\n")
        if rest:
            upstream_writer.write(rest)
        await asyncio.gather(relay(reader, upstream_writer), relay(up_reader, writer))
    except (ConnectionError, OSError, asyncio.IncompleteReadError):
        pass
    finally:
        if upstream_writer is not None:
            await _close(upstream_writer)
        await _close(writer)


class NetProxy:
    """The filtering proxy of one process: an asyncio loop in a daemon thread serving each run's ``Gate``.
    ``open`` and ``close`` are thread-safe; ``stop`` ends every gate."""

    def __init__(self) -> None:
        import asyncio
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentrace-netproxy", daemon=True)
        self._thread.start()

    def _call(self, coro: Any, timeout: float = 30.0) -> Any:
        import asyncio
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def open(self, path: Path, allow: Iterable[Rule],
             resolve: Mapping[tuple[str, int], tuple[str, int]] | None = None) -> Gate:
        """A gate listening on the unix socket ``path`` (made with mode 0666 so a run's unprivileged uid can
        connect; its folder decides who reaches it). Raises ``OSError`` when the socket cannot be made."""
        import asyncio
        gate = Gate(Path(path), tuple(allow), dict(resolve or {}))

        async def start() -> Any:
            return await asyncio.start_unix_server(functools.partial(_serve, gate), path=str(path))

        gate.server = self._call(start())
        os.chmod(path, 0o666)
        return gate

    def close(self, gate: Gate) -> None:
        """Stop the gate's listener (tunnels still open are left to end) and remove its socket."""
        if gate.server is not None:
            async def stop() -> None:
                gate.server.close()

            self._call(stop())
            gate.server = None
        try:
            os.unlink(gate.path)
        except OSError:
            pass

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


@functools.cache
def session_proxy() -> NetProxy:
    """This process's proxy, started on first use (one loop thread serves every run of the process)."""
    return NetProxy()
