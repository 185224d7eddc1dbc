"""Turn a unified diff into a task file (``agentrace diff``): the prompt carries the diff and a mode's
instruction, the checks are the repository's own commands.

The diff is parsed with ``unidiff`` (git extended headers: renames, copies, new/deleted files, binary
patches); binary payloads are left out of the prompt (they are noise to a model) but kept for ``--apply``,
which makes the task's setup apply the whole diff to the fresh clone (for changes not yet committed).
"""

from __future__ import annotations

import glob
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MODES = {
    "review": (
        "Review the change below. Report every problem you find (bugs, unhandled errors and edge cases, unclear "
        "code, missing tests), each with the file and line it concerns, most serious first. Do not modify any file: "
        "this is a review, and changing the files under review fails the run."
    ),
    "fix": (
        "The change below was made to this repository and it has problems. Find them and fix them in the code while "
        "keeping what the change is meant to do. When you are done, `{test_command}` must pass."
    ),
    "improve": (
        "Improve the change below in this repository: make it clearer, more robust and better tested, without "
        "changing what it does. When you are done, `{test_command}` must pass."
    ),
}
DEFAULT_AGENTS = ("claude", "codex")
DEFAULT_TEST_COMMAND = "python -m pytest -q"
DEFAULT_TIMEOUT = 900
MAX_PROMPT_DIFF = 100_000  # characters of diff text in the prompt (the rest is summarised)


class DiffError(ValueError):
    """The input is not a usable unified diff (empty, not a diff, or corrupt); the message is one line."""


@dataclass(frozen=True)
class FileChange:
    """One file of a diff: ``kind`` is added / deleted / modified / renamed; lines are 0 for binary files."""

    kind: str
    path: str
    old_path: str | None
    added: int
    removed: int
    binary: bool
    text: str  # this file's part of the diff for the prompt (headers and hunks, no binary payload)


def parse_diff(text: str) -> list[FileChange]:
    """Parse a unified diff (plain or git) into ``FileChange``s, in diff order.

    Raises ``DiffError`` for empty input, input with no file header, or a corrupt hunk.
    """
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    if not text.strip():
        raise DiffError("the input is empty; pipe a unified diff (e.g. `git diff | agentrace diff`) or pass --file PATCH")
    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        raise DiffError(f"the input is not a valid unified diff: {exc}") from None
    if not len(patch):
        raise DiffError("the input is not a unified diff: no file headers (`diff --git`, or `---`/`+++` lines) found")
    changes = []
    for f in patch:
        if f.is_added_file:
            kind = "added"
        elif f.is_removed_file:
            kind = "deleted"
        elif getattr(f, "is_rename", False):
            kind = "renamed"
        else:
            kind = "modified"
        old = _strip_prefix(f.source_file) if kind == "renamed" else None
        changes.append(FileChange(kind, f.path, old, f.added, f.removed, f.is_binary_file, str(f)))
    return changes


def _strip_prefix(name: str) -> str:
    return name[2:] if name.startswith(("a/", "b/")) else name


def summary_lines(changes: Sequence[FileChange]) -> list[str]:
    """One line per file: ``kind  path (+a -r)``; renames show ``old -> new``, binary files ``(binary)``."""
    lines = []
    for c in changes:
        name = f"{c.old_path} -> {c.path}" if c.old_path else c.path
        counts = "binary" if c.binary else f"+{c.added} -{c.removed}"
        lines.append(f"  {c.kind:<9} {name} ({counts})")
    return lines


def prompt_for(changes: Sequence[FileChange], mode: str, test_command: str) -> str:
    """The task description: the mode's instruction, a file summary and the diff (binary payloads left out,
    cut after ``MAX_PROMPT_DIFF`` characters)."""
    added = sum(c.added for c in changes)
    removed = sum(c.removed for c in changes)
    import textwrap

    parts = [textwrap.fill(MODES[mode].format(test_command=test_command), width=100, break_on_hyphens=False), ""]
    parts.append(f"The change touches {len(changes)} file(s), +{added} -{removed} lines:")
    parts.extend(summary_lines(changes))
    body = ""
    for c in changes:
        piece = c.text if c.text.endswith("\n") else c.text + "\n"
        if c.binary:
            piece += "(binary content not shown)\n"
        body += piece
    if len(body) > MAX_PROMPT_DIFF:
        cut = body.rfind("\n", 0, MAX_PROMPT_DIFF) + 1
        rest = body[cut:].count("\n")
        body = body[:cut] + f"... ({rest} more lines of the diff not shown; see the files above in the repository)\n"
    parts += ["", "```diff", body.rstrip("\n"), "```", ""]
    return "\n".join(parts)


