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


def _steps(wf: dict) -> list[tuple[str, dict]]:
    return [(job_name, step) for job_name, job in wf["jobs"].items() for step in job["steps"]]


def test_every_piped_github_step_runs_under_bash() -> None:
    """GitHub's default shell (``bash -e {0}``, ``sh -e`` where bash is missing) has no pipefail; ``shell: bash`` is
    ``bash --noprofile --norc -eo pipefail {0}``."""
    wf = yaml.safe_load((CI / "github-actions.yml").read_text())
    default = wf.get("defaults", {}).get("run", {}).get("shell")
    piped = [(job, s) for job, s in _steps(wf) if "|" in s.get("run", "").replace("||", "")]
    assert piped, "the gate step pipes into tee"
    for job, step in piped:
        assert step.get("shell", default) == "bash", f"{job}: {step.get('name')}"


WHEEL_GLOB = "ci/wheels/pytest_agentrace-*.whl"


def test_examples_install_from_a_built_wheel_until_published(tmp_path: Path) -> None:
    """Until the package is on PyPI, every install line takes the wheel the user built and committed (no package
    index name, no repository URL), the comment says how to build it, and the glob matches the wheel's file name."""
    import tomllib

    for name in ("github-actions.yml", "gitlab-ci.yml"):
        text = (CI / name).read_text()
        assert "not on PyPI yet" in text and "python -m build --wheel" in text and "ci/wheels/" in text
        assert "git+" not in text and "AGENTRACE_PIP" not in text and "pip install pytest-agentrace" not in text
        installs = [line for line in text.splitlines() if "pip install" in line and not line.lstrip().startswith("#")]
        assert len(installs) == 2 and all(WHEEL_GLOB in line for line in installs), installs
    meta = tomllib.loads((CI.parent.parent / "pyproject.toml").read_text())["project"]
    wheel = f"{meta['name'].replace('-', '_')}-{meta['version']}-py3-none-any.whl"  # what `python -m build` names it
    (tmp_path / "ci" / "wheels").mkdir(parents=True)
    (tmp_path / "ci" / "wheels" / wheel).write_bytes(b"")
    expanded = subprocess.run(["bash", "-c", f"printf '%s\\n' {WHEEL_GLOB}"], cwd=tmp_path, capture_output=True, text=True)
    assert expanded.stdout.splitlines() == [f"ci/wheels/{wheel}"]


AGENT_TASK = ("name: fix-it\ndescription: Create fixed.txt.\ntest_command: test -f fixed.txt\n"
              "agents:\n  - {{name: bot, command: \"{command}\"}}\n")


def _session(pytester: pytest.Pytester, out: Path, command: str) -> None:
    (pytester.path / "task.yaml").write_text(AGENT_TASK.format(command=command))
    res = pytester.runpytest_subprocess("--agentrace", "task.yaml", "--agentrace-reps", "4", "--agentrace-out",
                                        str(out), "--agentrace-no-save", "-p", "no:cacheprovider", "-q")
    assert res.ret in (0, 1), res.stdout.str()


def test_gate_step_fails_the_job_on_a_real_regression(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A cell that passed 4/4 in the snapshot and 0/4 now: the gate step's own command line exits 1 under
    ``bash -e -o pipefail`` (the example's shell) and 0 under ``sh -e`` (no pipefail: why the example sets it)."""
    before, after = tmp_path / "before", tmp_path / "merged"
    _session(pytester, before, "sh -c 'touch fixed.txt'")
    _session(pytester, after, "true")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "agentrace"  # the console script, for this interpreter and this checkout
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} -m pytest_agentrace.cli \"$@\"\n")
    launcher.chmod(0o755)
    env = {**__import__("os").environ, "PATH": f"{bin_dir}:{__import__('os').environ['PATH']}",
           "SNAPSHOT": str(tmp_path / "snap.json"), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    snap = subprocess.run(["agentrace", "snapshot", str(before), "--to", env["SNAPSHOT"]], env=env,
                          capture_output=True, text=True)
    assert snap.returncode == 0, snap.stderr
    wf = yaml.safe_load((CI / "github-actions.yml").read_text())
    gate = next(s["run"] for _, s in _steps(wf) if "--fail-on regressed" in s.get("run", ""))
    assert "| tee" in gate
    alone = subprocess.run(gate.split("|")[0], shell=True, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert alone.returncode == 1, alone.stdout + alone.stderr  # compare itself sees the regression
    assert "regressed" in alone.stdout
    bash = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", gate], cwd=tmp_path,
                          env=env, capture_output=True, text=True)
    assert bash.returncode == 1, bash.stdout + bash.stderr
    assert "regressed" in (tmp_path / "summary.md").read_text()
    sh = subprocess.run(["sh", "-e", "-c", gate], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert sh.returncode == 0  # the pipe's status is tee's: without pipefail the gate cannot fail
