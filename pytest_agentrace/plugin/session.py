"""The pytest side's one session object, ``AgentraceSession``: built by ``pytest_configure`` under ``--agentrace`` on
every process (the controller and each pytest-xdist worker), kept under one stash key (``switch.session_of``), and
called by each hook of ``pytest_agentrace.plugin``, as syrupy's hooks call its ``SnapshotSession``. This module is
imported by name (``switch.session_module``) only under ``--agentrace``: a plain pytest run never loads it.

It holds the settings (resolved once per process: command line, then ini, then default; ``options``), the session
id (a worker takes the controller's), the options every run shares (``RunOptions``), why the runs are not sandboxed,
the shard, the collection caches (``collect.SpecFiles``), the deselected count and the files that failed to load,
and the races and cases of the selected runs. Which runs are kept is decided by ``spec.select`` (pure rules); the
nodes are in ``plugin.collect``; the session's end is the ``Controller`` (``plugin.controller``, registered on the
controller process only).

Under ``--agentrace-shard K/N`` with N > 1, ``--agentrace-stop-when-decided`` is turned off with a warning: its looks
need every rep of a cell, and a shard holds only some of them. Decide on the merged folder (``agentrace merge``,
then ``agentrace report`` / ``agentrace plan``). ``--agentrace-resume`` works per run id as without shards.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock, Timeout

from pytest_agentrace import options as _options
from pytest_agentrace.agents.base import RunOptions
from pytest_agentrace.errors import SpecError, did_you_mean
from pytest_agentrace.model_double import netns
from pytest_agentrace.model_double.script import load_script
from pytest_agentrace.plugin import collect, interrupts, race, validate
from pytest_agentrace.plugin.controller import Controller
from pytest_agentrace.plugin.switch import SESSION_KEY
from pytest_agentrace.record.safefile import make_own_folder
from pytest_agentrace.record.store import cell_seconds
from pytest_agentrace.record.storepath import default_path
from pytest_agentrace.report import formats
from pytest_agentrace.run import discard
from pytest_agentrace.run.cgroup import Parent, find_parent
from pytest_agentrace.run.limits import Limits
from pytest_agentrace.run.resume import install_sigterm
from pytest_agentrace.run.sandbox import Sandbox, installed_package
from pytest_agentrace.run.sandbox import bwrap_path as sandbox_bwrap_path
from pytest_agentrace.run.sandbox import probe as sandbox_probe
from pytest_agentrace.spec.builtin import SAME_NAME_NOTE, level_key, levels_of, node_path, select_builtin
from pytest_agentrace.spec.common import AgentSpec
from pytest_agentrace.spec.harbor import is_harbor_folder
from pytest_agentrace.spec.matrix import RunSpec
from pytest_agentrace.spec.select import Rules, select_runs, wanted_agents
from pytest_agentrace.spec.shard import Shard, parse_shard
from pytest_agentrace.stats.snapshot import SnapshotError, read_snapshot
from pytest_agentrace.stats.verdict import parse_fail_on

MIN_RESAMPLES = 100
SESSION_LOCK = ".session.lock"
WORKER_SESSION = "agentrace_session"  # workerinput key: the controller's session id
WORKER_DESELECTED = "agentrace_deselected"  # workeroutput key: a pytest-xdist worker's deselected items
WORKER_OVERRIDES = "agentrace_overrides"  # workeroutput key: what a worker's --agentrace-agent overrides did
WORKER_SPLIT = "agentrace_split"  # workeroutput key: the digest of a worker's shard split
STOP_OFF_WARNING = ("--agentrace-stop-when-decided is off under --agentrace-shard {shard}: a shard holds only some reps "
                    "of each cell, so its looks would see part of the evidence; every rep up to the cap runs (decide on "
                    "the merged folder with `agentrace report --stop-when-decided CAP`)")
NOTHING_COLLECTED = (
    "agentrace: no task or trial file was found{where}. --agentrace collects:",
    "  task files      *.yaml / *.yml whose top level has `description:` and `test_command:` (`agentrace init` writes one)",
    "  trial files     *.toml (not pyproject.toml) with a top-level [[questions]] array",
    "  Harbor tasks    a folder holding task.toml and instruction.md",
    "  built-in tasks  --agentrace-builtin NAME (or all; `agentrace tasks list` shows them)",
    "A file named on the command line is always read as a task (YAML) or trial (TOML), so its mistakes are reported.",
)


def is_worker(config: pytest.Config) -> bool:
    """True inside a pytest-xdist worker (which must never aggregate or set the exit status)."""
    return hasattr(config, "workerinput")


@dataclass(eq=False)
class AgentraceSession:
    """The state of one pytest process's agentrace session, and what each hook does with it (see the module
    docstring). Built by ``start``; ``settings`` are final once built (stop-when-decided already off under a shard).

    ``id``: 12 hex digits, the same on every process of the session; ``out``: the results folder; ``run_options``:
    what every run shares (sandbox, cgroup, limits, network, model double, cassettes); ``sandbox_why``: why the
    runs have no sandbox under ``--agentrace-sandbox auto`` (None: they have one, or it is off on purpose);
    ``deselected``: items deselected (this process's, or on the controller the largest count a worker reported);
    ``spec_errors``: node ids of task/trial files that failed to load; ``wanted``: ``--agentrace-agent`` parsed once
    (None when not given, or when it failed: then ``wanted_error`` holds the ``SpecError`` each file's collection
    reports, and no later hook parses the option again); ``overrides``: what each whole-agent ``--agentrace-agent``
    spec did to the collected files' lists (id -> ``{"replaced", "added"}``, ``spec.select.override_effects``; on
    the controller merged from the workers); ``groups``: the races of the selected runs
    (``{race id: [RunSpec, ...]}``); ``cases``: under stop-when-decided, the selected cases per ``(trial file,
    agent id)``; ``feed``: the live progress display's feed (``spec -> on_stdout`` or None); ``split``: the digest of
    the shard's split of the runs (``spec.shard.split_digest``; on the controller a worker's), None without a shard
    of N > 1."""

    config: pytest.Config
    settings: _options.Settings
    id: str
    out: Path
    shard: Shard | None = None
    run_options: RunOptions = field(default_factory=RunOptions)
    sandbox_why: str | None = None
    deselected: int = 0
    spec_errors: set[str] = field(default_factory=set)
    wanted: tuple[AgentSpec, ...] | None = None
    wanted_error: SpecError | None = None
    overrides: dict[str, set[str]] = field(default_factory=dict)
    groups: dict[str, list[RunSpec]] = field(default_factory=dict)
    cases: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    feed: Callable[[RunSpec], Callable[[bytes], None] | None] | None = None
    split: str | None = None

    @cached_property
    def files(self) -> collect.SpecFiles:
        """Which files are task and trial files, and their parsed content (cached for the session)."""
        return collect.SpecFiles(self.config)

    @property
    def agents(self) -> tuple[AgentSpec, ...] | None:
        """``--agentrace-agent``'s specs (None when not given; ``spec.select.choose_agents`` applies them). Raises the
        option's ``SpecError`` (``wanted_error``) when a value is malformed: a collection error of each file."""
        if self.wanted_error is not None:
            raise self.wanted_error.with_traceback(None)
        return self.wanted

    def note_overrides(self, effects: dict[str, str]) -> None:
        """Add one file's ``spec.select.override_effects`` to ``overrides`` (a pytest-xdist worker passes them on)."""
        for agent_id, effect in effects.items():
            self.overrides.setdefault(agent_id, set()).add(effect)
        if effects and hasattr(self.config, "workeroutput"):
            self.config.workeroutput[WORKER_OVERRIDES] = {k: sorted(v) for k, v in self.overrides.items()}

    # -- pytest_configure --------------------------------------------------------------------------------------

    @classmethod
    def start(cls, config: pytest.Config) -> AgentraceSession:
        """Resolve and check the settings, give the session its id and its runs their options, and on the
        controller process check the results folder and report files, lock the folder and register the
        ``Controller``. Raises ``pytest.UsageError`` for settings that cannot work (before any run and its cost)."""
        found = resolve_settings(config)
        shard = None
        if found.shard is not None:
            try:
                shard = parse_shard(found.shard, os.environ)
            except ValueError as exc:
                raise pytest.UsageError(str(exc)) from None
            if shard.total > 1 and found.stop_when_decided:
                found = found.replace(stop_when_decided=False)
                if not is_worker(config):
                    config.issue_config_time_warning(pytest.PytestConfigWarning(STOP_OFF_WARNING.format(shard=shard)),
                                                     stacklevel=2)
        check_settings(found)
        sid = config.workerinput.get(WORKER_SESSION) if is_worker(config) else None
        self = cls(config, found, sid or uuid.uuid4().hex[:12], _options.out_dir(config, found.out), shard)
        try:  # parsed once; a malformed value is each file's collection error (``agents``), never a later hook's
            self.wanted = wanted_agents(found.agent or ())
        except SpecError as exc:
            self.wanted_error = exc
        config.stash[SESSION_KEY] = self
        sandbox, self.sandbox_why = session_sandbox(config, found, self.out)
        here = Path(config.invocation_params.dir)
        self.run_options = RunOptions(
            cache_dir=self.out / ".cache" / "repos", isolated_home=found.agent_home != _options.AGENT_HOME_USER,
            offline=found.offline, sandbox=sandbox, cgroup=session_cgroup(found), network=found.network,
            network_resolve=tuple(found.network_resolve or ()),
            limits=Limits(memory=found.memory, processes=found.max_procs, disk=found.disk, cpu_time=found.cpu_time),
            model_double=str((here / found.model_double).resolve()) if found.model_double else None,
            **cassette_options(config, found))
        check_model_double(config, self.run_options)
        install_sigterm(config)  # in workers too: a worker's SIGTERM ends its agent's group like Ctrl-C (plugin.interrupts)
        if is_worker(config):
            return self
        interrupts.install(config)
        if _options.in_package(self.out):
            raise pytest.UsageError(f"the results folder would be {self.out}, inside the installed pytest-agentrace "
                                    "package; run pytest from another folder or pass --agentrace-out DIR")
        check_out_dir(self.out)
        check_report_paths(config, found)
        if found.snapshot and not found.snapshot_update:
            try:
                read_snapshot(_options.setting_path(config, "snapshot", found.snapshot))
            except SnapshotError as exc:
                raise pytest.UsageError(f"--agentrace-snapshot: {exc}") from None
        lock_out_dir(config, self.out, found.lock_timeout)
        config.pluginmanager.register(Controller(self), Controller.NAME)
        return self

    def header(self) -> list[str]:
        """The report-header line of the shard (none without ``--agentrace-shard``)."""
        if self.shard is None:
            return []
        where = f" ({self.shard.source})" if self.shard.source != str(self.shard) else ""
        return [f"agentrace: shard {self.shard} of the runs{where}: split by run id, balanced by the history's durations"]

    # -- collection --------------------------------------------------------------------------------------------

    def ignore(self, path: Path) -> bool | None:
        """``pytest_ignore_collect``: a task's starter ``repo`` folder, a trial's repos and overlays and a Harbor
        task's ``tests/``, ``solution/``, ``environment/`` are input, not tests (True); None: pytest decides."""
        if not path.is_dir():
            return None
        parent = path.parent
        if is_harbor_folder(parent):
            return True
        if path.resolve() in self.files.task_repo_dirs(parent) | self.files.trial_input_dirs(parent):
            return True
        return None

    def collect_file(self, path: Path, parent: pytest.Collector) -> collect.SpecFile | None:
        """``pytest_collect_file``: the node of a task file, Harbor task folder (its ``task.toml``) or trial file
        (their validation nodes under ``--agentrace-validate``); a file named on the command line is claimed even
        when it does not look like one, so its mistakes are reported."""
        named = self.files.named(path)
        validating = self.settings.validate
        if path.suffix in (".yaml", ".yml") and (named or self.files.is_task(path)):
            node = validate.ValidationTaskFile if validating else collect.TaskFile
        elif path.name == "task.toml" and is_harbor_folder(path.parent):
            node = validate.ValidationHarborTaskFile if validating else collect.HarborTaskFile
        elif path.suffix == ".toml" and ((named and path.name != "pyproject.toml") or self.files.is_trial(path)):
            node = collect.TrialFile
        else:
            return None
        made = node.from_parent(parent, path=path, **self._outside_nodeid(path))
        made.agentrace = self
        return made

    def _outside_nodeid(self, file_path: Path) -> dict[str, str]:
        """``{"nodeid": ...}`` for a file outside the rootdir, where pytest would give an empty node-id path (and
        JUnit an empty classname): ``spec.builtin.node_path`` (``agentrace-builtin/<task>/task.yaml`` for a built-in
        task, else the path relative to the invocation folder); ``{}`` (pytest's own id) for a file under the
        rootdir."""
        if file_path.resolve().is_relative_to(Path(self.config.rootpath).resolve()):
            return {}
        return {"nodeid": node_path(file_path, self.config.rootpath, self.config.invocation_params.dir)}

    def note_collect_report(self, collector: pytest.Collector, report: pytest.CollectReport) -> None:
        """Count the collection errors of task and trial files (``tolerate_spec_errors``)."""
        if report.failed and isinstance(collector, collect.SpecFile):
            self.spec_errors.add(report.nodeid)

    def rules(self) -> Rules:
        """The settings ``spec.select.select_runs`` reads (the history only under a shard of N > 1)."""
        s = self.settings
        shard = self.shard
        history = cell_seconds(history_path(self.config, s)) if shard is not None and shard.total > 1 else {}
        return Rules(difficulty=tuple(s.difficulty or ()), validate=s.validate, shard=shard, history=history,
                     race=s.race, rep_major=s.stop_when_decided)

    def select(self, items: list[pytest.Item]) -> None:
        """``pytest_collection_modifyitems``: keep the items of the runs ``spec.select.select_runs`` keeps, in its
        order (pytest's own tests first under rep-major order, as before any run), deselect the others through
        ``pytest_deselected``, warn, and give a colliding run's item its error."""
        runs = [item.run_spec for item in items if isinstance(item, collect.RunItem)]
        chosen = select_runs(runs, self.rules())
        self.split = chosen.split
        if chosen.split is not None and hasattr(self.config, "workeroutput"):
            self.config.workeroutput[WORKER_SPLIT] = chosen.split
        kept = {id(spec): n for n, spec in enumerate(chosen.kept)}
        keep, drop = [], []
        for item in items:
            run = isinstance(item, collect.RunItem)
            (keep if (id(item.run_spec) in kept if run else chosen.plain) else drop).append(item)
        if drop:
            self.config.hook.pytest_deselected(items=drop)
        for line in chosen.warnings:
            warnings.warn(pytest.PytestConfigWarning(line), stacklevel=1)
        errors = {id(spec): message for spec, message in chosen.errors}
        for item in keep:
            if isinstance(item, collect.RunItem):
                item.collision = errors.get(id(item.run_spec))
        if self.settings.stop_when_decided:
            keep.sort(key=lambda it: kept[id(it.run_spec)] if isinstance(it, collect.RunItem) else -1)
        items[:] = keep

    def collected(self, items: list[pytest.Item]) -> None:
        """``pytest_collection_finish`` (after ``-k`` and all deselection): under ``--agentrace-race`` the races of
        the selected runs; under ``--agentrace-stop-when-decided`` the cases selected per trial and agent (a look
        over fixed cases needs a record of each). Workers note the same."""
        runs = [item.run_spec for item in items if isinstance(item, collect.RunItem)]
        if self.settings.race:
            self.groups = race.groups(runs)
        if self.settings.stop_when_decided:
            cases: dict[tuple[str, str], set[str]] = {}
            for spec in runs:
                cases.setdefault((str(spec.source), spec.agent.id), set()).add(spec.case)
            self.cases = {k: sorted(v) for k, v in cases.items()}

    def count_deselected(self, items: list[pytest.Item]) -> None:
        """``pytest_deselected``: count deselected items (``-k``, ``-m``, shards, difficulty), so that a session whose
        items were all deselected gets no "nothing collected" hint; a pytest-xdist worker passes its count on."""
        self.deselected += len(items)
        if hasattr(self.config, "workeroutput"):
            self.config.workeroutput[WORKER_DESELECTED] = self.deselected

    def worker_down(self, node: Any) -> None:
        """``pytest_testnodedown`` (controller): take a finished worker's deselected count, what its
        ``--agentrace-agent`` overrides did and its shard's split."""
        output = getattr(node, "workeroutput", {})
        count = output.get(WORKER_DESELECTED, 0)
        if count:
            self.deselected = max(self.deselected, count)
        for agent_id, effects in output.get(WORKER_OVERRIDES, {}).items():
            self.overrides.setdefault(agent_id, set()).update(effects)
        if isinstance(found := output.get(WORKER_SPLIT), str):
            self.split = found

    def configure_node(self, node: Any) -> None:
        """``pytest_configure_node`` (controller): give a worker the session id."""
        node.workerinput[WORKER_SESSION] = self.id

    # -- the test loop and the summary -------------------------------------------------------------------------

    def report_status(self, report: pytest.TestReport) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        """``pytest_report_teststatus``: a run's infrastructure error is shown and counted as an error
        (``collect.report_status``); None for any other report (pytest decides)."""
        return collect.report_status(report)

    def finish(self) -> None:
        """``pytest_sessionfinish``: the runs' scratch folders, deleted behind them (``run.discard``), are gone when the
        session ends."""
        discard.drain()

    @contextlib.contextmanager
    def tolerate_spec_errors(self, session: pytest.Session) -> Iterator[None]:
        """Around ``pytest_runtestloop``: a task or trial file that cannot be loaded is one collection error, and the
        other files' runs still go ahead: when every collection error comes from such a file, the loop runs as under
        ``--continue-on-collection-errors`` (the errors are still reported and the session fails). Any other
        collection error keeps pytest's rule; ``-x`` / ``--maxfail`` still stop at the first error."""
        option = session.config.option
        before = option.continue_on_collection_errors
        if session.testsfailed and not before and session.testsfailed <= len(self.spec_errors):
            option.continue_on_collection_errors = True
        try:
            yield
        finally:
            option.continue_on_collection_errors = before

    def terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        """On the controller: when nothing was collected (and nothing deselected or failed to collect), the file
        patterns the plugin looks for; under ``--agentrace-race`` one line per race."""
        if is_worker(self.config):
            return
        stats = terminalreporter.stats
        if (exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and not stats.get("deselected") and not self.deselected
                and not stats.get("error")):
            terminalreporter.section("agentrace: nothing collected")
            for line in self.nothing_collected_lines():
                terminalreporter.write_line(line)
        lines = race.summary_lines(self.config.pluginmanager.getplugin(Controller.NAME).finish()) \
            if self.settings.race else []
        if lines:
            terminalreporter.section("agentrace race")
            for line in lines:
                terminalreporter.write_line(line)

    def nothing_collected_lines(self) -> list[str]:
        """The hint when nothing was collected: the file patterns ``collect_file`` claims, after where was searched."""
        args = [a for a in self.config.args if not a.startswith("-")]
        where = f" under {', '.join(args)}" if args else ""
        return [NOTHING_COLLECTED[0].format(where=where), *NOTHING_COLLECTED[1:]]


