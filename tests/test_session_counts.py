"""Work a session does once: the task file is parsed once per process (collection's ignore hook and the file's
collection share it), however many paths its folder holds and however many runs it makes. Counted by wrapping
``spec.task.read_yaml`` in an in-process session."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from helpers import make_repo

from pytest_agentrace.spec import task as task_module


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Counter:
    counts: Counter = Counter()
    real = task_module.read_yaml

    def counting(path: Path):
        counts[Path(path).name] += 1
        return real(path)

    monkeypatch.setattr(task_module, "read_yaml", counting)
    return counts


def test_the_task_file_is_parsed_once_per_session(pytester: pytest.Pytester, parses: Counter) -> None:
    make_repo(pytester.path / "repo", {"a.py": "A = 1\n", "b.py": "B = 2\n"})
    (pytester.path / "notes.txt").write_text("a path beside the task file: the ignore hook is asked for it too\n")
    (pytester.path / "task.yaml").write_text("name: once\ndescription: nothing to do\nrepo: repo\ntest_command: 'true'\n"
                                             "agents: [{name: noop, expect: pass}]\ntimeout: 60\n")
    res = pytester.runpytest("--agentrace", "--agentrace-reps=3", "--agentrace-no-save", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=3)
    assert parses == {"task.yaml": 1}


def test_a_bad_task_file_is_parsed_once_and_reported_once(pytester: pytest.Pytester, parses: Counter) -> None:
    (pytester.path / "other.txt").write_text("x\n")
    (pytester.path / "task.yaml").write_text("name: bad\ndescription: d\ntest_command: x\nlint_commnd: y\nagents: [noop]\n")
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    res.stdout.fnmatch_lines(["*task.yaml: key 'lint_commnd': unknown key*"])
    assert parses == {"task.yaml": 1}
