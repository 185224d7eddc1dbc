"""``agentrace init-trial`` and ``agentrace context-eval``: write trial files (TOML) that pass the strict schema.

- ``init-trial FILE`` writes an example trial that runs offline: a small local repository (a plain folder,
  committed per session into a template repo), a documentation overlay, two custom agents that answer from the
  workspace and report tokens as Claude Code's stream-json (``source-reader`` reads the source, ``docs-first``
  reads docs/ first, so it costs less in the ``docs`` arm), two arms (``baseline``, ``docs``) and two questions: a copy
  of ``example_suites/trials`` (shipped in the package as ``example_trial``).
- ``context-eval --context-file CLAUDE.md --task TASK.yaml --agents a,b --trials N -o out.toml`` turns coderace's
  context-eval into an ordinary two-arm trial: ``baseline`` vs ``context`` (the context file as an overlay), the
  task's description as the question and its tests (plus hidden verify command) as ``verify``, the hidden verify
  files as the question's ``verify_files`` folder.

Both refuse to overwrite existing files unless ``--force``, and load what they wrote with the strict loader.
Imports nothing from ``_pytest``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path

from pytest_agentrace.errors import AgentraceError
from pytest_agentrace.record.runfile import write_atomic
from pytest_agentrace.spec.common import parse_agent, unique_agent_ids
from pytest_agentrace.spec.task import load_task
from pytest_agentrace.spec.trial import load_trial

EXAMPLE = Path(__file__).parents[1] / "example_trial"  # in the package folder; a link to example_suites/trials, shipped as package data
EXAMPLE_PARTS = ("example-repo", "example-docs", "example-agents")
EXAMPLE_FILE = "trial.toml"


def _write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def _refuse_existing(paths: list[Path], force: bool) -> None:
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        raise AgentraceError(f"{', '.join(existing)} already exist(s); choose another file name or pass --force")


def init_trial(path: Path, force: bool = False) -> list[Path]:
    """Write the example trial ``path`` plus ``example-repo/``, ``example-docs/`` and ``example-agents/`` beside it:
    a copy of the package's ``example_trial`` (``example_suites/trials`` in the source tree), with the trial file's
    own name in its usage comment.

    Returns the paths written. Raises ``AgentraceError`` when any exists (unless ``force``).
    """
    path = Path(path)
    root = path.parent
    if root.resolve() == EXAMPLE.resolve():
        raise AgentraceError(f"{root} holds the example itself (the package's example_trial); write the trial somewhere else")
    written = [path, *(root / part for part in EXAMPLE_PARTS)]
    _refuse_existing(written, force)
    root.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", ".agentrace", ".pytest_cache")
    for part in EXAMPLE_PARTS:
        if (root / part).exists():
            shutil.rmtree(root / part)
        shutil.copytree(EXAMPLE / part, root / part, ignore=ignore)
    for agent in (root / "example-agents").iterdir():  # an install may not keep the executable bit
        agent.chmod(0o755)
    text = (EXAMPLE / EXAMPLE_FILE).read_text(encoding="utf-8")
    path.write_text(text.replace(f"pytest --agentrace {EXAMPLE_FILE} ", f"pytest --agentrace {path.name} "), encoding="utf-8")
    _check(path)
    return written


def toml_str(value: str) -> str:
    """A TOML string for ``value``: a multi-line literal string when it has newlines and nothing that needs
    escaping there, else a basic string (JSON's escapes are a subset of TOML's basic-string escapes)."""
    if "\n" in value and "'''" not in value and not value.endswith("'") and all(c in "\n\t" or c >= " " for c in value) and "\x7f" not in value:
        return "'''\n" + value + "'''"
    return json.dumps(value, ensure_ascii=False)


def _rel(target: Path, base: Path) -> str:
    return Path(os.path.relpath(target, base)).as_posix()


def context_eval(context_file: Path, task_file: Path, agents: list[str], trials: int, out: Path, force: bool = False) -> list[Path]:
    """Write a two-arm trial ``out`` (``baseline`` vs ``context``) for one task file; returns the paths written.

    Beside ``out``: ``<stem>-context/<context file name>`` (the overlay), ``.<stem>-verify/`` (the task's hidden
    verify files, when it has any; a dot folder, which pytest does not collect) and ``<stem>-empty/`` (when the task starts from an empty repository).
    The question's ``verify`` is ``test_command`` (then ``verify_command``), its ``verify_files`` the folder of the
    task's hidden verify files (written into the checked tree before ``verify`` runs). Agents get ``edits = true``, the task's ``env`` and the ``model_double`` script of the task's agent of their name (or their own). Raises ``SpecError`` for a bad task file or agent,
    ``AgentraceError`` when an output exists (unless ``force``).
    """
    context_file, out = Path(context_file), Path(out)
    if not context_file.is_file():
        raise AgentraceError(f"--context-file {context_file}: no such file")
    if trials < 1:
        raise AgentraceError(f"--trials must be 1 or more, not {trials}")
    task = load_task(Path(task_file))
    specs = unique_agent_ids(parse_agent(Path("--agents"), f"--agents {a}", a, trusted=True) for a in agents)
    if not specs:
        raise AgentraceError("--agents is empty; give e.g. --agents claude,codex")
    base = out.parent
    stem = out.stem
    overlay = base / f"{stem}-context"
    verify_dir = base / f".{stem}-verify"  # a dot folder: pytest does not collect the hidden tests in it (norecursedirs)
    empty = base / f"{stem}-empty"
    outputs = [out, overlay] + ([verify_dir] if task.verify_files else []) + ([empty] if task.repo is None else [])
    _refuse_existing(outputs, force)
    base.mkdir(parents=True, exist_ok=True)
    for d in outputs[1:]:
        if d.exists():
            shutil.rmtree(d)
    overlay.mkdir()
    shutil.copyfile(context_file, overlay / context_file.name)
    if task.repo is None:
        empty.mkdir()
        source = empty.name
    elif "://" in task.repo or not Path(task.repo).is_absolute():
        source = task.repo
    else:
        source = _rel(Path(task.repo), base)
    verify = task.test_command
    hidden = None
    if task.verify_command:
        if task.verify_files:  # written into the checked tree by the harness: the box shows no host folder
            _write_files(verify_dir, task.verify_files)
            hidden = f"verify_files = {toml_str(verify_dir.name)}"
        verify += f" && {task.verify_command}"
    repo_name = "repo"
    case = re.sub(r"\s+", "-", task.name.strip())
    setup = f"setup = {json.dumps(list(task.setup), ensure_ascii=False)}" if task.setup else None
    lines = [
        f"# context-eval (written by `agentrace context-eval`): does {context_file.name} help on task {task.name!r}?",
        f"# Task file: {task_file}. Arms: baseline (the repository as is) vs context ({context_file.name} copied in).",
        "# Not carried over from the task: lint_command, protected, scoring, pricing (trials score the verify command).",
        f"name = {toml_str('context-eval-' + case)}",
        "",
        "[defaults]",
        f"reps = {trials}",
        f"timeout = {task.timeout:g}",
        'baseline = "baseline"',
        "",
        "[[repos]]",
        f'name = "{repo_name}"',
        f"source = {toml_str(source)}",
        "",
        "[[arms]]",
        'name = "baseline"',
        setup,
        "",
        "[[arms]]",
        'name = "context"',
        f"overlay = {toml_str(overlay.name)}",
        setup,
        "",
    ]
    doubles = {t.name: t.model_double for t in task.agents if t.model_double}
    for a in specs:
        lines += ["[[agents]]", f"name = {toml_str(a.name)}"]
        if a.model:
            lines.append(f"model = {toml_str(a.model)}")
        if md := a.model_double or doubles.get(a.name):  # the task's script for this agent: the trial runs offline too
            lines.append(f"model_double = {toml_str(_rel(Path(md), base))}")
        lines.append("edits = true")
        if task.env:
            lines.append("env = { " + ", ".join(f"{json.dumps(k)} = {json.dumps(v, ensure_ascii=False)}" for k, v in task.env.items()) + " }")
        lines.append("")
    lines += [
        "[[questions]]",
        f"id = {toml_str(case)}",
        f'repo = "{repo_name}"',
        f"prompt = {toml_str(task.description)}",
        f"verify = {toml_str(verify)}",
        hidden,
        "",
    ]
    write_atomic(out, "\n".join(line for line in lines if line is not None))  # the one writer of -o files (``cli``)
    _check(out)
    return outputs


def _check(path: Path) -> None:
    """Load what was written with the strict loader (a bug here must not hand the user a broken file)."""
    load_trial(path)


def _init_cmd(args: argparse.Namespace) -> int:
    try:
        written = init_trial(Path(args.file), force=args.force)
    except AgentraceError as exc:
        print(f"agentrace init-trial: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {', '.join(str(p) for p in written)}")
    print(f"dry run: pytest --agentrace {args.file} --collect-only ; run: pytest --agentrace {args.file}")
    return 0


def _context_cmd(args: argparse.Namespace) -> int:
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    try:
        written = context_eval(Path(args.context_file), Path(args.task), agents, args.trials, Path(args.output), force=args.force)
    except AgentraceError as exc:
        print(f"agentrace context-eval: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {', '.join(str(p) for p in written)}")
    print(f"run: pytest --agentrace {args.output}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``init-trial`` and ``context-eval`` to the ``agentrace`` command."""
    p = subparsers.add_parser("init-trial", help="write an example trial file that runs offline", description=init_trial.__doc__)
    p.add_argument("file", metavar="FILE", help="the trial file to write, e.g. trial.toml")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.set_defaults(func=_init_cmd)
    c = subparsers.add_parser("context-eval", help="write a two-arm trial: a task with and without a context file", description=context_eval.__doc__)
    c.add_argument("--context-file", required=True, metavar="PATH", help="the context file to evaluate (e.g. CLAUDE.md, AGENTS.md)")
    c.add_argument("--task", required=True, metavar="TASK.yaml", help="a task file (coderace format)")
    c.add_argument("--agents", required=True, metavar="A,B", help="comma-separated agents (name or name:model)")
    c.add_argument("--trials", type=int, default=3, metavar="N", help="reps per arm and agent (default 3)")
    c.add_argument("-o", "--output", required=True, metavar="OUT.toml", help="the trial file to write")
    c.add_argument("--force", action="store_true", help="overwrite existing files")
    c.set_defaults(func=_context_cmd)
