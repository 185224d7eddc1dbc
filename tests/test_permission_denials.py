"""Claude's silently denied tools (exit 0, result ``success``) show up in the run's reason, not as success."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script

SAMPLE = Path(__file__).parent / "samples/claude/captured-2.1.197-stream-json-permission-denied.jsonl"


def replay_sample_as_claude(bin_dir: Path) -> None:
    """A fake ``claude`` on PATH that prints the permission-denied sample (and its version)."""
    write_script(bin_dir / "claude", f"""\
        import sys
        if "--version" in sys.argv:
            print("2.1.197 (Claude Code)"); sys.exit(0)
        sys.stdout.write(open({str(SAMPLE)!r}).read())
    """)


def test_denied_tools_named_in_the_failure(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    replay_sample_as_claude(bin_dir)
    (pytester.path / "task.yaml").write_text(
        "name: t\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\nagents: [claude]\n"
    )
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", f"--agentrace-sandbox-read={SAMPLE.parent}")
    res.assert_outcomes(failed=1)
    record = json.loads((pytester.path / "o/runs/t/default/claude/1/run.json").read_text())
    assert record["status"] == "failed"
    assert record["reason"] == "tests failed (exit 1); permission_denials: Write: /tmp/workspace/hello.txt"
    assert record["usage"]["permission_denials"] == ["Write: /tmp/workspace/hello.txt"]


def test_denied_tools_named_in_a_failed_trial_run(pytester: pytest.Pytester, bin_dir: Path) -> None:
    """The same note on a trial run whose answer is wrong (the sample's answer does not name the port)."""
    make_repo(pytester.path / "app", {"app.py": "PORT = 8123\n"})
    replay_sample_as_claude(bin_dir)
    (pytester.path / "trial.toml").write_text(
        'name = "ports"\n[[repos]]\nname = "app"\nsource = "app"\n[[arms]]\nname = "base"\n'
        '[[agents]]\nname = "claude"\nedits = true\n'
        '[[questions]]\nid = "port"\nrepo = "app"\nprompt = "Which port?"\nexpect = ["8123"]\n'
    )
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", f"--agentrace-sandbox-read={SAMPLE.parent}")
    res.assert_outcomes(failed=1)
    record = json.loads(next((pytester.path / "o").glob("runs/**/run.json")).read_text())
    assert record["status"] == "failed"
    assert record["reason"] == "answer incorrect: recall 0.00 < min_recall 1.00; permission_denials: Write: /tmp/workspace/hello.txt"
