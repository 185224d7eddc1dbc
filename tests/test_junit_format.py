"""JUnit XML as a format of the table (``report.junit``): ``agentrace render OUT --format junit`` gives the document
pytest's ``--junitxml`` wrote in the session after the controller finished it (the same test cases, outcome
elements, totals and ``agentrace.*`` properties, serial and under pytest-xdist); every run's status maps to
pytest's element; hostile strings and secrets never make the file invalid XML or leak; an empty result is a suite
of no tests; ``patch_junit`` leaves other tests' cases alone."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script
from helpers.report import outcome

from pytest_agentrace import cli
from pytest_agentrace.record.model import Usage
from pytest_agentrace.report import formats, junit
from pytest_agentrace.report.result import Context, build_result
from pytest_agentrace.stats.score import score_outcomes

TASK = ("name: fix-add\ndescription: Fix add().\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        "timeout: 60\nagents:\n  - {name: fixer, command: fixer}\n  - {name: lazy, command: lazy}\n  - noop\n")
BROKEN = ("name: broken\ndescription: Fix add().\nrepo: ../repo\ntest_command: python -m pytest -q test_calc.py\n"
          "setup: ['exit 3']\ntimeout: 60\nagents:\n  - {name: fixer, command: fixer}\n")
SUITE_ATTRS = {"name", "tests", "errors", "failures", "skipped", "time", "timestamp", "hostname"}


def shape(xml: bytes) -> dict:
    """What a CI system reads from a JUnit file: the suite's totals and properties, and per test case (sorted by
    classname and name) its outcome elements and properties; the attribute names of suite and cases."""
    root = ET.fromstring(xml)
    assert root.tag == "testsuites" and root.get("name") == "pytest tests"
    (suite,) = root.findall("testsuite")
    props = suite.find("properties")
    cases = sorted(((c.get("classname"), c.get("name"), [e.tag for e in c],
                     [(p.get("name"), p.get("value")) for p in c.iter("property")]) for c in suite.iter("testcase")),
                   key=lambda c: (c[0], c[1]))
    return {"totals": {k: suite.get(k) for k in ("name", "tests", "errors", "failures", "skipped")},
            "suite_attrs": set(suite.attrib), "case_attrs": {frozenset(c.attrib) for c in suite.iter("testcase")},
            "suite_props": [(p.get("name"), p.get("value")) for p in props] if props is not None else [],
            "cases": cases}


def test_the_render_of_a_results_folder_is_the_finished_session_file(pytester: pytest.Pytester, bin_dir: Path,
                                                                    xdist: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    write_script(bin_dir / "lazy", "print('I changed nothing')\n")
    (pytester.path / "task.yaml").write_text(TASK)
    (pytester.path / "tasks").mkdir()
    (pytester.path / "tasks" / "broken.yaml").write_text(BROKEN)
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "--agentrace-resamples=200", "--junitxml=j.xml",
                             "-p", "no:cacheprovider", *xdist)
    res.assert_outcomes(passed=1, failed=1, xfailed=1, errors=1)
    session = shape((pytester.path / "j.xml").read_bytes())
    assert cli.main(["render", str(pytester.path / ".agentrace"), "--format", "junit", "--resamples", "200",
                     "--db", str(pytester.path / "none.db"), "-o", str(pytester.path / "r.xml")]) == 0
    rendered = shape((pytester.path / "r.xml").read_bytes())
    assert rendered == session
    monkeypatch.chdir("/")  # rendered from elsewhere: the classnames are still relative to the session's rootdir
    assert cli.main(["render", str(pytester.path / ".agentrace"), "--format", "junit", "--resamples", "200",
                     "--db", str(pytester.path / "none.db"), "-o", str(pytester.path / "r2.xml")]) == 0
    assert shape((pytester.path / "r2.xml").read_bytes()) == session
    assert session["totals"] == {"name": "pytest", "tests": "4", "errors": "1", "failures": "1", "skipped": "1"}
    assert session["suite_attrs"] == SUITE_ATTRS and session["case_attrs"] == {frozenset({"classname", "name", "time"})}
    assert [(c[0], c[1], c[2]) for c in session["cases"]] == [
        ("task.yaml", "fix-add[fixer-r1]", ["properties"]),
        ("task.yaml", "fix-add[lazy-r1]", ["properties", "failure"]),
        ("task.yaml", "fix-add[noop-r1]", ["properties", "skipped"]),
        ("tasks.broken.yaml", "broken[fixer-r1]", ["properties", "error"])]
    (digest,) = session["suite_props"]
    assert digest[0] == "agentrace.results_digest" and len(digest[1]) == 64
    props = {c[1]: dict(c[3]) for c in session["cases"]}
    fixer = props["fix-add[fixer-r1]"]
    assert json.loads(fixer["agentrace.outcome"])["score"] == float(fixer["agentrace.score"]) == 100.0
    assert [name for name, _ in session["cases"][0][3]] == [
        "agentrace.outcome", "agentrace.run_id", "agentrace.status", "agentrace.score", "agentrace.seconds",
        "agentrace.lines"]
    assert "agentrace.score" not in props["broken[fixer-r1]"]  # an error run has no composite score
    error = ET.parse(pytester.path / "r.xml").getroot().find(".//error")
    assert error.get("message").startswith("task:broken/default/fixer/r1: infrastructure error: ")


def test_each_status_is_the_element_pytest_writes() -> None:
    runs = [outcome(agent="ok"), outcome(agent="bad", status="failed"), outcome(agent="slow", status="timeout"),
            outcome(agent="broke", status="error", reason="clone failed"),
            outcome(agent="stopped", status="stopped", reason="another agent won"),
            outcome(agent="noop", status="failed"), outcome(agent="noop", status="passed", rep=2),
            outcome(agent="base", status="failed", extra={"expect": "fail"}),
            outcome(agent="noop", status="failed", rep=3, extra={"expect": "pass"}),
            outcome(case="q1", kind="trial", arm="docs", agent="ok", source="/suite/ports.toml")]
    text = junit.render(build_result(score_outcomes(runs), Context(resamples=200)))
    root = ET.fromstring(text.encode("utf-8"))
    suite = root.find("testsuite")
    got = {c.get("name"): [(e.tag, e.get("type")) for e in c if e.tag != "properties"] for c in suite.iter("testcase")}
    assert got == {
        "fix-add[ok-r1]": [], "fix-add[bad-r1]": [("failure", None)], "fix-add[slow-r1]": [("failure", None)],
        "fix-add[broke-r1]": [("error", None)], "fix-add[stopped-r1]": [("skipped", "pytest.skip")],
        "fix-add[noop-r1]": [("skipped", "pytest.xfail")], "fix-add[noop-r2]": [("failure", None)],
        "fix-add[base-r1]": [("skipped", "pytest.xfail")], "fix-add[noop-r3]": [("failure", None)],
        "q1[docs-ok-r1]": []}
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "10", "failures": "4", "errors": "1", "skipped": "3"}
    xpass = next(c for c in suite.iter("testcase") if c.get("name") == "fix-add[noop-r2]").find("failure")
    assert xpass.get("message").startswith("[XPASS(strict)] ")
    bad = next(c for c in suite.iter("testcase") if c.get("name") == "fix-add[bad-r1]").find("failure")
    assert bad.get("message") == "task:fix-add/default/bad/r1: failed" and "--- tests: `pytest -q` exit 1" in bad.text
    # a trial run has no composite score; a task run carries the one the result scored
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in suite.iter("testcase")}
    assert "agentrace.score" not in props["q1[docs-ok-r1]"] and float(props["fix-add[ok-r1]"]["agentrace.score"]) > 0
    # the file's path as the session's node id gives it (here outside the rootdir: relative to the working folder)
    assert {c.get("classname").rsplit("..", 1)[-1] for c in suite.iter("testcase")} == {"suite.task.yaml", "suite.ports.toml"}


HOSTILE = "nul\x00 esc\x1b[31m bell\x07 del\x7f surrogate\ud800 end]]> <tag attr=\"x\" y='z'> & amp; \U0001f600 \u202e"
KEY = "ghp_" + "A1b2C3d4" * 4 + "Zz9Y"  # a GitHub token's shape: 36 characters after the prefix


def test_hostile_strings_and_secrets_never_break_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "s3cret-value-of-the-session")
    usage = Usage(total_tokens=10, answer=HOSTILE + " s3cret-value-of-the-session " + KEY)
    runs = [outcome(case="c" + HOSTILE[:12], agent="evil", status="failed", reason=HOSTILE + " token " + KEY, usage=usage,
                    source="/suite/" + HOSTILE[:8] + ".yaml"),
            outcome(agent="broke", status="error", reason="s3cret-value-of-the-session " + HOSTILE)]
    text = junit.render(build_result(score_outcomes(runs), Context(resamples=200)))
    data = text.encode("utf-8")  # no lone surrogate is left to encode
    root = ET.fromstring(data)  # well-formed XML 1.0
    assert KEY not in text and "s3cret-value-of-the-session" not in text and "&lt;redacted&gt;" in text
    for forbidden in ("\x00", "\x1b", "\x07", "\x7f", "\ud800"):
        assert forbidden not in text
    failure = root.find(".//failure")
    message = failure.get("message")
    # what a terminal would act on is shown as its escape (``view.shown``: ``printable``), what XML 1.0 cannot hold
    # otherwise (a lone surrogate) as pytest writes it; markup and quotes come back as they were
    assert "nul\\x00 esc\\x1b[31m bell\\x07 del\\x7f surrogate#xD800 end]]> <tag attr=\"x\" y='z'> & amp;" in message
    assert "\U0001f600" in message and "]]> <tag" in failure.text
    error = root.find(".//error")
    assert error.get("message").startswith("task:fix-add/default/broke/r1: infrastructure error: <redacted> nul\\x00")
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    payload = json.loads(props["agentrace.outcome"])  # the record's JSON: ASCII, so nothing in it needs escaping
    assert payload["agent"] == "broke" and "nul\\x00" in payload["reason"] and KEY not in props["agentrace.outcome"]
    names = [c.get("name") for c in root.iter("testcase")]
    assert "cnul\\x00 esc\\x1b[31[evil-r1]" in names


def test_an_empty_result_is_a_suite_of_no_tests() -> None:
    text = formats.by_name("junit").render(build_result([], Context(resamples=200)))
    suite = ET.fromstring(text.encode("utf-8")).find("testsuite")
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped", "time")} == {
        "tests": "0", "failures": "0", "errors": "0", "skipped": "0", "time": "0.000"}
    assert list(suite.iter("testcase")) == [] and suite.find("properties") is None


PYTEST_FILE = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0"
failures="2" skipped="0" tests="3" time="1.0" timestamp="t" hostname="h"><testcase classname="test_x" name="test_plain"
time="0.1"><properties><property name="mine" value="1"/></properties><failure message="assert 0">boom</failure></testcase>
<testcase classname="task.yaml" name="fix-add[a-r1]" time="0.5"><properties><property name="other" value="kept"/>
<property name="agentrace.outcome" value="{}"/><property name="agentrace.run_id" value="task:fix-add/default/a/r1"/>
<property name="agentrace.status" value="error"/></properties><failure message="x: infrastructure error">e</failure>
</testcase><testcase classname="task.yaml" name="fix-add[b-r1]" time="0.5"><properties>
<property name="agentrace.run_id" value="task:fix-add/default/b/r1"/></properties></testcase></testsuite></testsuites>
"""


