"""Options shared by the pytest plugin (``--agentrace-*``) and the ``agentrace`` CLI.

``OPTIONS`` lists ``(flag, argparse kwargs)``; ``add_pytest_options`` registers them in an
``agentrace`` group, and the CLI reuses the same definitions where a subcommand needs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_agentrace.argtypes import positive_float, positive_int

OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--agentrace", {"action": "store_true", "default": False, "help": "collect task (YAML) and trial (TOML) files and run the agents they name"}),
    ("--agentrace-agent", {"action": "append", "default": [], "metavar": "SPEC", "help": "agent to run (name, name:model); repeatable; overrides the files' agent lists"}),
    ("--agentrace-reps", {"type": positive_int, "default": None, "metavar": "N", "help": "repetitions of each cell (default: the file's reps, else 1)"}),
    ("--agentrace-out", {"default": None, "metavar": "DIR", "help": "results folder (default: .agentrace under the rootdir)"}),
    ("--agentrace-timeout", {"type": positive_float, "default": None, "metavar": "SECONDS", "help": "override every task's/trial's timeout (seconds per command)"}),
    ("--agentrace-no-cost", {"action": "store_true", "default": False, "help": "hide token and cost columns in the summary"}),
]


def add_pytest_options(parser: Any, extra: list[tuple[str, dict[str, Any]]] | None = None) -> None:
    """Register ``OPTIONS`` (plus ``extra``) with pytest's ``parser`` in the ``agentrace`` group; an entry whose
    kwargs carry ``ini`` is also an ini-file setting of that name."""
    group = parser.getgroup("agentrace", "coding-agent races and trials (pytest-agentrace)")
    for flag, kwargs in [*OPTIONS, *(extra or [])]:
        kwargs = dict(kwargs)
        ini = kwargs.pop("ini", None)  # also an ini-file setting of this name (the option wins when given)
        group.addoption(flag, dest=flag.lstrip("-").replace("-", "_"), **kwargs)
        if ini:
            parser.addini(ini, kwargs.get("help", ""), default=None)


def out_dir(config: Any) -> Path:
    """The results folder: ``--agentrace-out`` or ``<rootdir>/.agentrace``.

    Nothing is written inside the installed package by default: when the rootdir lies in it (pytest run from
    inside ``builtin_tasks/``, or an ini file there), the default is ``<invocation dir>/.agentrace``, and when
    that is inside it too the plugin stops with a usage error (``in_package``).
    """
    value = config.getoption("agentrace_out")
    if value:
        return Path(value).resolve()
    if in_package(Path(config.rootpath)):
        return Path(config.invocation_params.dir).resolve() / ".agentrace"
    return Path(config.rootpath) / ".agentrace"


def in_package(path: Path) -> bool:
    """Whether ``path`` lies inside this installed package's folder (``pytest_agentrace/``)."""
    return path.resolve().is_relative_to(Path(__file__).resolve().parent)


from pytest_agentrace.run.resume import RESUME_OPTIONS  # noqa: E402  (trial/resume options, issue 4)
from pytest_agentrace.spec.trial import TRIAL_OPTIONS  # noqa: E402

OPTIONS += TRIAL_OPTIONS + RESUME_OPTIONS

from pytest_agentrace.spec.builtin import SUITE_OPTIONS  # noqa: E402  (built-in suite, difficulty filter, validation; issue 6)

OPTIONS += SUITE_OPTIONS

from pytest_agentrace.agents.cliadapter import AGENT_OPTIONS  # noqa: E402  (per-run agent HOME; issue 3)

OPTIONS += AGENT_OPTIONS

from pytest_agentrace.record.store import STORE_OPTIONS  # noqa: E402
from pytest_agentrace.report.options import REPORT_OPTIONS  # noqa: E402  (reports and history store; issue 8)

OPTIONS += REPORT_OPTIONS + STORE_OPTIONS

from pytest_agentrace.model_double.opts import OPTIONS as MODEL_DOUBLE_OPTIONS  # noqa: E402  (--agentrace-offline, --agentrace-model-double; issue 7)

OPTIONS += MODEL_DOUBLE_OPTIONS

from pytest_agentrace.cli.stats import STATS_OPTIONS  # noqa: E402  (statistics, snapshots, gates, stop-when-decided; issue 5)

OPTIONS += STATS_OPTIONS
