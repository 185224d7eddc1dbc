"""What network a run has: ``provider`` (its model provider and nothing else), ``host`` or ``none``.

- ``provider`` (the default): the run gets its own network namespace with only loopback. Its one way out is its
  gate on the session's proxy (``netproxy``), reached through ``netbridge`` inside the namespace, which lets through
  the hosts of ``allow_list``: the adapter's provider hosts (``PROVIDER_HOSTS``), the host of every base URL the
  run's environment names (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``, ...; the model double's too), and the
  task's, trial's or agent's ``network: {allow: [...]}``. Every contact is recorded (run.json ``network``).
- ``host``: the host's network as it is (the summary says so).
- ``none``: loopback only, nothing out. ``--agentrace-offline`` runs this way, with the model double inside the
  namespace. The checks (test, lint, verify) run this way unless the task's ``network`` says otherwise.

Precedence: the agent's key, else the file's, else ``--agentrace-network`` / ini ``agentrace_network``.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pytest_agentrace.errors import SpecError
from pytest_agentrace.run.netbridge import proxy_env
from pytest_agentrace.run.netbridge import wrap as bridge_wrap
from pytest_agentrace.run.netproxy import Gate, Rule, session_proxy
from pytest_agentrace.run.runspec import NETWORK_MODES
from pytest_agentrace.strict import ROUTING_SUFFIXES

CHECK_MODE = "none"

# The hosts each adapter's CLI needs to work with its own provider, from the CLI's documentation:
# - claude: Claude Code's "Network access requirements" (docs: network-config / corporate-proxy): the API,
#   claude.ai (WebFetch safety checks), statsig.anthropic.com (telemetry), sentry.io (error reports);
# - codex: the OpenAI API (Codex CLI README, "Using an API key"), chatgpt.com for a ChatGPT sign-in;
# - gemini: the Gemini API (GEMINI_API_KEY, generativelanguage.googleapis.com), and Code Assist
#   (cloudcode-pa.googleapis.com) and OAuth (oauth2.googleapis.com) for a Google sign-in (gemini-cli docs,
#   "Authentication");
# - opencode: models.dev (the model catalogue it loads at start, opencode docs "Models") and the providers it is set
#   up with (Anthropic, OpenAI);
# - aider: the providers of its default models through litellm (aider docs "API keys": OpenAI, Anthropic);
# - copilot: GitHub's Copilot API and GitHub's API (Copilot CLI docs, "Network requirements");
# - cursor: Cursor's API (cursor-agent docs, "Network").
# A custom command gets its ``kind``'s list; ``plain`` gets none.
PROVIDER_HOSTS: dict[str, tuple[str, ...]] = {
    "claude": ("api.anthropic.com:443", "claude.ai:443", "statsig.anthropic.com:443", "sentry.io:443"),
    "codex": ("api.openai.com:443", "chatgpt.com:443"),
    "gemini": ("generativelanguage.googleapis.com:443", "cloudcode-pa.googleapis.com:443",
               "oauth2.googleapis.com:443"),
    "opencode": ("models.dev:443", "api.anthropic.com:443", "api.openai.com:443"),
    "aider": ("api.openai.com:443", "api.anthropic.com:443"),
    "copilot": ("api.githubcopilot.com:443", "*.githubcopilot.com:443", "api.github.com:443"),
    "cursor": ("api2.cursor.sh:443", "api.cursor.com:443"),
}


@dataclass(frozen=True)
class NetworkSpec:
    """A task's, trial's or agent's ``network`` key: ``mode`` (one of ``NETWORK_MODES``, None: inherit) and ``allow``
    (``host[:port]`` entries added to the run's allow-list)."""

    mode: str | None = None
    allow: tuple[str, ...] = ()


def parse_network(path: Path, key: str, value: Any) -> NetworkSpec:
    """``network: provider`` or ``network: {mode: provider, allow: ["host[:port]", ...]}`` as a ``NetworkSpec``.
    Raises ``SpecError`` naming ``path`` and ``key`` for an unknown mode, key or a bad entry."""
    if isinstance(value, str):
        value = {"mode": value}
    if not isinstance(value, Mapping):
        raise SpecError(path, key, f"expected a mode ({', '.join(NETWORK_MODES)}) or a mapping {{mode, allow}}, "
                                   f"got {type(value).__name__}")
    unknown = sorted(set(value) - {"mode", "allow"})
    if unknown:
        raise SpecError(path, f"{key}.{unknown[0]}", "unknown key; valid: mode, allow")
    mode = value.get("mode")
    if mode is not None and mode not in NETWORK_MODES:
        raise SpecError(path, f"{key}.mode", f"unknown network mode {mode!r}; valid: {', '.join(NETWORK_MODES)}")
    allow = value.get("allow") or []
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        raise SpecError(path, f"{key}.allow", 'expected a list of "host[:port]" strings')
    for i, entry in enumerate(allow):
        try:
            Rule.parse(entry)
        except ValueError as exc:
            raise SpecError(path, f"{key}.allow[{i}]", f"{exc}; write host or host:port") from None
    return NetworkSpec(mode, tuple(allow))


def mode_for(session_mode: str, *specs: NetworkSpec | None) -> str:
    """The mode a run gets: the last of ``specs`` (file, then agent) that names one, else ``session_mode``."""
    mode = session_mode
    for spec in specs:
        if spec is not None and spec.mode is not None:
            mode = spec.mode
    return mode


def url_hosts(env: Mapping[str, str]) -> list[str]:
    """``host:port`` of every base URL in ``env`` (``*_BASE_URL``, ``*_API_BASE``, ``*_ENDPOINT`` variables)."""
    found = []
    for name, value in env.items():
        if not name.upper().endswith(ROUTING_SUFFIXES) or "://" not in value:
            continue
        parts = urlsplit(value)
        if parts.hostname:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            found.append(f"{parts.hostname}:{port}")
    return found


def allow_list(adapter: str, env: Mapping[str, str], extra: Iterable[str] = (), urls: Iterable[str] = ()) -> list[Rule]:
    """The rules of a ``provider`` run: ``PROVIDER_HOSTS[adapter]``, the base URLs' hosts in ``env`` and in
    ``urls``, and ``extra`` (``network.allow`` entries), without repeats."""
    entries = [*PROVIDER_HOSTS.get(adapter, ()), *url_hosts(env), *url_hosts({f"URL{i}_BASE_URL": u for i, u in enumerate(urls)}),
               *extra]
    return list(dict.fromkeys(Rule.parse(e) for e in entries))


def _loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def _free_port(taken: Iterable[int]) -> int:
    taken = set(taken)
    for port in range(3128, 3200):
        if port not in taken:
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RunNetwork:
    """One ``provider`` run's network: its ``gate`` on the session proxy, the forwards inside its namespace, and
    its proxy endpoint. ``wrap`` puts the bridge in front of the agent's argv; ``close`` ends the gate."""

    gate: Gate
    proxy_port: int
    forwards: dict[int, tuple[str, int]] = field(default_factory=dict)

    def wrap(self, argv: list[str], env: Mapping[str, str], unshare: Iterable[str] = ()) -> tuple[list[str], dict[str, str]]:
        """``(argv, env)`` run behind the bridge; ``unshare``: a prefix that makes the namespace when no sandbox
        does (``unshare -n``)."""
        argv = bridge_wrap(argv, str(self.gate.path), self.proxy_port, self.forwards, unshare)
        return argv, {**env, **proxy_env(self.proxy_port)}

    def close(self) -> list[dict[str, Any]]:
        """End the gate; the run's contacts (``Gate.record``)."""
        session_proxy().close(self.gate)
        shutil.rmtree(self.gate.path.parent, ignore_errors=True)
        return self.gate.record()

    def blocked_reason(self) -> str | None:
        """``network: blocked HOST:PORT (allow it with network.allow)`` for the first refused contact, or None."""
        blocked = self.gate.blocked()
        if not blocked:
            return None
        more = f" and {len(blocked) - 1} more" if len(blocked) > 1 else ""
        return f"network: blocked {blocked[0]}{more} (allow it with network.allow)"


    def unreachable_reason(self) -> str | None:
        """``network: cannot reach HOST:PORT from this machine (N requests failed)`` when the run asked for allowed
        hosts and the proxy reached none of them (``Gate.unreachable``: hosts the allow-list names, at their port
        or 443/80) and the harness, trying each again now (``PROBE_SECONDS``), cannot reach them either; None
        otherwise. A run that only asked for what does not answer can so not pass its failure off as this
        machine's: the harness's own try must fail too."""
        hosts = self.gate.unreachable()
        if not hosts or any(_reachable(self.gate.resolve.get(hp, hp)) for hp in hosts[:PROBED]):
            return None
        tries = sum(self.gate.failed.values())
        more = f" and {len(hosts) - 1} more" if len(hosts) > 1 else ""
        return (f"network: cannot reach {hosts[0][0]}:{hosts[0][1]}{more} from this machine ({tries} "
                f"request{'s' if tries != 1 else ''} failed; the provider is unreachable, not the agent at fault)")


PROBE_SECONDS = 3.0  # the harness's own try at a host a run could not reach
PROBED = 2  # hosts tried again at most


def _reachable(where: tuple[str, int]) -> bool:
    """Whether a TCP connection to ``where`` (host, port) opens within ``PROBE_SECONDS``."""
    try:
        with socket.create_connection(where, timeout=PROBE_SECONDS):
            return True
    except OSError:
        return False


def open_run(rules: list[Rule], resolve: Mapping[tuple[str, int], tuple[str, int]] | None = None) -> RunNetwork:
    """A ``provider`` network for one run: a gate whose socket is ``proxy.sock`` in a fresh folder of its own under
    ``/tmp`` (a unix socket's path has at most 107 bytes, and pytest's folders are deeper; only this folder is shown
    to the run, and ``RunNetwork.close`` removes it), forwards for the allowed loopback ``host:port`` entries, and a
    proxy port free of them. The folder is named ``agentrace-net-<pid>-...``; the first run of a process removes
    those of gone processes (``sweep``). Raises ``OSError`` when the socket cannot be made."""
    base = "/tmp" if os.access("/tmp", os.W_OK) else tempfile.gettempdir()
    if base not in _SWEPT:
        _SWEPT.add(base)
        sweep(Path(base))
    folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-", dir=base))
    os.chmod(folder, 0o755)
    try:
        gate = session_proxy().open(folder / "proxy.sock", rules, resolve)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    forwards = {r.port: (r.host, r.port) for r in rules if _loopback(r.host) and r.port is not None}
    return RunNetwork(gate, _free_port(forwards), forwards)


FOLDER_PREFIX = "agentrace-net-"
_SWEPT: set[str] = set()  # the folders swept by this process


def sweep(base: Path) -> list[Path]:
    """Remove ``base``'s ``agentrace-net-<pid>-...`` folders (a gate's socket folder) that this user owns and whose
    process is gone (a session killed with SIGKILL leaves them); links and other users' folders are never touched.
    Returns the folders removed."""
    removed = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        pid = entry.name.removeprefix(FOLDER_PREFIX).split("-", 1)[0]
        if not entry.name.startswith(FOLDER_PREFIX) or not pid.isdigit():
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
            os.kill(int(pid), 0)
            continue  # its process is alive
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def parse_resolve(entries: Iterable[str]) -> dict[tuple[str, int], tuple[str, int]]:
    """``HOST:PORT:ADDR:APORT`` entries (curl's ``--resolve`` with a port to dial) as the proxy's map.
    Raises ``ValueError`` for a malformed entry."""
    out = {}
    for entry in entries:
        parts = entry.rsplit(":", 3)
        if len(parts) != 4:
            raise ValueError(f"{entry!r}: write HOST:PORT:ADDRESS:PORT")
        host, port, addr, aport = parts
        out[(host.lower(), int(port))] = (addr, int(aport))
    return out


def describe(mode: str) -> str:
    """One summary line for a session's network mode."""
    return {
        "provider": "network: provider (each run reaches only its provider's hosts, through the session proxy)",
        "host": "network: host (runs have the host's network; nothing is filtered)",
        "none": "network: none (runs have loopback only)",
    }[mode]

