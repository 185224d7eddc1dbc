"""A bug of the harness's own at the session's end (writing the outputs, rendering the summary) is shown in red
under the ``agentrace`` section with its traceback and fails the session with pytest's INTERNAL_ERROR (3); pytest's
own summary line still ends the output, and every run is kept in the results folder."""

from __future__ import annotations

import json

import pytest
from helpers import make_repo

TASK = ("name: bug\ndescription: nothing\nrepo: repo\ntest_command: 'true'\n"
        "agents: [{name: noop, expect: pass}]\ntimeout: 60\n")
# a conftest that breaks one piece of the session's end, as a bug in it would
BREAK = """\
import pytest_agentrace.plugin.controller as controller

def broken(*args, **kwargs):
    raise RuntimeError("a bug at the session's end")

controller.{name} = broken
"""


@pytest.mark.parametrize(("name", "where", "table"), [
    ("section", "the terminal summary", False),
    ("patch_junit", "writing the session's outputs", True),
])
def test_an_internal_error_at_the_end_is_shown_and_fails_the_session(
        pytester: pytest.Pytester, xdist: list[str], name: str, where: str, table: bool) -> None:
    make_repo(pytester.path / "repo", {"a.py": "A = 1\n"})
    (pytester.path / "task.yaml").write_text(TASK)
    pytester.makeconftest(BREAK.format(name=name))
    out = pytester.path / "out"
    res = pytester.runpytest_subprocess("--agentrace", "task.yaml", "-p", "no:cacheprovider", f"--agentrace-out={out}",
                                        f"--junitxml={pytester.path / 'junit.xml'}", *xdist)
    text = res.stdout.str()
    assert res.ret == pytest.ExitCode.INTERNAL_ERROR, text
    res.assert_outcomes(passed=1)  # pytest's summary line is still printed
    assert f"agentrace: internal error in {where}" in text, text
    assert "RuntimeError: a bug at the session's end" in text, text
    assert ("| noop " in text) is table, text  # the table is shown when only writing an output failed
    assert "Traceback" not in res.stderr.str(), res.stderr.str()
    runs = [json.loads(p.read_text()) for p in out.rglob("run.json")]
    assert [r["agent"] for r in runs] == ["noop"]
