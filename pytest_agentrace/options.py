"""Every setting, declared once: the pytest options (``--agentrace-*``), their ini keys (``agentrace_*``) and the
``agentrace`` CLI flags that mean the same thing are all made from ``OPTIONS``.

Precedence (pytest side, ``resolve``): the command line, then the ini file (``[tool.pytest.ini_options]``,
``pytest.ini``, ``tox.ini``, ``setup.cfg``), then the option's default. A repeatable option's ini value is a
list of lines. The master switch ``--agentrace`` has no ini key on purpose: the plugin does nothing unless it is
on the command line (put it in ``addopts`` to make it the default).

This module imports no pytest and nothing heavy: every pytest process reads it (``pytest --help``, a session
without ``--agentrace``), and so does the CLI. What it imports is standard library only: the argparse types
(``argtypes``), the report table (``report.formats``), the words and defaults of the run values
(``run.runspec``), the history's place (``record.storepath``), the shard argument (``spec.shard``) and the
statistics' words (``stats.verdict``, ``stats.resample``); ``tests/test_startup_imports.py`` lists them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentrace.argtypes import (
    byte_size,
    difficulty_list,
    human_bytes,
    limit_count,
    limit_seconds,
    name_list,
    non_negative_float,
    positive_float,
    positive_int,
    probability,
)
from pytest_agentrace.record.storepath import DEFAULT_NAME as DB_NAME
from pytest_agentrace.record.storepath import ENV_VAR as DB_ENV
from pytest_agentrace.report import formats
from pytest_agentrace.run.runspec import CGROUP_AUTO, DEFAULT_NETWORK, NETWORK_MODES, REPLAY_MATCHES, STRICT_MATCH
from pytest_agentrace.run.runspec import DEFAULTS as LIMITS
from pytest_agentrace.spec.shard import shard_arg
from pytest_agentrace.stats.resample import DEFAULT_RESAMPLES as RESAMPLES
from pytest_agentrace.stats.verdict import FIXED, GATE_CELLS, GATE_HELP, HOLM, TARGETS

DEFAULT_OUT = ".agentrace"  # the results folder, relative to the rootdir (pytest) or the working folder (CLI)
AGENT_HOME_RUN, AGENT_HOME_USER = "run", "user"


@dataclass(frozen=True)
class Option:
    """One setting. ``name`` ``"reps"`` is ``--agentrace-reps`` and ini ``agentrace_reps`` in pytest, and
    ``settings.reps``; ``cli`` is the ``agentrace`` subcommands' flag for it (``"--seed"``), or None.

    ``type`` converts a command-line or ini string (raises ``argparse.ArgumentTypeError``); ``flag`` is an on/off
    switch; ``many`` a repeatable option (a list). ``pytest=False`` marks a CLI-only setting.
    """

    name: str
    help: str
    default: Any = None
    type: Callable[[str], Any] | None = None
    flag: bool = False
    many: bool = False
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    cli: str | None = None
    pytest: bool = True

    @property
    def flag_name(self) -> str:
        return "--agentrace" if self.name == "agentrace" else "--agentrace-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "agentrace" if self.name == "agentrace" else "agentrace_" + self.name

    @property
    def has_ini(self) -> bool:
        return self.pytest and self.name != "agentrace"

    @property
    def ini_type(self) -> str:
        """pytest's ``addini`` type: ``bool`` (a flag), ``linelist`` (repeatable), ``int`` / ``float`` (a plain
        number; pytest 8.4 and later), else ``string`` (sizes such as ``4G``, ``none``, choices). With pytest 9's
        native TOML (``[tool.pytest]``, ``pytest.toml``) the value is then written unquoted: ``agentrace_reps = 2``."""
        if self.flag:
            return "bool"
        if self.many:
            return "linelist"
        if self.type in _INT_TYPES:
            return "int"
        if self.type in _FLOAT_TYPES:
            return "float"
        return "string"

    def argparse_kwargs(self, default: Any) -> dict[str, Any]:
        """``add_argument`` keyword arguments with ``default``."""
        kw: dict[str, Any] = {"help": self.help, "default": default}
        if self.flag:
            kw["action"] = "store_true"
            return kw
        if self.many:
            kw["action"] = "append"
        for key in ("type", "metavar", "choices"):
            if getattr(self, key) is not None:
                kw[key] = getattr(self, key)
        return kw

    def from_ini(self, raw: Any) -> Any:
        """The value of an ini entry (a string, or a list of lines for ``many``); raises ``ValueError`` naming the
        ini key when it does not convert."""
        try:
            if self.flag:
                return _ini_bool(raw)
            if self.many:
                lines = raw if isinstance(raw, list) else str(raw).splitlines()
                return [self._convert(line.strip()) for line in lines if line.strip()]
            return self._convert(str(raw).strip())
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise ValueError(f"ini key {self.dest} = {raw!r}: {exc}") from None

    def _convert(self, text: str) -> Any:
        if self.choices is not None and text not in self.choices:
            raise ValueError(f"use one of {', '.join(self.choices)}")
        return self.type(text) if self.type is not None else text


def format_option(fmt: formats.Format) -> Option:
    """The ``--agentrace-<name> PATH`` option (and ini key) of a report format written to a file."""
    return Option(fmt.name, fmt.help, None, metavar="PATH")


def pytest_options() -> tuple[Option, ...]:
    """The pytest-side options: ``OPTIONS``, plus the option of each file format added to ``report.formats.FORMATS``
    after this module was imported (a format registered at run time gets its option too)."""
    extra = tuple(format_option(f) for f in formats.FORMATS if f.to == "file" and f.name not in BY_NAME)
    return tuple(o for o in OPTIONS if o.pytest) + extra


_INT_TYPES = (int, positive_int)
_FLOAT_TYPES = (positive_float, non_negative_float, probability)


def _ini_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("use true or false")


OPTIONS: tuple[Option, ...] = (
    # what runs
    Option("agentrace", "collect task (YAML) and trial (TOML) files and run the agents they name", False, flag=True),
    Option("agent", "agent to run (name, name:model, or a YAML flow mapping such as '{name: x, command: ...}'); repeatable; "
           "overrides the files' agent lists", [], many=True, metavar="SPEC"),
    Option("arm", "run only this arm of each trial file; repeatable", [], many=True, metavar="ARM"),
    Option("reps", "repetitions of each cell (default: the file's reps, else 1)", None, type=positive_int, metavar="N"),
    Option("timeout", "override every task's/trial's timeout (seconds per command)", None, type=positive_float, metavar="SECONDS"),
    Option("builtin", "run built-in tasks by name without a path (comma-separated, repeatable; 'all' for every one; "
           "see `agentrace tasks list`)", [], type=name_list, many=True, metavar="NAME[,NAME]"),
    Option("difficulty", "keep only tasks of these difficulty levels, by name (easy, medium, hard, or a file's own level "
           "such as medium-hard, which neither medium nor hard selects); others are deselected", None,
           type=difficulty_list, metavar="LEVEL[,LEVEL]"),
    Option("validate", "validate task files instead of racing: run only the oracle (reference solution) and noop agents "
           "and fail a task whose oracle does not pass every check or whose hidden checks pass without a change", False, flag=True),
    Option("resume", "reuse complete run.json records of unchanged task/trial files in the results folder instead of "
           "running them again", False, flag=True),
    Option("shard", "run only shard K of N (1-based) of the collected runs, split by run id and balanced by the history's "
           "durations; 'auto' reads CI_NODE_INDEX/CI_NODE_TOTAL (GitLab), CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL or "
           "BUILDKITE_PARALLEL_JOB/BUILDKITE_PARALLEL_JOB_COUNT; merge the shards' folders with `agentrace merge`", None,
           type=shard_arg, metavar="K/N|auto"),
    Option("retry_failed", "like --agentrace-resume, but run again what did not finish cleanly (error, timeout, crashed "
           "agent)", False, flag=True),
    Option("race", "race the agents of each task (per arm and rep): they start together, the first to meet the win "
           "condition (verify passes, else tests pass, else a clean exit) wins, the others are stopped after the grace "
           "window and recorded as 'stopped' (not a sample)", False, flag=True),
    Option("race_grace", "seconds the other agents of a race may still finish after the winner (default 5)", 5.0,
           type=non_negative_float, metavar="SECONDS"),
    # where agents run
    Option("agent_home", "HOME of the agent CLIs: 'run' (default) gives each run a fresh HOME (and CODEX_HOME, XDG_*) so runs "
           "cannot see each other's sessions or caches; 'user' keeps your HOME (needed for real logins)", AGENT_HOME_RUN,
           choices=(AGENT_HOME_RUN, AGENT_HOME_USER)),
    Option("sandbox", "the filesystem sandbox (bubblewrap, Linux) around every agent and check command: 'auto' uses it "
           "where bwrap can run and says why not elsewhere (default); 'bwrap' makes a missing sandbox an error; 'off' "
           "never", "auto", choices=("auto", "bwrap", "off")),
    Option("sandbox_read", "show PATH read-only inside every run's sandbox, besides the system, the agent's program "
           "and the session's Python (repeatable; a task, trial or agent 'sandbox: {read: [...]}' adds its own)",
           default=[], many=True, metavar="PATH"),
    Option("sandbox_write", "show PATH read-write inside every run's sandbox, besides the workspace, HOME, /tmp and "
           "the outbox (repeatable; 'sandbox: {write: [...]}' in a file or agent adds its own)",
           default=[], many=True, metavar="PATH"),
    Option("offline", "run each agent in a network namespace with only loopback (Linux, unshare -n); the model double "
           "runs inside it", False, flag=True),
    Option("network", "what network each agent run has: 'provider' (default) its own namespace whose only way out is a "
           "proxy that lets through its provider's hosts, its base URLs' hosts and network.allow; 'host' the host's "
           "network; 'none' loopback only (a task, trial or agent 'network' key overrides it)", DEFAULT_NETWORK,
           choices=NETWORK_MODES),
    Option("network_resolve", "provider network: dial HOST:PORT at ADDRESS:APORT instead, as curl's --resolve "
           "(repeatable; HOST:PORT:ADDRESS:APORT), e.g. a provider's host mapped to a local gateway or model double",
           default=[], many=True, metavar="HOST:PORT:ADDRESS:APORT"),
    Option("model_double", "run every CLI agent against the scripted local model SCRIPT (YAML) unless its entry names a "
           "model_double of its own", None, metavar="SCRIPT"),
    Option("record", "record each CLI agent's model traffic as a cassette per run under DIR, through a local recording "
           "proxy on 127.0.0.1 to the CLI's provider or --agentrace-record-upstream (docs/cassettes.md)", None,
           metavar="DIR"),
    Option("record_upstream", "with --agentrace-record: send the recorded traffic to URL (a gateway such as LiteLLM or "
           "OpenRouter, or a model double) instead of each CLI's provider", None, metavar="URL"),
    Option("replay", "replay each CLI agent's run from its cassette under DIR against the model double (no network, "
           "no key); a request the cassette does not hold makes the run an error (cassette mismatch)", None,
           metavar="DIR"),
    Option("replay_match", "how --agentrace-replay matches requests: 'strict' (default) compares each request with the "
           "recorded one, volatile fields aside; 'loose' matches by turn only", STRICT_MATCH, choices=REPLAY_MATCHES),
    # resource limits of each run's agent (kernel-enforced; 0 or none: no limit; a file's or agent's limits win)
    Option("memory", f"memory each run's agent may use (e.g. 512M, 4G; default {human_bytes(LIMITS.memory)}): the "
           "whole process tree in a delegated cgroup, and RLIMIT_DATA per process", LIMITS.memory, type=byte_size,
           metavar="SIZE"),
    Option("max_procs", f"processes (threads included) each run's agent may have at once (default {LIMITS.processes}): "
           "cgroup pids.max, else RLIMIT_NPROC (not enforced as root without a cgroup)", LIMITS.processes,
           type=limit_count, metavar="N"),
    Option("disk", f"largest file and total bytes each run's agent may write in its workspace (default "
           f"{human_bytes(LIMITS.disk)}): RLIMIT_FSIZE, and the workspace's growth checked while it runs", LIMITS.disk,
           type=byte_size, metavar="SIZE"),
    Option("cpu_time", f"CPU seconds each process of a run's agent may use (default {LIMITS.cpu_time:g}): RLIMIT_CPU",
           LIMITS.cpu_time, type=limit_seconds, metavar="SECONDS"),
    Option("cgroup", "where each run's control group is made: 'auto' (default) finds a delegated cgroup v2 folder "
           "(memory, pids) or a writable v1 pids one and falls back to rlimits alone; 'off'; or a folder's path",
           CGROUP_AUTO, metavar="auto|off|PATH"),
    # where results go
    Option("out", "results folder (default: .agentrace under the rootdir)", None, metavar="DIR"),
    Option("db", f"SQLite history file (default: ${DB_ENV}, else {DEFAULT_OUT}/{DB_NAME} under the rootdir)", None,
           metavar="PATH", cli="--db"),
    Option("lock_timeout", "seconds a session waits for another session that writes the same results folder before it "
           "stops with an error (default 600)", 600.0, type=positive_float, metavar="SECONDS"),
    Option("progress_seconds", "seconds between the plain progress lines printed when the output is not a terminal "
           "or under pytest-xdist (default 30)", 30.0, type=positive_float, metavar="SECONDS"),
    Option("no_save", "write nothing to the history store (no sessions, runs or ratings); the results folder's "
           "runs/ (--agentrace-out) is still written", False, flag=True),
    Option("allow_empty", "exit 0 when no run could start (every agent missing, every run item skipped); by default "
           "such a session fails with one line naming why", False, flag=True),
    *(format_option(f) for f in formats.FORMATS if f.to == "file"),  # --agentrace-html/md/json: report.formats
    Option("no_cost", "hide the token and cost columns of the run tables (the statistics keep theirs)", False, flag=True),
    # statistics, snapshots, gates
    Option("seed", "seed of the bootstrap and permutation draws, so a report is reproducible (default 0)", 0, type=int,
           metavar="N", cli="--seed"),
    Option("resamples", f"bootstrap resamples per interval (default {RESAMPLES:,}; at least 100)", RESAMPLES,
           type=positive_int, metavar="N", cli="--resamples"),
    Option("baseline", "arm the other arms are compared with (default: the trial's [defaults] baseline, else its first arm)",
           None, metavar="ARM", cli="--baseline"),
    Option("snapshot", "compare this session's cells with a snapshot file at session end", None, metavar="PATH"),
    Option("snapshot_update", "write the --agentrace-snapshot file from this session instead of comparing", False, flag=True),
    Option("tolerance", "token ratio change within which a snapshot comparison calls nothing dearer/improved (default "
           "0.10; an arm against its baseline in one session is judged by its interval and test, not by this)",
           0.10, type=non_negative_float, metavar="FRACTION", cli="--tolerance"),
    Option("regression_alpha", "one-sided level of the snapshot pass-rate test behind 'regressed', and the family-wise "
           "error rate of the verdict gates (default 0.05)", 0.05,
           type=probability, metavar="P", cli="--alpha"),
    Option("fail_on", "fail (exit 1) when one of these occurs: " + GATE_HELP, [], many=True, metavar="LIST", cli="--fail-on"),
    Option("gate_cells", "how the verdict gates of --agentrace-fail-on treat many cells: 'holm' (default) fails only "
           "on a verdict whose Holm-adjusted p over every test the gates look at is below --agentrace-regression-alpha "
           "(a session with no change fails at most that often, however many cells); 'raw' gates each cell at its own "
           "level (false failures grow with the cells: 18 to 38 percent of unchanged sessions at 10 cases)", HOLM,
           choices=GATE_CELLS, cli="--gate-cells"),
    Option("generalize", "what a verdict over several cases is about: 'fixed' (default) asks whether the arm is cheaper on "
           "the cases that ran (runs resampled within each case, labels permuted within each case; can decide with 2-3 "
           "cases); 'cases' asks whether it would hold for new cases like these (cases resampled, sign-flip test over "
           "cases; needs 6 or more cases)", FIXED, choices=TARGETS, cli="--generalize"),
    Option("stop_when_decided", "run reps in order and skip a trial cell's remaining reps once its relative cost vs the "
           "baseline is clear or futile (group-sequential test; --agentrace-reps is the cap)", False, flag=True),
    # CLI only
    Option("last_session", "only the runs of the last pytest session into this folder (a results folder keeps every run "
           "ever made there)", False, flag=True, cli="--last-session", pytest=False),
)
BY_NAME: Mapping[str, Option] = {o.name: o for o in OPTIONS}


class Settings:
    """The resolved value of every pytest-side option, read-only: ``settings.reps``, ``settings.fail_on``.
    An unknown name raises ``AttributeError``."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]):
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no setting {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("settings are read-only")

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (names of settings; an unknown one raises ``AttributeError``)."""
        for name in changes:
            getattr(self, name)
        return Settings({**self._values, **changes})


def add_pytest_options(parser: Any) -> None:
    """Register every pytest-side option with pytest's ``parser``: the ``--agentrace-*`` flag (default None, so that
    ``resolve`` can tell a given value from an absent one) and its ini key."""
    group = parser.getgroup("agentrace", "coding-agent races and trials (pytest-agentrace)")
    numbers = _pytest_has_number_ini()
    for opt in pytest_options():
        group.addoption(opt.flag_name, dest=opt.dest, **opt.argparse_kwargs(None))
        if opt.has_ini:
            kind = opt.ini_type if numbers or opt.ini_type not in ("int", "float") else "string"
            parser.addini(opt.dest, f"{opt.help} (ini form of {opt.flag_name})", type=kind, default=None)


def _pytest_has_number_ini() -> bool:
    """Whether this pytest's ``addini`` knows the ``int`` and ``float`` types (pytest 8.4 and later; before,
    numbers are declared ``string`` and converted here)."""
    from importlib.metadata import version

    major, minor = (int(part) for part in version("pytest").split(".")[:2])
    return (major, minor) >= (8, 4)


def resolve(getoption: Callable[[str], Any], getini: Callable[[str], Any]) -> Settings:
    """The pytest-side settings from ``config.getoption`` and ``config.getini``: command line, then ini, then the
    default. Raises ``ValueError`` naming the ini key when an ini value does not convert."""
    values = {}
    for opt in pytest_options():
        value = getoption(opt.dest)
        if value is None and opt.has_ini:
            try:  # pytest's own conversion of a typed key (8.4+), or ours of a string (8.3)
                raw = getini(opt.dest)
                if raw not in (None, "", []):
                    value = opt.from_ini(raw)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"ini key {opt.dest}: {exc}; write {_INI_EXAMPLE[opt.ini_type]}") from None
        if value is None:
            value = list(opt.default) if isinstance(opt.default, list) else opt.default
        values[opt.name] = value
    return Settings(values)


_INI_EXAMPLE = {"bool": "true or false", "int": "a whole number, e.g. 3", "float": "a number, e.g. 0.5",
                "linelist": "one value per line (a list in native TOML)", "string": "a string"}


def add_cli_options(parser: argparse.ArgumentParser, *names: str, suppress: bool = False) -> None:
    """Add the CLI flags of the settings ``names`` (each must have ``cli``) with their defaults (``suppress``:
    ``argparse.SUPPRESS``, for a second parser that reads the same flags from leftover arguments)."""
    for name in names:
        opt = BY_NAME[name]
        assert opt.cli, f"option {name} has no CLI flag"
        default = argparse.SUPPRESS if suppress else (list(opt.default) if isinstance(opt.default, list) else opt.default)
        parser.add_argument(opt.cli, dest=name, **opt.argparse_kwargs(default))


def out_dir(config: Any, value: str | None = None) -> Path:
    """The results folder: ``value`` (``--agentrace-out``, ``setting_path``) or ``<rootdir>/.agentrace``.

    Nothing is written inside the installed package by default: when the rootdir lies in it (pytest run from
    inside ``builtin_tasks/``, or an ini file there), the default is ``<invocation dir>/.agentrace``, and when
    that is inside it too the plugin stops with a usage error (``in_package``).
    """
    if value:
        return setting_path(config, "out", value).resolve()
    if in_package(Path(config.rootpath)):
        return Path(config.invocation_params.dir).resolve() / DEFAULT_OUT
    return Path(config.rootpath) / DEFAULT_OUT


def setting_path(config: Any, name: str, value: str) -> Path:
    """The path setting ``name`` holds (``value``): a relative one is relative to the folder pytest was started in
    when it came from the command line, and to the ini file's folder when it came from the ini file (as pytest's own
    ``paths`` ini keys), so a project's ``agentrace_out = results`` is one folder wherever pytest is started."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    opt = BY_NAME.get(name) or next((o for o in pytest_options() if o.name == name), None)  # a format added later
    from_ini = opt is not None and config.getoption(opt.dest, None) is None and getattr(config, "inipath", None) is not None
    return (Path(config.inipath).parent if from_ini else Path(config.invocation_params.dir)) / path


def in_package(path: Path) -> bool:
    """Whether ``path`` lies inside this installed package's folder (``pytest_agentrace/``)."""
    return path.resolve().is_relative_to(Path(__file__).resolve().parent)
