"""Which files of a workspace's source are other evaluations' inputs that hold what an agent must never read: the
hidden checks and solutions of a task file, the answer keys and arm overlays of a trial file, a Harbor task's tests
and solution.

A task whose ``repo`` is the folder it lives in (``repo: .``) gets that folder as its workspace; the project's
other task and trial files lie in it too. ``secret_inputs`` finds them in a template's tree so that
``workspace.template_repo`` leaves them out:

- a YAML file (``*.yaml``, ``*.yml``) whose top level is a mapping with ``verify_command``, ``verify_files``,
  ``solution_files`` or ``solution_patch`` (a task's hidden checks and reference solution; ``spec.task``'s keys),
  and the patch file its ``solution_patch`` names (relative to the task file) when it lies under the root;
- a TOML file with a top-level ``[[questions]]`` array (a trial file: its questions carry the answer keys;
  ``spec.trial``'s rule), also when it does not parse but has that line, and the folders its questions'
  ``verify_files`` and its arms' ``overlay`` name (relative to the trial file) that lie under the root (an overlay
  is one arm's treatment: the other arms' workspaces, and every other evaluation's, must not hold it; its own arm
  gets it laid over the clone);
- beside a Harbor ``task.toml`` with an ``instruction.md``: the ``tests`` and ``solution`` folders.

Files over ``SIZE_CAP`` bytes, links and ``.git`` are not read. The rule is read from files' contents, never
from their names alone, so a project's own ``config.yaml`` stays in the workspace.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import yaml

from pytest_agentrace import fstree

SECRET_KEYS = frozenset({"verify_command", "verify_files", "solution_files", "solution_patch"})
HARBOR_HIDDEN = ("tests", "solution")
SIZE_CAP = 1_000_000  # bytes: a larger YAML/TOML file is data, not a task or trial file
RULE = "inputs-v4"  # part of a template's cache digest: a change of this rule makes new templates


def is_patch_file_name(value: str) -> bool:
    """True when a ``solution_patch`` value names a patch file (one line ending ``.patch`` or ``.diff``) rather than
    holding the patch."""
    return "\n" not in value.strip() and value.strip().endswith((".patch", ".diff"))


def _text(path: Path) -> str | None:
    try:
        if os.lstat(path).st_size > SIZE_CAP:
            return None
        with open(path, encoding="utf-8", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def _task_like(text: str) -> list[str] | None:
    """The patch files (as written) a task file ``text`` with hidden checks or a reference solution names as its
    ``solution_patch`` (``[]`` when none, or when it does not parse but has such a top-level line), or None when it
    is no such task file."""
    if not any(key in text for key in SECRET_KEYS):
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:  # a broken task file still holds its checks: judge by its top-level lines
        return [] if any(line.split(":", 1)[0] in SECRET_KEYS for line in text.splitlines() if ":" in line) else None
    if not isinstance(data, dict) or not SECRET_KEYS & set(map(str, data)):
        return None
    patch = data.get("solution_patch")
    return [patch.strip()] if isinstance(patch, str) and is_patch_file_name(patch) else []


def _trial_folders(text: str) -> list | None:
    """The folders the trial file ``text`` names that no workspace may hold (as written, relative to the file): its
    questions' ``verify_files`` and its arms' ``overlay`` (an arm's treatment, which another arm must not see; ``[]``
    when it does not parse but has a ``[[questions]]`` line), or None when it is no trial file."""
    if "questions" not in text:
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        found = any(line.strip().replace(" ", "") == "[[questions]]" for line in text.splitlines())
        return [] if found else None
    questions, arms = data.get("questions"), data.get("arms")
    if not isinstance(questions, list):
        return None
    return [*(q.get("verify_files") for q in questions if isinstance(q, dict)),
            *(a.get("overlay") for a in (arms if isinstance(arms, list) else []) if isinstance(a, dict))]


def secret_inputs(root: Path) -> list[str]:
    """Relative POSIX paths under ``root`` (files, and Harbor ``tests``/``solution`` folders) that are other
    evaluations' hidden inputs (see the module docstring), sorted."""
    found: list[str] = []
    for dirpath, dirnames, filenames in fstree.walk(root):
        here = Path(dirpath)
        rel = here.relative_to(root)
        dirnames[:] = sorted(d for d in dirnames if d != ".git" and not os.path.islink(here / d))
        names = set(filenames)
        if "task.toml" in names and "instruction.md" in names:
            for hidden in HARBOR_HIDDEN:
                if hidden in dirnames:
                    found.append((rel / hidden).as_posix())
                    dirnames.remove(hidden)
        for name in sorted(filenames):
            suffix = Path(name).suffix
            if suffix not in (".yaml", ".yml", ".toml") or name == "pyproject.toml":
                continue
            text = _text(here / name)
            if text is None:
                continue
            folders = _trial_folders(text) if suffix == ".toml" else None
            patches = _task_like(text) if suffix != ".toml" else None
            if folders is not None or patches is not None:
                found += [(rel / name).as_posix(), *_under(root, here, [*(folders or []), *(patches or [])])]
    return sorted(set(found))


def _under(root: Path, here: Path, names: list) -> list[str]:
    """The paths under ``root`` (relative POSIX, not ``root`` itself) that ``names`` (strings relative to the folder
    ``here``; other values skipped) lead to: a trial's ``verify_files`` folders, a task's patch file."""
    found = []
    for value in names:
        if not isinstance(value, str) or not value:
            continue
        target = Path(os.path.normpath(here / value))
        if target.is_relative_to(root) and target != root:
            found.append(target.relative_to(root).as_posix())
    return found
