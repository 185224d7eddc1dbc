"""Start-up cost: ``pytest --help``, collection and a session whose cells are too small for statistics (one run
each) import neither numpy nor scipy; a session with two runs in a cell does (the control that shows the check can
fail). Each case runs pytest in a fresh interpreter, as a user would: this test process has numpy loaded already.

Every pytest process loads the plugin's two entry points, so a run without ``--agentrace`` (and ``--help``) imports
only ``START_MODULES``: the hooks, ``plugin.switch``, the option table and the small modules of words it reads
(standard library only), and no yaml, sqlite3, http.server, numpy or scipy; the session (``plugin.session``) is
imported by name under ``--agentrace`` only, the model double's server when its fixture is used (111 modules of
the package on that path before).

Adapters are loaded by name (``agents.REGISTRY``): neither ``--help``, collection nor a ``noop`` session imports the
module of a CLI's adapter; nor does a session whose runs use no model double import the double (``run.agent``
loads ``model_double.runs`` by name for a run that does)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import make_repo

from pytest_agentrace.agents import ADAPTERS, CLI_AGENTS, get_adapter
from pytest_agentrace.agents.cliadapter import CliAdapter

HEAVY = ("numpy", "scipy")
WATCHED = ("yaml", "sqlite3", "http.server", "numpy", "scipy")  # none of them imported by pytest itself (the control)
# what a pytest process without --agentrace (and --help) imports of the package: the entry points and the option
# table with the words it names; a new module here must be small and standard library only
START_MODULES = frozenset({
    "pytest_agentrace", "pytest_agentrace.plugin", "pytest_agentrace.plugin.switch",
    "pytest_agentrace.model_double", "pytest_agentrace.model_double.fixtures",
    "pytest_agentrace.options", "pytest_agentrace.argtypes", "pytest_agentrace.report", "pytest_agentrace.report.formats",
    "pytest_agentrace.run", "pytest_agentrace.run.runspec", "pytest_agentrace.spec", "pytest_agentrace.spec.shard",
    "pytest_agentrace.stats", "pytest_agentrace.stats.resample", "pytest_agentrace.stats.verdict",
    "pytest_agentrace.record", "pytest_agentrace.record.storepath",
    "pytest_agentrace.errors",  # did_you_mean for a misspelt --agentrace-fail-on verdict (stats.verdict)
})
HELP_MODULES = len(START_MODULES)  # 19: --help needs no more than a plain run (111 before plugin.switch)
PROBE = f"""\
import json, sys
import pytest
rc = pytest.main(sys.argv[2:])
json.dump({{"rc": int(rc), "heavy": sorted(m for m in {HEAVY!r} if m in sys.modules),
           "watched": sorted(m for m in {WATCHED!r} if m in sys.modules),
           "package": sorted(m for m in sys.modules if m.startswith("pytest_agentrace"))}}, open(sys.argv[1], "w"))
"""


def heavy_imports(pytester: pytest.Pytester, *args: str) -> dict:
    """Run ``pytest *args`` in a new interpreter; return its exit code, which of numpy/scipy it imported, which of
    ``WATCHED`` (``watched``) and (``package``) the modules of this package it imported."""
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
    assert (got["rc"], got["heavy"], got["watched"], cli_adapters(got)) == (0, [], [], [])
    assert len(got["package"]) <= HELP_MODULES, got["package"]


def test_a_run_without_agentrace_imports_only_the_start_modules(pytester: pytest.Pytester) -> None:
    """An ordinary test file, passing, without ``--agentrace``: the package's modules are exactly ``START_MODULES``
    and neither yaml, sqlite3, http.server, numpy nor scipy is imported; with the plugin's entry points disabled
    (the control) none of them is imported either, so it is the plugin that keeps them out."""
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    got = heavy_imports(pytester, "-q", "test_plain.py")
    assert (got["rc"], got["watched"]) == (0, [])
    assert set(got["package"]) == START_MODULES
    bare = heavy_imports(pytester, "-q", "-p", "no:pytest_agentrace", "-p", "no:agentrace_model_double", "test_plain.py")
    assert (bare["rc"], bare["watched"], bare["package"]) == (0, [], [])


def test_the_model_double_fixture_loads_its_server_when_used(pytester: pytest.Pytester) -> None:
    """The fixture's server (``http.server`` with it) is imported by a test that uses the fixture, not by the plugin."""
    pytester.makepyfile(test_double="def test_double(model_double):\n    assert model_double.url.startswith('http://127.0.0.1:')\n")
    got = heavy_imports(pytester, "-q", "test_double.py")
    assert got["rc"] == 0 and "http.server" in got["watched"]
    assert "pytest_agentrace.model_double.server" in got["package"] and "pytest_agentrace.plugin.session" not in got["package"]


def test_collection_imports_no_numpy_or_scipy(pytester: pytest.Pytester, noop_task: Path) -> None:
    got = heavy_imports(pytester, "--agentrace", str(noop_task), "--collect-only", "-q")
    assert (got["rc"], got["heavy"], cli_adapters(got)) == (0, [], [])


def test_one_run_session_imports_no_numpy_or_scipy(pytester: pytest.Pytester, noop_task: Path) -> None:
    got = heavy_imports(pytester, "--agentrace", str(noop_task), "-q", f"--agentrace-out={pytester.path / 'out'}")
    assert (got["rc"], got["heavy"], cli_adapters(got)) == (0, [], [])
    assert "pytest_agentrace.agents.builtin" in got["package"]  # the one adapter the session ran, loaded by name
    assert len(list((pytester.path / "out").glob("runs/**/run.json"))) == 1  # the session did run and record
    # no run used the model double: neither its server, its wire formats nor its namespace helper was imported
    assert "http.server" not in got["watched"]
    assert not {"pytest_agentrace.model_double.runs", "pytest_agentrace.model_double.server",
                "pytest_agentrace.model_double.inside"} & set(got["package"])


def test_a_run_with_the_model_double_imports_its_server(pytester: pytest.Pytester) -> None:
    """The control of the check above: the same session whose run uses the model double (``--agentrace-model-double``)
    loads ``model_double.runs`` by name, and the double's server with it."""
    make_repo(pytester.path / "repo", {"a.py": "A = 1\n"})
    (pytester.path / "script.yaml").write_text("steps:\n  - text: DONE\n")
    task = pytester.path / "task.yaml"
    task.write_text("name: start\ndescription: nothing to do\nrepo: repo\ntest_command: 'true'\n"
                    "agents: [{name: c, command: 'true'}]\ntimeout: 60\n")
    got = heavy_imports(pytester, "--agentrace", str(task), "-q", f"--agentrace-out={pytester.path / 'out'}",
                        f"--agentrace-model-double={pytester.path / 'script.yaml'}")
    assert got["rc"] == 0 and "http.server" in got["watched"]
    assert {"pytest_agentrace.model_double.runs", "pytest_agentrace.model_double.server"} <= set(got["package"])


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
