"""``agentrace tasks list|show``, ``agentrace init`` and ``agentrace diff``: task tooling on the command line.

Each ``register_*`` adds one subcommand (see ``cli.COMMANDS``); each command returns its exit status:
0 done, 1 could not be done (e.g. the file exists), 2 bad input (unknown task, not a diff, bad option).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pytest_agentrace.cli.difftask import (
    DEFAULT_AGENTS,
    DEFAULT_TEST_COMMAND,
    MODES,
    DiffError,
    build_task,
    dump_yaml,
)
from pytest_agentrace.errors import SpecError
from pytest_agentrace.record.runfile import write_atomic
from pytest_agentrace.spec.builtin import (
    builtin_tasks,
    find_builtin,
    known_difficulty_list,
    level_rank,
    same_level,
)
from pytest_agentrace.spec.harbor import is_harbor_folder, load_harbor_task
from pytest_agentrace.spec.task import is_task_data, load_task

INIT_TEMPLATE = '''\
# Task file for pytest-agentrace (coderace-compatible), made by `agentrace init {name}`.
#   race agents:       pytest --agentrace {file} --agentrace-agent claude --agentrace-agent codex
#   check the task:    pytest --agentrace --agentrace-validate {file}
#                      (the reference solution must pass every check; the unchanged repo must fail them)
# Keys not listed here are errors; see `agentrace tasks show fibonacci` for a larger example.

name: {name}

# The prompt every agent gets. Say what to build or fix and how it is judged; never show the hidden tests.
description: |
  Create greet.py with a function greet(name) that returns "Hello, <name>!".
  An empty or blank name raises ValueError. Add a test for it in test_greet.py.

# The starting code: a folder next to this file, a git repository or a URL. Without repo, agents start
# from an empty git repository.
# repo: repo

# Runs after the agent finishes, in a fresh clean tree, not the agent's workspace: the repo plus the agent's
# change, minus its changes to test machinery (conftest.py, pytest.ini, ...). Exit 0 means the tests pass.
test_command: python -m pytest -q -p no:cacheprovider

# Hidden checks, written into a fresh clean tree only after the agent finishes (agents cannot see or edit them).
verify_command: python -m pytest -q -p no:cacheprovider hidden_tests
verify_files:
  hidden_tests/test_greet_hidden.py: |
    import pytest

    from greet import greet


    def test_greets():
        assert greet("Ada") == "Hello, Ada!"


    @pytest.mark.parametrize("name", ["", "   "])
    def test_rejects_blank_names(name):
        with pytest.raises(ValueError):
            greet(name)

# Style check of the agent's change, in a fresh clean tree without the hidden files. Optional.
lint_command: python -m ruff check --quiet --no-cache --isolated --select E4,E7,E9,F .

# Seconds per command: the agent's run and each check.
timeout: 300
difficulty: easy

# Files an agent must not create, change or delete (globs; a name without '/' matches at any depth).
protected: [conftest.py, pytest.ini, pyproject.toml, setup.cfg, tox.ini]

# Environment for the agent and the checks.
env:
  PYTHONDONTWRITEBYTECODE: "1"

# Agents to run when --agentrace-agent is not given: noop (changes nothing) is an expected failure,
# oracle applies the reference solution below.
agents: [oracle, noop]

# The reference solution used by the oracle agent (or solution_patch: a unified diff, inline or a .patch
# file next to this one).
solution_files:
  greet.py: |
    def greet(name):
        if not name.strip():
            raise ValueError("name must not be blank")
        return f"Hello, {{name}}!"
  test_greet.py: |
    import pytest

    from greet import greet


    def test_greet():
        assert greet("Bo") == "Hello, Bo!"


    def test_blank():
        with pytest.raises(ValueError):
            greet("")
'''


def _error(command: str, message: str, status: int = 2) -> int:
    print(f"agentrace {command}: error: {message}", file=sys.stderr)
    return status


# --- agentrace tasks -------------------------------------------------------------------------------------


def register_tasks(subparsers: argparse._SubParsersAction) -> None:
    """``agentrace tasks list [--difficulty L]`` and ``agentrace tasks show NAME``."""
    parser = subparsers.add_parser("tasks", help="list the built-in tasks or show one", description="The built-in task suite.")
    actions = parser.add_subparsers(dest="tasks_action", metavar="ACTION")
    listing = actions.add_parser("list", help="a table of the built-in tasks (or of the task files and Harbor task "
                                 "folders under PATH): name, difficulty, verify, timeout")
    listing.add_argument("paths", nargs="*", metavar="PATH",
                         help="list the tasks found here instead: YAML task files and Harbor task folders "
                              "(task.toml + instruction.md), searched recursively")
    listing.add_argument("--difficulty", type=known_difficulty_list, metavar="LEVEL[,LEVEL]",
                         help="only these difficulty levels, by name (easy, medium, medium-hard, hard)")
    listing.set_defaults(func=cmd_tasks_list)
    show = actions.add_parser("show", help="print a built-in task's YAML file")
    show.add_argument("name", help="a built-in task name (see `agentrace tasks list`)")
    show.set_defaults(func=cmd_tasks_show)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _shown_path(path: Path) -> str:
    """``path`` relative to the current folder when it lies below it, else absolute."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def cmd_tasks_list(args: argparse.Namespace) -> int:
    """Print the table of the built-in tasks (or of the tasks under PATH, with each one's format and file), easiest
    first, then by name. A task
    file under PATH that does not load is reported on standard error (one line each, file, key and fix) after the
    table of the ones that do, and the exit status is then 1."""
    from tabulate import tabulate

    rows = []
    if args.paths:
        tasks, broken = found_tasks(args.paths)
    else:
        tasks, broken = [load_task(e.path) for e in builtin_tasks()], []
    for task in tasks:
        if args.difficulty and not same_level(task.difficulty, args.difficulty):
            continue
        rank = level_rank(task.difficulty)
        if task.harbor is not None:
            verify = "reward (tests/test.sh)" + (" *" if task.harbor.environment else "")
        else:
            n = count_tests(task.verify_files)
            verify = f"yes ({n} test{'' if n == 1 else 's'})" if task.verify_command else "no"
        # under PATH: the format and the file (relative to the current folder when below it), as one name may repeat
        fmt = ["harbor" if task.harbor is not None else "yaml", _shown_path(task.path)] if args.paths else []
        rows.append((rank, [task.name, *fmt, task.difficulty or "-", verify, f"{task.timeout:g}"]))
    rows.sort(key=lambda r: (r[0], r[1][0], r[1][2] if args.paths else ""))
    headers = ["Name", *(["Format", "File"] if args.paths else []), "Difficulty", "Verify", "Timeout (s)"]
    if rows or not broken:
        print(tabulate([r[1] for r in rows], headers=headers, tablefmt="github"))
    if any(t.harbor is not None and t.harbor.environment for t in tasks):
        print("* environment/Dockerfile does more than pick a base image: it is not built, results may differ")
    if args.paths:
        print(f"{len(rows)} task(s). Race one: pytest --agentrace PATH --agentrace-agent claude")
    else:
        print(f"{len(rows)} task(s). Race one: pytest --agentrace --agentrace-builtin NAME --agentrace-agent claude")
    for message in broken:
        _error("tasks list", message, 1)
    if broken:
        print(f"agentrace tasks list: {len(broken)} task file(s) do not load (above); they are not listed",
              file=sys.stderr)
    return 1 if broken else 0


