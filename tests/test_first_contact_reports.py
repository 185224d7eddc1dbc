"""What a newcomer sees after a first session: `agentrace report` shows the run table of a one-rep session, an
empty folder names the files the plugin collects, `agentrace comment` fits GitHub's comment limit for any session
size, and the HTML report links each run's files, shows its transcript turn by turn, counts a baseline's expected
failures apart from failures, says why an empty chart is empty and names the scope of its Elo ratings."""

from __future__ import annotations

import json
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import numpy  # noqa: F401  (imported once here: pytester's in-process runs cannot re-import numpy's C extension)
import pytest
import scipy.stats  # noqa: F401
from helpers import XDIST, make_repo, write_script
from helpers.report import BOT, CALC_REPO, outcome

from pytest_agentrace import cli
from pytest_agentrace.record.index import iter_outcomes
from pytest_agentrace.record.manifest import digest_run, write_manifest
from pytest_agentrace.record.model import Outcome
from pytest_agentrace.record.runfile import write_run
from pytest_agentrace.report.html import render_report
from pytest_agentrace.report.markdown import (
    COMMENT_LIMIT,
    COMMENT_MARKER,
    comment_body,
    elo_title,
    expected_failure,
    render_result,
)
from pytest_agentrace.report.result import Context, build_result
from pytest_agentrace.stats.score import score_outcomes

TASK = """\
name: fix-add
description: Fix add() in calc.py.
repo: repo
test_command: python -m pytest -q test_add.py
timeout: 60
agents:
  - {name: alpha, command: 'bot alpha {prompt}', kind: claude}
  - {name: gamma, command: 'bot gamma {prompt}', kind: claude}
  - noop
"""