# -- settings and what the session's runs share ----------------------------------------------------------------


def resolve_settings(config: pytest.Config) -> _options.Settings:
    """The session's settings (``options.resolve``); ``pytest.UsageError`` for an ini value that does not convert."""
    try:
        return _options.resolve(config.getoption, lambda name: _getini(config, name))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _getini(config: pytest.Config, name: str) -> object:
    """``config.getini``, with pytest 9.2's ``UsageError`` for a value of the wrong type as a ``ValueError`` (so that
    ``options.resolve`` names the key, as on earlier pytests)."""
    try:
        return config.getini(name)
    except pytest.UsageError as exc:
        raise ValueError(str(exc)) from None


def builtin_paths(names: list[str], difficulty: Sequence[str] | None) -> list[str]:
    """The ``task.yaml`` paths of the built-in tasks ``names`` (``all``: every one) of the ``difficulty`` levels
    (None: any), for ``switch.builtin_args``. Raises ``pytest.UsageError`` for an unknown name or a difficulty no
    such task has."""
    try:
        tasks = select_builtin(names, difficulty)
    except (KeyError, FileNotFoundError) as exc:
        raise pytest.UsageError(f"--agentrace-builtin: {exc.args[0]}") from None
    if not tasks:
        wanted = ",".join(difficulty or ())
        levels = levels_of(select_builtin(names))
        raise pytest.UsageError(f"--agentrace-builtin: no task among {', '.join(names)} has difficulty {wanted}"
                                f"{did_you_mean(level_key(wanted), levels)}; their levels: {', '.join(levels) or 'none'} "
                                f"({SAME_NAME_NOTE}); see `agentrace tasks list`")
    return [str(t.path) for t in tasks]