# errors a task file's content can raise beyond SpecError (as ``plugin.collect.LOAD_ERRORS``): one line, no traceback
LOAD_ERRORS = (OSError, ValueError, UnicodeError, RecursionError, RuntimeError, OverflowError, TypeError, LookupError)


def found_tasks(paths: list[str]) -> tuple[list, list[str]]:
    """The tasks under ``paths`` (files or folders, searched recursively): YAML task files (``is_task_data``) and
    Harbor task folders (``task.toml`` + ``instruction.md``), each loaded strictly. Returns ``(tasks, broken)``:
    the tasks that load, and one message per path that does not (a missing path, a task file or Harbor folder the
    strict loader rejects, or YAML that does not parse but has ``description:`` and ``test_command:`` lines, as
    ``pytest --agentrace`` claims it), so one bad file does not hide the others."""
    import yaml

    tasks, broken, seen = [], [], set()

    def load(loader, p: Path) -> None:
        seen.add(p.resolve())
        try:
            tasks.append(loader(p))
        except SpecError as exc:
            broken.append(str(exc))
        except LOAD_ERRORS as exc:
            broken.append(f"{p}: cannot load this file: {type(exc).__name__}: {exc}")

    for given in paths:
        root = Path(given)
        if not root.exists():
            broken.append(str(SpecError(root, None, "no such file or folder")))
            continue
        candidates = [root] if root.is_file() else sorted(root.rglob("*"))
        for p in candidates:
            if p.name == "task.toml" and is_harbor_folder(p.parent) and p.resolve() not in seen:
                load(load_harbor_task, p)
            elif p.suffix in (".yaml", ".yml") and p.is_file() and p.resolve() not in seen:
                if any(part in ("repo", ".agentrace", "node_modules") for part in p.parts):
                    continue
                try:
                    text = p.read_text(encoding="utf-8")
                    data = yaml.safe_load(text)
                except (UnicodeDecodeError, OSError):
                    continue
                except yaml.YAMLError:  # a task file with a syntax error is reported, other YAML is not a task
                    lines = text.splitlines()
                    if any(x.startswith("description:") for x in lines) and any(x.startswith("test_command:") for x in lines):
                        load(load_task, p)
                    continue
                if is_task_data(data):
                    load(load_task, p)
    return tasks, broken


