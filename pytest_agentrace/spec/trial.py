"""Strict loader for trial files (TOML, read with ``tomllib``).

A trial file describes one A/B experiment (AgentTrialRig-style): repositories, arms (the conditions
compared), agents, and questions with answer keys. Every (question, arm, agent, rep) becomes one run.
The keys, and nothing else (an unknown key anywhere raises ``SpecError`` naming the table, the key and the
nearest valid name)::

    name = "docs-layer"                           # top level: name + the arrays/tables below
    [defaults]   reps (1), parallel (runs at once, at most), timeout (seconds per run, 300), baseline (arm name,
                 default the first arm), prompt_suffix, claim (bool, default false), network
                 (``run.network.parse_network``), limits
                 (table: memory, max_procs, disk, cpu_time; see ``spec.common.parse_limits``), max_answer_chars
                 (characters of the final answer, default 4000: a longer one is incorrect)
    [[repos]]    name, source (local path, file:// URL or remote URL), ref (optional)
    [[arms]]     name, overlay (folder copied over the clone), repos = {app = "other"},
                 setup (commands per fresh clone), parallel_setup (bool), prepare (commands once per
                 session), uses (regex over tool calls), prompt_prefix, prompt_suffix
    [[agents]]   name, model, args, env, edits (default false), sandbox, command ({prompt}), kind,
                 model_double, isolate, limits (the agent's own; over [defaults] limits)
    [[questions]] id, repo, prompt, expect (regexes), min_recall (0..1, default 1.0), forbid (regexes),
                  verify (shell command), verify_files (folder of hidden files written into the checked tree
                  before verify, never shown to the agent), max_answer_chars (over [defaults])

Relative paths (``source``, ``overlay``, ``verify_files``, a custom command's executable) resolve against the trial file's
folder. A file is a trial file when its top level has a ``[[questions]]`` array (``is_trial_data``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentrace.errors import SpecError, did_you_mean
from pytest_agentrace.run.limits import Limits
from pytest_agentrace.run.network import NetworkSpec, parse_network
from pytest_agentrace.run.sandbox import BoxSpec
from pytest_agentrace.run.workspace import folder_hash
from pytest_agentrace.spec.common import AgentSpec, parse_agent, parse_box, parse_limits, unique_agent_ids
from pytest_agentrace.spec.lines import (
    BOX,
    DRAFT,
    LIMITS,
    NETWORK,
    STR,
    STR_MAP,
    STR_OR_STRS,
    agent_schema,
    every_error,
    schema_table,
)
from pytest_agentrace.strict import (
    check_keys,
    positive_number,
    resolve_source,
    str_list,
    str_mapping,
    typed,
)

TOP_KEYS = ("name", "defaults", "repos", "arms", "agents", "questions")
DEFAULTS_KEYS = ("reps", "parallel", "timeout", "baseline", "prompt_suffix", "claim", "limits", "network", "sandbox",
                 "max_answer_chars")
REPO_KEYS = ("name", "source", "ref")
ARM_KEYS = ("name", "overlay", "repos", "setup", "parallel_setup", "prepare", "uses", "prompt_prefix", "prompt_suffix")
AGENT_KEYS = ("name", "model", "args", "env", "edits", "sandbox", "command", "kind", "model_double", "isolate",
              "limits", "network")
QUESTION_KEYS = ("id", "repo", "prompt", "expect", "min_recall", "forbid", "verify", "verify_files", "max_answer_chars")
DEFAULT_MAX_ANSWER_CHARS = 4000  # characters: a longer final answer is incorrect before any pattern is tried
DEFAULT_TIMEOUT = 300.0
SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")  # codex exec --sandbox
_NAME_BAD = re.compile(r"[/\\\[\]\s]")



@dataclass(frozen=True)
class Repo:
    """A ``[[repos]]`` entry: ``source`` is an absolute path or URL; ``ref`` a commit/branch/tag to check out."""

    name: str
    source: str
    ref: str | None = None


@dataclass(frozen=True)
class Arm:
    """A condition being compared. ``overlay`` is an absolute folder path; ``repos`` maps a question's repo
    name to the repo cloned instead in this arm; ``uses`` is a regex source (matched with ``re.search``)."""

    name: str
    overlay: str | None = None
    repos: dict[str, str] = field(default_factory=dict)
    setup: tuple[str, ...] = ()
    parallel_setup: bool = False
    prepare: tuple[str, ...] = ()
    uses: str | None = None
    prompt_prefix: str | None = None
    prompt_suffix: str | None = None


@dataclass(frozen=True)
class Question:
    """A question (the trial's case): ``expect``/``forbid`` are regex sources, ``min_recall`` a fraction 0..1,
    ``verify`` a shell command run in the clone after the agent (exit 0 = passed); ``verify_files`` the hidden files
    written into that clone first (``{relative path: text}``, read from the folder ``verify_dir``)."""

    id: str
    repo: str
    prompt: str
    expect: tuple[str, ...] = ()
    min_recall: float = 1.0
    forbid: tuple[str, ...] = ()
    verify: str | None = None
    max_answer_chars: int | None = None  # None: the trial's [defaults] max_answer_chars
    verify_dir: str | None = None  # absolute folder of verify_files
    verify_files: Mapping[str, str] = field(default_factory=dict)

    @property
    def has_answer_key(self) -> bool:
        """Whether a run can fail on its answer: some ``expect`` with ``min_recall`` > 0, a ``forbid`` or a ``verify``."""
        return bool(self.forbid) or self.verify is not None or (bool(self.expect) and self.min_recall > 0)


@dataclass(frozen=True)
class Trial:
    """A loaded trial file. ``timeout`` is seconds per run (agent, and each setup/verify command);
    ``parallel`` caps how many of its runs run at once across pytest-xdist workers (``run.slots``; None: no cap
    beyond the workers); ``content_hash`` is the sha256 of
    the file's bytes and of every arm overlay's contents (``workspace.folder_hash``), so editing an answer key or
    an overlay (e.g. the CLAUDE.md under test) makes ``--agentrace-resume`` run those cells again."""

    path: Path
    name: str
    repos: tuple[Repo, ...]
    arms: tuple[Arm, ...]
    agents: tuple[AgentSpec, ...]
    questions: tuple[Question, ...]
    reps: int = 1
    parallel: int | None = None
    timeout: float = DEFAULT_TIMEOUT
    baseline: str = ""
    prompt_suffix: str | None = None
    claim: bool = False
    limits: Limits | None = None  # [defaults] limits: resource limits of every run (over the session's)
    network: NetworkSpec | None = None  # [defaults] network: mode / allow-list of every run (run.network)
    box: BoxSpec | None = None  # [defaults] sandbox = {read, write}: more the sandbox shows every run
    max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS  # characters; a question may set its own
    content_hash: str = ""

    def repo(self, name: str) -> Repo:
        return next(r for r in self.repos if r.name == name)

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)


def is_trial_data(data: Any) -> bool:
    """True when parsed TOML has a top-level ``[[questions]]`` array (a list of tables)."""
    return isinstance(data, Mapping) and isinstance(data.get("questions"), list)


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; raises ``SpecError`` with tomllib's message (it names line and column)."""
    import tomllib

    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(path, None, f"not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(path, None, f"not UTF-8 text: {exc}") from None


def load_trial(path: Path, data: Any = None) -> Trial:
    """Load and validate a trial file (``data``: the already-parsed TOML, if at hand).

    Raises ``SpecError`` (file, table.key, fix) for any schema violation, e.g. an unknown key with the
    nearest valid one, a question naming an unknown repo, an uncompilable regex, or duplicate names; the error
    carries its line and every other key or type error of the file (``spec.schema.every_error``).
    """
    path = Path(path)
    if data is None:
        data = read_toml(path)
    try:
        return _load_trial(path, data)
    except SpecError as first:
        if not isinstance(data, Mapping):
            raise
        raise every_error(first, path, "trial", data, trial_schema()) from None


def _load_trial(path: Path, data: Any) -> Trial:
    raw = path.read_bytes()
    if not is_trial_data(data):
        raise SpecError(path, "questions", "a trial file needs a [[questions]] array of tables")
    check_keys(path, "", data, TOP_KEYS, required=("questions",))
    name = _name(path, "name", data["name"]) if "name" in data else path.stem
    defaults = _table(path, "defaults", data.get("defaults", {}))
    check_keys(path, "[defaults]", defaults, DEFAULTS_KEYS)
    repos = tuple(_repo(path, i, r) for i, r in enumerate(_array(path, "repos", data.get("repos"), required=True)))
    _unique(path, "[[repos]]", "name", [r.name for r in repos])
    repo_names = [r.name for r in repos]
    arms_raw = data.get("arms")
    arms = tuple(_arm(path, i, a, repo_names) for i, a in enumerate(_array(path, "arms", arms_raw))) if arms_raw else (Arm("default"),)
    _unique(path, "[[arms]]", "name", [a.name for a in arms])
    agents = unique_agent_ids(_agent(path, i, a) for i, a in enumerate(_array(path, "agents", data.get("agents"), required=True)))
    questions = tuple(_question(path, i, q, repos, arms) for i, q in enumerate(_array(path, "questions", data["questions"], required=True)))
    _unique(path, "[[questions]]", "id", [q.id for q in questions])

    kw: dict[str, Any] = {}
    if "reps" in defaults:
        kw["reps"] = _positive_int(path, "[defaults].reps", defaults["reps"])
    if "parallel" in defaults:
        kw["parallel"] = _positive_int(path, "[defaults].parallel", defaults["parallel"])
    if "timeout" in defaults:
        kw["timeout"] = positive_number(path, "[defaults].timeout", defaults["timeout"])
    if "prompt_suffix" in defaults:
        kw["prompt_suffix"] = typed(path, "[defaults].prompt_suffix", defaults["prompt_suffix"], str)
    if "claim" in defaults:
        kw["claim"] = typed(path, "[defaults].claim", defaults["claim"], bool)
    if "limits" in defaults:
        kw["limits"] = parse_limits(path, "[defaults].limits", defaults["limits"])
    if "network" in defaults:
        kw["network"] = parse_network(path, "[defaults].network", defaults["network"])
    if "sandbox" in defaults:
        kw["box"] = parse_box(path, "[defaults].sandbox", defaults["sandbox"])
    if "max_answer_chars" in defaults:
        kw["max_answer_chars"] = _positive_int(path, "[defaults].max_answer_chars", defaults["max_answer_chars"])
    baseline = arms[0].name
    if "baseline" in defaults:
        baseline = typed(path, "[defaults].baseline", defaults["baseline"], str)
        names = [a.name for a in arms]
        if baseline not in names:
            raise SpecError(path, "[defaults].baseline", f"no arm named {baseline!r}{did_you_mean(baseline, names)}; arms: {', '.join(names)}")
    return Trial(
        path=path, name=name, repos=repos, arms=arms, agents=agents, questions=questions, baseline=baseline,
        content_hash=_content_hash(raw, arms, questions), **kw,
    )


def _content_hash(raw: bytes, arms: tuple[Arm, ...], questions: tuple[Question, ...]) -> str:
    """sha256 over the trial file's bytes, per arm with an overlay its name and the overlay's folder hash, and per
    question with ``verify_files`` its id and that folder's hash."""
    h = hashlib.sha256(raw)
    for arm in arms:
        if arm.overlay:
            h.update(f"\0{arm.name}\0{folder_hash(Path(arm.overlay))}".encode())
    for question in questions:
        if question.verify_dir:
            h.update(f"\0{question.id}\0{folder_hash(Path(question.verify_dir))}".encode())
    return h.hexdigest()


def _name(path: Path, key: str, value: Any) -> str:
    """A name used in node ids and result folders: no slashes, brackets or whitespace."""
    name = typed(path, key, value, str)
    if not name or _NAME_BAD.search(name) or name in (".", ".."):
        raise SpecError(path, key, f"{name!r} cannot be used as a name; use letters, digits, '-', '_' or '.'")
    return name


def _table(path: Path, key: str, value: Any) -> Mapping[str, Any]:
    return typed(path, key, value, dict, fix=f"write it as a [{key}] table")


def _array(path: Path, key: str, value: Any, required: bool = False) -> list[Mapping[str, Any]]:
    """A TOML array of tables (``[[key]]``); raises ``SpecError`` when missing (if ``required``) or not tables."""
    if value is None or value == []:
        if required:
            raise SpecError(path, f"[[{key}]]", f"no [[{key}]] entries; add at least one [[{key}]] table")
        return []
    typed(path, key, value, list, fix=f"write one [[{key}]] table per entry")
    for i, item in enumerate(value):
        typed(path, f"[[{key}]] #{i + 1}", item, dict, fix=f"write one [[{key}]] table per entry")
    return value


def _where(kind: str, index: int, data: Mapping[str, Any], key: str = "name") -> str:
    """Table label for messages: ``[[arms]] 'docs'`` or ``[[arms]] #2`` when it has no usable name."""
    label = data.get(key)
    return f"[[{kind}]] {label!r}" if isinstance(label, str) and label else f"[[{kind}]] #{index + 1}"


def _unique(path: Path, table: str, key: str, names: list[str]) -> None:
    seen = set()
    for n in names:
        if n in seen:
            raise SpecError(path, f"{table}.{key}", f"{n!r} is used twice; each {key} must be unique")
        seen.add(n)


def _positive_int(path: Path, key: str, value: Any) -> int:
    typed(path, key, value, int, fix="write a whole number without quotes")
    if value < 1:
        raise SpecError(path, key, f"must be 1 or more, not {value}")
    return value


def _regex(path: Path, key: str, value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise SpecError(path, key, f"{value!r} is not a valid regular expression: {exc}") from None
    return value


def _commands(path: Path, key: str, value: Any) -> tuple[str, ...]:
    cmds = str_list(path, key, value)
    for i, c in enumerate(cmds):
        if not c.strip():
            raise SpecError(path, f"{key}[{i}]", "empty command; remove it or write a shell command")
    return cmds


def _repo(path: Path, i: int, data: Mapping[str, Any]) -> Repo:
    where = _where("repos", i, data)
    check_keys(path, where, data, REPO_KEYS, required=("name", "source"))
    name = _name(path, f"{where}.name", data["name"])
    source = typed(path, f"{where}.source", data["source"], str)
    if not source.strip():
        raise SpecError(path, f"{where}.source", "is empty; give a local path, file:// URL or git URL")
    ref = data.get("ref")
    if ref is not None:
        typed(path, f"{where}.ref", ref, str)
    return Repo(name, resolve_source(path, source), ref)


def _arm(path: Path, i: int, data: Mapping[str, Any], repo_names: list[str]) -> Arm:
    where = _where("arms", i, data)
    check_keys(path, where, data, ARM_KEYS, required=("name",))
    kw: dict[str, Any] = {"name": _name(path, f"{where}.name", data["name"])}
    if "overlay" in data:
        overlay = typed(path, f"{where}.overlay", data["overlay"], str)
        resolved = Path(resolve_source(path, overlay))
        if not resolved.is_dir():
            raise SpecError(path, f"{where}.overlay", f"folder {resolved} does not exist; give a folder relative to the trial file")
        kw["overlay"] = str(resolved)
    if "repos" in data:
        mapping = str_mapping(path, f"{where}.repos", data["repos"])
        for k, v in mapping.items():
            for side, n in (("key", k), ("value", v)):
                if n not in repo_names:
                    raise SpecError(path, f"{where}.repos.{k}", f"{side} {n!r} is not a [[repos]] name{did_you_mean(n, repo_names)}; repos: {', '.join(repo_names)}")
        kw["repos"] = mapping
    for key in ("setup", "prepare"):
        if key in data:
            kw[key] = _commands(path, f"{where}.{key}", data[key])
    if "parallel_setup" in data:
        kw["parallel_setup"] = typed(path, f"{where}.parallel_setup", data["parallel_setup"], bool)
    if "uses" in data:
        kw["uses"] = _regex(path, f"{where}.uses", typed(path, f"{where}.uses", data["uses"], str))
    for key in ("prompt_prefix", "prompt_suffix"):
        if key in data:
            kw[key] = typed(path, f"{where}.{key}", data[key], str)
    return Arm(**kw)


def _agent(path: Path, i: int, data: Mapping[str, Any]) -> AgentSpec:
    where = _where("agents", i, data)
    check_keys(path, where, data, AGENT_KEYS, required=("name",))
    _name(path, f"{where}.name", data["name"])
    agent = parse_agent(path, where, dict(data))
    if agent.command is not None and not any("{prompt" in part for part in agent.command):
        raise SpecError(path, f"{where}.command", "has no {prompt} or {prompt_file} placeholder; the agent would never see the question")
    if agent.sandbox is not None and agent.sandbox not in SANDBOX_MODES:
        raise SpecError(path, f"{where}.sandbox", f"unknown sandbox mode {agent.sandbox!r}{did_you_mean(agent.sandbox, SANDBOX_MODES)}; valid: {', '.join(SANDBOX_MODES)}")
    return agent


def _question(path: Path, i: int, data: Mapping[str, Any], repos: Sequence[Repo], arms: Sequence[Arm]) -> Question:
    repo_names = [r.name for r in repos]
    where = _where("questions", i, data, key="id")
    check_keys(path, where, data, QUESTION_KEYS, required=("id", "prompt"))
    qid = _name(path, f"{where}.id", data["id"])
    if "repo" in data:
        repo = typed(path, f"{where}.repo", data["repo"], str)
        if repo not in repo_names:
            raise SpecError(path, f"{where}.repo", f"no [[repos]] entry named {repo!r}{did_you_mean(repo, repo_names)}; repos: {', '.join(repo_names)}")
    elif len(repo_names) == 1:
        repo = repo_names[0]
    else:
        raise SpecError(path, f"{where}.repo", f"required when there are several [[repos]]; one of: {', '.join(repo_names)}")
    prompt = typed(path, f"{where}.prompt", data["prompt"], str)
    if not prompt.strip():
        raise SpecError(path, f"{where}.prompt", "is empty; write the question the agent is asked")
    kw: dict[str, Any] = {"id": qid, "repo": repo, "prompt": prompt}
    for key in ("expect", "forbid"):
        if key in data:
            kw[key] = tuple(_regex(path, f"{where}.{key}[{j}]", p) for j, p in enumerate(str_list(path, f"{where}.{key}", data[key])))
            for j, pattern in enumerate(kw[key]):
                if re.search(pattern, ""):
                    every = "every answer would pass it" if key == "expect" else "it would forbid every answer"
                    raise SpecError(path, f"{where}.{key}[{j}]", f"{pattern!r} matches the empty string, so {every}; write what the answer must contain")
    if "min_recall" in data:
        value = typed(path, f"{where}.min_recall", data["min_recall"], int, float)
        if not 0 <= value <= 1:
            raise SpecError(path, f"{where}.min_recall", f"must be a fraction from 0 to 1, not {value}")
        kw["min_recall"] = float(value)
    if "verify" in data:
        verify = typed(path, f"{where}.verify", data["verify"], str)
        if not verify.strip():
            raise SpecError(path, f"{where}.verify", "is empty; write a shell command or remove the key")
        kw["verify"] = verify
    if "max_answer_chars" in data:
        kw["max_answer_chars"] = _positive_int(path, f"{where}.max_answer_chars", data["max_answer_chars"])
    if "verify_files" in data:
        if "verify" not in kw:
            raise SpecError(path, f"{where}.verify_files", "needs verify, the command that runs with these files; add it")
        kw["verify_dir"], kw["verify_files"] = _verify_files(path, f"{where}.verify_files", data["verify_files"], repos, arms)
    return Question(**kw)


def _verify_files(path: Path, key: str, value: Any, repos: Sequence[Repo], arms: Sequence[Arm]) -> tuple[str, dict[str, str]]:
    """``(absolute folder, {relative POSIX path: text})`` of a question's ``verify_files`` folder: every regular
    file below it, UTF-8 text. Raises ``SpecError`` for a missing folder, a link, a file that is not text, or a
    folder that would reach the agent's workspace (``_hidden_apart``)."""
    folder = Path(resolve_source(path, typed(path, key, value, str)))
    if not folder.is_dir() or folder.is_symlink():
        raise SpecError(path, key, f"folder {folder} does not exist; give a folder relative to the trial file")
    _hidden_apart(path, key, folder, repos, arms)
    files: dict[str, str] = {}
    for entry in sorted(folder.rglob("*")):
        rel = entry.relative_to(folder).as_posix()
        if entry.is_symlink():
            raise SpecError(path, key, f"{rel} in {folder} is a link; hidden files are copied as files, so put the file itself there")
        if entry.is_file():
            try:
                files[rel] = entry.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise SpecError(path, key, f"{rel} in {folder} is not UTF-8 text; hidden files are written as text") from None
    if not files:
        raise SpecError(path, key, f"folder {folder} holds no file; put the hidden tests there or remove the key")
    return str(folder), files


def _hidden_apart(path: Path, key: str, hidden: Path, repos: Sequence[Repo], arms: Sequence[Arm]) -> None:
    """Raise ``SpecError`` when the ``verify_files`` folder ``hidden`` would reach an agent's workspace whole: when it
    is a local repo's folder or holds one (a workspace is made from the repo's files; a folder below the repo is
    left out of it, ``run.trial``), or overlaps an arm's overlay (copied over the workspace as it is)."""
    for r in repos:
        source = Path(r.source)
        if source.is_absolute() and (source == hidden or source.is_relative_to(hidden)):
            raise SpecError(path, key, f"folder {hidden} holds repo {r.name!r} ({source}), so every agent would see "
                                       "the hidden files; put them in a folder of their own beside the repo or below it")
    for a in arms:
        overlay = Path(a.overlay) if a.overlay else None
        if overlay and (hidden.is_relative_to(overlay) or overlay.is_relative_to(hidden)):
            raise SpecError(path, key, f"folder {hidden} and arm {a.name!r}'s overlay {overlay} overlap, and the overlay is "
                                       "copied into the agent's workspace; put the hidden files in a folder of their own")


def trial_schema() -> dict[str, Any]:
    """The JSON Schema of a trial file (``spec.trial``)."""
    positive_int = {"type": "integer", "minimum": 1}
    defaults = {"reps": positive_int, "parallel": positive_int, "timeout": {"type": "number", "exclusiveMinimum": 0},
                "baseline": STR, "prompt_suffix": STR, "claim": {"type": "boolean"}, "limits": LIMITS,
                "max_answer_chars": {"type": "integer", "minimum": 1},
                "network": NETWORK, "sandbox": BOX}
    repo = {"name": STR, "source": STR, "ref": STR}
    arm = {"name": STR, "overlay": STR, "repos": STR_MAP, "setup": STR_OR_STRS,
           "parallel_setup": {"type": "boolean"}, "prepare": STR_OR_STRS, "uses": STR, "prompt_prefix": STR,
           "prompt_suffix": STR}
    question = {"id": STR, "repo": STR, "prompt": STR, "expect": STR_OR_STRS,
                "min_recall": {"type": "number", "minimum": 0, "maximum": 1}, "forbid": STR_OR_STRS, "verify": STR,
                "verify_files": STR, "max_answer_chars": {"type": "integer", "minimum": 1}}
    top = {
        "name": STR,
        "defaults": schema_table(defaults, DEFAULTS_KEYS),
        "repos": {"type": "array", "items": schema_table(repo, REPO_KEYS, ("name", "source"))},
        "arms": {"type": "array", "items": schema_table(arm, ARM_KEYS, ("name",))},
        "agents": {"type": "array", "items": agent_schema(AGENT_KEYS, with_string=False)},
        "questions": {"type": "array", "items": schema_table(question, QUESTION_KEYS, ("id", "prompt"))},
    }
    return {"$schema": DRAFT, "$id": "https://pytest-agentrace/schemas/trial.schema.json",
            "title": "pytest-agentrace trial file (TOML)", **schema_table(top, TOP_KEYS, ("questions",))}
