"""pytest nodes: task files and the run item. Only wiring; the work is in ``run.pipeline``.

A run item is a ``pytest.Function`` (so fixtures, markers, ``-k`` and pytest's caches work as usual) whose agent
runs in the call phase: an infrastructure fault reports as a pytest *error* (``pytest_report_teststatus``), an
agent's failure as a *failure*, and ``noop`` (or any agent with ``expect: fail``) is an expected failure.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

try:  # pytest >= 9.2 (there CallSpec2 is a deprecated alias)
    from _pytest.python import CallSpec as _CallSpec
except ImportError:  # pytest 8.x to 9.1
    from _pytest.python import CallSpec2 as _CallSpec

from pytest_agentrace.errors import SpecError, did_you_mean
from pytest_agentrace.plugin import race
from pytest_agentrace.plugin.failure import LONG_TAIL, RunFailed, case_line, failure_repr, printable
from pytest_agentrace.record.attempts import other_source, recorded_dir
from pytest_agentrace.record.manifest import record_run
from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.report.junit import STATUS_PROPERTY, run_properties
from pytest_agentrace.run.agent import agent_path_error, missing_executable
from pytest_agentrace.run.checks import log_tail
from pytest_agentrace.run.pipeline import execute
from pytest_agentrace.run.resume import stored_outcome
from pytest_agentrace.run.slots import run_slot, slot_key
from pytest_agentrace.spec.common import AgentSpec, parse_agent, unique_agent_ids
from pytest_agentrace.spec.harbor import load_harbor_task
from pytest_agentrace.spec.matrix import RunSpec, task_runs, trial_runs
from pytest_agentrace.spec.select import choose_agents, override_effects, overrides
from pytest_agentrace.spec.task import _TASK_ONLY_KEYS, Task, is_task_data, load_task
from pytest_agentrace.spec.trial import is_trial_data, load_trial
from pytest_agentrace.stats.sequential import skip_reason

if TYPE_CHECKING:
    from pytest_agentrace.plugin.session import AgentraceSession

# errors a task/trial file's content can raise beyond SpecError (reported as one line, never a crash)
LOAD_ERRORS = (OSError, ValueError, UnicodeError, RecursionError, RuntimeError, OverflowError, TypeError, LookupError)


_CHECK_KEY_LINE = re.compile(r"(?m)^(?:test|lint|verify|solution)\w*\s*:")  # a check key, or a near miss of one


def looks_like_task(path: Path) -> bool:
    """True when ``path`` is a task file: YAML whose top level maps ``description`` and ``test_command``. A file that
    does not parse but has both keys at the start of a line is claimed too, so its syntax error is reported instead
    of the file being skipped silently."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if not any(key in text for key in _TASK_ONLY_KEYS) and not _CHECK_KEY_LINE.search(text):  # before parsing YAML
        return False
    try:
        return is_task_data(yaml.safe_load(text))
    except (yaml.YAMLError, RecursionError, ValueError):
        lines = text.splitlines()
        return any(x.startswith("description:") for x in lines) and any(x.startswith("test_command:") for x in lines)


def looks_like_trial(path: Path) -> bool:
    """True when ``path`` is a trial file: a ``*.toml`` (not ``pyproject.toml``) with a top-level ``[[questions]]``
    array. A file that does not parse but has a ``[[questions]]`` line is claimed too, so its syntax error is
    reported."""
    if path.suffix != ".toml" or path.name == "pyproject.toml":
        return False
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if "questions" not in text:
        return False
    try:
        return is_trial_data(tomllib.loads(text))
    except tomllib.TOMLDecodeError:
        return any(x.strip().replace(" ", "") == "[[questions]]" for x in text.splitlines())


