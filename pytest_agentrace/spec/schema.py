"""The shipped JSON Schemas of task files (YAML) and trial files (TOML): ``pytest_agentrace/schemas/task.schema.json``
and ``trial.schema.json``, made by ``spec.task.task_schema`` and ``spec.trial.trial_schema`` from the loaders' own key
tables (``tests/test_spec_schema.py`` proves the shipped files equal them). ``python -m pytest_agentrace.spec.schema``
writes them. Editors use them through yaml-language-server (``# yaml-language-server: $schema=...``) and Even
Better TOML (``#:schema ...``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pytest_agentrace.spec.task import task_schema
from pytest_agentrace.spec.trial import trial_schema

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
SCHEMAS = {"task": task_schema, "trial": trial_schema}


def schema_text(kind: str) -> str:
    """The shipped file's text for ``kind`` (``task`` or ``trial``): sorted keys, two-space indent."""
    return json.dumps(SCHEMAS[kind](), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # regenerate the shipped schemas
    for name in SCHEMAS:
        (SCHEMA_DIR / f"{name}.schema.json").write_text(schema_text(name), encoding="utf-8")
        print(SCHEMA_DIR / f"{name}.schema.json")