class Links(HTMLParser):
    """Every ``<a href>`` of a page, and the text of each ``<h2>``."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.h2: list[str] = []
        self._in_h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.append(dict(attrs)["href"] or "")
        self._in_h2 = tag == "h2"

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            self.h2.append(data)
            self._in_h2 = False


@pytest.fixture
def one_rep(pytester: pytest.Pytester, bin_dir: Path, request: pytest.FixtureRequest) -> pytest.RunResult:
    """A one-rep session of one task: alpha fixes add (passes), gamma fixes only mul (fails), noop changes nothing
    (a baseline expected to fail: xfailed). Results in ``results/``, the HTML report in ``site/report.html``."""
    make_repo(pytester.path / "repo", CALC_REPO)
    (pytester.path / "fix-add.yaml").write_text(TASK)
    write_script(bin_dir / "bot", BOT)
    res = pytester.runpytest("--agentrace", "--agentrace-out", "results", "--agentrace-no-save",
                             "--agentrace-html", "site/report.html", "-p", "no:cacheprovider", *request.param)
    res.assert_outcomes(passed=1, failed=1, xfailed=1)
    return res


@pytest.mark.parametrize("one_rep", XDIST, indirect=True)
def test_report_after_a_one_rep_session_shows_the_run_table(one_rep: pytest.RunResult, pytester: pytest.Pytester,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli.main(["report", str(pytester.path / "results"), "--resamples", "200"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].startswith("task fix-add  [")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")]
    header, *body = rows
    assert header[:4] == ["Rank", "Agent", "Score", "Status"]
    by_agent = {r[1]: r for r in body if r[1]}
    assert set(by_agent) == {"alpha", "gamma", "noop"}
    assert by_agent["alpha"][:4] == ["1", "alpha", "100", "passed"]  # alone passing: it wins the race
    assert by_agent["gamma"][3] == "failed" and by_agent["noop"][3] == "failed"
    assert "Elo over these races" in text  # the statistics follow the table, they do not replace it
    capsys.readouterr()
    assert cli.main(["report", str(pytester.path / "results"), "--format", "markdown", "--resamples", "200"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("```text\ntask fix-add  [")
    fenced = md[:md.index("\n```\n")]
    assert [r for r in fenced.splitlines() if "| alpha " in r and "| passed " in r]


@pytest.mark.parametrize("one_rep", XDIST, indirect=True)
def test_html_of_a_session_with_a_baseline(one_rep: pytest.RunResult, pytester: pytest.Pytester) -> None:
    page_path = pytester.path / "site" / "report.html"
    page = page_path.read_text()
    # noop's expected failure is counted apart from the failures, as pytest's summary counts it
    assert "3 runs: 1 passed, 1 failed, 1 expected failure (baselines), 0 timed out, 0 errors" in page
    toggles = re.findall(r'<label class="outcome">.*?<span class="status-[a-z]+">([^<]*)</span>', page)
    assert toggles == ["1 passed", "1 failed", "1 expected failures"]
    assert page.count('data-status="xfailed"') == 1 and page.count('data-status="failed"') == 1
    assert "2 of 3 runs did not pass (1 of them baselines&#x27; expected failures)" in page
    # every run's files are linked relative to the page, and each link names a file of that run's folder
    parser = Links()
    parser.feed(page)
    runs = pytester.path / "results" / "runs"
    linked = {(page_path.parent / unquote(h)).resolve() for h in parser.hrefs}
    assert all(not h.startswith(("/", "file:")) for h in parser.hrefs)
    for agent in ("alpha", "gamma", "noop"):
        folder = runs / "fix-add" / "default" / agent / "1"
        for name in ("run.json", "trajectory.json", "prompt.txt"):
            assert (folder / name).resolve() in linked, (agent, name)
    assert all(p.is_file() and runs in p.parents for p in linked)
    # the transcript, turn by turn: the prompt, then the agent's tool calls in order and its final answer
    assert page.count("Turn 1: user (prompt)") == 3
    alpha = page[page.index('data-run-id="task:fix-add/default/alpha/r1"'):]
    alpha = alpha[:alpha.index("</tbody>")]
    assert "Transcript (2 turns)" in alpha and "Turn 2: agent · claude-test · 4 model calls" in alpha
    calls = re.findall(r"<li><code>([^<]*)</code>", alpha)
    assert calls == ["Read", "Edit", "Bash"]
    assert "alpha: edited calc.py &lt;b&gt;&amp;amp; done&lt;/b&gt;" in alpha  # the answer, escaped
    # one rep, no history store: the Elo ratings are those of these runs
    assert "Elo over these runs (1 race in 1 session)" in parser.h2


def test_nothing_collected_names_the_file_patterns(pytester: pytest.Pytester, xdist: list[str]) -> None:
    (pytester.path / "notes.yaml").write_text("title: not a task\n")
    (pytester.path / "settings.toml").write_text("[tool]\nname = 'not a trial'\n")
    res = pytester.runpytest("--agentrace", "-p", "no:cacheprovider", *xdist)
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    res.stdout.fnmatch_lines([
        "*agentrace: nothing collected*",
        f"agentrace: no task or trial file was found under {pytester.path}. --agentrace collects:",
        "  task files      *.yaml / *.yml whose top level has `description:` and `test_command:`*",
        "  trial files     *.toml (not pyproject.toml) with a top-level [[questions]] array",
        "  Harbor tasks    a folder holding task.toml and instruction.md",
        "  built-in tasks  --agentrace-builtin NAME*",
    ])
    # a session that collected something and deselected it all gets pytest's own word only
    make_repo(pytester.path / "repo", CALC_REPO)
    (pytester.path / "fix-add.yaml").write_text(TASK)
    res = pytester.runpytest("--agentrace", "-p", "no:cacheprovider", "-k", "no-such-run", *xdist)
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "nothing collected" not in res.stdout.str()


def big_results(out: Path, tasks: int = 100, agents: int = 5, questions: int = 50, reps: int = 2) -> Path:
    """A results folder of ``tasks x agents`` task cells and ``questions x 2 arms x agents`` trial cells (1,000 with
    the defaults), ``reps`` runs each, with a manifest (so every record verifies)."""
    runs = []
    for t in range(tasks):
        for a in range(agents):
            for r in range(1, reps + 1):
                ok = (t + a + r) % 4 != 0
                runs.append(outcome(case=f"task-number-{t:03d}", agent=f"agent-{a}", rep=r, status="passed" if ok else "failed",
                                    reason=None if ok else "tests failed: 3 of 12 tests", tokens=1000 + 37 * t + 11 * a + r,
                                    cost=0.001 * (t + a + 1), seconds=5.0 + t % 7, source=f"/suite/task-number-{t:03d}.yaml"))
    for q in range(questions):
        for arm in ("baseline", "docs"):
            for a in range(agents):
                for r in range(1, reps + 1):
                    ok = (q + r) % 3 != 0
                    runs.append(outcome(kind="trial", case=f"question-{q:03d}", arm=arm, agent=f"agent-{a}", rep=r, cost=None,
                                        status="passed" if ok else "failed", source="/suite/trial.toml",
                                        tokens=2000 - (600 if arm == "docs" else 0) + 13 * q + 7 * r,
                                        answer_score={"correct": ok}, extra={"trial": "t", "baseline_arm": "baseline"}))
    digests = {}
    for o in runs:
        folder = out / "runs" / o.case / o.arm / o.agent / str(o.rep)
        write_run(folder, o)
        digests[o.run_id] = digest_run(out, folder)
    write_manifest(out, "s1", digests)
    return out


def test_comment_of_a_thousand_cells_fits_githubs_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = big_results(tmp_path / "results")
    assert cli.main(["export", str(out), "--resamples", "200", "--db", str(tmp_path / "none.db"), "-o", str(tmp_path / "doc.json")]) == 0
    assert len(json.loads((tmp_path / "doc.json").read_text())["cells"]) == 1000
    doc = build_result(score_outcomes(iter_outcomes(out), per_session=False), Context(resamples=200))
    assert len(doc.report.cells) == 1000
    full = COMMENT_MARKER + "\n" + render_result(doc, title="agentrace results")
    assert len(full) > COMMENT_LIMIT  # the uncut report would be refused by GitHub
    capsys.readouterr()
    url = "https://ci.example.org/run/7/artifacts/report.html"
    assert cli.main(["comment", str(out), "--resamples", "200", "--db", str(tmp_path / "none.db"), "--full-report", url]) == 0
    body = capsys.readouterr().out
    assert len(body) <= COMMENT_LIMIT and body.startswith(COMMENT_MARKER + "\n## agentrace results\n")
    assert "2000 runs: " in body and f"See [the full report]({url})." in body
    # the headline tables, in order, each cut to its first rows with the count left out
    headings = re.findall(r"^### (.*)$", body, re.M)
    assert headings == ["Leaderboard", "Arms vs baseline", "Tasks", "Trials", "Elo over these runs (100 races in 1 session)"]  # one race per task and session
    assert "| 1      | agent-" in body or "| 1 " in body
    task_rows = re.findall(r"^\| task-number-\d{3} ", body, re.M)
    trial_rows = re.findall(r"^\| question-\d{3} ", body, re.M)
    assert 0 < len(task_rows) < 500 and 0 < len(trial_rows) < 500
    assert f"_… and {500 - len(task_rows):,} more rows: see the full report._" in body
    assert f"_… and {500 - len(trial_rows):,} more rows: see the full report._" in body
    # a report that fits is left whole
    small = build_result(score_outcomes([outcome(agent="a"), outcome(agent="b", status="failed")], per_session=False),
                         Context(resamples=200))
    assert comment_body(small) == COMMENT_MARKER + "\n" + render_result(small, title="agentrace results")
    # and any limit is kept, however small, while the headline fits
    for limit in (40_000, 10_000, 3_000):
        cut = comment_body(doc, limit=limit)
        assert len(cut) <= limit and "### Leaderboard" in cut
    with pytest.raises(ValueError, match="cannot hold"):
        comment_body(doc, limit=200)


def empty_charts(page: str) -> dict[str, str]:
    """``{chart title: the sentence it shows}`` for each chart of ``page`` that has no data (its lines joined)."""
    found = {}
    for title, svg in re.findall(r'<svg class="chart"[^>]*><title>([^<]*)</title>(.*?)</svg>', page):
        lines = re.findall(r'class="muted empty">([^<]*)<', svg)
        if lines:
            found[unescape(title)] = unescape(" ".join(lines))
    return found


def test_an_empty_chart_says_why() -> None:
    trials = [outcome(kind="trial", case="q", arm=arm, agent="a", rep=r, source="/s/t.toml", answer_score={"correct": True},
                      extra={"trial": "t", "baseline_arm": "base"}) for arm in ("base", "docs") for r in (1, 2)]
    empty = empty_charts(render_report(build_result(score_outcomes(trials, per_session=False), Context(resamples=200))))
    assert empty == {
        "Score vs cost per agent": ("No task runs: score vs cost compares agents on task files, and this report holds only "
                                    "trials (answers are not scored 0-100; see the pass-rate and relative-cost charts)."),
        "Elo over time": "No race yet: Elo rates agents from races, the runs of two or more agents on one task and rep.",
    }
    errors = [outcome(agent=a, status="error", reason="harness fault") for a in ("a", "b")]
    empty = empty_charts(render_report(build_result(score_outcomes(errors, per_session=False), Context(resamples=200))))
    assert empty["Score vs cost per agent"] == ("No task run was scored: every one was an infrastructure error (see the "
                                                "runs table for the reasons).")
    assert empty["Pass rate with Wilson 95% intervals"] == "No cell has a valid run: every run was an infrastructure error."
    unknown = [outcome(agent=a, tokens=None, cost=None) for a in ("a", "b")]
    empty = empty_charts(render_report(build_result(score_outcomes(unknown, per_session=False), Context(resamples=200))))
    assert empty["Score vs cost per agent"].startswith("No task run reported its tokens or cost")
    assert empty["Relative cost vs baseline arm"].startswith("No arm comparison: relative cost compares the arms of a trial file")
    assert "Elo over time" not in empty  # two agents raced: the Elo chart has its line


def test_elo_is_labelled_with_its_scope() -> None:
    here = [outcome(agent=a, session_id="now", seconds=s) for a, s in (("a", 1.0), ("b", 2.0))]
    earlier = [outcome(agent=a, session_id="before", started="2025-12-01T00:00:00+00:00", seconds=s) for a, s in (("a", 2.0), ("b", 1.0))]
    scored = score_outcomes(here, per_session=False)
    alone = build_result(scored, Context(resamples=200))
    assert elo_title(alone) == "Elo over these runs (1 race in 1 session)"
    wide = build_result(scored, Context(resamples=200), history=score_outcomes(earlier + here))
    assert elo_title(wide) == "Elo, history-wide (2 races in 2 sessions of the history store, not only these runs)"
    page = render_report(wide)
    assert "<h2>Elo, history-wide (2 races in 2 sessions of the history store, not only these runs)</h2>" in page
    assert "Elo over time: Elo, history-wide" in page
    assert "### Elo, history-wide (2 races in 2 sessions" in render_result(wide)


def test_links_without_a_page_path_are_absolute(tmp_path: Path) -> None:
    o = outcome(agent="a")
    folder = tmp_path / "runs" / o.case / o.arm / o.agent / "1"
    write_run(folder, o)
    (folder / "odd name #1.txt").write_text("x")
    (folder / "elsewhere").symlink_to("/etc/hostname")  # a link is neither listed nor followed
    doc = build_result(score_outcomes([o], per_session=False), Context(out=tmp_path, resamples=200))
    page = render_report(doc)
    assert f'href="{(folder / "odd name #1.txt").as_uri()}"' in page and "elsewhere" not in page
    page = render_report(doc, html_path=tmp_path / "site" / "r.html")
    assert 'href="../runs/fix-add/default/a/1/odd%20name%20%231.txt"' in page


def test_a_custom_baseline_expected_to_fail_is_recorded_and_reported_as_such(pytester: pytest.Pytester,
                                                                              bin_dir: Path, xdist: list[str]) -> None:
    """A custom agent with ``expect: fail`` is a baseline: pytest counts its failed run as xfailed, its record says
    ``extra.expect`` and the reports count it as an expected failure, not a failure."""
    make_repo(pytester.path / "repo", CALC_REPO)
    (pytester.path / "fix-add.yaml").write_text(TASK.replace("  - noop\n", "  - {name: idle, command: 'true', expect: fail}\n"))
    write_script(bin_dir / "bot", BOT)
    res = pytester.runpytest("--agentrace", "--agentrace-out", "results", "--agentrace-no-save",
                             "-p", "no:cacheprovider", *xdist)
    res.assert_outcomes(passed=1, failed=1, xfailed=1)
    idle = json.loads(next((pytester.path / "results" / "runs").glob("fix-add/*/idle/*/run.json")).read_text())
    assert (idle["status"], idle["extra"]["expect"]) == ("failed", "fail")
    alpha = json.loads(next((pytester.path / "results" / "runs").glob("fix-add/*/alpha/*/run.json")).read_text())
    assert "expect" not in alpha["extra"]
    assert [r["agent"] for r in [alpha, idle] if expected_failure(Outcome.from_dict(r))] == ["idle"]
