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
elif mode == "peek":  # the question's hidden checks, committed in the repo the trial file lies beside
    print(f"port 8123; hidden files seen: {sorted(os.listdir('hidden')) if os.path.exists('hidden') else 'none'}")
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


def test_hidden_files_committed_in_the_repo_stay_out_of_the_workspace(pytester: pytest.Pytester, bin_dir: Path,
                                                                      xdist: list[str]) -> None:
    """A question's ``verify_files`` folder inside its repo, the trial file outside it: the agent's workspace holds
    none of the hidden files (so do the other questions'), and ``verify`` still gets them."""
    make_repo(pytester.path / "repo", {**BUGGY_REPO, "hidden/test_h.py": "def test_h():\n    assert True\n",
                                       "hidden2/test_i.py": "def test_i():\n    assert True\n"})
    question = ('verify = "python -m pytest -q -p no:cacheprovider test_h.py"\nverify_files = "repo/hidden"\n\n'
                '[[questions]]\nid = "other"\nprompt = "?"\nexpect = ["8123"]\nverify = "true"\nverify_files = "repo/hidden2"\n')
    session(pytester, bin_dir, xdist, question=question, modes=("peek",))
    records = [json.loads(p.read_text()) for p in (pytester.path / "out").glob("runs/**/run.json")]
    assert sorted(r["case"] for r in records) == ["other", "port"]
    for r in records:
        assert r["usage"]["answer"].strip() == "port 8123; hidden files seen: none", r["usage"]["answer"]
        assert r["status"] == "passed" and r["checks"]["verify"]["exit_code"] == 0, r["reason"]


@pytest.mark.parametrize(("verify_files", "arm", "found"), [
    ("repo", "", "holds repo 'app'"),
    (".", "", "holds repo 'app'"),
    ("ov/hidden", '[[arms]]\nname = "plain"\n\n[[arms]]\nname = "docs"\noverlay = "ov"\n', "overlay .* overlap"),
])
def test_hidden_files_that_would_reach_the_workspace_are_refused(tmp_path: Path, verify_files: str, arm: str,
                                                                 found: str) -> None:
    """A ``verify_files`` folder that is the repo's own folder or holds it, or overlaps an arm's overlay, cannot be
    left out of the agent's workspace: the loader refuses it, naming the key and the fix."""
    from pytest_agentrace.errors import SpecError
    from pytest_agentrace.spec.trial import load_trial

    make_repo(tmp_path / "repo", BUGGY_REPO)
    (tmp_path / "ov" / "hidden").mkdir(parents=True)
    (tmp_path / "ov" / "hidden" / "test_h.py").write_text("def test_h():\n    pass\n")
    text = TRIAL.format(defaults="", agents=agents("short"), question=f'verify = "true"\nverify_files = "{verify_files}"\n')
    (tmp_path / "trial.toml").write_text(text + "\n" + arm)
    with pytest.raises(SpecError, match=r"key '\[\[questions\]\] 'port'\.verify_files': .*" + found):
        load_trial(tmp_path / "trial.toml")
