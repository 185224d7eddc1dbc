"""The ``agentrace`` command. Subcommands live in their own modules and register here.

``COMMANDS`` maps a subcommand to ``"module:register"``; ``register(subparsers)`` adds its parser and sets
``func`` (called with the parsed args, returning the exit status). Imports nothing from ``_pytest``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

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
    "diff": "pytest_agentrace.cli.tasks:register_diff",
    "history": "pytest_agentrace.cli.reports:register",
    "trend": "pytest_agentrace.cli.reports:register",
    "html": "pytest_agentrace.cli.reports:register",
    "export": "pytest_agentrace.cli.reports:register",
    "comment": "pytest_agentrace.cli.reports:register",
    "merge": "pytest_agentrace.cli.merge:register",
    "init-trial": "pytest_agentrace.cli.trials:register",
    "context-eval": "pytest_agentrace.cli.trials:register",
    "verify": "pytest_agentrace.cli.verify:register",
    "model-double": "pytest_agentrace.cli.double:register",
}


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
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        return 0
    except OSError as exc:  # an unreadable input or unwritable output path: one line, not a traceback
        where = f": {exc.filename}" if exc.filename else ""
        print(f"agentrace {args.command}: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2