def check_settings(found: _options.Settings) -> None:
    """Usage errors for settings that cannot work together (before any run and its cost)."""
    try:
        parse_fail_on(found.fail_on)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if found.snapshot_update and not found.snapshot:
        raise pytest.UsageError("--agentrace-snapshot-update needs --agentrace-snapshot PATH (the file to write)")
    if found.resamples < MIN_RESAMPLES:
        raise pytest.UsageError(f"--agentrace-resamples must be at least {MIN_RESAMPLES}")


def history_path(config: pytest.Config, found: _options.Settings) -> Path:
    """The history file shard durations come from: ``--agentrace-db``, else ``$AGENTRACE_DB`` / the default."""
    return Path(found.db).expanduser().resolve() if found.db else default_path(config.rootpath)


def cassette_options(config: pytest.Config, found: _options.Settings) -> dict[str, str | None]:
    """``RunOptions`` fields of ``--agentrace-record`` / ``--agentrace-replay`` (folders made absolute). Raises
    ``pytest.UsageError`` for settings that cannot work together or a replay folder that does not exist."""
    base = Path(config.invocation_params.dir)
    record = str((base / found.record).resolve()) if found.record else None
    replay = str((base / found.replay).resolve()) if found.replay else None
    if record and replay:
        raise pytest.UsageError("--agentrace-record and --agentrace-replay cannot be used together (record once, "
                                "then replay in another session)")
    if found.record_upstream and not record:
        raise pytest.UsageError("--agentrace-record-upstream needs --agentrace-record DIR")
    if found.record_upstream and not found.record_upstream.startswith(("http://", "https://")):
        raise pytest.UsageError(f"--agentrace-record-upstream {found.record_upstream!r}: give an http:// or "
                                "https:// URL")
    if record and found.offline:
        raise pytest.UsageError("--agentrace-record needs the network to reach its upstream; drop --agentrace-offline "
                                "(replay offline instead)")
    if replay and not Path(replay).is_dir():
        raise pytest.UsageError(f"--agentrace-replay {found.replay}: no such folder of cassettes ({replay})")
    return {"record": record, "record_upstream": found.record_upstream, "replay": replay,
            "replay_match": found.replay_match}