class SpecFiles:
    """The session's knowledge of its files, each found once per process: which are task and trial files, the task
    files parsed, the input folders (not tests) of each folder's tasks and trials, and the paths named on the
    command line."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.sniffed: dict[tuple[str, Path], bool] = {}  # ("task" / "trial", path): does it look like one
        self.tasks: dict[Path, Task | BaseException] = {}
        self.trial_dirs: dict[Path, set[Path]] = {}

    @functools.cached_property
    def named_paths(self) -> frozenset[Path]:
        base = self.config.invocation_params.dir
        return frozenset((base / arg.split("::")[0]).resolve() for arg in self.config.args if not arg.startswith("-"))

    def named(self, path: Path) -> bool:
        """True when ``path`` itself was given on the command line (``pytest --agentrace my-task.yaml``): such a file
        is loaded as a task (YAML) or trial (TOML) even when it does not look like one, so its mistakes (a misspelt
        ``descripton``, an empty file) are reported instead of "not found"."""
        return path.resolve() in self.named_paths

    def is_task(self, path: Path) -> bool:
        """``looks_like_task``, once per path."""
        if ("task", path) not in self.sniffed:
            self.sniffed["task", path] = looks_like_task(path)
        return self.sniffed["task", path]

    def is_trial(self, path: Path) -> bool:
        """``looks_like_trial``, once per path."""
        if ("trial", path) not in self.sniffed:
            self.sniffed["trial", path] = looks_like_trial(path)
        return self.sniffed["trial", path]

    def task(self, path: Path) -> Task:
        """``load_task(path)``, parsed once per session: the ignore hook asks for the ``repo`` of every task file of
        a folder for each path in it, and the file is then collected. Raises what ``load_task`` raises
        (``SpecError``, ``LOAD_ERRORS``), each time it is asked."""
        key = Path(path)
        if key not in self.tasks:
            try:
                self.tasks[key] = load_task(path)
            except (SpecError, *LOAD_ERRORS) as exc:
                self.tasks[key] = exc
        found = self.tasks[key]
        if isinstance(found, BaseException):
            raise found.with_traceback(None)
        return found

    def task_repo_dirs(self, directory: Path) -> set[Path]:
        """Resolved ``repo`` folders of the task files directly in ``directory`` (not collected as tests)."""
        dirs = set()
        for path in sorted(directory.glob("*.y*ml")):
            if path.suffix in (".yaml", ".yml") and self.is_task(path):
                try:
                    repo = self.task(path).repo
                except (SpecError, *LOAD_ERRORS):  # reported when the file itself is collected
                    continue
                if repo and not repo.startswith(("http", "git@", "ssh:")):
                    dirs.add(Path(repo))
        return dirs

    def trial_input_dirs(self, directory: Path) -> set[Path]:
        """Resolved local ``[[repos]]`` sources and arm overlays of the trial files in ``directory`` and its parents
        up to the rootdir (inputs, not tests: never collected; nested ones such as ``overlays/docs`` included).
        Cached per folder for the session."""
        directory = directory.resolve()
        if directory in self.trial_dirs:
            return self.trial_dirs[directory]
        dirs: set[Path] = set()
        for path in sorted(directory.glob("*.toml")):
            if self.is_trial(path):
                try:
                    trial = load_trial(path)
                except (SpecError, *LOAD_ERRORS):  # reported when the file itself is collected
                    continue
                dirs.update(Path(r.source) for r in trial.repos if Path(r.source).is_absolute())
                dirs.update(Path(a.overlay) for a in trial.arms if a.overlay)
        root = Path(self.config.rootpath).resolve()
        if directory != root and root in directory.parents:
            dirs |= self.trial_input_dirs(directory.parent)
        self.trial_dirs[directory] = dirs
        return dirs


def override_lines(wanted: Sequence[AgentSpec] | None, ran: set[str], effects: Mapping[str, set[str]]) -> list[str]:
    """One summary line per ``--agentrace-agent`` spec (``wanted``: the option's parsed values, None when not given)
    that is a whole agent (``spec.select.overrides``) and ran (its id in ``ran``), saying what ran and what it did to
    the files' lists (``effects``: id -> ``{"replaced", "added"}``, ``spec.select.override_effects`` over the
    collected files): ``agent claude: ran `my-claude {prompt}` (--agentrace-agent; replaces the files' entries named
    claude)``, or ``(--agentrace-agent; added: no file lists an agent named slow)``."""
    import shlex

    lines = []
    for spec in wanted or ():
        if overrides(spec) and spec.id in ran:
            what = f"`{shlex.join(spec.command)}`" if spec.command else f"the {spec.name} CLI with the option's settings"
            did = effects.get(spec.id, set())
            if did == {"replaced"}:
                how = f"replaces the files' entries named {spec.name}"
            elif "replaced" in did:
                how = f"replaces the entries named {spec.name} of the files that list one, added to the others"
            else:
                how = f"added: no file lists an agent named {spec.name}"
            lines.append(f"agent {spec.id}: ran {what} (--agentrace-agent; {how})")
    return lines


def run_markers(spec: RunSpec) -> list[pytest.MarkDecorator]:
    """The markers of a run item: ``agentrace`` and ``agentrace_task`` or ``agentrace_trial``, each with the keyword
    arguments ``kind``, ``case``, ``arm``, ``agent`` (id), ``agent_name`` and ``rep`` (int) that pytest >= 8.3 matches
    in ``-m "agentrace(agent='claude', rep=1)"``. Registered in ``switch.MARKERS`` (``--strict-markers`` clean)."""
    kwargs = {"kind": spec.kind, "case": spec.case, "arm": spec.arm, "agent": spec.agent.id,
              "agent_name": spec.agent.name, "rep": spec.rep}
    return [pytest.mark.agentrace(**kwargs), getattr(pytest.mark, f"agentrace_{spec.kind}")(**kwargs)]


class SpecFile(pytest.File):
    """Base of task/trial files: a ``SpecError`` is shown as its one-line message. ``agentrace``: the session
    object (set by ``AgentraceSession.collect_file``)."""

    agentrace: AgentraceSession

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> Any:
        if isinstance(excinfo.value, SpecError):
            return f"agentrace: {excinfo.value}"
        if isinstance(excinfo.value, LOAD_ERRORS):
            # a value the loader did not foresee (e.g. a regex too large, an unknown ~user): still one line
            return f"agentrace: {self.path}: cannot load this file: {type(excinfo.value).__name__}: {excinfo.value}"
        return super().repr_failure(excinfo)

    def chosen_agents(self, listed: Sequence[AgentSpec]) -> tuple[AgentSpec, ...]:
        """This file's agents: ``spec.select.choose_agents`` over ``listed`` (the file's own) and the session's
        ``--agentrace-agent`` specs, noting what each whole-agent spec did (``AgentraceSession.note_overrides``).
        Raises ``SpecError`` as ``choose_agents`` does, and the option's own parse error."""
        wanted = self.agentrace.agents
        chosen = choose_agents(listed, wanted, self.path)
        self.agentrace.note_overrides(override_effects(listed, wanted))
        return chosen

    def with_timeout(self, spec: Any) -> Any:
        """``spec`` (a task or trial) with ``--agentrace-timeout`` applied."""
        override = self.agentrace.settings.timeout
        return dataclasses.replace(spec, timeout=float(override)) if override else spec

    def make_items(self, runs: list[RunSpec], judge: Any = None, baselines_xfail: bool = True):
        """One ``RunItem`` per run, named ``case[<param ids>]`` (``RunSpec.item_name``) and built the way pytest
        builds a parametrized test: ``originalname`` the case, a ``callspec`` whose ids are ``RunSpec.param_ids``
        (no parameter values). pytest >= 9.2 compares structured node ids (path, names, params), and its last-failed,
        stepwise and new-first caches parse stored ids into that structure; an item whose brackets were only part
        of its name never matched them (``--lf`` re-ran everything). pytest has no public constructor for such an
        item outside ``Metafunc``, so the callspec class is taken from ``_pytest.python``.

        ``judge``: the item's function (default ``check_outcome``); ``baselines_xfail``: ``noop`` and agents with
        ``expect: fail`` are strict expected failures."""
        for spec in runs:
            item = RunItem.from_parent(self, name=spec.item_name, originalname=spec.case, callobj=judge or check_outcome,
                                       callspec=_CallSpec(_idlist=list(spec.param_ids)))
            item.run_spec, item.agentrace = spec, self.agentrace
            for marker in run_markers(spec):
                item.add_marker(marker)
            baseline = spec.agent.expect == "fail" or (spec.agent.expect is None and spec.agent.name == "noop")
            if baselines_xfail and baseline:
                item.add_marker(pytest.mark.xfail(reason=f"{spec.agent.label} is a baseline expected to fail",
                                                  raises=RunFailed, strict=True))
            yield item


