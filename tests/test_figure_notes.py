"""The summary and the HTML run view say how each run's figures were read: cut output, parse warnings, and why
a cell has no tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script
from helpers.adapters import SAMPLES

CLAUDE_SAMPLE = SAMPLES / "claude" / "captured-2.1.197-stream-json-bash-tool.jsonl"


def test_summary_and_html_show_cut_output_parse_warnings_and_unknown_tokens(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)  # plain: stdout is its answer, no tokens
    # the real Claude Code capture with one line broken in the middle: a parse warning, figures from the rest
    lines = CLAUDE_SAMPLE.read_text().splitlines()
    broken = "\n".join([lines[0], lines[1][:40], *lines[2:]]) + "\n"
    write_script(bin_dir / "brokenclaude", FIXER + f"import sys\nsys.stdout.write({broken!r})\n")
    write_script(bin_dir / "flooder", FIXER + "import sys\nfor _ in range(12):\n    sys.stdout.write('y' * 1_000_000)\n")
    (pytester.path / "task.yaml").write_text(
        "name: t\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        "agents: [{name: fixer, command: fixer}, {name: brokenclaude, command: brokenclaude, kind: claude},"
        " {name: flooder, command: flooder}]\n"
    )
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-html", "report.html", *xdist)
    res.assert_outcomes(passed=3)
    out = res.stdout.str()
    row = {name: next(line for line in out.splitlines() if line.startswith("|") and f" {name} " in line) for name in ("fixer", "brokenclaude", "flooder")}
    assert " unknown " in row["fixer"] and " 2,260 " in row["brokenclaude"]
    # fixer and flooder share the note: it is said once, with the runs that have it
    assert ("  tokens unknown: a plain command reports no token counts (kind: plain reads only its stdout) "
            "(2 runs: fixer, flooder)") in out
    # FIXER prints one plain line first (line 1), so the broken event is line 3
    assert f"  brokenclaude: parse warnings: line 3: malformed JSON: {lines[1][:40]}; 1 non-JSON line(s) ignored" in out
    assert "  flooder: raw.out cut: 1,514,254 of 12,000,014 bytes dropped from the middle (the file marks the place); figures printed there are missing" in out
    run = json.loads((pytester.path / "o/runs/t/default/flooder/1/run.json").read_text())
    assert run["usage"]["parse_warnings"][0].startswith("raw.out cut: 1,514,254 of 12,000,014 bytes")
    assert run["usage"]["tokens_note"].startswith("a plain command reports no token counts")
    page = (pytester.path / "report.html").read_text()
    assert "<h4>Notes on the figures</h4>" in page
    assert "<li>raw.out cut: 1,514,254 of 12,000,014 bytes dropped from the middle" in page
    assert "<li>parse warning: line 3: malformed JSON:" in page
    assert "<li>tokens unknown: a plain command reports no token counts" in page


def test_trial_table_notes_and_unknown_tokens(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", {"README.md": "hi\n"})
    write_script(bin_dir / "answerer", "print('The answer is 42.')\n")
    (pytester.path / "trial.toml").write_text(
        'name = "t"\n[[repos]]\nname = "r"\nsource = "repo"\n[[agents]]\nname = "answerer"\ncommand = ["answerer", "{prompt}"]\n'
        '[[questions]]\nid = "q"\nrepo = "r"\nprompt = "What is the answer?"\nexpect = ["42"]\n'
    )
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o")
    res.assert_outcomes(passed=1)
    out = res.stdout.str()
    assert "  q[default-answerer-r1]: tokens unknown: a plain command reports no token counts" in out
    row = next(line for line in out.splitlines() if line.startswith("| q "))
    assert " unknown " in row