def session_cgroup(found: _options.Settings) -> Parent | None:
    """The folder each run's control group is made in (``run.cgroup.find_parent``), or None (rlimits only).
    Raises ``pytest.UsageError`` when ``--agentrace-cgroup PATH`` names a folder that cannot be used."""
    try:
        return find_parent(found.cgroup)
    except ValueError as exc:
        raise pytest.UsageError(f"--agentrace-cgroup: {exc}") from None


def session_sandbox(config: pytest.Config, found: _options.Settings, out: Path) -> tuple[Sandbox | None, str | None]:
    """``(profile, why not)``: the session's sandbox profile (``run.sandbox``), or None under ``--agentrace-sandbox
    off`` or where bwrap cannot run (``auto``: with the reason, for the summary's warning; ``bwrap``: a usage error).
    Hides the results folder ``out`` and the user's HOME; shows the session's interpreter, its package folders
    (every ``site-packages`` / ``dist-packages`` folder on ``sys.path``) and this package read-only."""
    if found.sandbox == "off":
        return None, None
    exe, why = sandbox_probe(found.offline)
    if exe is None:
        if found.sandbox == "bwrap":
            raise pytest.UsageError(f"--agentrace-sandbox bwrap: {why}")
        if os.geteuid() == 0 and sandbox_bwrap_path() is not None:  # root never runs agents with its privilege
            raise pytest.UsageError(f"--agentrace-sandbox auto: this session runs as root and {why}; fix that, or "
                                    "run as another user, or pass --agentrace-sandbox off to run agents as root")
        return None, why
    package = Path(_options.__file__).resolve().parent
    # the interpreter's package folders wherever they are (a user site under the hidden HOME, a folder a .pth adds)
    sites = tuple(Path(p) for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir())
    visible = (Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent, package,
               *filter(None, [installed_package()]), *sites)
    here = Path(config.invocation_params.dir)
    return Sandbox(exe, hidden=(out,), visible=visible, offline=found.offline).exposing(
        [(here / Path(p).expanduser()).resolve() for p in found.sandbox_read or ()],
        [(here / Path(p).expanduser()).resolve() for p in found.sandbox_write or ()]), None


