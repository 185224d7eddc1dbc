"""Strict loader for Harbor task folders: ``task.toml`` + ``instruction.md`` -> the same ``Task`` as a YAML task file.

A Harbor task (Harbor's task format, https://harborframework.com/docs/task-format; the templates of Harbor 0.26.0's
``harbor/cli/template-task``) is a folder::

    task.toml         schema_version, [task] (name, keywords, ...), [metadata], [agent], [verifier], [environment]
    instruction.md    the prompt
    tests/test.sh     the verifier: run after the agent from the workdir, writes /logs/verifier/reward.txt (a number)
                      or reward.json (a number or {name: number})
    solution/solve.sh the reference solution (the ``oracle`` agent runs it as /solution/solve.sh)
    environment/Dockerfile   not built here: the run uses this host's toolchain inside the sandbox

What is read: the prompt from ``instruction.md``; ``[agent] timeout_sec`` (the agent's seconds) and ``[verifier]
timeout_sec`` (the verifier's); ``[metadata] difficulty`` and the keywords of ``[task] keywords`` and ``[metadata]
keywords`` / ``tags``; ``[environment] env`` (the agent's and verifier's environment), ``[verifier] env`` and
``[solution] env``; ``[environment] memory_mb`` / ``storage_mb`` as resource limits and ``workdir`` (default
``/app``). Keys of Harbor's ``TaskConfig`` that cannot change a run here (``build_timeout_sec``, ``cpus``, network
settings, ``user``, ...) are accepted and listed in ``HarborLayout.ignored``; multi-step tasks, a separate verifier
environment, GPUs, TPUs and MCP servers are ``SpecError``s, and so is any other key (with a did-you-mean, as in task
files). ``[metadata]`` is free-form, as in Harbor.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentrace.errors import SpecError
from pytest_agentrace.record import safefile
from pytest_agentrace.run.limits import Limits
from pytest_agentrace.spec.common import AgentSpec
from pytest_agentrace.spec.lines import key_path, line_finder
from pytest_agentrace.spec.task import DEFAULT_TIMEOUT, Task
from pytest_agentrace.strict import check_keys, file_env, positive_number, str_list, typed

CONFIG = "task.toml"
INSTRUCTION = "instruction.md"
VERIFIER_TIMEOUT = 600.0  # seconds: Harbor's VerifierConfig default
WORKDIR = "/app"
TESTS_MOUNT = "/tests"
SOLUTION_MOUNT = "/solution"
VERIFIER_LOGS = "/logs/verifier"
AGENT_LOGS = "/logs/agent"
VERIFY_COMMAND = "bash /tests/test.sh"
ORACLE_COMMAND = ("bash", f"{SOLUTION_MOUNT}/solve.sh")
HOST_TOOLCHAIN = "environment/Dockerfile not built: the run used this host's toolchain inside the sandbox"

KEYS = {
    "": ("schema_version", "task", "metadata", "verifier", "agent", "environment", "solution", "source",
         "multi_step_reward_strategy", "steps", "artifacts"),
    "task": ("name", "version", "description", "authors", "keywords"),
    "agent": ("timeout_sec", "user", "network_mode", "allowed_hosts"),
    "verifier": ("timeout_sec", "env", "user", "environment_mode", "environment", "collect", "network_mode",
                 "allowed_hosts"),
    "environment": ("build_timeout_sec", "docker_image", "os", "cpus", "memory_mb", "storage_mb", "gpus", "gpu_types",
                    "tpu", "mcp_servers", "env", "skills_dir", "healthcheck", "workdir", "allow_internet",
                    "network_mode", "allowed_hosts"),
    "solution": ("env",),
}
USED = {"schema_version", "task", "metadata", "verifier", "agent", "environment", "solution", "task.name",
        "task.version", "task.description", "task.authors", "task.keywords", "agent.timeout_sec",
        "verifier.timeout_sec",
        "verifier.env", "environment.env", "environment.memory_mb", "environment.storage_mb", "environment.workdir",
        "environment.os", "environment.docker_image", "solution.env"}
UNSUPPORTED = {
    "steps": "multi-step Harbor tasks are not supported; run each step as a task of its own",
    "multi_step_reward_strategy": "multi-step Harbor tasks are not supported",
    "verifier.environment_mode": "a separate verifier environment is not supported (the verifier runs in the box)",
    "verifier.environment": "a separate verifier environment is not supported (the verifier runs in the box)",
    "verifier.collect": "verifier collect commands (other services) are not supported",
    "environment.tpu": "TPUs are not supported",
    "environment.mcp_servers": "MCP servers of a task are not supported",
}


@dataclass(frozen=True)
class HarborLayout:
    """What a Harbor task folder adds to its ``Task``: the folder (absolute), its ``tests`` and ``solution`` folders
    (None when missing), the verifier's timeout (seconds) and environment, the solution's environment, the workdir the
    workspace is shown at (``/app``), ``keywords``, ``environment`` (why results may differ from Harbor's: the
    Dockerfile does more than pick a base image, or a prebuilt ``docker_image``; None when it only picks one),
    and ``ignored`` (keys read but without effect here)."""

    folder: Path
    tests: Path | None
    solution: Path | None
    verify_timeout: float = VERIFIER_TIMEOUT
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)
    workdir: str = WORKDIR
    keywords: tuple[str, ...] = ()
    environment: str | None = None
    ignored: tuple[str, ...] = ()


def is_harbor_folder(folder: Path) -> bool:
    """True when ``folder`` holds ``task.toml`` and ``instruction.md`` (a Harbor task): as entries of its own,
    whatever they are (a link there makes the task an error when loaded, not a folder silently passed over)."""
    return all(os.path.lexists(folder / name) and not (folder / name).is_dir() for name in (CONFIG, INSTRUCTION))


MAX_FILE_BYTES = 1024 * 1024  # task.toml, instruction.md, environment/Dockerfile: each read whole
MAX_FOLDER_BYTES = 1024 ** 3  # apparent size of a task folder's regular files (tests/ and solution/ are copied per run)


def _own_bytes(path: Path, key: str | None = None) -> bytes:
    """The bytes of ``path``, a regular file of the task's own folder: read without following a link
    (``safefile.read_bytes``), at most ``MAX_FILE_BYTES``. Raises ``SpecError`` for a link, a missing or special
    file, or a larger one: a task folder from elsewhere never makes the harness read a host file."""
    if not safefile.is_regular(path):
        raise SpecError(path, key, "is a link or no regular file; a Harbor task's files must be regular files "
                                   "in its own folder (copy the file in place of the link)")
    data = safefile.read_bytes(path, MAX_FILE_BYTES + 1)
    if data is None:
        raise SpecError(path, key, "cannot be read")
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(path, key, f"is larger than {MAX_FILE_BYTES} bytes")
    return data


def _own_text(path: Path, key: str | None = None) -> str:
    """``_own_bytes`` as text (undecodable bytes replaced)."""
    return _own_bytes(path, key).decode("utf-8", errors="replace")


def _own_folder(path: Path, folder: Path, name: str, script: str, required: bool) -> Path | None:
    """``folder/name`` when it is a folder of its own (no link) holding ``script`` as a regular file; None when it
    does not hold it and is not ``required``. Raises ``SpecError`` naming ``name/script`` for a link, or a missing
    ``script`` when ``required``."""
    sub = folder / name
    if os.path.islink(sub) or os.path.islink(sub / script):
        raise SpecError(path, f"{name}/{script}", f"{name}/ and {name}/{script} must be a folder and a file of the "
                                                  "task's own, not links")
    if not safefile.is_regular(sub / script):
        if required:
            raise SpecError(path, f"{name}/{script}", f"missing: {sub / script} is the verifier that writes the reward")
        return None
    return sub


def _table(path: Path, key: str, value: Any) -> dict[str, Any]:
    return typed(path, key, value, dict, fix=f"write a [{key}] table")


def load_harbor_task(path: Path) -> Task:
    """Load the Harbor task whose ``task.toml`` is ``path`` (or whose folder is ``path``) as a ``Task``.

    ``Task.path`` is the ``task.toml``; ``Task.harbor`` the ``HarborLayout``; ``verify_command`` runs
    ``tests/test.sh`` (from the workdir); ``test_command`` is empty (a Harbor task has no visible tests). Raises
    ``SpecError`` naming ``task.toml`` (or ``instruction.md``) and the key, with the fix, and the key's line in
    ``task.toml`` where it has one."""
    path = Path(path)
    if path.is_dir():
        path = path / CONFIG
    try:
        return _load(path)
    except SpecError as exc:
        if exc.path != str(path) or not exc.key:
            raise
        try:
            line = line_finder("trial", path.read_text(encoding="utf-8"))(key_path(exc.key))
        except (OSError, UnicodeDecodeError, ValueError):
            line = None
        if line is None:
            raise
        message = str(exc).removeprefix(f"{exc.path}: key '{exc.key}': ")
        raise SpecError(path, exc.key, f"{message} (line {line})") from None


def _load(path: Path) -> Task:
    folder = path.parent.resolve()
    raw = _own_bytes(path)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(path, None, f"not valid TOML: {exc}") from None
    check_keys(path, "", data, KEYS[""])
    tables = {name: _table(path, name, data.get(name) or {}) for name in ("task", "metadata", "agent", "verifier",
                                                                          "environment", "solution")}
    for name, allowed in KEYS.items():
        if name:
            check_keys(path, name, tables[name], allowed)
    given = set(data) | {f"{t}.{k}" for t in KEYS if t for k in tables[t]}
    for key, why in UNSUPPORTED.items():
        table, _, sub = key.rpartition(".")
        if (tables[table].get(sub) if table else data.get(key)) not in (None, [], {}):
            raise SpecError(path, key, why)
    env_t, task_t, meta = tables["environment"], tables["task"], tables["metadata"]
    if env_t.get("os", "linux") != "linux":
        raise SpecError(path, "environment.os", f"{env_t['os']!r} tasks are not supported; runs here are Linux")
    if env_t.get("gpus"):
        raise SpecError(path, "environment.gpus", "GPU tasks are not supported")
    instruction = folder / INSTRUCTION
    prompt = _own_text(instruction)
    if not prompt.strip():
        raise SpecError(instruction, None, "is empty; write the task's instruction (the prompt) in it")
    name = _name(path, folder, task_t)
    timeout = DEFAULT_TIMEOUT
    if tables["agent"].get("timeout_sec") is not None:
        timeout = positive_number(path, "agent.timeout_sec", tables["agent"]["timeout_sec"])
    verify_timeout = VERIFIER_TIMEOUT
    if tables["verifier"].get("timeout_sec") is not None:
        verify_timeout = positive_number(path, "verifier.timeout_sec", tables["verifier"]["timeout_sec"])
    difficulty = meta.get("difficulty")
    if difficulty is not None:
        difficulty = str(typed(path, "metadata.difficulty", difficulty, str, int, float)).strip() or None
    keywords = [*str_list(path, "task.keywords", task_t.get("keywords") or [], allow_str=False)]
    for key in ("keywords", "tags"):
        if meta.get(key) is not None:
            keywords += str_list(path, f"metadata.{key}", meta[key])
    workdir = typed(path, "environment.workdir", env_t.get("workdir") or WORKDIR, str)
    if not workdir.startswith("/") or ".." in workdir.split("/") or workdir.rstrip("/") in ("", "/tmp", "/logs"):
        raise SpecError(path, "environment.workdir", f"{workdir!r} cannot be the workspace's path; write e.g. /app")
    tests = _own_folder(path, folder, "tests", "test.sh", required=True)
    assert tests is not None
    content_hash = _folder_hash(path, folder)
    layout = HarborLayout(
        folder=folder, tests=tests, solution=_own_folder(path, folder, "solution", "solve.sh", required=False),
        verify_timeout=verify_timeout,
        verifier_env=file_env(path, "verifier.env", tables["verifier"].get("env") or {}),
        solution_env=file_env(path, "solution.env", tables["solution"].get("env") or {}),
        workdir=workdir.rstrip("/"), keywords=tuple(dict.fromkeys(keywords)),
        environment=environment_note(folder, env_t.get("docker_image")),
        ignored=tuple(sorted(k for k in given - USED if "." in k)))
    return Task(path=path, name=name, description=prompt, test_command="", verify_command=VERIFY_COMMAND,
                timeout=timeout, difficulty=difficulty,
                env=file_env(path, "environment.env", env_t.get("env") or {}),
                limits=_limits(path, env_t), content_hash=content_hash, harbor=layout)


def _name(path: Path, folder: Path, task_t: dict[str, Any]) -> str:
    """The task's name: the part of ``[task] name`` (``org/name``) after the ``/``, else the folder's name."""
    given = task_t.get("name")
    if given is None:
        return folder.name
    full = typed(path, "task.name", given, str)
    short = full.rsplit("/", 1)[-1].strip()
    if not short or short in (".", "..") or any(c in short for c in "\\[]"):
        raise SpecError(path, "task.name", f"{full!r} cannot name a task; write org/name, e.g. acme/median-bug")
    return short


def _limits(path: Path, env_t: dict[str, Any]) -> Limits | None:
    """``memory_mb`` / ``storage_mb`` of ``[environment]`` as the runs' memory and disk limits (bytes)."""
    given = {}
    for key, name in (("memory_mb", "memory"), ("storage_mb", "disk")):
        if env_t.get(key) is not None:
            given[name] = int(positive_number(path, f"environment.{key}", env_t[key]) * 1024 * 1024)
    return Limits(**given) if given else None


