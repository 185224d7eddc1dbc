"""The task judge: a coderace-style task's workspace, setup and checks (see ``run.pipeline`` for the run).

The workspace is a fresh clone of the task's ``repo``; ``setup`` commands run in it (the first that fails makes
the run an ``error``). After the agent, each check runs in a fresh checkout of the run's clean tree (the source
plus the agent's change minus the test machinery, ``run.cleantree``): ``test_command``, then ``lint_command``,
then the hidden ``verify_files`` are written into a fresh checkout and ``verify_command`` runs; a pytest check is
counted (``run.counting``), and verify must have run every test its files define. The run fails when tests or
verify fail; lint counts in the score only. The task's ``protected`` paths and its verify files are guarded
against the agent (``tampered``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_agentrace.record.model import CheckResult, Usage
from pytest_agentrace.run import workspace
from pytest_agentrace.run.checks import clean_env, run_check, run_commands
from pytest_agentrace.run.counting import hidden_tests
from pytest_agentrace.run.judge import Judge, Judgement


class TaskJudge(Judge):
    """The ``Judge`` of a task run (``spec.spec`` is the ``spec.task.Task``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        task = self.task = self.spec.spec
        self.prompt = task.description
        self.edits = True
        self.protected_globs = task.protected_globs
        self.machinery = task.machinery
        self.binary_diffs = task.binary_diffs
        self.fields = {"has_verify": bool(task.verify_command), "has_lint": bool(task.lint_command),
                       "scoring": task.scoring or None, "difficulty": task.difficulty, "extra": {}}

    def env(self, ws: Path) -> dict[str, str]:
        """``checks.clean_env`` plus the task's and the agent's ``env``."""
        return clean_env(extra={**self.task.env, **self.spec.agent.env})

    def make_workspace(self, ws: Path) -> None:
        """A clone of the task's repo without the task file and its reference patch file (when they lie inside the
        repo) and its verify files."""
        exclude = list(self.task.verify_files)
        if self.task.repo and not self.task.repo.startswith(("http", "git@", "ssh:")):
            exclude += self.left_out(Path(self.task.repo), (self.task.path, self.task.solution_patch_file()))
        made = workspace.clone(self.task.repo, ws, self.cache_dir, exclude=exclude, session=self.session_id)
        self.start_tree = made.tree
        self.note_source(self.task.repo, made)

    def hidden(self) -> list[Path]:
        repo = self.task.repo
        local = [Path(repo)] if repo and Path(repo).is_dir() else []
        return [*super().hidden(), *local]

    def setup(self, ws: Path, env: Mapping[str, str], run_dir: Path, secrets: list[str]) -> tuple[dict[str, CheckResult], str | None]:
        """The task's ``setup`` commands in order, one log; the first that fails (or cannot run) is the error."""
        if not self.task.setup:
            return {}, None
        res = run_commands("setup", self.task.setup, ws, env, self.task.timeout, run_dir / "setup.log", secrets, self.box)
        number = self.task.setup.index(res.command) + 1
        if res.missing:
            return {"setup": res}, f"setup command {number} cannot run here: {res.missing} is missing (`{res.command}`)"
        if not res.passed:
            return {"setup": res}, f"setup command {number} failed ({res.why}): {res.command}"
        return {"setup": res}, None

    def judge(self, ws: Path, env: Mapping[str, str], run_dir: Path, secrets: list[str], usage: Usage) -> Judgement:
        task, checks = self.task, {}
        checks["tests"] = run_check("tests", task.test_command, self.check_tree(), env, task.timeout, run_dir / "tests.log",
                                    secrets, self.box, self.limits, self.report_dir("tests"))
        if task.lint_command:  # lint sees the agent's tree, without the hidden verify files
            checks["lint"] = run_check("lint", task.lint_command, self.check_tree(), env, task.timeout, run_dir / "lint.log",
                                       secrets, self.box, self.limits, self.report_dir("lint"))
        if task.verify_command:
            tree = self.check_tree()
            try:  # a folder on a verify file's way that the agent made a link: nothing is written through it
                self.write_tree_files(task.verify_files)
            except workspace.Tampered as exc:
                return Judgement(checks, f"tampered: {', '.join(exc.paths)}", {"tampered": tuple(exc.paths)})
            checks["verify"] = run_check("verify", task.verify_command, tree, env, task.timeout, run_dir / "verify.log",
                                         secrets, self.box, self.limits, self.report_dir("verify"),
                                         hidden_tests(task.verify_files))
        failed = [c for c in (checks.get("tests"), checks.get("verify")) if c is not None and not c.passed]
        return Judgement(checks, failed[0].reason if failed else None)
