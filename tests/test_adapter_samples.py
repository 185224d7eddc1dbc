"""Every recorded CLI output in tests/samples parses to the figures in its expectation file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.adapters import SAMPLES

from pytest_agentrace.agents import get_adapter
from pytest_agentrace.cli.parse import JSON_KEYS, parse_file, usage_json

AGENT_DIRS = ("aider", "claude", "codex", "copilot", "cursor", "gemini", "opencode")  # model-double-requests/ is server input
SAMPLE_FILES = sorted(
    p for p in SAMPLES.glob("*/*") if p.is_file() and p.parent.name in AGENT_DIRS and not p.name.endswith(".expected.json")
)


def _ids(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


def test_there_are_samples_for_all_seven_agents():
    assert {p.parent.name for p in SAMPLE_FILES} == set(AGENT_DIRS)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=_ids)
def test_sample_has_expectation_and_provenance_row(path: Path):
    assert Path(f"{path}.expected.json").is_file(), f"add {path.name}.expected.json"
    assert f"`{path.parent.name}/{path.name}`" in (SAMPLES / "README.md").read_text(), "add the provenance row to README.md"


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=_ids)
def test_sample_parses_to_expected_figures(path: Path, tmp_path: Path):
    exp = json.loads(Path(f"{path}.expected.json").read_text())
    assert exp["agent"] == path.parent.name
    stdout = path.parent / exp["stdout"] if exp["stdout"] else tmp_path / "empty"
    if not exp["stdout"]:
        stdout.write_text("")
    side = {k: str(path.parent / v) for k, v in exp.get("side", {}).items()}
    got = usage_json(parse_file(exp["agent"], str(stdout), **side))
    assert list(got) == list(JSON_KEYS)
    assert got == exp["usage"]


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=_ids)
def test_parse_through_the_adapter_reads_side_files_from_the_run_folder(path: Path, tmp_path: Path):
    """A run's parse (``adapter.parse(stdout, stderr, ctx)``) finds the OTel/analytics file in the run folder
    and gives the same figures as the expectation (before pricing, which no sample needs: none is priced)."""
    from helpers.adapters import make_ctx

    exp = json.loads(Path(f"{path}.expected.json").read_text())
    adapter = get_adapter(exp["agent"])
    ctx = make_ctx(tmp_path, name=exp["agent"])
    for key, rel in exp.get("side", {}).items():
        (ctx.run_dir / adapter.side_files[key]).write_text((path.parent / rel).read_text())
    stdout = (path.parent / exp["stdout"]).read_text() if exp["stdout"] else ""
    got = usage_json(adapter.parse(stdout, "", ctx))
    expected = dict(exp["usage"])
    # apply_pricing (done by `agentrace parse`) may add a "no price for model" warning; parse alone does not
    expected["warnings"] = [w for w in expected["warnings"] if not w.startswith("no price for model")]
    assert got == expected
