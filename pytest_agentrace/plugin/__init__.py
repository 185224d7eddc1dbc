"""pytest hooks and wiring only. Nothing happens without ``--agentrace``.

Data flow: ``pytest_collect_file`` claims task/trial files (``plugin.collect``) -> each run item executes its
RunSpec through ``run.pipeline`` -> its outcome travels in ``report.user_properties`` (one JSON string; the same
with pytest-xdist) -> the one ``Controller`` (``plugin.controller``, registered on the controller process only;
an xdist worker registers nothing) takes each payload once, builds the session result once after the test loop,
sets the exit status, writes every output and prints the ``agentrace`` section.

Settings are resolved once per process (``settings``: command line, then ini, then default; ``options``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
import warnings
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

from pytest_agentrace import options as _options
from pytest_agentrace.agents.base import RunOptions
from pytest_agentrace.errors import SpecError, did_you_mean
from pytest_agentrace.model_double import netns
from pytest_agentrace.model_double.script import load_script
from pytest_agentrace.plugin import collect, interrupts, validate
from pytest_agentrace.plugin import race as _race
from pytest_agentrace.plugin import shard as _shard
from pytest_agentrace.plugin.controller import Controller
from pytest_agentrace.plugin.session import (
    RUN_OPTIONS_KEY,
    SANDBOX_WHY_KEY,
    SESSION_ID_KEY,
    enabled,
    is_worker,
    out_dir,
    report_path,
    settings,
)
from pytest_agentrace.report import formats
from pytest_agentrace.run.cgroup import Parent, find_parent
from pytest_agentrace.run.limits import Limits
from pytest_agentrace.run.resume import install_sigterm
from pytest_agentrace.run.sandbox import Sandbox, installed_package
from pytest_agentrace.run.sandbox import bwrap_path as sandbox_bwrap_path
from pytest_agentrace.run.sandbox import probe as sandbox_probe
from pytest_agentrace.spec.builtin import (
    SAME_NAME_NOTE,
    builtin_root,
    keep_difficulty,
    level_key,
    levels_of,
    same_level,
    select_builtin,
    sorted_levels,
)
from pytest_agentrace.spec.harbor import is_harbor_folder
from pytest_agentrace.stats.snapshot import SnapshotError, read_snapshot
from pytest_agentrace.stats.verdict import parse_fail_on

MIN_RESAMPLES = 100
SESSION_LOCK = ".session.lock"


def pytest_addoption(parser: pytest.Parser) -> None:
    _options.add_pytest_options(parser)


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """``--agentrace-builtin NAME``: append the built-in tasks' ``task.yaml`` paths to the command line.

    This is the hook pytest documents for changing the command line before it is parsed, so pytest, pytest-xdist
    workers (which re-parse the same command line) and ``--collect-only`` all see the tasks as if their paths had
    been typed. Raises ``pytest.UsageError`` for an unknown name, or when the option is used without ``--agentrace``.
    """
    namespace = early_config.known_args_namespace
    groups = getattr(namespace, "agentrace_builtin", None)
    if not groups and getattr(namespace, "agentrace", False):  # the ini key counts only for an agentrace session
        groups = _options.BY_NAME["builtin"].from_ini(early_config.getini("agentrace_builtin") or [])
    if not groups:
        return
    if not getattr(namespace, "agentrace", False):
        raise pytest.UsageError("--agentrace-builtin needs --agentrace (e.g. pytest --agentrace --agentrace-builtin fibonacci)")
    names = [n for group in groups for n in group]
    difficulty = getattr(namespace, "agentrace_difficulty", None)
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
    args.extend(str(t.path) for t in tasks)


def pytest_configure(config: pytest.Config) -> None:
    """Resolve and check the settings, give the session its id and its runs their options, and register the
    controller (on the controller process only). The run items' markers are registered in any session, so
    ``--strict-markers`` with ``-m agentrace`` in an ini file is clean with or without ``--agentrace``."""
    for name, text in collect.MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    if not enabled(config):
        return
    found = _shard.configure(config, settings(config), warn=not is_worker(config))
    _check_settings(found)
    sid = config.workerinput.get("agentrace_session") if is_worker(config) else None
    config.stash[SESSION_ID_KEY] = sid or uuid.uuid4().hex[:12]
    model_double = found.model_double
    config.stash[RUN_OPTIONS_KEY] = RunOptions(
        cache_dir=out_dir(config) / ".cache" / "repos", isolated_home=found.agent_home != _options.AGENT_HOME_USER,
        offline=found.offline, sandbox=session_sandbox(config, found), cgroup=session_cgroup(found),
        network=found.network, network_resolve=tuple(found.network_resolve or ()),
        limits=Limits(memory=found.memory, processes=found.max_procs, disk=found.disk, cpu_time=found.cpu_time),
        model_double=str((Path(config.invocation_params.dir) / model_double).resolve()) if model_double else None,
        **_cassette_options(config, found))
    _check_model_double(config)
    install_sigterm(config)  # in workers too: a worker's SIGTERM ends its agent's group like Ctrl-C (plugin.interrupts)
    if is_worker(config):
        return
    interrupts.install(config)
    out = out_dir(config)
    if _options.in_package(out):
        raise pytest.UsageError(f"the results folder would be {out}, inside the installed pytest-agentrace package; "
                                "run pytest from another folder or pass --agentrace-out DIR")
    _check_out_dir(out)
    _check_report_paths(config, found)
    if found.snapshot and not found.snapshot_update:
        try:
            read_snapshot(Path(found.snapshot))
        except SnapshotError as exc:
            raise pytest.UsageError(f"--agentrace-snapshot: {exc}") from None
    _lock_out_dir(config, out, found.lock_timeout)
    config.pluginmanager.register(Controller(config, found, config.stash[SESSION_ID_KEY], out), Controller.NAME)


def _check_settings(found: _options.Settings) -> None:
    """Usage errors for settings that cannot work together (before any run and its cost)."""
    try:
        parse_fail_on(found.fail_on)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if found.snapshot_update and not found.snapshot:
        raise pytest.UsageError("--agentrace-snapshot-update needs --agentrace-snapshot PATH (the file to write)")
    if found.resamples < MIN_RESAMPLES:
        raise pytest.UsageError(f"--agentrace-resamples must be at least {MIN_RESAMPLES}")


def _cassette_options(config: pytest.Config, found: _options.Settings) -> dict[str, str | None]:
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


def session_sandbox(config: pytest.Config, found: _options.Settings) -> Sandbox | None:
    """The session's sandbox profile (``run.sandbox``), or None under ``--agentrace-sandbox off`` or where bwrap cannot
    run (``auto``: the reason is kept for the summary's warning; ``bwrap``: a usage error). Hides the results folder
    and the user's HOME; shows the session's interpreter, its package folders (every ``site-packages`` /
    ``dist-packages`` folder on ``sys.path``) and this package read-only."""
    if found.sandbox == "off":
        return None
    exe, why = sandbox_probe(found.offline)
    if exe is None:
        if found.sandbox == "bwrap":
            raise pytest.UsageError(f"--agentrace-sandbox bwrap: {why}")
        if os.geteuid() == 0 and sandbox_bwrap_path() is not None:  # root never runs agents with its privilege
            raise pytest.UsageError(f"--agentrace-sandbox auto: this session runs as root and {why}; fix that, or "
                                    "run as another user, or pass --agentrace-sandbox off to run agents as root")
        config.stash[SANDBOX_WHY_KEY] = why
        return None
    package = Path(_options.__file__).resolve().parent
    # the interpreter's package folders wherever they are (a user site under the hidden HOME, a folder a .pth adds)
    sites = tuple(Path(p) for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir())
    visible = (Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent, package,
               *filter(None, [installed_package()]), *sites)
    here = Path(config.invocation_params.dir)
    return Sandbox(exe, hidden=(out_dir(config),), visible=visible, offline=found.offline).exposing(
        [(here / Path(p).expanduser()).resolve() for p in found.sandbox_read or ()],
        [(here / Path(p).expanduser()).resolve() for p in found.sandbox_write or ()])


def _check_model_double(config: pytest.Config) -> None:
    """A bad ``--agentrace-model-double`` script stops the session at once, naming file and key; with
    ``--agentrace-offline`` where network namespaces are not permitted the controller warns once and the runs go on
    without one."""
    script = config.stash[RUN_OPTIONS_KEY].model_double
    if script:
        try:
            load_script(script)
        except SpecError as exc:
            raise pytest.UsageError(f"--agentrace-model-double: {exc}") from None
    if config.stash[RUN_OPTIONS_KEY].offline and not is_worker(config):
        prefix, why = netns.probe()
        if prefix is None:
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(f"--agentrace-offline: {why}; agents run without a network namespace"), stacklevel=2)


def _lock_out_dir(config: pytest.Config, out: Path, timeout: float) -> None:
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


def _check_out_dir(out: Path) -> None:
    """Fail early (one usage error, not one traceback per run) when the results folder cannot be written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-test.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise pytest.UsageError(f"--agentrace-out {out}: cannot write the results folder there ({exc.strerror or exc})") from None


def _check_report_paths(config: pytest.Config, found: _options.Settings) -> None:
    """Usage error before any run (and its cost) when a report file (``--agentrace-html/md/json``, each file format of
    ``report.formats.FORMATS``) could not be written at the end: its folder cannot be made or written, or the path is
    a folder or a read-only file."""
    for option in (f.name for f in formats.FORMATS if f.to == "file"):
        value = getattr(found, option, None)
        if not value:
            continue
        path = report_path(config, value)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise pytest.UsageError(f"--agentrace-{option} {value}: cannot make its folder ({exc.strerror or exc})") from None
        if path.is_dir():
            raise pytest.UsageError(f"--agentrace-{option} {value}: is a folder; give a file name, e.g. {path / ('report.' + option)}")
        if not os.access(path if path.exists() else path.parent, os.W_OK):
            raise pytest.UsageError(f"--agentrace-{option} {value}: not writable")


def pytest_report_header(config: pytest.Config) -> list[str]:
    return _shard.header(config) if enabled(config) else []


NOTHING_COLLECTED = (
    "agentrace: no task or trial file was found{where}. --agentrace collects:",
    "  task files      *.yaml / *.yml whose top level has `description:` and `test_command:` (`agentrace init` writes one)",
    "  trial files     *.toml (not pyproject.toml) with a top-level [[questions]] array",
    "  Harbor tasks    a folder holding task.toml and instruction.md",
    "  built-in tasks  --agentrace-builtin NAME (or all; `agentrace tasks list` shows them)",
    "A file named on the command line is always read as a task (YAML) or trial (TOML), so its mistakes are reported.",
)


DESELECTED_KEY = pytest.StashKey[int]()
WORKER_DESELECTED = "agentrace_deselected"  # workeroutput key: a pytest-xdist worker's deselected items


@pytest.hookimpl(trylast=True)
def pytest_deselected(items: list[pytest.Item]) -> None:
    """Count deselected items (``-k``, ``-m``, shards, difficulty), so that a session whose items were all deselected
    gets no "nothing collected" hint; under pytest-xdist the workers deselect, and pass their count on."""
    if items:
        config = items[0].config
        config.stash[DESELECTED_KEY] = config.stash.get(DESELECTED_KEY, 0) + len(items)
        if hasattr(config, "workeroutput"):
            config.workeroutput[WORKER_DESELECTED] = config.stash[DESELECTED_KEY]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist controller: add a finished worker's deselected count (``pytest_deselected``)."""
    count = getattr(node, "workeroutput", {}).get(WORKER_DESELECTED, 0)
    if count:
        node.config.stash[DESELECTED_KEY] = max(node.config.stash.get(DESELECTED_KEY, 0), count)


def nothing_collected_lines(config: pytest.Config) -> list[str]:
    """The hint printed under ``--agentrace`` when nothing was collected (exit status 5, nothing deselected): the
    file patterns the plugin collects (``pytest_collect_file``), after the folders or files that were searched."""
    args = [a for a in config.args if not a.startswith("-")]
    where = f" under {', '.join(args)}" if args else ""
    return [NOTHING_COLLECTED[0].format(where=where), *NOTHING_COLLECTED[1:]]


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Under ``--agentrace-race``: one line per race (winner and time, runner-up and gap, stopped agents). When
    nothing was collected (and nothing deselected or failed to collect): the file patterns the plugin looks for."""
    if not enabled(config) or is_worker(config):
        return
    if (exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and not terminalreporter.stats.get("deselected")
            and not config.stash.get(DESELECTED_KEY, 0) and not terminalreporter.stats.get("error")):
        terminalreporter.section("agentrace: nothing collected")
        for line in nothing_collected_lines(config):
            terminalreporter.write_line(line)
    if not settings(config).race:
        return
    lines = _race.summary_lines(config.pluginmanager.getplugin(Controller.NAME).finish())
    if lines:
        terminalreporter.section("agentrace race")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist: give workers the controller's session id."""
    if enabled(node.config):
        node.workerinput["agentrace_session"] = node.config.stash[SESSION_ID_KEY]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under --agentrace, a task's starter ``repo`` folder and a trial's repos and overlays are input, not tests."""
    if not enabled(config) or not collection_path.is_dir():
        return None
    parent = collection_path.parent
    if is_harbor_folder(parent):  # a Harbor task's tests/, solution/, environment/: its parts, not tests
        return True
    if collection_path.resolve() in collect.task_repo_dirs(parent, config) | collect.trial_input_dirs(parent, config):
        return True
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if not enabled(parent.config):
        return None
    config = parent.config
    named = collect.named_on_command_line(file_path, config)  # claimed even when it does not look like one
    if file_path.suffix in (".yaml", ".yml") and (named or collect.sniff_task(file_path, config)):
        node = validate.ValidationTaskFile if settings(config).validate else collect.TaskFile
        return node.from_parent(parent, path=file_path, **_outside_nodeid(file_path, config))
    if file_path.name == "task.toml" and is_harbor_folder(file_path.parent):  # a Harbor task folder (spec.harbor)
        node = validate.ValidationHarborTaskFile if settings(config).validate else collect.HarborTaskFile
        return node.from_parent(parent, path=file_path, **_outside_nodeid(file_path, config))
    if file_path.suffix == ".toml" and ((named and file_path.name != "pyproject.toml") or collect.sniff_trial(file_path, config)):
        return collect.TrialFile.from_parent(parent, path=file_path, **_outside_nodeid(file_path, config))
    return None


def _outside_nodeid(file_path: Path, config: pytest.Config) -> dict[str, str]:
    """``{"nodeid": ...}`` for a file outside the rootdir, where pytest would give an empty node-id path (and JUnit
    an empty classname): ``agentrace-builtin/<task>/task.yaml`` for a built-in task (``--agentrace-builtin``), else
    the path relative to the invocation folder; ``{}`` (pytest's own id) for a file under the rootdir."""
    path = file_path.resolve()
    if path.is_relative_to(Path(config.rootpath).resolve()):
        return {}
    root = builtin_root().resolve()
    if path.is_relative_to(root):
        return {"nodeid": "agentrace-builtin/" + path.relative_to(root).as_posix()}
    return {"nodeid": Path(os.path.relpath(path, config.invocation_params.dir)).as_posix()}


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The one pass over the collected run items (the same on the controller and on every xdist worker):

    - deselect, through ``pytest_deselected``, task runs of other difficulties (``--agentrace-difficulty``) and,
      under ``--agentrace-validate``, trial runs;
    - under ``--agentrace-shard K/N``, deselect the other shards' runs (``plugin.shard``);
    - mark runs of different files that would share a results folder (``collect.mark_collisions``);
    - under ``--agentrace-stop-when-decided``, order runs rep-major (stable), so every arm's early reps come first
      and later reps can be skipped once decided.
    """
    if not enabled(config):
        return
    found = settings(config)
    keep, drop, levels = [], [], set()
    for item in items:
        spec = item.stash.get(collect.RUNSPEC_KEY, None)
        if spec is not None and spec.kind == "task" and spec.spec.difficulty is not None:
            levels.add(spec.spec.difficulty)
        dropped = spec is not None and (
            (found.validate and spec.kind != "task")
            or (spec.kind == "task" and not keep_difficulty(spec.spec.difficulty, found.difficulty)))
        (drop if dropped else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    unmatched = [w for w in found.difficulty or () if not any(same_level(level, [w]) for level in levels)]
    if unmatched and (keep or drop) and any(i.stash.get(collect.RUNSPEC_KEY, None) is not None for i in (*keep, *drop)):
        known = sorted_levels(levels)
        hint = did_you_mean(level_key(unmatched[0]), [level_key(level) for level in known])
        warnings.warn(pytest.PytestConfigWarning(
            f"--agentrace-difficulty: no collected task has difficulty {', '.join(unmatched)}{hint}; the tasks' levels "
            f"are {', '.join(known) or 'none'} ({SAME_NAME_NOTE})"), stacklevel=1)
    _shard.deselect(config, found, items, lambda item: item.stash.get(collect.RUNSPEC_KEY, None),
                    unit=_race.race_unit if found.race else None)
    collect.mark_collisions(items)
    if found.stop_when_decided:
        items.sort(key=lambda it: spec.rep if (spec := it.stash.get(collect.RUNSPEC_KEY, None)) is not None else 0)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``--agentrace-race`` note the races of the selected runs (``plugin.race``); under
    ``--agentrace-stop-when-decided`` the cases selected per trial and agent (after ``-k`` and other deselection): a
    look over fixed cases needs a record of each. Workers note the same."""
    if enabled(session.config) and settings(session.config).race:
        _race.note_groups(session.config, [s for i in session.items if (s := i.stash.get(collect.RUNSPEC_KEY, None))])
    if not enabled(session.config) or not settings(session.config).stop_when_decided:
        return
    cases: dict[tuple[str, str], set[str]] = {}
    for item in session.items:
        if (spec := item.stash.get(collect.RUNSPEC_KEY, None)) is not None:
            cases.setdefault((str(spec.source), spec.agent.id), set()).add(spec.case)
    session.config.stash[collect.CASES_KEY] = {k: sorted(v) for k, v in cases.items()}


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    """A run's infrastructure error (``agentrace.status`` ``error``: clone or setup failed, a check's tool missing, ...)
    fails its call phase, where the agent ran; it is shown and counted as an *error*, never as the agent's failure.
    On the controller this is decided from the report alone, so it holds with pytest-xdist."""
    props = getattr(report, "user_properties", ())
    if report.when == "call" and report.failed and any(p[0] == "agentrace.status" and p[1] == "error" for p in props):
        return "error", "E", ("ERROR", {"red": True})
    return None


SPEC_ERRORS_KEY = pytest.StashKey[set]()  # node ids of task/trial files whose collection failed


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """Count the collection errors of task and trial files (see ``pytest_runtestloop``)."""
    report = yield
    if report.failed and isinstance(collector, collect.SpecFile):
        collector.config.stash.setdefault(SPEC_ERRORS_KEY, set()).add(report.nodeid)
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    """A task or trial file that cannot be loaded is one collection error, and the other files' runs still go ahead:
    when every collection error of the session comes from such a file, the test loop runs as under
    ``--continue-on-collection-errors`` (the errors are still reported, one line each, and the session fails). A
    collection error in any other file (a Python test module) keeps pytest's rule; ``-x`` / ``--maxfail`` still stop
    at the first error. Under pytest-xdist the controller runs what the workers collected in any case."""
    option = session.config.option
    before = option.continue_on_collection_errors
    spec_errors = session.config.stash.get(SPEC_ERRORS_KEY, set())
    if enabled(session.config) and session.testsfailed and not before and session.testsfailed <= len(spec_errors):
        option.continue_on_collection_errors = True
    try:
        return (yield)
    finally:
        option.continue_on_collection_errors = before