def count_tests(files: dict[str, str]) -> int:
    """Test functions (``def test*``, at any nesting) in the Python files of ``files``; files that do not
    parse count 0."""
    import ast

    total = 0
    for path, text in files.items():
        if not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        total += sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test") for n in ast.walk(tree))
    return total


def cmd_tasks_show(args: argparse.Namespace) -> int:
    """Print the built-in task file as it is (comments included)."""
    try:
        entry = find_builtin(args.name)
    except KeyError as exc:
        return _error("tasks show", exc.args[0])
    sys.stdout.write(entry.path.read_text(encoding="utf-8"))
    return 0


# --- agentrace schema ------------------------------------------------------------------------------------


def register_schema(subparsers: argparse._SubParsersAction) -> None:
    """``agentrace schema task|trial [-o FILE]``."""
    parser = subparsers.add_parser(
        "schema", help="print the JSON Schema of task files (YAML) or trial files (TOML), for editors",
        description="Print the shipped JSON Schema (pytest_agentrace/schemas/KIND.schema.json); save it in your "
                    "repository and name it in a task file's first line (# yaml-language-server: $schema=PATH) or a "
                    "trial file's (#:schema PATH).")
    parser.add_argument("kind", choices=("task", "trial"))
    parser.add_argument("-o", "--output", dest="output_file", metavar="FILE", help="write to FILE instead of standard output")
    parser.set_defaults(func=cmd_schema)


def cmd_schema(args: argparse.Namespace) -> int:
    from pytest_agentrace.spec.schema import SCHEMA_DIR

    sys.stdout.write((SCHEMA_DIR / f"{args.kind}.schema.json").read_text(encoding="utf-8"))
    return 0


# --- agentrace init --------------------------------------------------------------------------------------


