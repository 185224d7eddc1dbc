"""The Markdown, HTML and PR-comment outputs print the figures recorded in ``tests/golden/report_views/``: a results
folder built field by field (a task raced by three agents over two reps, with a baseline's expected failure, a
timeout, an infrastructure error, a memory-limit hit, a reason holding a secret and one holding markup; a two-arm
trial with claims; earlier sessions in the history store for the Elo chart) is rendered through the ``FORMATS``
table and compared, byte for byte, with the files recorded before the Markdown and HTML outputs were moved from the
export document's keys to the session result's typed fields. What changes from one machine to the next (the
folder's path, the time the report was made, the Python and platform in the HTML footer) is replaced by a
placeholder before comparing; nothing else is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.report import outcome

from pytest_agentrace.record.runfile import write_run
from pytest_agentrace.record.trajectory import write_trajectory
from pytest_agentrace.report import formats
from pytest_agentrace.report.result import Context, build_result
from pytest_agentrace.stats.score import score_outcomes

GOLDEN = Path(__file__).parent / "golden" / "report_views"
SECRET = "sk-golden-0123456789abcdef"  # the value of a secret-named variable: never printed
MARKUP = "<script>alert('x')</script> & <b>bold</b> | pipe"
FILES = {"md": "report.md", "html": "report.html", "comment": "comment.md"}


def runs() -> list:
    """The folder's outcomes (unscored; see the module docstring)."""
    found = []
    for rep in (1, 2):
        found.append(outcome(agent="alpha", rep=rep, tokens=1000 + 7 * rep, cost=0.0123 + rep / 1000, seconds=2.0 + rep))
        found.append(outcome(agent="beta", rep=rep, status="failed" if rep == 2 else "passed", tokens=3000 + rep, cost=0.031,
                             seconds=12.5, reason=f"tests failed (exit 1): {MARKUP}" if rep == 2 else None))
        found.append(outcome(agent="noop", rep=rep, status="failed", tokens=None, cost=None, seconds=0.2,
                             reason="tests failed (exit 1)"))
    found.append(outcome(agent="gamma", rep=1, status="timeout", tokens=500, cost=None, seconds=60.0,
                         reason="agent timed out after 60 s"))
    found.append(outcome(agent="gamma", rep=2, status="error", tokens=None, cost=None, seconds=0.1,
                         reason=f"harness fault: token {SECRET} rejected"))
    found.append(outcome(case="fix-mul", agent="alpha", rep=1, tokens=1500, cost=0.02, seconds=4.0))
    found.append(outcome(case="fix-mul", agent="beta", rep=1, status="failed", tokens=2500, cost=0.04, seconds=9.0,
                         reason="resource limit: memory (512 MiB)", extra={"limit_hit": {"limit": "memory"}}))
    for arm, tokens in (("baseline", 2000), ("docs", 1000)):
        for rep in (1, 2, 3):
            found.append(outcome(
                case="q1", kind="trial", arm=arm, agent="alpha", rep=rep, tokens=tokens + 10 * rep + 3 * rep * rep, cost=None,
                status="passed" if arm == "docs" else "failed", source="/suite/ports.toml", used_tool=arm == "docs",
                answer_score={"correct": arm == "docs", "recall": 1.0 if arm == "docs" else 0.5, "missing": [], "forbidden": []},
                claim={"status": "valid", "false_pass": rep == 3, "false_fail": False} if arm == "docs" else None,
                extra={"trial": "ports"}, baseline_arm="baseline"))
    return found


def history() -> list:
    """Earlier sessions' task runs (the history store's), for the history-wide Elo."""
    return [outcome(agent=a, rep=1, session_id=f"s0{i}", status="passed" if a == "alpha" or i == 1 else "failed",
                    started=f"2025-12-0{i}T00:00:00+00:00") for i in (1, 2) for a in ("alpha", "beta")]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("views") / "out"
    for o in runs():
        run_dir = out / "runs" / o.case / o.arm / o.agent / str(o.rep)
        run_dir.mkdir(parents=True)
        (run_dir / "prompt.txt").write_text(f"Fix {o.case}. {MARKUP}\n")
        if o.kind == "task":
            log = "".join(f"log line {i}\n" for i in range(3000)) if o.status == "failed" else "2 passed\n"
            (run_dir / "tests.log").write_text(log)
            (run_dir / "diff.patch").write_text("--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-    return a - b\n+    return a + b\n")
            (run_dir / "raw.err").write_text(f"warning: {MARKUP}\n")
        if o.rep == 1:
            write_trajectory(run_dir, o)  # rep 2 runs: the transcript is built from the record and prompt.txt
        write_run(run_dir, o)
    return out


def normalised(text: str, out: Path) -> str:
    text = text.replace(str(out), "<OUT>")
    text = re.sub(r"Generated \d{4}-\d\d-\d\dT[\d:]+\+00:00", "Generated <TIME>", text)
    text = re.sub(r"generated \d{4}-\d\d-\d\dT[\d:]+\+00:00 · Python [^<]*? on [^<]*? · ", "generated <TIME> · <SYSTEM> · ", text)
    return re.sub(r"pytest-agentrace \d[^\s<·]*", "pytest-agentrace <VERSION>", text)


@pytest.mark.parametrize("name", list(FILES))
def test_outputs_print_the_recorded_figures(folder: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRACE_GOLDEN_API_KEY", SECRET)
    from pytest_agentrace.record.runfile import iter_runs

    scored = score_outcomes([o for _, o in iter_runs(folder)], per_session=False)
    context = Context(out=folder, session={"id": "sess-1", "git_sha": "0123456789abcdef0123", "args": ["--agentrace"]},
                      options={"reps": 2, "timeout": None}, seed=7, resamples=300, paths={"html": folder / "report.html"},
                      full_report="https://ci.example/run/1")
    result = build_result(scored, context, history=score_outcomes(history() + scored))
    text = normalised(formats.by_name(name).render(result), folder)
    assert SECRET not in text
    golden = GOLDEN / FILES[name]
    if not golden.exists():  # recorded once, from the code before the change (see the module docstring)
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")
