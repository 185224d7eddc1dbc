"""`agentrace export / html / comment` over a results folder: schema, escaping, truncation, marker (issue 8)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jsonschema
import pytest
from helpers.report import outcome

from pytest_agentrace.cli import main
from pytest_agentrace.record.manifest import record_run
from pytest_agentrace.record.model import CheckResult
from pytest_agentrace.record.runfile import write_run
from pytest_agentrace.report import html as html_report
from pytest_agentrace.report import markdown
from pytest_agentrace.report.json_export import load_schema, validate

EVIL = "<script>alert('x')</script> & <b>bold</b> | pipe"
BIG_LOG = "".join(f"log line {i}\n" for i in range(5000))  # ~68,000 characters


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A results folder: task fix-add (agents a, b; 2 reps, one b run failed with an evil reason) and a trial
    question q1 with arms baseline/docs (3 reps each; docs uses half the tokens), with run files on disk."""
    out = tmp_path / "out"
    runs = []
    for rep in (1, 2):
        runs.append(outcome(agent="a", rep=rep, tokens=1000 + rep, cost=0.01, seconds=2.0 + rep))
        runs.append(outcome(agent="b", rep=rep, status="failed" if rep == 2 else "passed", tokens=3000, cost=0.03, seconds=5.0,
                            reason=EVIL if rep == 2 else None))
    for arm, tokens in (("baseline", 2000), ("docs", 1000)):
        for rep in (1, 2, 3):
            runs.append(outcome(case="q1", kind="trial", arm=arm, agent="a", rep=rep, tokens=tokens + 10 * rep, cost=None,
                                status="passed" if arm == "docs" else "failed", source="/suite/ports.toml",
                                answer_score={"correct": arm == "docs", "recall": 1.0 if arm == "docs" else 0.0, "missing": [], "forbidden": []}))
    for o in runs:
        run_dir = out / "runs" / o.case / o.arm / o.agent / str(o.rep)
        if o.kind == "task":
            o = o.replace(checks={"tests": CheckResult("tests", "pytest -q", 0 if o.status == "passed" else 1, 0.5, "tests.log")})
            (run_dir / "tests.log").parent.mkdir(parents=True, exist_ok=True)
            (run_dir / "tests.log").write_text(BIG_LOG if o.agent == "b" and o.rep == 2 else "1 passed\n")
            (run_dir / "diff.patch").write_text("--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-    return a - b\n+    return a + b\n")
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "prompt.txt").write_text(f"Fix it. {EVIL}")
        write_run(run_dir, o.replace(usage=dataclasses.replace(o.usage, answer=f"answer of {o.run_id}: {EVIL}")))
        record_run(out, "s1", o.run_id, run_dir)  # as a session does: the folder verifies
    return out


def test_export_validates_against_the_schema(results: Path, tmp_path: Path) -> None:
    target = tmp_path / "export.json"
    assert main(["export", str(results), "-o", str(target)]) == 0
    doc = json.loads(target.read_text())
    validate(doc)
    assert doc["schema_version"] == 1 and doc["product"]["name"] == "pytest-agentrace" and doc["session"] is None
    assert doc["totals"] == {"runs": 10, "passed": 6, "failed": 4, "expected_failures": 0, "timeout": 0, "error": 0}
    assert doc["config"]["agents"] == ["a", "b"] and doc["config"]["reps"] == 3
    assert [(c["kind"], c["case"], c["arm"], c["agent"], c["passed"], c["valid"]) for c in doc["cells"]] == [
        ("task", "fix-add", "default", "a", 2, 2), ("task", "fix-add", "default", "b", 1, 2),
        ("trial", "q1", "baseline", "a", 0, 3), ("trial", "q1", "docs", "a", 3, 3)]
    (comp,) = doc["comparisons"]
    assert (comp["arm"], comp["baseline"]) == ("docs", "baseline")
    assert comp["relative_cost"] == pytest.approx((1010 + 1020 + 1030) / 3 / 2020)
    assert len(doc["runs"]) == 10 and all(r["kind"] in ("task", "trial") for r in doc["runs"])
    # scores were filled in for the task runs, as in a session
    assert all(r["score"] is not None for r in doc["runs"] if r["kind"] == "task")


def test_a_baselines_failed_runs_are_expected_failures_in_every_format() -> None:
    """The JSON totals count a ``noop`` baseline's failed runs apart from the failed ones, as the Markdown headline
    and JUnit (skipped, pytest's xfailed) do: a dashboard reading ``totals.failed`` sees a green session as green."""
    from pytest_agentrace.report.json_export import document
    from pytest_agentrace.report.result import build_result
    from pytest_agentrace.stats.score import score_outcomes

    runs = [outcome(agent="a", rep=r) for r in (1, 2)] + [outcome(agent="a", rep=3, status="failed")]
    runs += [outcome(agent="noop", rep=r, status="failed", tokens=None, cost=None) for r in (1, 2, 3)]
    result = build_result(score_outcomes(runs))
    doc = document(result)
    validate(doc)
    assert doc["totals"] == {"runs": 6, "passed": 2, "failed": 1, "expected_failures": 3, "timeout": 0, "error": 0}
    assert markdown.headline(result).startswith("6 runs: 2 passed, 1 failed, 3 expected failures (baselines)")