def check_model_double(config: pytest.Config, options: RunOptions) -> None:
    """A bad ``--agentrace-model-double`` script stops the session at once, naming file and key; with
    ``--agentrace-offline`` where network namespaces are not permitted the controller warns once and the runs go on
    without one."""
    if options.model_double:
        try:
            load_script(options.model_double)
        except SpecError as exc:
            raise pytest.UsageError(f"--agentrace-model-double: {exc}") from None
    if options.offline and not is_worker(config):
        prefix, why = netns.probe()
        if prefix is None:
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(f"--agentrace-offline: {why}; agents run without a network namespace"), stacklevel=2)


def lock_out_dir(config: pytest.Config, out: Path, timeout: float) -> None:
    """One session per results folder at a time: hold ``<out>/.session.lock`` until the session ends. A second
    session waits (saying so on stderr) and stops with a usage error after ``timeout`` seconds; it never
    overwrites what the first one writes."""
    lock = FileLock(str(out / SESSION_LOCK))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        sys.stderr.write(f"agentrace: another session is writing {out}; waiting for it to end (at most {timeout:g} s)\n")
        try:
            lock.acquire(timeout=timeout)
        except Timeout:
            raise pytest.UsageError(f"--agentrace-out {out}: another session held it for {timeout:g} s; try again later or "
                                    "pass another --agentrace-out") from None
    config.add_cleanup(lock.release)


