"""`agentrace leaderboard / history / trend` on a fixed store, against figures counted by hand (issue 8)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from helpers.report import outcome

from pytest_agentrace.cli import main
from pytest_agentrace.record import store
from pytest_agentrace.record.store import SessionInfo
from pytest_agentrace.report.leaderboard import parse_since, sparkline

S1, S2, S3 = "2026-01-10T09:00:00+00:00", "2026-02-10T09:00:00+00:00", "2026-02-20T09:00:00+00:00"
STARTED = {"s1": S1, "s2": S2, "s3": S3}


def run(agent, case, rep, score, sid, cost=None, seconds=1.0, status=None, started=None, **kw):
    status = status or ("error" if score is None else "passed" if score >= 50 else "failed")
    return outcome(case=case, agent=agent, rep=rep, score=score, session_id=sid, cost=cost, seconds=seconds, status=status,
                   started=started or STARTED[sid], **kw)


@pytest.fixture
def fixed_store(tmp_path: Path) -> Path:
    """Three sessions; a race is one task in one session, each agent at its mean score over reps.

    s1: fix-add  a 90, 80 (85)  b 70, 80 (75)  c 50, 60 (55)   -> a wins
        slugify  a 40  b 95  c error (not scored, not in the race) -> b wins
    s2: fix-add  a 100, error (100)  b 20, error (20)  c 100, 100 (100) -> tie a/c: nobody wins
        slugify  c 70 alone: a run, not a race
    s3: fix-add  a 80.5  b 80.0 -> within 1 point: a tie, nobody wins
    plus trial runs in s2, which the leaderboard ignores."""
    db = tmp_path / "history.db"
    s1 = [
        run("a", "fix-add", 1, 90.0, "s1", cost=0.01, seconds=10), run("b", "fix-add", 1, 70.0, "s1", cost=0.02, seconds=20),
        run("c", "fix-add", 1, 50.0, "s1", seconds=1),
        run("a", "fix-add", 2, 80.0, "s1", cost=0.01, seconds=10), run("b", "fix-add", 2, 80.0, "s1", cost=0.04, seconds=30),
        run("c", "fix-add", 2, 60.0, "s1", seconds=1),
        run("a", "slugify", 1, 40.0, "s1", cost=0.01, seconds=10), run("b", "slugify", 1, 95.0, "s1", seconds=40),
        run("c", "slugify", 1, None, "s1", seconds=0),
    ]
    s2 = [
        run("a", "fix-add", 1, 100.0, "s2", cost=0.01, seconds=10), run("b", "fix-add", 1, 20.0, "s2", seconds=50),
        run("c", "fix-add", 1, 100.0, "s2", seconds=1),
        run("a", "fix-add", 2, None, "s2"), run("b", "fix-add", 2, None, "s2"), run("c", "fix-add", 2, 100.0, "s2", seconds=1),
        run("c", "slugify", 1, 70.0, "s2", seconds=1),
        run("a", "q1", 1, None, "s2", kind="trial", arm="docs", status="passed"),
        run("b", "q1", 1, None, "s2", kind="trial", arm="docs", status="passed"),
    ]
    s3 = [run("a", "fix-add", 1, 80.5, "s3", cost=0.01, seconds=10), run("b", "fix-add", 1, 80.0, "s3", seconds=35)]
    for sid, runs in (("s1", s1), ("s2", s2), ("s3", s3)):
        store.save(db, SessionInfo(sid, started=STARTED[sid]), runs)
    return db


def cli_json(capsys: pytest.CaptureFixture, *args: str):
    assert main([*args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_leaderboard_matches_hand_counts(fixed_store: Path, capsys: pytest.CaptureFixture) -> None:
    board = cli_json(capsys, "leaderboard", "--db", str(fixed_store))
    got = [(s["agent"], s["runs"], s["races"], s["wins"], s["win_rate"], s["mean_score"], s["passed"]) for s in board]
    assert got == [
        ("a", 5, 4, 1, 0.25, 78.1, 4),  # 90 80 40 100 80.5; wins and win rate tie with b, the higher mean ranks first
        ("b", 5, 4, 1, 0.25, 69.0, 4),  # 70 80 95 20 80
        ("c", 5, 2, 0, 0.0, 76.0, 5),  # 50 60 100 100 70; its lone slugify run is a run, not a race
    ]
    by = {s["agent"]: s for s in board}
    assert by["a"]["mean_cost"] == pytest.approx(0.01) and by["b"]["mean_cost"] == pytest.approx(0.03) and by["c"]["mean_cost"] is None
    assert by["a"]["mean_seconds"] == 10 and by["b"]["mean_seconds"] == 35 and by["c"]["mean_seconds"] == 1


def test_leaderboard_filters(fixed_store: Path, capsys: pytest.CaptureFixture) -> None:
    since = cli_json(capsys, "leaderboard", "--db", str(fixed_store), "--since", "2026-02-01")
    # s2 and s3 only: two ties, no wins; by mean score a 90.25, c 90.0, b 50.0
    assert [(s["agent"], s["runs"], s["races"], s["wins"]) for s in since] == [("a", 2, 2, 0), ("c", 3, 1, 0), ("b", 2, 2, 0)]
    task = cli_json(capsys, "leaderboard", "--db", str(fixed_store), "--task", "slugify")
    assert [(s["agent"], s["runs"], s["races"], s["wins"], s["win_rate"]) for s in task] == [("b", 1, 1, 1, 1.0), ("c", 1, 0, 0, None), ("a", 1, 1, 0, 0.0)]
    few = cli_json(capsys, "leaderboard", "--db", str(fixed_store), "--since", "2026-02-01", "--min-runs", "3")
    assert [s["agent"] for s in few] == ["c"]


def test_leaderboard_terminal_and_markdown(fixed_store: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["leaderboard", "--db", str(fixed_store)]) == 0
    text = capsys.readouterr().out
    lines = [line.split() for line in text.splitlines()]
    rows = [row for row in lines if row and row[0] in ("1", "2", "3")]
    assert [row[1:5] for row in rows] == [["a", "1", "4", "25.0%"], ["b", "1", "4", "25.0%"], ["c", "0", "2", "0.0%"]]
    assert "ties are not wins" in text
    assert main(["leaderboard", "--db", str(fixed_store), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    md_lines = md.splitlines()
    assert md_lines[0] == "### agentrace leaderboard"
    assert [c.strip() for c in md_lines[2].strip("|").split("|")][:4] == ["Rank", "Agent", "Wins", "Races"]
    assert [c.strip() for c in md_lines[4].strip("|").split("|")][:6] == ["1", "a", "1", "4", "25.0%", "78.1"]


def test_leaderboard_html_is_a_sortable_page(fixed_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "board.html"
    assert main(["leaderboard", "--db", str(fixed_store), "--format", "html", "-o", str(out)]) == 0
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and 'class="sortable"' in page and "<td>a</td>" in page
    assert 'data-sort="78.1"' in page  # numeric columns sort by value


def test_history_matches_hand_counts(fixed_store: Path, capsys: pytest.CaptureFixture) -> None:
    races = cli_json(capsys, "history", "--db", str(fixed_store))
    got = [(r["session_id"], r["task"], r["agents"], r["winner"], r["top_score"]) for r in races]
    assert got == [
        ("s3", "fix-add", ["a", "b"], "tie", 80.5),
        ("s2", "slugify", ["c"], None, 70.0),
        ("s2", "fix-add", ["a", "b", "c"], "tie", 100.0),
        ("s1", "slugify", ["a", "b"], "b", 95.0),
        ("s1", "fix-add", ["a", "b", "c"], "a", 85.0),
    ]
    mine = cli_json(capsys, "history", "--db", str(fixed_store), "--agent", "c")
    assert [(r["session_id"], r["task"], r["score"], r["rank"]) for r in mine] == [("s2", "slugify", 70.0, 1), ("s2", "fix-add", 100.0, 1), ("s1", "fix-add", 55.0, 3)]
    assert len(cli_json(capsys, "history", "--db", str(fixed_store), "--limit", "2")) == 2
    assert [r["session_id"] for r in cli_json(capsys, "history", "--db", str(fixed_store), "--task", "slugify")] == ["s2", "s1"]


def test_trend_series_and_sparkline(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "h.db"
    now = dt.datetime.now(dt.UTC)
    for i, (days_ago, a_scores) in enumerate([(60, [10.0]), (3, [0.0, 50.0]), (2, [50.0]), (1, [100.0])]):
        started = (now - dt.timedelta(days=days_ago)).isoformat(timespec="seconds")
        store.save(db, SessionInfo(f"s{i}", started=started),
                   [run("a", "fix-add", rep, s, f"s{i}", started=started) for rep, s in enumerate(a_scores, 1)]
                   + [run("b", "fix-add", 1, 70.0, f"s{i}", started=started)])
    series = cli_json(capsys, "trend", "--db", str(db))  # last 30 days: the 60-day-old session is out
    a = next(s for s in series if s["agent"] == "a")
    assert [v for _, v in a["points"]] == [25.0, 50.0, 100.0] and a["change"] == 75.0
    assert main(["trend", "--db", str(db), "--agent", "a"]) == 0
    text = capsys.readouterr().out
    assert sparkline([25.0, 50.0, 100.0]) in text and " b " not in text
    assert len(cli_json(capsys, "trend", "--db", str(db), "--days", "90")[0]["points"]) == 4


def test_sparkline_and_since_parsing() -> None:
    assert sparkline([0, 50, 100]) == "▁▅█"
    now = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.UTC)
    assert parse_since("7d", now) == "2026-03-03T12:00:00+00:00"
    assert parse_since("2026-01-31", now) == "2026-01-31T00:00:00+00:00"
    with pytest.raises(ValueError, match="expected a span like 7d"):
        parse_since("last week", now)


def test_missing_store_and_bad_since_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture, fixed_store: Path) -> None:
    assert main(["leaderboard", "--db", str(tmp_path / "nope.db")]) == 2
    err = capsys.readouterr().err
    assert "no history store at" in err and "nope.db" in err
    assert not (tmp_path / "nope.db").exists()  # reading never creates a store
    assert main(["leaderboard", "--db", str(fixed_store), "--since", "yesterday-ish"]) == 2
    assert "expected a span like 7d" in capsys.readouterr().err


def test_a_store_without_task_races_says_so(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from pytest_agentrace.record.store import Store

    db = tmp_path / "h.db"
    with Store(db):
        pass
    assert main(["leaderboard", "--db", str(db)]) == 0
    assert "no task races recorded" in capsys.readouterr().out


def test_agents_tied_on_every_ranked_column_share_a_rank() -> None:
    """Three agents with no wins and equal mean scores and one below them: ranks 1, 1, 1, 4 (competition ranking, as
    the task tables rank equal scores), in the Markdown and HTML leaderboards alike."""
    from helpers.report import outcome

    from pytest_agentrace.report import html, markdown
    from pytest_agentrace.report.leaderboard import Standing, standing_ranks
    from pytest_agentrace.report.result import build_result
    from pytest_agentrace.stats.score import score_outcomes

    table = [Standing(agent=a, runs=2, races=0, wins=0, win_rate=None, mean_score=100.0, mean_cost=None, mean_seconds=1.0,
                      passed=2) for a in ("claude", "mine", "oracle")]
    table.append(Standing(agent="noop", runs=2, races=0, wins=0, win_rate=None, mean_score=0.0, mean_cost=None,
                          mean_seconds=1.0, passed=0))
    assert standing_ranks(table) == [1, 1, 1, 4]
    runs = score_outcomes([outcome(case=f"t{t}", agent=a, rep=1) for a in ("a", "b") for t in (1, 2)])
    result = build_result(runs)
    assert [row[0] for row in markdown.leaderboard_rows(result)] == [1, 1]
    page = html.render(result)
    rows = page[page.index('id="leaderboard"'):].split("</tbody>")[0]
    assert rows.count('<td data-sort="1.0" class="num">1</td><td>') == 2 and ">2</td><td>b<" not in rows