def task_name(text: str, mode: str) -> str:
    """Default task name: ``diff-<mode>-<first 8 hex of sha256(diff)>`` (stable for the same diff)."""
    return f"diff-{mode}-{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"


def build_task(
    text: str, mode: str = "review", agents: Sequence[str] = DEFAULT_AGENTS, name: str | None = None,
    test_command: str = DEFAULT_TEST_COMMAND, lint_command: str | None = None, repo: str | None = ".",
    apply: bool = False,
) -> dict[str, Any]:
    """The task mapping for ``text`` (keys in the order they are written). Raises ``DiffError``.

    ``repo`` is written as given (relative paths are relative to the task file). ``apply`` adds a setup
    command that applies the diff to the clone (``git apply`` reading a here-document). Review tasks protect
    the files the diff touches, so a reviewer that edits them fails.
    """
    if mode not in MODES:
        raise DiffError(f"unknown mode {mode!r}; use {', '.join(MODES)}")
    changes = parse_diff(text)
    task: dict[str, Any] = {
        "name": name or task_name(text, mode),
        "description": prompt_for(changes, mode, test_command),
    }
    if repo is not None:
        task["repo"] = repo
    if apply:
        if "\ufffd" in text:
            raise DiffError("the diff is not valid UTF-8 text, so it cannot be embedded for --apply")
        marker = "AGENTRACE_DIFF_" + hashlib.sha256(text.encode()).hexdigest()[:12].upper()
        task["setup"] = [f"git apply --whitespace=nowarn <<'{marker}'\n{text.rstrip(chr(10))}\n{marker}\n"]
    task["test_command"] = test_command
    if lint_command:
        task["lint_command"] = lint_command
    task["timeout"] = DEFAULT_TIMEOUT
    if mode == "review":
        # the files under review must stay as they are (not every file: agent CLIs may leave their own files)
        task["protected"] = sorted({glob.escape(c.path) for c in changes} | {glob.escape(c.old_path) for c in changes if c.old_path})
    task["agents"] = list(agents)
    return task


def dump_yaml(data: Mapping[str, Any], header: str = "") -> str:
    """YAML for a task mapping with multi-line strings as literal blocks (readable diffs and prompts).

    The result is parsed back and compared; if a string cannot be written as a literal block (carriage
    returns, control characters), the whole mapping is written by ``yaml.safe_dump`` instead.
    """
    import yaml

    out = [header] if header else []
    for key, value in data.items():
        piece = f"{key}:" + _yaml_value(value, 2)
        try:
            ok = yaml.safe_load(piece) == {key: value}
        except yaml.YAMLError:
            ok = False
        out.append(piece if ok else yaml.safe_dump({key: value}, allow_unicode=True, width=100_000))
    text = "".join(out)
    try:
        if yaml.safe_load(text) == dict(data):
            return text
    except yaml.YAMLError:
        pass
    return header + yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True, width=100_000)


def _yaml_value(value: Any, indent: int) -> str:
    import json

    pad = " " * indent
    if isinstance(value, str) and "\n" in value.rstrip("\n"):
        return " " + _literal(value, indent) + "\n"
    if isinstance(value, str) and value.endswith("\n"):
        return " " + _literal(value, indent) + "\n"
    if isinstance(value, list):
        if not value:
            return " []\n"
        return "\n" + "".join(f"{pad}-" + _yaml_value(v, indent + 2) for v in value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f" {value}\n"
    if isinstance(value, str) and _PLAIN.fullmatch(value) and ": " not in value and value.lower() not in _YAML_WORDS:
        return f" {value}\n"
    return f" {json.dumps(value, ensure_ascii=False)}\n"


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/ -]*[A-Za-z0-9_.]|[A-Za-z_]")  # no ': ', no leading digit or sign
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _literal(text: str, indent: int) -> str:
    """A YAML literal block scalar for ``text`` with the chomping and indentation indicators it needs."""
    stripped = text.rstrip("\n")
    trailing = len(text) - len(stripped)
    chomp = "-" if trailing == 0 else ("" if trailing == 1 else "+")
    indicator = str(indent) if text[:1] in (" ", "\n") else ""
    pad = " " * indent
    body = "\n".join(pad + line if line else "" for line in stripped.split("\n"))
    return f"|{indicator}{chomp}\n{body}" + "\n" * max(trailing - 1, 0)
