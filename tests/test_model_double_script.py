"""Model scripts: strict loading (errors name file and key), defaults, step choice, usage sums."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentrace.errors import SpecError
from pytest_agentrace.model_double.script import TurnUsage, load_script

EXAMPLES = Path(__file__).parents[1] / "example_suites" / "offline" / "scripts"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "script.yaml"
    p.write_text(text)
    return p


def test_defaults_and_sums(tmp_path) -> None:
    s = load_script(write(tmp_path, "steps:\n  - shell: make\n  - write: {path: a/b.py, content: x}\n    usage: {input: 5, output: 1, cache_read: 2}\n  - text: done\n"))
    assert [st.kind for st in s.steps] == ["shell", "write", "text"]
    assert s.steps[0].usage == TurnUsage(1000, 50) and s.steps[1].usage == TurnUsage(5, 1, 2, 0)
    assert s.total_usage() == TurnUsage(2005, 101, 2, 0)
    assert (s.side_text, s.side_usage) == ("Scripted title", TurnUsage(300, 5))
    assert s.name == "script" and len(s.id) == 12 and s.final_text == "done"


def test_step_choice_past_the_end_and_with_loop(tmp_path) -> None:
    s = load_script(write(tmp_path, "turns:\n  - shell: a\n  - text: end\n"))
    assert [s.step_for(i).kind for i in range(4)] == ["shell", "text", "text", "text"]
    loop = load_script(write(tmp_path, "loop: true\nusage: {input: 7, output: 3}\nsteps:\n  - shell: a\n  - shell: b\n"))
    assert [loop.step_for(i).command for i in range(5)] == ["a", "b", "a", "b", "a"]
    assert loop.steps[0].usage == TurnUsage(7, 3) and loop.final_text is None


def test_example_scripts_load() -> None:
    solve = load_script(EXAMPLES / "solve-fibonacci.yaml")
    assert [s.kind for s in solve.steps] == ["write", "shell", "text"]
    assert solve.total_usage() == TurnUsage(4300, 185)
    nothing = load_script(EXAMPLES / "do-nothing.yaml")
    assert [s.kind for s in nothing.steps] == ["text"]


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ("steps:\n  - shel: ls\n  - text: x\n", "steps[0].shel", "did you mean 'shell'"),
        ("steps:\n  - shell: ls\n    text: x\n", "steps[0]", "exactly one of shell, write, text"),
        ("steps:\n  - text: early\n  - text: late\n", "steps[0]", "can only be the last step"),
        ("steps:\n  - shell: ls\n", "steps[0]", "last step must be a text step"),
        ("steps: []\n", "steps", "is empty"),
        ("name: x\n", "steps", "required key is missing"),
        ("steps:\n  - text: x\n    usage: {input: -1}\n", "steps[0].usage.input", "0 or more"),
        ("steps:\n  - text: x\n    usage: {inputs: 3}\n", "steps[0].usage.inputs", "did you mean 'input'"),
        ("steps:\n  - text: x\n    error: {status: 200}\n", "steps[0].error.status", "400-599"),
        ("steps:\n  - text: x\n    error: {status: 429, times: 0}\n", "steps[0].error.times", "1 or more"),
        ("steps:\n  - write: {path: ../x, content: y}\n  - text: x\n", "steps[0].write.path", "escapes the workspace"),
        ("steps:\n  - write: {path: x}\n  - text: x\n", "steps[0].write.content", "required key is missing"),
        ("steps:\n  - text: x\n    delay: -2\n", "steps[0].delay", "0 or more seconds"),
        ("loop: yes please\nsteps:\n  - text: x\n", "loop", "true/false"),
    ],
)
def test_bad_scripts_name_the_key(tmp_path, text, key, message) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as err:
        load_script(path)
    assert err.value.key == key and message in str(err.value) and str(path) in str(err.value)


def test_missing_file_and_bad_yaml(tmp_path) -> None:
    with pytest.raises(SpecError, match="cannot read the model script"):
        load_script(tmp_path / "nope.yaml")
    with pytest.raises(SpecError, match="not a valid YAML model script at line 2"):  # the unclosed [ (context mark)
        load_script(write(tmp_path, "steps:\n  - text: [unclosed\n"))
    with pytest.raises(SpecError, match="YAML mapping"):
        load_script(write(tmp_path, "- text: x\n"))
