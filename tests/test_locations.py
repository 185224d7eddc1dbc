"""Where pytest places run items: a skip at the task file's line naming the case (not the plugin's source), and a
built-in task (outside the rootdir) with a node-id path and a JUnit classname of its own."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest


def test_skip_location_is_the_task_file(pytester: pytest.Pytester, xdist: list[str]) -> None:
    (pytester.path / "task.yaml").write_text("# a comment\nname: fix-add\ndescription: d\ntest_command: 'false'\n"
                                             "agents:\n  - {name: ghost, command: 'no-such-agent-cli {prompt}'}\n")
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "-rs", "-p", "no:cacheprovider", *xdist)
    res.assert_outcomes(skipped=1)
    skipped = [line for line in res.stdout.lines if line.startswith("SKIPPED")]
    assert len(skipped) == 1 and "task.yaml:2: " in skipped[0], skipped
    assert "collect.py" not in res.stdout.str()


def test_builtin_tasks_get_a_node_id_path_and_classname(pytester: pytest.Pytester, xdist: list[str]) -> None:
    res = pytester.runpytest("--agentrace", "--agentrace-builtin", "fibonacci", "--agentrace-no-save",
                             "--junitxml=out.xml", "-p", "no:cacheprovider", "-rA", *xdist)
    res.assert_outcomes(passed=1, xfailed=1)
    cases = list(ET.parse(pytester.path / "out.xml").getroot().iter("testcase"))
    assert sorted((c.get("classname"), c.get("name")) for c in cases) == [
        ("agentrace-builtin.fibonacci.task.yaml", "fibonacci[noop-r1]"),
        ("agentrace-builtin.fibonacci.task.yaml", "fibonacci[oracle-r1]")]
    ids = pytester.runpytest("--agentrace", "--agentrace-builtin", "fibonacci", "--collect-only", "-q",
                             "-p", "no:cacheprovider")
    assert [line for line in ids.stdout.lines if "::" in line] == [
        "agentrace-builtin/fibonacci/task.yaml::fibonacci[oracle-r1]",
        "agentrace-builtin/fibonacci/task.yaml::fibonacci[noop-r1]"]
