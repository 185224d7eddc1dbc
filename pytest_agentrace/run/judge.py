"""The part of a run that differs by kind of case: the ``Judge`` interface (``run.task``, ``run.trial``) and the
``Judgement`` it returns to the pipeline (``run.pipeline``)."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentrace.record.model import CheckResult, Usage
from pytest_agentrace.run import workspace
from pytest_agentrace.run.checks import Box, Confine
from pytest_agentrace.run.cleantree import CleanTree
from pytest_agentrace.run.machinery import DEFAULT_MACHINERY
from pytest_agentrace.run.runspec import RunOptions, RunSpec
from pytest_agentrace.run.sandbox import Mount


@dataclass
class Judgement:
    """What a judge found in a finished run: its ``checks``, ``failure`` (why the case's checks say the run failed;
    None when they pass) and outcome ``fields`` it sets (``answer_score``, ``used_tool``, ``claim``)."""

    checks: dict[str, CheckResult] = field(default_factory=dict)
    failure: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


class Judge(abc.ABC):
    """What a kind of case supplies to the pipeline (see the module docstring). One instance per run.

    Attributes set by subclasses: ``prompt`` (the exact text sent), ``edits`` (file changes allowed),
    ``protected_globs`` (paths the agent must not change), ``fields`` (typed outcome fields known before the run:
    ``has_verify``, ``has_lint``, ``scoring``, ``difficulty``, ``baseline_arm``, and ``extra``).
    """

    prompt: str = ""
    edits: bool = True
    where: str = ""  # what a workspace error names besides the cause (a trial's repo: " (app)")
    protected_globs: tuple[str, ...] = ()
    machinery: tuple[str, ...] = DEFAULT_MACHINERY  # test machinery patterns and rules (run.machinery)
    binary_diffs: bool = False  # diff.patch keeps binary files' bytes (a task's ``binary_diffs: true``)
    # the tree of the fresh workspace when ``make_workspace`` knows it without reading the files (a clone of a local
    # template with nothing written over it, ``workspace.Clone.tree``): the pipeline takes it as the "before" snapshot
    # when setup ran nothing, instead of hashing every file
    start_tree: str | None = None

    def __init__(self, spec: RunSpec, out: Path, session_id: str, options: RunOptions):
        self.spec, self.out, self.session_id, self.options = spec, out, session_id, options
        self.fields: dict[str, Any] = {"extra": {}}
        self.notes: list[str] = []  # what making the workspace found (``note_source``): the run's ``extra.notes``
        self.box: Box | None = None  # set by the pipeline: setup and check commands run in the run's sandbox
        self.limits: Confine | None = None  # set by the pipeline: checks after the agent run in its resource limits
        self.tree: CleanTree | None = None  # set by the pipeline before ``judge``: where the checks run
        self.reports: Path | None = None  # set by the pipeline: the harness's folder for the checks' test reports

    def left_out(self, repo: Path, own: Iterable[Path | str | None]) -> list[str]:
        """The paths (relative to the local ``repo``) its workspace leaves out: the evaluation's ``own`` files that
        lie inside it (its task or trial file, hidden checks, a reference patch) and the harness's results and cache
        folders (``workspace.harness_paths``)."""
        inside = (workspace.inside(repo, Path(p)) for p in own if p)
        return [*(rel for rel in inside if rel and rel != "."), *workspace.harness_paths(repo, self.out, self.cache_dir)]

    def note_source(self, source: str, made: Any) -> None:
        """Note for the run's ``extra.notes`` (the summary's notes) that the local repository ``source`` had changes
        its last commit does not hold (``made``: the ``workspace.Clone``), which the run therefore did not see."""
        if made.uncommitted:
            shown = ", ".join(made.uncommitted[:3]) + (", ..." if len(made.uncommitted) > 3 else "")
            self.notes.append(
                f"{source} has {len(made.uncommitted)} uncommitted change(s) ({shown}): runs start from its last "
                f"commit {made.commit[:12]}; commit them to include them")

    def check_tree(self) -> Path:
        """A fresh checkout of the run's clean tree for the next check (``run.cleantree.CleanTree.fresh``)."""
        if self.tree is None:
            raise RuntimeError("the pipeline sets the clean tree before it calls judge()")
        return self.tree.fresh()

    def write_tree_files(self, files: Mapping[str, str]) -> None:
        """Write ``{relative path: content}`` (hidden files) into the clean tree ``check_tree()`` just made fresh,
        never through a link (``run.cleantree.CleanTree.write_files``; raises ``linksafe.Tampered``)."""
        if self.tree is None:
            raise RuntimeError("the pipeline sets the clean tree before it calls judge()")
        self.tree.write_files(dict(files))

    def report_dir(self, check: str) -> Path | None:
        """The folder of ``check``'s test report (the harness's own; emptied by ``run_check``)."""
        return self.reports / check if self.reports is not None else None

    needs_sandbox = False  # a Harbor task's run cannot be made without the sandbox's mounts

    def mounts(self, phase: str, ws: Path) -> list[Mount]:
        """Host folders the sandbox shows at other paths for ``phase`` (``agent`` or ``checks``): none, but for a
        Harbor task (``run.harbor``: its ``/app``, ``/tests``, ``/logs``)."""
        return []

    def hidden(self) -> list[Path]:
        """Host folders the run's sandbox hides besides the session's: the task/trial file's folder, local source
        repositories and the agent's ``isolate`` folders."""
        return [Path(self.spec.source).resolve().parent, *map(Path, self.spec.agent.isolate)]

    @property
    def cache_dir(self) -> Path:
        """Template repositories of plain folders (``RunOptions.cache_dir``, else ``<out>/.cache/repos``)."""
        return Path(self.options.cache_dir or self.out / ".cache" / "repos")

    @abc.abstractmethod
    def env(self, ws: Path) -> dict[str, str]:
        """The environment of setup, the agent and the checks."""

    @abc.abstractmethod
    def make_workspace(self, ws: Path) -> None:
        """Create the run's fresh workspace at ``ws``; raises ``WorkspaceError``."""

    def setup(self, ws: Path, env: Mapping[str, str], run_dir: Path, secrets: list[str]) -> tuple[dict[str, CheckResult], str | None]:
        """Prepare the workspace before the agent: ``(checks run, reason of an error or None)``."""
        return {}, None

    @abc.abstractmethod
    def judge(self, ws: Path, env: Mapping[str, str], run_dir: Path, secrets: list[str], usage: Usage) -> Judgement:
        """Check the finished run (the agent's process group has exited): its checks run in ``check_tree()``,
        never in the workspace ``ws``."""
