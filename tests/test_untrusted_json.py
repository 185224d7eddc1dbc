"""JSON an agent prints (or a check writes) nested past the interpreter's recursion limit: ``json.loads`` raises
``RecursionError``, no ``ValueError``, so a parser catching only the latter made an agent's garbage a harness fault
(an uncounted ``error``); a document nested just below the limit parsed, and recursive walks of it afterwards
could fail. ``untrusted.loads`` refuses both as malformed JSON; the run is judged on its change, the line recorded
as a parse warning. A ``pyproject.toml`` nested past the limit (``tomllib`` recurses) is reset whole."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, BUGGY_TASK, make_repo, write_script

from pytest_agentrace import untrusted
from pytest_agentrace.agents.parsing import load_events, summarize
from pytest_agentrace.run.machinery import merge_config

DEEP = "[" * 100_000 + "]" * 100_000
SHALLOW_DEEP = "[" * 500 + "]" * 500  # parses, but deeper than any agent's event


def test_loads_refuses_what_nests_too_deep() -> None:
    for text in (DEEP, SHALLOW_DEEP, '{"a":' * 70 + "1" + "}" * 70):
        with pytest.raises(ValueError, match="nested deeper than 64 levels"):
            untrusted.loads(text)
    assert untrusted.loads('{"a": [1, {"b": [2]}]}') == {"a": [1, {"b": [2]}]}
    assert untrusted.loads("[" * 64 + "]" * 64) is not None  # at the limit
    with pytest.raises(ValueError):
        untrusted.loads("{not json")
    assert untrusted.depth({"a": [[1]], "b": 2}) == 3 and untrusted.depth(5) == 0


def test_an_agents_deep_json_is_a_parse_warning_not_a_crash() -> None:
    with pytest.raises(RecursionError):  # the hole, as the standard library has it
        json.loads(DEEP)
    events = load_events(DEEP + "\n" + json.dumps({"type": "result", "result": "ok"}))
    assert [e["type"] for e in events.events] == ["result"] and events.warnings[0].startswith("line 1: malformed JSON")
    assert load_events(DEEP).events == []  # one whole document that does not parse: no event
    assert summarize(DEEP, 40).startswith("[[[[")  # a tool call's arguments: shown as text


def test_a_pyproject_nested_too_deep_is_reset_whole() -> None:
    mine = ("[project]\nname = 'x'\n[tool.pytest.ini_options]\naddopts = '-q'\n[tool.other]\na = " + DEEP[:20_000]
            + "]" * 0 + "\n").encode()
    assert merge_config("pyproject.toml", mine, b"[project]\nname = 'x'\n", ("pytest*",)) is None


CLAUDE_DEEP = """\
import json, pathlib, sys
p = pathlib.Path("calc.py")
p.write_text(p.read_text().replace("a - b", "a + b"))
print("[" * 100000 + "]" * 100000)
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "fixed", "num_turns": 1,
                  "usage": {"input_tokens": 10, "output_tokens": 5}}))
"""


def test_a_session_records_the_run_on_its_merits(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "deepjson", CLAUDE_DEEP)
    (pytester.path / "task.yaml").write_text(BUGGY_TASK + "agents:\n  - {name: deep, command: 'deepjson {prompt}', kind: claude}\n")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save", "-p", "no:cacheprovider",
                       *xdist)
    (record,) = [json.loads(p.read_text()) for p in (pytester.path / "out" / "runs").rglob("run.json")]
    assert (record["status"], record["reason"]) == ("passed", None), record["reason"]
    assert record["usage"]["output_tokens"] == 5
    assert any("malformed JSON" in w for w in record["usage"]["parse_warnings"])


def test_a_lone_surrogate_reaches_no_sink_whole(tmp_path: Path) -> None:
    """JSON may hold ``"\\ud800"``, no UTF-8 text can: an agent's ``"model": "m\\ud800"`` took the session's end down
    (the history's insert, the HTML report). The parser makes it U+FFFD; the history, every text file the harness
    writes and the HTML report's file links take any string (a file name's undecodable byte too)."""
    from helpers.report import outcome

    from pytest_agentrace.record.safefile import write_text
    from pytest_agentrace.record.store import SessionInfo, Store
    from pytest_agentrace.report.html import _linked, file_href

    assert untrusted.loads('{"model": "m\\ud800", "ok": "\\ud83d\\ude00"}') == {"model": "m\ufffd", "ok": "\U0001F600"}
    assert load_events('{"type": "system", "model": "m\\ud800"}').events == [{"type": "system", "model": "m\ufffd"}]
    odd = outcome(case="q", agent="a\udcff").replace(model="m\ud800", reason="tampered: bad\udcffname.py")
    with Store(tmp_path / "h.db") as store:
        assert store.save_session(SessionInfo("s1"), [odd]) == 1
        (agent, model, reason), = store.conn.execute("SELECT agent, model, reason FROM runs").fetchall()
    assert (agent, model, reason) == ("a\ufffd", "m\ufffd", "tampered: bad\ufffdname.py")
    write_text(tmp_path / "r.md", "model m\ud800\n")
    assert (tmp_path / "r.md").read_text(encoding="utf-8") == "model m\ufffd\n"
    run = tmp_path / "run"
    (run / "outbox").mkdir(parents=True)
    bad = run / "outbox" / os.fsdecode(b"bad\xffname.txt")
    bad.write_text("x")
    assert file_href(bad, tmp_path) == "run/outbox/bad%FFname.txt"
    assert "outbox/bad\\xffname.txt</a>" in _linked([bad], run, tmp_path)
