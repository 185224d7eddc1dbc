"""The ready CI files in examples/ci: their shard counts agree with their matrix / parallel settings, each merges
what its shard jobs uploaded, and the GitLab file passes GitLab's CI schema (check-jsonschema's vendored copy).
actionlint runs on the GitHub workflow in .ci/run (scripts/check-ci-examples.sh)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

CI = Path(__file__).resolve().parent.parent / "examples" / "ci"


def test_github_workflow_shards_merge_and_gate() -> None:
    wf = yaml.safe_load((CI / "github-actions.yml").read_text())
    shard = wf["jobs"]["shard"]
    total = int(wf["env"]["SHARDS"])
    assert shard["strategy"]["matrix"]["shard"] == list(range(1, total + 1))
    run = next(s["run"] for s in shard["steps"] if "--agentrace-shard" in s.get("run", ""))
    assert '--agentrace-shard "${{ matrix.shard }}/$SHARDS"' in run and "-n 2" in run
    merge = wf["jobs"]["merge"]
    assert merge["needs"] == "shard"
    runs = " ".join(s.get("run", "") for s in merge["steps"])
    for part in ("agentrace merge shards/agentrace-shard-* --to merged", '>> "$GITHUB_STEP_SUMMARY"', "agentrace html merged",
                 "--fail-on regressed"):
        assert part in runs


def test_gitlab_pipeline_uses_parallel_and_auto() -> None:
    pipeline = yaml.safe_load((CI / "gitlab-ci.yml").read_text())
    shard, merge = pipeline["agentrace-shard"], pipeline["agentrace-merge"]
    assert shard["parallel"] == 3 and any("--agentrace-shard auto" in line for line in shard["script"])
    assert "agentrace merge shards/* --to merged" in merge["script"]


@pytest.mark.parametrize(("schema", "name"), [("vendor.gitlab-ci", "gitlab-ci.yml"), ("vendor.github-workflows", "github-actions.yml")])
def test_examples_pass_their_schema(schema: str, name: str, tmp_path: Path) -> None:
    pytest.importorskip("check_jsonschema")
    ok = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(CI / name)],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = tmp_path / name  # the check can fail: a job with an unknown keyword
    broken.write_text((CI / name).read_text() + ("\nbad-job:\n  scriptz: [x]\n" if "gitlab" in name else "\nonn: push\n"))
    bad = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(broken)],
                         capture_output=True, text=True)
    assert bad.returncode == 1
