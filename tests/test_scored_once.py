"""Work a session does once, counted in the pytester session's own processes (a ``conftest.py`` there wraps the
functions and writes its counts to a file per process): each task run's composite score is computed once per
session (``stats.score.score_group``), with the HTML, Markdown, JSON and JUnit outputs all requested, serial and
under pytest-xdist; the task file is parsed once per process (``spec.task.read_yaml``), the export's reading of its
settings included; an outcome's dict is made once where its run is recorded and read back once by the controller
(plus the JSON export's own, when asked for)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

TASK = ("name: fix-add\ndescription: Fix add().\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        "timeout: 60\nagents:\n  - {name: fixer, command: fixer}\n  - {name: lazy, command: lazy}\n")

# the runs' own test commands (pytest in the run's clone, under this folder) see this conftest too, without the package
COUNTING_CONFTEST = '''
import json, os
from collections import Counter
try:
    from pytest_agentrace.record import model
    from pytest_agentrace.spec import task
    from pytest_agentrace.stats import score
except ImportError:
    model = score = task = None

SCORED, DICTS, PARSED = Counter(), Counter(), Counter()
if score is not None:
    _group, _to, _from = score.score_group, model.Outcome.to_dict, model.Outcome.from_dict.__func__
    _read = task.read_yaml


def read_yaml(path):
    PARSED[os.path.basename(str(path))] += 1
    return _read(path)


def score_group(outcomes, *args, **kwargs):
    outcomes = list(outcomes)
    SCORED.update(o.run_id for o in outcomes)
    return _group(outcomes, *args, **kwargs)


def to_dict(self, *args, **kwargs):
    DICTS["to_dict"] += 1
    return _to(self, *args, **kwargs)


def from_dict(cls, *args, **kwargs):
    DICTS["from_dict"] += 1
    return _from(cls, *args, **kwargs)


if score is not None:
    score.score_group = score_group
    model.Outcome.to_dict = to_dict
    model.Outcome.from_dict = classmethod(from_dict)
    task.read_yaml = read_yaml


def pytest_unconfigure(config):
    if score is None or "COUNTS_DIR" not in os.environ:
        return
    name = config.workerinput["workerid"] if hasattr(config, "workerinput") else "controller"
    with open(os.path.join(os.environ["COUNTS_DIR"], name + ".json"), "w") as fh:
        json.dump({"scored": SCORED, "dicts": DICTS, "parsed": PARSED}, fh)
    score.score_group, model.Outcome.to_dict, model.Outcome.from_dict = _group, _to, classmethod(_from)  # in-process
    task.read_yaml = _read
'''


def test_each_outcome_is_scored_once_per_session(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    write_script(bin_dir / "lazy", "print('I changed nothing')\n")
    (pytester.path / "task.yaml").write_text(TASK)
    pytester.makeconftest(COUNTING_CONFTEST)
    counts_dir = pytester.path / "counts"
    counts_dir.mkdir()
    monkeypatch.setenv("COUNTS_DIR", str(counts_dir))
    res = pytester.runpytest(
        "--agentrace", "--agentrace-reps=2", "--agentrace-no-save", "--agentrace-resamples=200",
        "--agentrace-html=r.html", "--agentrace-md=r.md", "--agentrace-json=r.json", "--junitxml=j.xml",
        "-p", "no:cacheprovider", *xdist)
    res.assert_outcomes(passed=2, failed=2)
    for name in ("r.html", "r.md", "r.json", "j.xml"):
        assert (pytester.path / name).is_file(), name
    per_process = {p.stem: json.loads(p.read_text()) for p in counts_dir.glob("*.json")}
    assert set(per_process) == ({"controller", "gw0", "gw1"} if xdist else {"controller"})
    scored: Counter = Counter()
    for found in per_process.values():
        scored.update(found["scored"])
    run_ids = {run["run_id"] for run in json.loads((pytester.path / "r.json").read_text())["runs"]}
    assert len(run_ids) == 4
    assert scored == dict.fromkeys(run_ids, 1)
    # the JUnit score property is written once, with the session's final score (the fixer passed, the lazy one not)
    xml = (pytester.path / "j.xml").read_text()
    assert xml.count('name="agentrace.score"') == 4
    # the task file is parsed once per process, the reports' reading of its settings included
    assert all(found["parsed"] == {"task.yaml": 1} for name, found in per_process.items() if name != "controller" or not xdist)
    assert per_process["controller"]["parsed"] in ({}, {"task.yaml": 1})
    # an outcome's dicts, per process: the record's dict is made once per run, where the run is recorded (its
    # run.json, then the payload its item sends to the controller, from the same dict: Outcome.record), and read back
    # once, by the controller taking the payload; the results index checks each run.json against the payload it
    # equals instead of parsing it again; redaction works field by field; Markdown and HTML read typed fields. The
    # one other dict is the JSON export's (--agentrace-json asked for it), in the controller.
    dicts = {name: Counter(found["dicts"]) for name, found in per_process.items()}
    index = (pytester.path / ".agentrace" / "index.jsonl").read_text().splitlines()
    assert len(index) == 1 + 4 and all('"record"' in line for line in index[1:])  # the 4 run.json indexed, all readable
    if xdist:
        assert dicts["gw0"] + dicts["gw1"] == {"to_dict": 4}, dicts  # the 4 records, each where its run ran
        assert dicts["controller"] == {"to_dict": 4, "from_dict": 4}, dicts  # the export; the 4 payloads read
    else:
        assert dicts["controller"] == {"to_dict": 4 + 4, "from_dict": 4}, dicts
