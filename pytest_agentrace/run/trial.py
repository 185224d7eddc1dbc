"""The trial judge: a trial question's workspace, arm setup and answer key (see ``run.pipeline`` for the run).

Each run gets a fresh clone of its question's repo (or the repo the arm maps it to), the arm's overlay copied
over it, then:

- ``prepare`` runs once per session per arm (file lock + a marker under ``<out>/.sessions/<session id>``, so it
  also holds across pytest-xdist workers, which share the controller's session id); cwd is the trial file's
  folder; a failed prepare is remembered and every run of that arm reports it without re-running it;
- ``setup`` runs in the clone, one run at a time across the whole session (a ``FileLock`` under
  ``<out>/.locks``) unless the arm says ``parallel_setup = true``;
- the agent runs with ``edits`` from the agent entry (default ``False``);
- the answer is scored (``answers.score_answer``), ``uses`` is matched over the tool calls, ``verify`` runs
  in a fresh checkout of the clean tree with the question's hidden ``verify_files`` written into it, and a
  verification claim is judged against it. A wrong answer or a failed verify fails the run.

Environment of prepare, setup, verify (and the agent): ``TRIAL_OUT`` (the results folder, ``--agentrace-out``;
in the sandbox the agent and verify get their run's outbox instead, whose files the record keeps under ``outbox/``;
the rest is out of their reach),
``TRIAL_DIR`` (the clone), ``TRIAL_ID`` (unique per run and session; ``[a-z0-9_]``, starts with a letter,
at most 51 characters: safe as a database name), ``TRIAL_QUESTION``, ``TRIAL_ARM``, ``TRIAL_AGENT``,
``TRIAL_REP``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_agentrace.record.model import CheckResult, Usage
from pytest_agentrace.record.runfile import write_atomic
from pytest_agentrace.record.safefile import read_bytes, write_bytes
from pytest_agentrace.run import workspace
from pytest_agentrace.run.checks import clean_env, run_check, run_commands
from pytest_agentrace.run.counting import hidden_tests
from pytest_agentrace.run.judge import Judge, Judgement
from pytest_agentrace.run.runspec import RunSpec
from pytest_agentrace.stats.answers import (
    CLAIM_REQUEST,
    judge_claim,
    parse_claim,
    score_answer,
    tool_used,
)

SETUP_LOCK = Path(".locks") / "setup.lock"
SESSION_MARKER_MAX_AGE = 24 * 3600.0  # seconds: older sessions' prepare markers are removed


def trial_id(spec: RunSpec, session_id: str) -> str:
    """``TRIAL_ID``: a readable slug of question/arm/agent/rep plus 8 hex digits of sha256(session id, run id)."""
    slug = re.sub(r"[^a-z0-9]+", "_", f"{spec.case}_{spec.arm}_{spec.agent.id}_r{spec.rep}".lower()).strip("_")[:40].rstrip("_")
    digest = hashlib.sha256(f"{session_id}\0{spec.id}".encode()).hexdigest()[:8]
    return f"t_{slug}_{digest}"


def trial_env(spec: RunSpec, out: Path, ws: Path, session_id: str) -> dict[str, str]:
    """The environment for prepare, setup, verify and the agent: ``clean_env`` + the agent's ``env`` + ``TRIAL_*``."""
    return clean_env(extra={
        **spec.agent.env,
        "TRIAL_OUT": str(out), "TRIAL_DIR": str(ws), "TRIAL_ID": trial_id(spec, session_id),
        "TRIAL_QUESTION": spec.case, "TRIAL_ARM": spec.arm, "TRIAL_AGENT": spec.agent.id, "TRIAL_REP": str(spec.rep),
    })