class TaskFile(SpecFile):
    """A coderace-style task file: one item per agent x rep (agents by ``spec.select.choose_agents``)."""

    def load(self):
        """The task file loaded (``SpecError`` when invalid), with ``--agentrace-timeout`` applied."""
        return self.with_timeout(self.agentrace.files.task(self.path))

    def collect(self):
        task = self.load()
        agents = self.chosen_agents(task.agents)
        yield from self.make_items(task_runs(task, agents, self.agentrace.settings.reps or 1))


HARBOR_AGENTS = ("oracle", "noop")  # a Harbor task names no agents: without --agentrace-agent these run it


class HarborTaskFile(TaskFile):
    """A Harbor task folder's ``task.toml`` (``spec.harbor``): one item per agent x rep, like a task file. Its agents
    are ``oracle`` (``solution/solve.sh``) and ``noop``, as a task file's list (``--agentrace-agent`` picks or adds)."""

    def load(self):
        return self.with_timeout(load_harbor_task(self.path))

    def collect(self):
        task = self.load()
        defaults = unique_agent_ids(parse_agent(self.path, "agents", a) for a in HARBOR_AGENTS)
        agents = self.chosen_agents(defaults)
        yield from self.make_items(task_runs(task, agents, self.agentrace.settings.reps or 1))