def test_patch_finishes_agentrace_cases_and_leaves_other_tests_alone(tmp_path: Path) -> None:
    path = tmp_path / "j.xml"
    path.write_text(PYTEST_FILE)
    runs = score_outcomes([outcome(agent="a", status="error", reason="clone failed"), outcome(agent="b")])
    result = build_result(runs, Context(resamples=200, digest="d" * 64))
    assert junit.patch_junit(path, result) > 0
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert (suite.get("errors"), suite.get("failures"), suite.get("tests")) == ("1", "1", "3")
    assert [(p.get("name"), p.get("value")) for p in suite.find("properties")] == [("agentrace.results_digest", "d" * 64)]
    plain, a, b = suite.iter("testcase")
    assert [(p.get("name"), p.get("value")) for p in plain.iter("property")] == [("mine", "1")]
    assert plain.find("failure").text == "boom"
    assert [e.tag for e in a if e.tag != "properties"] == ["error"]
    want = {r.run_id: [(n, junit.xml_text(v)) for n, v in junit.run_properties(r)] for r in result.outcomes}
    assert [(p.get("name"), p.get("value")) for p in a.iter("property")] == [("other", "kept"), *want[runs[0].run_id]]
    assert [(p.get("name"), p.get("value")) for p in b.iter("property")] == want[runs[1].run_id]
    before = path.read_bytes()
    assert junit.patch_junit(path, result) == 0 and path.read_bytes() == before  # a finished file stays as it is
    assert junit.patch_junit(tmp_path / "missing.xml", result) == 0