def compose_prompt(trial: Any, arm: Any, question: Any) -> str:
    """The exact text sent: arm ``prompt_prefix``, the question's ``prompt``, the suffix (the arm's
    ``prompt_suffix`` when set, else ``[defaults].prompt_suffix``), and the claim request when ``claim = true``.

    Parts are stripped of surrounding whitespace and joined by a blank line; empty parts are left out.
    """
    suffix = arm.prompt_suffix if arm.prompt_suffix is not None else trial.prompt_suffix
    parts = [arm.prompt_prefix, question.prompt, suffix, CLAIM_REQUEST if trial.claim else None]
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def prune_sessions(root: Path, keep: str, max_age: float = SESSION_MARKER_MAX_AGE) -> None:
    """Remove other sessions' marker folders under ``root`` untouched for more than ``max_age`` seconds."""
    cutoff = time.time() - max_age
    for d in root.iterdir() if root.is_dir() else ():
        try:
            if d.is_dir() and d.name != keep and d.stat().st_mtime < cutoff:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            continue


def prepare_once(spec: RunSpec, out: Path, env: Mapping[str, str], session_id: str, run_dir: Path, secrets=()) -> CheckResult:
    """Run the arm's ``prepare`` commands once per session (across xdist workers); return their result.

    The first run of the arm in a session takes a file lock, runs the commands in the trial file's folder and
    writes a marker ``<out>/.sessions/<session id>/prepare/<key>.json``; later runs read the marker. The log is
    copied into ``run_dir/prepare.log``. A ``KeyboardInterrupt`` leaves no marker (the next session prepares).
    """
    trial, arm = spec.spec, spec.spec.arm(spec.arm)
    key = hashlib.sha256(f"{Path(trial.path).resolve()}\0{arm.name}".encode()).hexdigest()[:16]
    folder = out / ".sessions" / session_id / "prepare"
    if not folder.exists():
        prune_sessions(out / ".sessions", keep=session_id)
    folder.mkdir(parents=True, exist_ok=True)
    marker, log = folder / f"{key}.json", folder / f"{key}.log"
    with FileLock(str(folder / f"{key}.lock")):
        if marker.exists():
            result = CheckResult.from_dict(json.loads(marker.read_text(encoding="utf-8")))
        else:
            result = run_commands("prepare", arm.prepare, Path(trial.path).parent, env, trial.timeout, log, secrets)
            write_atomic(marker, json.dumps({**result.to_dict(), "run_id": spec.id, "arm": arm.name}))
    if (text := read_bytes(log)) is not None:
        write_bytes(run_dir / "prepare.log", text)
    return dataclasses.replace(result, log="prepare.log")


def run_setup(spec: RunSpec, ws: Path, out: Path, env: Mapping[str, str], run_dir: Path, secrets=(), box=None) -> CheckResult:
    """Run the arm's ``setup`` commands in the clone; one run at a time per results folder unless ``parallel_setup``."""
    trial, arm = spec.spec, spec.spec.arm(spec.arm)
    log = run_dir / "setup.log"
    if arm.parallel_setup:
        return run_commands("setup", arm.setup, ws, env, trial.timeout, log, secrets, box)
    lock = out / SETUP_LOCK
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock)):
        return run_commands("setup", arm.setup, ws, env, trial.timeout, log, secrets, box)


