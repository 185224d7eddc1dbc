"""Start-up cost: ``pytest --help``, collection and a session whose cells are too small for statistics (one run
each) import neither numpy nor scipy; a session with two runs in a cell does (the control that shows the check can
fail). Each case runs pytest in a fresh interpreter, as a user would: this test process has numpy loaded already."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import make_repo

HEAVY = ("numpy", "scipy")
PROBE = f"""\
import json, sys
import pytest
rc = pytest.main(sys.argv[2:])
json.dump({{"rc": int(rc), "heavy": sorted(m for m in {HEAVY!r} if m in sys.modules)}}, open(sys.argv[1], "w"))
"""


def heavy_imports(pytester: pytest.Pytester, *args: str) -> dict:
    """Run ``pytest *args`` in a new interpreter; return its exit code and which of numpy/scipy it imported."""
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


def test_help_imports_no_numpy_or_scipy(pytester: pytest.Pytester) -> None:
    assert heavy_imports(pytester, "--help") == {"rc": 0, "heavy": []}


def test_collection_imports_no_numpy_or_scipy(pytester: pytest.Pytester, noop_task: Path) -> None:
    assert heavy_imports(pytester, "--agentrace", str(noop_task), "--collect-only", "-q") == {"rc": 0, "heavy": []}


def test_one_run_session_imports_no_numpy_or_scipy(pytester: pytest.Pytester, noop_task: Path) -> None:
    got = heavy_imports(pytester, "--agentrace", str(noop_task), "-q", f"--agentrace-out={pytester.path / 'out'}")
    assert got == {"rc": 0, "heavy": []}
    assert len(list((pytester.path / "out").glob("runs/**/run.json"))) == 1  # the session did run and record


def test_two_runs_in_a_cell_import_the_statistics(pytester: pytest.Pytester, noop_task: Path) -> None:
    got = heavy_imports(pytester, "--agentrace", str(noop_task), "-q", "--agentrace-reps=2")
    assert got["rc"] == 0 and "numpy" in got["heavy"]
