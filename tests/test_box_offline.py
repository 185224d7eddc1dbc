"""``--agentrace-offline`` inside the default sandbox: the model double started in the run's network namespace
reads its script there, and a fault of the double is an ``error`` run that names it (serial and -n 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script
from test_model_double_runner import MINIAGENT, SOLVE, task

from pytest_agentrace.run.sandbox import probe

pytestmark = pytest.mark.skipif(probe(True)[0] is None, reason=f"no sandbox here: {probe(True)[1]}")



@pytest.fixture
def project(pytester: pytest.Pytester, bin_dir: Path) -> pytest.Pytester:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "miniagent", MINIAGENT)
    (pytester.path / "scripts").mkdir()
    (pytester.path / "scripts" / "solve.yaml").write_text(json.dumps(SOLVE))
    return pytester


def test_offline_in_the_sandbox_plays_the_script(project: pytest.Pytester, xdist: list[str]) -> None:
    ifaces = project.path / "ifaces.json"
    project.makefile(".yaml", task("  - {name: mini, command: 'miniagent {prompt}', model_double: scripts/solve.yaml}\n",
                                   Path("/tmp/ifaces.json")))
    res = project.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-offline", "--agentrace-no-save", *xdist)
    res.assert_outcomes(passed=1)
    run = project.path / "out/runs/fix-add/default/mini/1"
    record = json.loads((run / "run.json").read_text())
    assert record["extra"]["sandbox"]["on"] is True and record["extra"]["network_mode"] == "none"
    # the double in the namespace logged to the outbox; the log was copied into the record folder
    log = [json.loads(line) for line in (run / "model-double-requests.jsonl").read_text().splitlines()]
    assert [r["answer"]["step"] for r in log] == [0, 1, 2]
    # the harness's double wrote it, so it sits beside the other records, not under the agent's outbox/
    assert record["extra"]["outbox"] == {"copied": 0, "harness": ["model-double-requests.jsonl"]}
    assert not (run / "outbox").exists()
    assert not ifaces.exists()  # the agent's /tmp is its own


def test_a_double_that_cannot_read_its_script_is_an_error_naming_it(project: pytest.Pytester, xdist: list[str]) -> None:
    script = project.path / "scripts" / "solve.yaml"
    script.chmod(0)  # the session (root) may still read it; the box's user may not
    try:
        project.makefile(".yaml", task("  - {name: mini, command: 'miniagent {prompt}', model_double: scripts/solve.yaml}\n"))
        res = project.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-offline", "--agentrace-no-save",
                                *xdist)
    finally:
        script.chmod(0o644)
    record = json.loads((project.path / "out/runs/fix-add/default/mini/1/run.json").read_text())
    assert record["status"] == "error", record["reason"]
    if os.geteuid() == 0:  # read by the harness, refused inside the box: the double's own fault
        assert record["reason"].startswith("model double: "), record["reason"]
        assert "Permission denied" in record["reason"] and "agent crashed" not in record["reason"]
    else:  # the harness itself cannot read it: a configuration error before the run
        assert "model_double" in record["reason"], record["reason"]
    res.assert_outcomes(errors=1)


def test_a_real_cli_offline_without_a_model_is_an_error_not_its_timeout(project: pytest.Pytester, bin_dir: Path,
                                                                        xdist: list[str]) -> None:
    """``codex`` with ``--agentrace-offline`` and no model double script or cassette has no model to reach: it used to
    retry the network until its timeout and be scored a ``timeout``; the run is an ``error`` naming the fix, and the
    CLI is never started. A command agent (``mini``) without a script runs as before."""
    write_script(bin_dir / "codex", "#!/bin/sh\necho codex-started\nsleep 30\n")
    project.makefile(".yaml", task("  - codex\n  - {name: mini, command: 'true'}\n"))
    res = project.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-offline", "--agentrace-no-save", *xdist)
    record = json.loads((project.path / "out/runs/fix-add/default/codex/1/run.json").read_text())
    assert record["status"] == "error" and record["reason"].startswith("--agentrace-offline: agent codex has no model to reach"), record["reason"]
    run_dir = project.path / "out/runs/fix-add/default/codex/1"
    assert "codex-started" not in "".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())
    mini = json.loads((project.path / "out/runs/fix-add/default/mini/1/run.json").read_text())
    assert mini["status"] == "failed"
    res.assert_outcomes(errors=1, failed=1)
