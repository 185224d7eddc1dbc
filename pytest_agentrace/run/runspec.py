"""The values one run is given, at the bottom of the run layer: which run (``RunSpec``), the session's settings
every run shares (``RunOptions``) and the resource limits (``Limits``, enforced by ``run.limits``).

Plain frozen dataclasses and the words of the session's settings they hold (network modes, cgroup words; read by
``options`` at every pytest start: standard library only); every other module of ``run/`` may import them, and this one imports none of them (the
box's types it names, ``Sandbox`` and ``Parent``, and the spec layer's ``AgentSpec`` only for type checking).
``spec.matrix`` builds the RunSpecs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # names in annotations only: the box's types sit a tier up, the spec layer above run/
    from pytest_agentrace.run.cgroup import Parent
    from pytest_agentrace.run.sandbox import Sandbox
    from pytest_agentrace.spec.common import AgentSpec

NAMES = ("memory", "processes", "disk", "cpu_time")  # the limits, in the order reports show them
# a run's network mode (``--agentrace-network``, a file's or agent's ``network`` key; ``run.network`` sets it up):
# its own namespace whose way out is a proxy to its provider's hosts, the host's network, or loopback only
NETWORK_MODES = ("provider", "host", "none")
DEFAULT_NETWORK = "provider"
# how ``--agentrace-replay`` matches a request with its cassette (``model_double.cassette.Replayer``): each request
# against the recorded one (volatile fields aside), or by turn only
REPLAY_MATCHES = STRICT_MATCH, LOOSE_MATCH = ("strict", "loose")
CGROUP_AUTO, CGROUP_OFF = "auto", "off"  # ``--agentrace-cgroup``'s words besides a folder (``run.cgroup.find_parent``)


@dataclass(frozen=True)
class RunSpec:
    """One run: ``case`` x ``arm`` x ``agent`` x ``rep`` (rep counts from 1).

    ``spec`` is the loaded Task (or the trial); ``case_obj`` what the agent is asked (Task or question).
    ``timeout`` is seconds per command.
    """

    kind: str
    source: Path
    case: str
    arm: str
    agent: AgentSpec
    rep: int
    timeout: float
    spec: Any
    case_obj: Any

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.case}/{self.arm}/{self.agent.id}/r{self.rep}"

    @property
    def param_ids(self) -> tuple[str, ...]:
        """The parts of the pytest item's parameter id, as pytest's ``parametrize`` ids: ``(agent, "rN")`` for
        tasks, ``(arm, agent, "rN")`` for trials (joined with ``-`` inside the name's brackets)."""
        if self.kind == "task":
            return (self.agent.id, f"r{self.rep}")
        return (self.arm, self.agent.id, f"r{self.rep}")

    @property
    def item_name(self) -> str:
        """pytest item name: ``case[agent-rN]`` for tasks, ``case[arm-agent-rN]`` for trials."""
        return f"{self.case}[{'-'.join(self.param_ids)}]"

    def run_dir(self, out: Path) -> Path:
        """``<out>/runs/<case>/<arm>/<agent>/<rep>``."""
        return out / "runs" / self.case / self.arm / self.agent.id / str(self.rep)

    @property
    def agent_hash(self) -> str:
        """sha256 (hex) of what makes this run's agent the agent it is: its whole resolved entry (name, model,
        command, kind, env, args, edits, sandbox, model double, limits, network, box; from the file or the command
        line) and the timeout. Kept in the record (``extra.agent_hash``): resume reuses a record only for the same
        agent, not for another entry that shares its id. The files a command runs are not hashed.

        The entry is hashed as it would be stored: passed through ``record.redact.redact_data`` with the values of
        the secret-like variables of the environment and of the entry's ``env``. A key is not what makes the agent
        (another key resumes the same records), and a stored hash of a key would let anyone holding a candidate key
        confirm it."""
        import dataclasses
        import hashlib
        import json
        import os

        # here, not at the top: this module is read at every pytest start (standard library only)
        from pytest_agentrace.record.redact import redact_data, secret_values

        entry = dataclasses.asdict(self.agent)
        env = {k: str(v) for k, v in (entry.get("env") or {}).items()}
        data = json.loads(json.dumps({"agent": entry, "timeout": self.timeout}, default=str))
        data = redact_data(data, secret_values({**os.environ, **env}))
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Limits:
    """A run's limits; ``None``: not given here (a less specific level decides), 0: no limit.

    ``memory`` and ``disk`` are bytes, ``processes`` a count of tasks, ``cpu_time`` seconds."""

    memory: int | None = None
    processes: int | None = None
    disk: int | None = None
    cpu_time: float | None = None

    def over(self, base: Limits) -> Limits:
        """These limits where given, ``base``'s elsewhere."""
        return Limits(**{n: getattr(base, n) if getattr(self, n) is None else getattr(self, n) for n in NAMES})

    def given(self) -> dict[str, Any]:
        """``{name: value}`` of the limits that are set (not None)."""
        return {n: getattr(self, n) for n in NAMES if getattr(self, n) is not None}


# memory 4 GiB: every CLI starts at 1 GiB of RLIMIT_DATA and a run's tests rarely need more; two parallel runs
# (-n 2) then stay far below a 24 GiB runner. processes 512: node CLIs run ~10-20 threads each, a test run with
# workers some dozens. disk 2 GiB: a repository plus its dependencies. cpu_time 3600 s: only a backstop (the
# run's timeout bounds wall time; one process spinning for an hour of CPU is a runaway).
DEFAULTS = Limits(memory=4 * 1024**3, processes=512, disk=2 * 1024**3, cpu_time=3600.0)


@dataclass(frozen=True)
class RunOptions:
    """Session-wide settings every run of a session shares (made once by the pytest layer from its settings).

    ``cache_dir``: where template repositories of plain folders are kept (None: ``<out>/.cache/repos``);
    ``isolated_home``: each CLI gets a fresh HOME (False: the user's own, ``--agentrace-agent-home user``);
    ``offline``: the agent runs in a loopback-only network namespace; ``model_double``: a model script (absolute
    path) every CLI agent runs against unless its own entry names one; ``on_stdout``: called with each chunk of
    the agent's stdout as it arrives (a live display), or None; ``sandbox``: the session's bubblewrap profile;
    ``record``: a folder where each CLI run's model traffic is recorded as a cassette (through a recording proxy
    to ``record_upstream``, else the CLI's provider); ``replay``: a folder of cassettes each CLI run replays
    against the model double, matched ``replay_match`` (``strict`` or ``loose``).
    ``limits``: the session's resource limits of a run (``run.limits``; a file's or agent's own ``limits`` override
    them); ``cgroup``: the folder each run's control group is made in (None: rlimits only). ``network``: the
    session's network mode (``run.network``), ``network_resolve``: the provider proxy's ``--resolve`` map entries.
    """

    cache_dir: Path | None = None
    isolated_home: bool = True
    offline: bool = False
    model_double: str | None = None
    on_stdout: Callable[[bytes], None] | None = None
    sandbox: Sandbox | None = None  # every agent and check command runs inside it (None: no sandbox)
    record: str | None = None
    record_upstream: str | None = None
    replay: str | None = None
    replay_match: str = STRICT_MATCH
    limits: Limits = DEFAULTS
    cgroup: Parent | None = None
    network: str = DEFAULT_NETWORK  # the session's network mode (NETWORK_MODES); a file's or agent's key overrides
    network_resolve: tuple[str, ...] = ()  # HOST:PORT:ADDRESS:APORT entries the provider proxy dials instead
