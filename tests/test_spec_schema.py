"""The JSON Schemas of task and trial files: shipped as generated from the loaders' key tables, they accept every
example file, and the loaders report every key and type error of a file at once, each with its line."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from pytest_agentrace.errors import SpecError
from pytest_agentrace.spec import common, task, trial
from pytest_agentrace.spec.lines import key_path
from pytest_agentrace.spec.schema import SCHEMA_DIR, schema_text
from pytest_agentrace.spec.task import load_task, task_schema
from pytest_agentrace.spec.trial import load_trial, trial_schema

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kind", ["task", "trial"])
def test_shipped_schema_equals_the_generated_one(kind: str) -> None:
    shipped = (SCHEMA_DIR / f"{kind}.schema.json").read_text(encoding="utf-8")
    assert shipped == schema_text(kind), "run: python -m pytest_agentrace.spec.schema"
    Draft202012Validator.check_schema(json.loads(shipped))


def test_schemas_hold_exactly_the_loaders_keys() -> None:
    t = task_schema()
    assert list(t["properties"]) == list(task.TASK_KEYS) and t["required"] == list(task.REQUIRED)
    assert list(t["properties"]["agents"]["items"]["anyOf"][1]["properties"]) == list(common.AGENT_KEYS)
    assert list(t["properties"]["limits"]["properties"]) == list(common.LIMIT_KEYS)
    r = trial_schema()
    assert list(r["properties"]) == list(trial.TOP_KEYS)
    for table, keys in (("defaults", trial.DEFAULTS_KEYS),):
        assert list(r["properties"][table]["properties"]) == list(keys)
    for table, keys in (("repos", trial.REPO_KEYS), ("arms", trial.ARM_KEYS), ("agents", trial.AGENT_KEYS),
                        ("questions", trial.QUESTION_KEYS)):
        assert list(r["properties"][table]["items"]["properties"]) == list(keys)


def test_every_example_file_passes_its_schema() -> None:
    tasks = [p for p in (ROOT / "example_suites").rglob("*.yaml") if task.is_task_data(yaml.safe_load(p.read_text()))]
    trials = [p for p in (ROOT / "example_suites").rglob("*.toml") if "questions" in tomllib.loads(p.read_text())]
    assert len(tasks) >= 20 and trials
    for paths, schema, read in ((tasks, task_schema(), yaml.safe_load), (trials, trial_schema(), tomllib.loads)):
        validator = Draft202012Validator(schema)
        for p in paths:
            errors = [e.message for e in validator.iter_errors(read(p.read_text()))]
            assert not errors, (p, errors)


BAD_TASK = """\
name: t
description: d
test_command: 'true'
timeout: soon
agents:
  - noop
  - {name: x, comand: 'y {prompt}'}
scoring:
  tests: 1
  speed: 2
lint_comand: ruff
"""


def test_a_task_file_reports_every_error_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(BAD_TASK)
    with pytest.raises(SpecError) as err:
        load_task(path)
    text = str(err.value)
    assert err.value.key == "lint_comand" and "(did you mean 'lint_command'?)" in text and "(line 11)" in text
    assert "3 more errors:" in text
    assert "\n  line 4: key 'timeout': 'soon' is not of type 'number'" in text
    assert "\n  line 7: key 'agents[1].comand': unknown key (did you mean 'command'?)" in text
    assert "\n  line 10: key 'scoring.speed': unknown key" in text


BAD_TRIAL = """\
name = "t"

[defaults]
reps = "three"

[[repos]]
name = "app"
source = "."

[[agents]]
name = "noop"
modle = "x"

[[questions]]
id = "q1"
prompt = "Why?"

[[questions]]
id = "q2"
prompt = "How?"
min_recal = 0.5
"""


def test_a_trial_file_reports_every_error_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "trial.toml"
    path.write_text(BAD_TRIAL)
    with pytest.raises(SpecError) as err:
        load_trial(path)
    text = str(err.value)
    lines = text.splitlines()
    assert len(lines) == 3, text  # the loader's first error, then the two others
    found = {line.strip().split(":")[0] for line in lines[1:]}
    first = lines[0]
    assert "(line " in first
    # the three errors, wherever the loader met its first: reps (line 4), modle (line 12), min_recal (line 21)
    every = {"line 4": "defaults.reps", "line 12": "agents[0].modle", "line 21": "questions[1].min_recal"}
    named = [f"{n}" for n in every if n in first or n in found]
    assert sorted(named) == sorted(every), text
    assert "(did you mean 'model'?)" in text and "(did you mean 'min_recall'?)" in text


def test_key_labels_become_paths() -> None:
    assert key_path("agents[2].command") == ["agents", 2, "command"]
    assert key_path("[defaults].reps") == ["defaults", "reps"]
    assert key_path("scoring.tests") == ["scoring", "tests"]


def test_schema_command_prints_the_shipped_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_agentrace.cli import main

    assert main(["schema", "trial"]) == 0
    assert capsys.readouterr().out == schema_text("trial")
    assert main(["schema", "task", "-o", str(tmp_path / "task.schema.json")]) == 0
    assert (tmp_path / "task.schema.json").read_text() == schema_text("task")


def test_a_missing_required_key_is_named_as_its_key(tmp_path: Path) -> None:
    """A required key the file lacks, among other errors, is reported by its own key name, at the line of the
    table that lacks it (jsonschema says ``'name' is a required property`` of the table's path, the top: ``''``)."""
    path = tmp_path / "task.yaml"
    path.write_text("name: t\ndescription: d\ntimeout: soon\nagents:\n  - {command: 'y {prompt}'}\n")
    with pytest.raises(SpecError) as err:
        load_task(path)
    text = str(err.value)
    assert "key ''" not in text and "is a required property" not in text
    assert "key 'test_command': required key is missing; add it" in text
    assert "key 'agents[0].name': required key is missing; add it" in text