class TrialFile(SpecFile):
    """A trial file (TOML): one item per question x arm x agent x rep, named ``question[arm-agent-rN]``.

    ``--agentrace-reps`` overrides ``[defaults].reps``; ``--agentrace-agent`` chooses the agents as for a task file
    (``spec.select.choose_agents``); ``--agentrace-arm`` keeps only the arms named, and an arm filter that leaves
    nothing in this file is a collection error listing what the file has, and so is an ``--agentrace-baseline``
    that is not one of its arms.
    """

    def collect(self):
        found = self.agentrace.settings
        trial = self.with_timeout(load_trial(self.path))
        agents = self.chosen_agents(trial.agents)
        names = arms = [a.name for a in trial.arms]
        if found.arm:
            arms = [a for a in arms if a in found.arm]
            if not arms:
                hint = next((h for h in (did_you_mean(a, names) for a in found.arm) if h), "")
                raise SpecError(self.path, "--agentrace-arm", f"{', '.join(found.arm)} matches none of this trial's arms{hint}; arms: {', '.join(names)}")
        base = found.baseline
        if base and base not in names:
            raise SpecError(self.path, "--agentrace-baseline", f"{base} is not an arm of this trial{did_you_mean(base, names)}; arms: {', '.join(names)}")
        keyless = [q.id for q in trial.questions if not q.has_answer_key]
        if keyless:
            self.warn(pytest.PytestWarning(
                f"agentrace: {self.path}: question(s) {', '.join(keyless)} have no answer key (expect, forbid or verify), so every "
                "answer passes: their pass rate measures nothing (tokens and cost still compare)"))
        yield from self.make_items(trial_runs(trial, agents, arms, found.reps or trial.reps))