def test_the_partial_line_is_redacted_and_printable_in_every_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Context.partial`` (why a folder holds part of a sharded session; it names the folder's path) reaches every
    report body through redaction and ``printable``, as every other exported field does."""
    from pytest_agentrace.report.json_export import document
    from pytest_agentrace.report.result import Context, build_result
    from pytest_agentrace.stats.score import score_outcomes

    monkeypatch.setenv("CI_DEPLOY_TOKEN", "tok-0123456789abcdef")
    why = "/ci/tok-0123456789abcdef/out holds shards 1 of 2; shard 2 of 2 missing\x1b]52;c;aGk=\x07"
    result = build_result(score_outcomes([outcome(agent="a", rep=1)]), Context(partial=why))
    md = markdown.render_result(result)
    page = html_report.render(result)
    comment = markdown.comment_body(result)
    doc = document(result)
    for text in (md, page, comment, doc["partial"]):
        assert "tok-0123456789abcdef" not in text and "shard 2 of 2 missing" in text
    for text in (md, page, comment):  # read by people (JSON is data: its encoder escapes a control character)
        assert "\x1b" not in text and "\\x1b]52" in text
    assert "partial results: /ci/<redacted>/out holds shards 1 of 2" in md


def test_schema_catches_bad_documents(results: Path, tmp_path: Path) -> None:
    target = tmp_path / "export.json"
    main(["export", str(results), "-o", str(target)])
    doc = json.loads(target.read_text())
    for breakage in (
        lambda d: d.pop("cells"),
        lambda d: d["runs"][0].update(status="exploded"),
        lambda d: d["totals"].update(runs=-1),
        lambda d: d["cells"][0].update(pass_rate=1.5),
        lambda d: d.update(schema_version=2),
        lambda d: d["runs"][0].update(run_id="fix-add/a/1"),
    ):
        bad = json.loads(json.dumps(doc))
        breakage(bad)
        with pytest.raises(jsonschema.ValidationError):
            validate(bad)
    jsonschema.Draft202012Validator.check_schema(load_schema())


def test_comment_body_has_marker_and_escaped_tables(results: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["comment", str(results)]) == 0
    body = capsys.readouterr().out
    lines = body.splitlines()
    assert lines[0] == markdown.COMMENT_MARKER
    assert "### Leaderboard" in body and "### Tasks" in body and "### Trials" in body and "### Arms vs baseline" in body
    failed = next(line for line in lines if line.startswith("- task:fix-add/default/b/r2"))
    assert "\\| pipe" in failed  # a pipe in a reason cannot break the list or a table
    task_rows = [line for line in lines if line.startswith("| fix-add")]
    assert [[c.strip() for c in row.strip("|").split("|")][:4] for row in task_rows] == [["fix-add", "a", "2", "2/2"], ["fix-add", "b", "2", "1/2"]]


def test_html_is_self_contained_escaped_and_truncates_large_logs(results: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    assert main(["html", str(results), "-o", str(target)]) == 0
    page = target.read_text()
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing to fetch
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert page.count('<svg class="chart"') == 4
    assert page.count('<tbody class="run"') == 10
    note = f"truncated: showing the last {html_report.MAX_FILE_CHARS:,} of {len(BIG_LOG):,} characters"
    assert note in page
    big = results / "runs/fix-add/default/b/2/tests.log"
    assert f"the whole file is {big}" in page
    assert "log line 4999" in page and "log line 0\n" not in page  # the tail of a log is kept
    assert '<span class="diff-add">+    return a + b</span>' in page


def test_clip_keeps_head_or_tail() -> None:
    assert html_report.clip("abc", "x", limit=5) == ("abc", None)
    head, note = html_report.clip("abcdefgh", "f.txt", "head", limit=3)
    assert head == "abc" and note == "truncated: showing the first 3 of 8 characters; the whole file is f.txt"
    assert html_report.clip("abcdefgh", "f.txt", "tail", limit=3)[0] == "fgh"


def test_missing_results_folder_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["export", str(tmp_path / "nothing")]) == 2
    assert "no run records under" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["export", "html", "comment"])
def test_unusable_history_db_is_one_line(results: Path, tmp_path: Path, capsys: pytest.CaptureFixture, command: str) -> None:
    bad = tmp_path / "bad.db"
    bad.write_text("this is not sqlite\n" * 100)
    assert main([command, str(results), "--db", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"agentrace: {bad}: not a usable history store") and "Traceback" not in err
