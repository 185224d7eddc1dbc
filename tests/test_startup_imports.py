"""Start-up cost: ``pytest --help``, collection and a session whose cells are too small for statistics (one run
each) import neither numpy nor scipy; a session with two runs in a cell does (the control that shows the check can
fail). Each case runs pytest in a fresh interpreter, as a user would: this test process has numpy loaded already.

Adapters are loaded by name (``agents.REGISTRY``): neither ``--help``, collection nor a ``noop`` session imports the
module of a CLI's adapter, and ``--help`` imports at most ``HELP_MODULES`` of the package's modules (108 of 121
before the registry)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import make_repo

from pytest_agentrace.agents import ADAPTERS, CLI_AGENTS, get_adapter
from pytest_agentrace.agents.cliadapter import CliAdapter

HEAVY = ("numpy", "scipy")
HELP_MODULES = 111  # 97 + plugin.interrupts, record.attempts, model_double.normalise, run.outbox (on the start-up path on purpose)
# + run.runspec, run.linksafe, run.discard: code split out of spec.matrix, agents.base, run.limits and run.workspace
# (run.runspec, run.linksafe) or new on the run path (run.discard, a few lines)
# + run.launch, run.inputs (small, standard library only); report.formats, report.result, report.numbers in place of
# report.html, report.markdown, report.json_export and report.charts (loaded by name from FORMATS when one is written)
# + run.treefiles, run.snapshot (split out of run.workspace), stats.draws, stats.figures and stats.permutation (split out of stats.resample, cells and
# report: standard library at import, numpy only when called); report.terminal in place of report.summary
# + report.view (imported by report.junit, whose run_properties the run items send: small, no numpy)
PROBE = f"""\
import json, sys
import pytest
rc = pytest.main(sys.argv[2:])
json.dump({{"rc": int(rc), "heavy": sorted(m for m in {HEAVY!r} if m in sys.modules),
           "package": sorted(m for m in sys.modules if m.startswith("pytest_agentrace"))}}, open(sys.argv[1], "w"))
"""


def heavy_imports(pytester: pytest.Pytester, *args: str) -> dict:
    """Run ``pytest *args`` in a new interpreter; return its exit code, which of numpy/scipy it imported and
    (``package``) the modules of this package it imported."""
    probe = pytester.path / "probe.py"
    probe.write_text(PROBE)
    result_file = pytester.path / "probe.json"
    res = pytester.run(sys.executable, str(probe), str(result_file), "-p", "no:cacheprovider", *args, timeout=120)
    assert result_file.exists(), res.stdout.str() + res.stderr.str()
    return json.loads(result_file.read_text())


@pytest.fixture
def noop_task(pytester: pytest.Pytester) -> Path:
    make_repo(pytester.path / "repo", {"a.py": "A = 1\n"})
    path = pytester.path / "task.yaml"
    path.write_text("name: start\ndescription: nothing to do\nrepo: repo\ntest_command: 'true'\n"
                    "agents: [{name: noop, expect: pass}]\ntimeout: 60\n")
    return path


def cli_adapters(got: dict) -> list[str]:
    return [m for m in got["package"] if m.rsplit(".", 1)[-1] in CLI_AGENTS]


def test_help_imports_no_numpy_or_scipy(pytester: pytest.Pytester) -> None:
    got = heavy_imports(pytester, "--help")
    assert (got["rc"], got["heavy"], cli_adapters(got)) == (0, [], [])
    assert len(got["package"]) <= HELP_MODULES, got["package"]


def test_collection_imports_no_numpy_or_scipy(pytester: pytest.Pytester, noop_task: Path) -> None:
    got = heavy_imports(pytester, "--agentrace", str(noop_task), "--collect-only", "-q")
    assert (got["rc"], got["heavy"], cli_adapters(got)) == (0, [], [])


def test_one_run_session_imports_no_numpy_or_scipy(pytester: pytest.Pytester, noop_task: Path) -> None:
    got = heavy_imports(pytester, "--agentrace", str(noop_task), "-q", f"--agentrace-out={pytester.path / 'out'}")
    assert (got["rc"], got["heavy"], cli_adapters(got)) == (0, [], [])
    assert "pytest_agentrace.agents.builtin" in got["package"]  # the one adapter the session ran, loaded by name
    assert len(list((pytester.path / "out").glob("runs/**/run.json"))) == 1  # the session did run and record


def test_the_registry_names_each_adapter_class() -> None:
    """Each name of the registry loads a class of that name; the CLI agents are the subprocess adapters."""
    assert all(cls.name == name for name, cls in ADAPTERS.items())
    assert CLI_AGENTS == tuple(sorted(n for n, cls in ADAPTERS.items() if issubclass(cls, CliAdapter)))
    assert get_adapter("claude").name == "claude"
    with pytest.raises(KeyError):
        get_adapter("nobody")


def test_two_runs_in_a_cell_import_the_statistics(pytester: pytest.Pytester, noop_task: Path) -> None:
    got = heavy_imports(pytester, "--agentrace", str(noop_task), "-q", "--agentrace-reps=2")
    assert got["rc"] == 0 and "numpy" in got["heavy"]