_BASE_ONLY = re.compile(r"(?i)^\s*(#.*|FROM\s+\S+(\s+AS\s+\S+)?|WORKDIR\s+\S+|)\s*$")


def environment_note(folder: Path, docker_image: Any) -> str | None:
    """Why a Harbor task's runs may differ from Harbor's: its ``environment/Dockerfile`` does more than pick a base
    image (``FROM``, ``WORKDIR``, comments), naming the first such instruction; or ``[environment] docker_image``
    names a prebuilt image. None when the Dockerfile only picks a base image (or there is none)."""
    if docker_image:
        return f"[environment] docker_image {docker_image} is not pulled: results may differ from Harbor's"
    dockerfile = folder / "environment" / "Dockerfile"
    if not os.path.lexists(dockerfile) or os.path.islink(folder / "environment"):
        return None
    lines = _own_text(dockerfile).splitlines()
    extra = [line.strip() for line in lines if not _BASE_ONLY.match(line)]
    if not extra:
        return None
    first = extra[0] if len(extra[0]) <= 60 else extra[0][:59] + "…"
    return (f"environment/Dockerfile does more than pick a base image ({first!r}, {len(extra)} instruction line(s)): "
            "results may differ from Harbor's")


def _folder_hash(path: Path, folder: Path) -> str:
    """sha256 over the folder's regular files (relative path and content, sorted; links, linked folders and caches
    skipped; each file read in chunks): the task's content hash (resume reuses a run only when it is unchanged).
    Raises ``SpecError`` when the files' apparent size passes ``MAX_FOLDER_BYTES`` (a sparse file too: its copies
    per run would be dense)."""
    files = [p for p in safefile.regular_files(folder)
             if not {"__pycache__", ".pytest_cache"} & set(p.relative_to(folder).parts)]
    total = 0
    for p in files:
        total += os.lstat(p).st_size
        if total > MAX_FOLDER_BYTES:
            raise SpecError(path, None, f"the task folder's files pass {MAX_FOLDER_BYTES} bytes (at {p.relative_to(folder)}); "
                                        "a Harbor task's tests/ and solution/ are copied for every run")
    digest = hashlib.sha256()
    for p in sorted(files, key=lambda p: p.relative_to(folder).parts):  # as Path sorts
        digest.update(p.relative_to(folder).as_posix().encode() + b"\0")
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def harbor_agent(task: Task, agent: AgentSpec) -> AgentSpec:
    """The agent as it runs a Harbor task: ``oracle`` runs ``solution/solve.sh`` (shown at ``/solution``) from the
    workdir, with ``[solution] env``, as a command in the run's sandbox; every other agent is unchanged. A task
    without ``solution/solve.sh`` keeps the in-process oracle, which reports that it has no solution."""
    layout = getattr(task, "harbor", None)
    if layout is None or agent.name != "oracle" or agent.command is not None or layout.solution is None:
        return agent
    import dataclasses

    return dataclasses.replace(agent, command=ORACLE_COMMAND, kind="plain", env={**layout.solution_env, **agent.env},
                               calls_model=False)