def run(agentrace: AgentraceSession, spec: RunSpec, tmp: Path) -> Outcome:
    """Run ``spec`` in the scratch folder ``tmp`` (``run.pipeline.execute``), or reuse its stored outcome under
    ``--agentrace-resume`` / ``--agentrace-retry-failed`` (``run.resume.stored_outcome``). A trial with
    ``[defaults] parallel = N`` runs at most N of its runs at once, across xdist workers (``run.slots``)."""
    found, out = agentrace.settings, agentrace.out
    if found.race:  # the agents of a case, arm and rep run together (plugin.race)
        return race.outcome(agentrace, spec, tmp)
    if found.resume or found.retry_failed:
        reused = stored_outcome(spec, out, retry_failed=found.retry_failed)
        if reused is not None:
            return reused
    options = agentrace.run_options
    if agentrace.feed is not None:
        options = dataclasses.replace(options, on_stdout=agentrace.feed(spec))
    cap = getattr(spec.spec, "parallel", None) if spec.kind == "trial" else None
    if not cap:
        return execute(spec, tmp, out, options, agentrace.id)
    with run_slot(out, slot_key(spec.source), cap):
        return execute(spec, tmp, out, options, agentrace.id)


def planned_reps(reps: int | None, spec: Any) -> int:
    """The cap of a cell's reps: ``reps`` (``--agentrace-reps``) or the file's ``reps`` (1 when it has none)."""
    return int(reps or getattr(spec, "reps", None) or 1)


def should_skip(agentrace: AgentraceSession, spec: RunSpec) -> str | None:
    """Skip reason for a run under ``--agentrace-stop-when-decided`` (None: run it). Trials only: a task file
    has a single arm, so nothing is compared and every rep runs."""
    found = agentrace.settings
    if not found.stop_when_decided or spec.kind != "trial":
        return None
    trial = spec.spec
    arms = [a.name for a in trial.arms if not found.arm or a.name in found.arm]
    base = found.baseline if found.baseline in arms else trial.baseline
    cases = agentrace.cases.get((str(spec.source), spec.agent.id), [spec.case])
    return skip_reason(spec, agentrace.out, agentrace.id, planned_reps(found.reps, trial), arms, base,
                       target=found.generalize, cases=cases, seed=found.seed, resamples=found.resamples)