class TrialJudge(Judge):
    """The ``Judge`` of a trial run (``spec.spec`` is the ``Trial``, ``spec.case_obj`` the question)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        trial, question = self.trial, self.question = self.spec.spec, self.spec.case_obj
        arm = self.arm = trial.arm(self.spec.arm)
        self.repo_name = arm.repos.get(question.repo, question.repo)
        self.where = f" ({self.repo_name})"
        self.prompt = compose_prompt(trial, arm, question)
        self.edits = bool(self.spec.agent.edits)
        self.fields = {"has_verify": question.verify is not None, "baseline_arm": trial.baseline, "extra": {
            "trial": trial.name, "repo": self.repo_name, "edits": self.edits, "claim_requested": trial.claim,
            "uses": arm.uses}}

    def env(self, ws: Path) -> dict[str, str]:
        return trial_env(self.spec, self.out, ws, self.session_id)

    def hidden(self) -> list[Path]:
        local = [Path(r.source) for r in self.trial.repos if Path(r.source).is_dir()]
        verify = [Path(q.verify_dir) for q in self.trial.questions if q.verify_dir]
        return [*super().hidden(), *local, *(Path(a.overlay) for a in self.trial.arms if a.overlay), *verify]

    def make_workspace(self, ws: Path) -> None:
        """A clone of the question's repo (or the one the arm maps it to) at its ``ref``, the arm's overlay over it."""
        repo = self.trial.repo(self.repo_name)
        exclude: list[str] = []
        if Path(repo.source).is_dir():  # the trial file and every question's hidden files, when inside the repo
            exclude = self.left_out(Path(repo.source), [self.trial.path, *(q.verify_dir for q in self.trial.questions)])
        made = workspace.clone(repo.source, ws, self.cache_dir, repo.ref, exclude=exclude, session=self.session_id)
        self.fields["extra"]["commit"] = made.commit
        self.note_source(repo.source, made)
        if self.arm.overlay:
            workspace.overlay(Path(self.arm.overlay), ws)
        else:
            self.start_tree = made.tree

    def setup(self, ws: Path, env: Mapping[str, str], run_dir: Path, secrets: list[str]) -> tuple[dict[str, CheckResult], str | None]:
        """The arm's ``prepare`` (once per session) and ``setup`` commands; the first that fails is the error."""
        checks: dict[str, CheckResult] = {}
        if self.arm.prepare:
            checks["prepare"] = prepare_once(self.spec, self.out, env, self.session_id, run_dir, secrets)
        if self.arm.setup and all(c.passed for c in checks.values()):
            checks["setup"] = run_setup(self.spec, ws, self.out, env, run_dir, secrets, self.box)
        for name, res in checks.items():
            if res.missing:
                return checks, f"{name} of arm {self.arm.name!r} cannot run here: {res.missing} is missing (`{res.command}`)"
            if not res.passed:
                return checks, f"{name} of arm {self.arm.name!r} failed ({res.why}): {res.command}"
        return checks, None

    def judge(self, ws: Path, env: Mapping[str, str], run_dir: Path, secrets: list[str], usage: Usage) -> Judgement:
        """The answer key (``expect`` / ``forbid`` / ``min_recall``), ``uses`` over the tool calls, ``verify`` in the
        clone and the verification claim against it."""
        question, trial = self.question, self.trial
        limit = question.max_answer_chars or trial.max_answer_chars
        score = score_answer(usage.answer, question.expect, question.forbid, question.min_recall, limit,
                             usage.answer_chars)
        fields: dict[str, Any] = {"answer_score": score, "used_tool": tool_used(self.arm.uses, usage.tool_calls)}
        checks, verify = {}, None
        if question.verify is not None:  # in a fresh checkout of the clean tree, which TRIAL_DIR names
            tree = self.check_tree()
            try:  # the hidden verify files; a folder on their way that the agent made a link: nothing written through it
                self.write_tree_files(question.verify_files)
            except workspace.Tampered as exc:
                return Judgement(checks, f"tampered: {', '.join(exc.paths)}", {**fields, "tampered": tuple(exc.paths)})
            verify = checks["verify"] = run_check("verify", question.verify, tree, {**env, "TRIAL_DIR": str(tree)},
                                                  trial.timeout, run_dir / "verify.log", secrets, self.box, self.limits,
                                                  self.report_dir("verify"), hidden_tests(question.verify_files))
        if trial.claim:
            fields["claim"] = judge_claim(parse_claim(usage.answer), None if verify is None else verify.passed)
        failure = None
        if score.get("too_long"):
            failure = f"answer longer than {limit} characters"
        elif not score["correct"]:
            why = []
            if score["missing"] and score["recall"] + 1e-9 < question.min_recall:
                why.append(f"recall {score['recall']:.2f} < min_recall {question.min_recall:.2f}")
            if score["forbidden"]:
                why.append("forbidden pattern matched: " + ", ".join(score["forbidden"]))
            failure = "answer incorrect: " + "; ".join(why)
        elif verify is not None and not verify.passed:
            failure = verify.reason
        return Judgement(checks, failure, fields)
