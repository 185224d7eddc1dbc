"""Answers judged as answers: a trial agent that dumps 40 KB (its whole workspace) as its answer is incorrect
before any ``expect`` pattern is tried, a short right answer passes, and ``forbid`` keeps working; serially and
under xdist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script

BOT = r"""
import os, sys
mode = os.environ["MODE"]
if mode == "dump":  # every file, many times over: the expected "8123" is in there somewhere
    text = "".join(open(f).read() for f in sorted(os.listdir(".")) if f.endswith(".py")) + "port 8123\n"
    print((text * (40_000 // len(text) + 1))[:40_000] + "port 8123")
elif mode == "short":
    print("The server listens on port 8123.")
elif mode == "forbidden":
    print("It listens on 8123 or maybe 9000.")
"""
TRIAL = """\
name = "answers"

[defaults]
timeout = 30
{defaults}

[[repos]]
name = "app"
source = "repo"

{agents}
[[questions]]
id = "port"
prompt = "Which port?"
expect = ["8123"]
forbid = ["9000"]
{question}
"""


def agents(*modes: str) -> str:
    return "".join(f'[[agents]]\nname = "{m}"\ncommand = ["bot", "{{prompt}}"]\nenv = {{ MODE = "{m}" }}\n\n'
                   for m in modes)


def session(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str], defaults: str = "", question: str = "",
            modes=("dump", "short", "forbidden")) -> dict[str, dict]:
    write_script(bin_dir / "bot", BOT)
    if not (pytester.path / "repo").exists():
        make_repo(pytester.path / "repo", BUGGY_REPO)
    (pytester.path / "trial.toml").write_text(TRIAL.format(defaults=defaults, question=question, agents=agents(*modes)))
    pytester.runpytest("--agentrace", "--agentrace-out", "out", *xdist)
    records = [json.loads(p.read_text()) for p in (pytester.path / "out").glob("runs/**/run.json")]
    return {r["agent"]: r for r in records}


def test_a_dumped_answer_is_incorrect_and_a_short_one_passes(pytester: pytest.Pytester, bin_dir: Path,
                                                             xdist: list[str]) -> None:
    runs = session(pytester, bin_dir, xdist)
    dump = runs["dump"]
    assert (dump["status"], dump["reason"]) == ("failed", "answer longer than 4000 characters")
    assert dump["answer_score"]["correct"] is False and dump["answer_score"]["too_long"] > 40_000
    assert dump["usage"]["answer_chars"] > 40_000  # the whole answer's length, though the record keeps its end
    assert runs["short"]["status"] == "passed", runs["short"]["reason"]
    forbidden = runs["forbidden"]
    assert (forbidden["status"], forbidden["reason"]) == ("failed", "answer incorrect: forbidden pattern matched: 9000")


def test_max_answer_chars_from_defaults_and_question(pytester: pytest.Pytester, bin_dir: Path) -> None:
    """``[defaults]`` sets the limit for every question, a question's own ``max_answer_chars`` wins."""
    runs = session(pytester, bin_dir, [], defaults="max_answer_chars = 10", modes=("short",))
    assert runs["short"]["reason"] == "answer longer than 10 characters"
    runs = session(pytester, bin_dir, [], defaults="max_answer_chars = 10", question="max_answer_chars = 50000",
                   modes=("dump",))
    assert runs["dump"]["status"] == "passed", runs["dump"]["reason"]