def check_outcome(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The judgement at the end of a run item's call phase (after ``RunItem.runtest`` ran the agent): fail with the
    run's report (``RunFailed``) unless the run passed."""
    outcome = request.node.run_outcome
    if outcome is not None and outcome.status == Status.STOPPED:  # race mode: neither a failure nor a sample
        pytest.skip(f"{request.node.run_spec.id}: {outcome.reason}")
    if outcome is not None and outcome.status != Status.PASSED:
        raise request.node.run_failed(outcome)


def report_status(report: pytest.TestReport) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
    """``pytest_report_teststatus``: a run's infrastructure error (``agentrace.status`` ``error``: clone or setup
    failed, a check's tool missing, ...) fails its call phase, where the agent ran; it is shown and counted as an
    *error*, never as the agent's failure. Decided from the report alone, so it holds with pytest-xdist."""
    props = getattr(report, "user_properties", ())
    if report.when == "call" and report.failed and any(p[0] == STATUS_PROPERTY and p[1] == "error" for p in props):
        return "error", "E", ("ERROR", {"red": True})
    return None


_case_line = functools.lru_cache(maxsize=4096)(case_line)  # reportinfo runs per item; the file is read once


def replaces_another(spec: RunSpec, out: Path) -> str | None:
    """The error of a run whose results folder holds the record of another task or trial file with the same task
    name or question id (``record.attempts.other_source``; an earlier session's): made, it would replace that record,
    and the folder's reports would show one file's runs under the other's name. None otherwise."""
    run_dir = spec.run_dir(out)
    other = other_source(run_dir, spec.source)
    if other is None:
        return None
    return (f"{spec.source} and {other} both have a task/question named {spec.case!r}: "
            f"{run_dir.relative_to(out)} in {out} holds {other}'s run, which this run would replace; rename one "
            "(task 'name' / question 'id'), or give this session another --agentrace-out")


class RunItem(pytest.Function):
    """One run: ``run_spec`` (its RunSpec), ``agentrace`` (the session object), ``collision`` (the error of a run
    sharing its results folder with another file's, ``spec.select.collisions``), ``run_outcome`` (after the call
    phase ran the agent).

    ``setup`` decides whether it can run (a results-folder collision, in the session or with another file's record
    in the folder, or a custom command's missing path: error; an
    agent CLI not installed or a run no longer needed under stop-when-decided: skip); the agent runs in the call
    phase (``runtest``), so ``--durations``, the JUnit time and timeout plugins measure it; then the item's function
    (``check_outcome``, or validation's) judges the outcome. An infrastructure fault is a pytest failure of the call
    phase that ``pytest_report_teststatus`` shows as an *error*."""

    run_spec: RunSpec
    agentrace: AgentraceSession
    collision: str | None = None
    run_outcome: Outcome | None = None

    def setup(self) -> None:
        super().setup()
        spec = self.run_spec
        if error := self.collision or agent_path_error(spec) or replaces_another(spec, self.agentrace.out):
            pytest.fail(error, pytrace=False)
        if reason := missing_executable(spec) or should_skip(self.agentrace, spec):
            # at the item's location (``reportinfo``: the task or trial file's line naming the case), as pytest's
            # own skip marks are, not at this line of the plugin
            raise pytest.skip.Exception(reason, _use_item_location=True)

    def runtest(self) -> None:
        spec, agentrace = self.run_spec, self.agentrace
        # tmp_path_factory, not tmp_path: tmp_path's teardown raised KeyError after a Ctrl-C before makereport
        tmp = self.funcargs["tmp_path_factory"].mktemp(re.sub(r"\W", "_", self.name)[:30], numbered=True)
        outcome = run(agentrace, spec, tmp)
        self.run_outcome = outcome
        self.user_properties.extend(run_properties(outcome))  # the controller's payload; JUnit's properties
        if not outcome.reused and agentrace.settings.race:  # hashed before any later agent starts (record.manifest;
            # a run outside a race is hashed by run.pipeline.execute itself, an error's attempt in its own folder)
            out, sid = agentrace.out, agentrace.id
            record_run(out, sid, spec.id, recorded_dir(out, sid, spec.run_dir(out)))
        if outcome.status == Status.ERROR:
            pytest.fail(printable(f"{spec.id}: infrastructure error: {outcome.reason}"), pytrace=False)
        super().runtest()

    def run_failed(self, outcome: Outcome) -> RunFailed:
        """The report of a run that did not pass: status and reason, the failing check's command, exit code and the
        last lines of its log, and what an answer missed."""
        spec = self.run_spec
        head = f"{spec.id}: {outcome.status}: {outcome.reason or ''}".rstrip(": ")
        run_dir = spec.run_dir(self.agentrace.out)
        check_line, log = None, []
        for name in ("tests", "verify"):
            check = outcome.checks.get(name)
            if check is not None and not check.passed:
                check_line = f"--- {name}: `{check.command}` exit {check.exit_code}; last lines of {run_dir / (check.log or '')}:"
                log = log_tail(run_dir, check, LONG_TAIL).splitlines()
                break
        notes = []
        if outcome.answer_score and outcome.answer_score.get("missing"):
            notes.append("missing from the answer: " + ", ".join(outcome.answer_score["missing"]))
        return RunFailed(head, check_line, log, notes)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> Any:
        if isinstance(excinfo.value, RunFailed):
            spec = self.run_spec
            tb = style or self.config.getoption("tbstyle", "auto")
            return failure_repr(excinfo.value, self.location[0], case_line(spec.source, spec.case), tb)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        """``(file, 0-based line naming the case, name)``: where ``-rs`` and JUnit place the item's skips."""
        spec = self.run_spec
        return self.path, _case_line(spec.source, spec.case) - 1, f"{self.name}"