def check_out_dir(out: Path) -> None:
    """Fail early (one usage error, not one traceback per run) when the results folder cannot be written. A results
    folder made here gets a ``.gitignore`` of ``*`` (as pytest's ``.pytest_cache``): it stays out of ``git status``
    and of commits unless the user removes it."""
    try:
        make_own_folder(out)
        fd, probe = tempfile.mkstemp(prefix=".write-test.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise pytest.UsageError(f"--agentrace-out {out}: cannot write the results folder there ({exc.strerror or exc})") from None


def check_report_paths(config: pytest.Config, found: _options.Settings) -> None:
    """Usage error before any run (and its cost) when a report file (``--agentrace-html/md/json``, each file format of
    ``report.formats.FORMATS``) could not be written at the end: its folder cannot be made or written, or the path is
    a folder or a read-only file."""
    for option in (f.name for f in formats.FORMATS if f.to == "file"):
        value = getattr(found, option, None)
        if not value:
            continue
        path = _options.setting_path(config, option, value)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise pytest.UsageError(f"--agentrace-{option} {value}: cannot make its folder ({exc.strerror or exc})") from None
        if path.is_dir():
            raise pytest.UsageError(f"--agentrace-{option} {value}: is a folder; give a file name, e.g. {path / ('report.' + option)}")
        if not os.access(path if path.exists() else path.parent, os.W_OK):
            raise pytest.UsageError(f"--agentrace-{option} {value}: not writable")
