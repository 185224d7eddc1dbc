"""The ``agentrace`` command. Subcommands live in their own modules and register here.

``COMMANDS`` maps a subcommand to ``"module:register"``; ``register(subparsers)`` adds its parser and sets
``func`` (called with the parsed args, returning the exit status). Imports nothing from ``_pytest``.

Output options have one spelling on every command that writes a report: ``-o/--output FILE`` and ``--format
text|json|markdown`` (``output_options``); the older spellings stay as aliases (``snapshot --to``, ``--json``,
``--format terminal``). Every ``-o`` file is written by one writer, ``record.runfile.write_atomic``: missing parent
folders are made, and the file is a temp file renamed over the target in a folder opened without following a link
(a link at the target is replaced, never written through; a folder that is a link is refused).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import sys
from typing import Any

from pytest_agentrace import __version__

COMMANDS: dict[str, str] = {
    "plan": "pytest_agentrace.cli.stats:register",
    "report": "pytest_agentrace.cli.stats:register",
    "snapshot": "pytest_agentrace.cli.stats:register",
    "compare": "pytest_agentrace.cli.stats:register",
    "ratings": "pytest_agentrace.cli.stats:register",
    "rescore": "pytest_agentrace.cli.stats:register",
    "regress": "pytest_agentrace.cli.stats:register",
    "parse": "pytest_agentrace.cli.parse:register",
    "leaderboard": "pytest_agentrace.cli.reports:register",
    "tasks": "pytest_agentrace.cli.tasks:register_tasks",
    "init": "pytest_agentrace.cli.tasks:register_init",
    "schema": "pytest_agentrace.cli.tasks:register_schema",
    "diff": "pytest_agentrace.cli.tasks:register_diff",
    "history": "pytest_agentrace.cli.reports:register",
    "trend": "pytest_agentrace.cli.reports:register",
    "html": "pytest_agentrace.cli.reports:register",
    "export": "pytest_agentrace.cli.reports:register",
    "comment": "pytest_agentrace.cli.reports:register",
    "render": "pytest_agentrace.cli.reports:register",
    "merge": "pytest_agentrace.cli.merge:register",
    "init-trial": "pytest_agentrace.cli.trials:register",
    "context-eval": "pytest_agentrace.cli.trials:register",
    "verify": "pytest_agentrace.cli.verify:register",
    "model-double": "pytest_agentrace.cli.double:register",
    "completion": "pytest_agentrace.cli:register_completion",
}


def output_options(p: argparse.ArgumentParser, formats: tuple[str, ...] = ("text", "json"), default: str = "text",
                   short: bool = True, json_alias: bool = False, suppress: bool = False) -> None:
    """Add ``-o/--output FILE`` (dest ``output_file``: ``main`` sends the command's standard output there and says
    ``agentrace: wrote FILE`` on standard error) and
    ``--format`` with ``formats`` (``terminal`` read as ``text``; ``json_alias``: also ``--json``, the same as
    ``--format json``). ``short``: False
    leaves ``-o`` out (``regress`` passes it to pytest, where it is ``--override-ini``)."""
    flags = ("-o", "--output") if short else ("--output",)
    kw: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    p.add_argument(*flags, dest="output_file", metavar="FILE", help="write to FILE instead of standard output", **kw)
    alias = {"terminal": "text"} if "text" in formats else {}  # the store commands' word for text, taken everywhere
    p.add_argument("--format", choices=formats, type=lambda value: alias.get(value, value), metavar="|".join(formats),
                   help=f"output format (default: {default})",
                   **({"default": argparse.SUPPRESS} if suppress else {"default": default}))
    if json_alias:
        p.add_argument("--json", dest="format", action="store_const", const="json", help="alias of --format json")


def register_completion(sub: Any) -> None:
    """Add ``completion SHELL``: print the shell completion script of ``agentrace`` (shtab, optional extra)."""
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh, tcsh; needs shtab)",
                       description="Print the completion script for SHELL; e.g. in ~/.bashrc: "
                                   "eval \"$(agentrace completion bash)\". Needs shtab: "
                                   "pip install 'pytest-agentrace[completion]'.")
    p.add_argument("shell", choices=("bash", "zsh", "tcsh"))
    p.set_defaults(func=_completion)


def _completion(args: argparse.Namespace) -> int:
    try:
        import shtab
    except ImportError:
        print("agentrace completion: needs shtab; pip install 'pytest-agentrace[completion]' (or pip install shtab)",
              file=sys.stderr)
        return 2
    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell) + "\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentrace", description="Race coding agents on tasks and trials (pytest-agentrace).")
    parser.add_argument("--version", action="version", version=f"agentrace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for target in dict.fromkeys(COMMANDS.values()):
        module, _, func = target.partition(":")
        getattr(importlib.import_module(module), func)(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point: parse ``argv`` and run the subcommand; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    # the records hold what agents (or a folder from elsewhere) wrote: what people read is shown, never acted on -
    # standard error always, standard output and -o files unless they carry JSON (which escapes its own controls)
    data = getattr(args, "format", None) in ("json", "atif")
    try:
        target = getattr(args, "output_file", None)
        with contextlib.redirect_stderr(Printable(sys.stderr)):
            if target is None:
                with contextlib.redirect_stdout(sys.stdout if data else Printable(sys.stdout)):
                    return int(args.func(args) or 0)
            from pathlib import Path

            from pytest_agentrace.record.redact import printable
            from pytest_agentrace.record.runfile import write_atomic  # the one writer of -o files (module docstring)

            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                status = int(args.func(args) or 0)
            write_atomic(Path(target), text.getvalue() if data else printable(text.getvalue()))
        if status != 2:  # written (1: a --fail-on verdict, the report is whole); 2: bad input, nothing worth naming
            print(f"agentrace: wrote {target}", file=sys.stderr)  # as html, export and render say it
        return status
    except BrokenPipeError:
        return 0
    except OSError as exc:  # an unreadable input or unwritable output path: one line, not a traceback
        where = f": {exc.filename}" if exc.filename else ""
        print(f"agentrace {args.command}: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2


class Printable:
    """A text stream that writes to ``stream`` with the characters a terminal would act on shown as escapes
    (``record.redact.printable``): what a command prints from the records (reasons, answers, check logs) is the
    agents' text, and an escape sequence in it would move the cursor, rewrite lines or set the clipboard."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, text: str) -> int:
        from pytest_agentrace.record.redact import printable  # here: only a command on a terminal needs it

        self.stream.write(printable(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