def register_init(subparsers: argparse._SubParsersAction) -> None:
    """``agentrace init NAME [-o DIR] [--force]``."""
    parser = subparsers.add_parser(
        "init", help="write a commented task file template NAME.yaml",
        description="Write DIR/NAME.yaml: a commented task template that loads, collects and validates as it is.",
    )
    parser.add_argument("name", help="task name; the file is NAME.yaml")
    parser.add_argument("-o", "--output-dir", default=".", metavar="DIR", help="folder to write into (default: the current one)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")
    parser.set_defaults(func=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    """Write the template, then load it with the strict loader (a template that does not load is a bug)."""
    name = args.name.removesuffix(".yaml")
    if not name.strip() or any(c in name for c in "/\\[]") or name in (".", ".."):
        return _error("init", f"{args.name!r} cannot be a task name; use letters, digits, '-', '_' or '.'")
    folder = Path(args.output_dir)
    path = folder / f"{name}.yaml"
    if path.exists() and not args.force:
        return _error("init", f"{path} exists; pass --force to overwrite it", 2)
    write_atomic(path, INIT_TEMPLATE.format(name=name, file=path.name))  # the one writer of -o files (``cli``)
    try:
        load_task(path)
    except SpecError as exc:  # pragma: no cover - guards the template itself
        return _error("init", f"the template does not load: {exc}", 1)
    print(f"wrote {path}")
    print(f"check it:  pytest --agentrace --agentrace-validate {path}")
    print(f"race:      pytest --agentrace {path} --agentrace-agent claude")
    return 0


# --- agentrace diff --------------------------------------------------------------------------------------


def _agent_list(value: str) -> list[str]:
    return [a.strip() for a in value.split(",") if a.strip()]


def register_diff(subparsers: argparse._SubParsersAction) -> None:
    """``agentrace diff [--file PATCH] [--mode M] [--agents A,B] [--name N] [--test-command C]
    [--lint-command C] [--repo DIR] [--apply] [--output FILE]``."""
    parser = subparsers.add_parser(
        "diff", help="turn a unified diff into a task file (review, fix or improve it)",
        description="Read a unified diff (stdin, or --file) and write a task file whose prompt carries the diff and the "
                    "mode's instruction. Example: git diff HEAD~1 | agentrace diff --mode review -o review.yaml",
    )
    parser.add_argument("--file", metavar="PATCH", help="read the diff from PATCH ('-' or omitted: standard input)")
    parser.add_argument("--mode", choices=list(MODES), default="review", help="what the agents are asked to do (default: review)")
    parser.add_argument("--agents", type=_agent_list, action="append", metavar="A[,B]", help=f"agents of the task (repeatable; default: {', '.join(DEFAULT_AGENTS)})")
    parser.add_argument("--name", help="task name (default: diff-MODE-<hash of the diff>)")
    parser.add_argument("--test-command", default=DEFAULT_TEST_COMMAND, help=f"the task's test_command (default: {DEFAULT_TEST_COMMAND!r})")
    parser.add_argument("--lint-command", help="the task's lint_command (default: none)")
    parser.add_argument("--repo", default=".", metavar="DIR", help="the repository the diff belongs to (default: the current folder); written relative to the output file")
    parser.add_argument("--apply", action="store_true", help="add a setup command that applies the diff to each fresh clone (for a change that is not committed)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the task here (default: standard output)")
    parser.set_defaults(func=cmd_diff)


def _read_diff(file: str | None) -> str:
    if file in (None, "-"):
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    else:
        data = Path(file).read_bytes()
    return data.decode("utf-8", errors="replace")


def cmd_diff(args: argparse.Namespace) -> int:
    """Build the task, write it, and load it back with the strict loader before reporting success."""
    import tempfile

    try:
        text = _read_diff(args.file)
    except OSError as exc:
        return _error("diff", f"cannot read {args.file}: {exc.strerror or exc}")
    out = Path(args.output) if args.output else None
    repo = args.repo
    if repo is not None and out is not None and not os.path.isabs(repo):
        repo = os.path.relpath(Path(repo).resolve(), out.resolve().parent)
    agents = [a for group in args.agents for a in group] if args.agents else list(DEFAULT_AGENTS)
    try:
        task = build_task(text, args.mode, agents, args.name, args.test_command, args.lint_command, repo, args.apply)
    except DiffError as exc:
        return _error("diff", str(exc))
    header = f"# Made by `agentrace diff --mode {args.mode}`; run: pytest --agentrace {out.name if out else 'FILE.yaml'}\n"
    yaml_text = dump_yaml(task, header)
    target = out or Path(tempfile.mkstemp(suffix=".yaml", prefix="agentrace-diff-")[1])
    try:
        write_atomic(target, yaml_text)  # the one writer of -o files (``cli`` docstring)
        load_task(target)
    except SpecError as exc:
        if out is not None:
            out.unlink(missing_ok=True)
        return _error("diff", f"the task does not load: {exc}")
    finally:
        if out is None:
            target.unlink(missing_ok=True)
    if out is None:
        sys.stdout.write(yaml_text)
    else:
        print(f"wrote {out} ({args.mode} task {task['name']!r})", file=sys.stderr)
    return 0
