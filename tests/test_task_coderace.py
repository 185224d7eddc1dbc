"""coderace 2.0's own task-file forms load unchanged, each key with coderace's meaning, and an agent of one's own
can be given on the command line as a YAML flow mapping.

The inputs are small copies of the forms in coderace's repository (github.com/mikiships/coderace, tag v2.0.0):
a built-in task (``coderace/builtins/tasks/*.yaml``: ``difficulty``, verify files, short score keys), the
model-selection example (``examples/model-selection.yaml``: ``name:model`` agents, canonical score keys with
fractional weights), the README's ``pricing:`` block (``input_per_1m`` / ``output_per_1m`` by agent or model name)
and the template ``coderace init`` writes (``coderace/task.py`` ``create_template``)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from pytest_agentrace.agents.pricing import apply_pricing
from pytest_agentrace.errors import SpecError
from pytest_agentrace.record.model import CostSource, Usage
from pytest_agentrace.spec.common import AgentSpec, parse_agent
from pytest_agentrace.spec.task import load_task
from pytest_agentrace.stats.score import weights

BUILTIN_FORM = """\
name: state-machine
difficulty: medium-hard
description: |
  Implement a finite state machine in `state_machine.py`.
repo: .
test_command: python3 -m pytest test_state_machine.py -x -q
verify_command: python3 -m pytest verify_state_machine.py -x -q
verify_files:
  verify_state_machine.py: |
    from state_machine import StateMachine

    def test_initial_state():
        sm = StateMachine()
        sm.add_state("a")
        assert sm.current_state == "a"
lint_command: ruff check state_machine.py
timeout: 900
agents:
  - claude
  - codex
  - gemini
  - aider
  - opencode
scoring:
  tests: 25
  verify: 30
  exit: 20
  lint: 15
  time: 5
  lines: 5
"""

MODEL_SELECTION_FORM = """\
# Model Selection Example
# Compare different models of the same agent on the same task.
name: model-comparison
description: |
  Add a `reverse_words(sentence: str) -> str` function to utils.py
repo: .  # Replace with your actual repo path
test_command: pytest tests/ -x -q
lint_command: ruff check . --select E,F --quiet

timeout: 300

# Compare models head-to-head — same task, different models
agents:
  - codex:gpt-5.4
  - codex:gpt-5.3-codex
  - claude:opus-4-6
  - claude:sonnet-4-6

# Custom scoring: emphasize correctness over speed for model comparison
scoring:
  tests_pass: 0.50
  exit_clean: 0.25
  lint_clean: 0.15
  wall_time: 0.05
  lines_changed: 0.05
"""

README_PRICING_FORM = """\
name: priced
description: d
test_command: echo ok
agents:
  - claude
  - codex
# pricing: per-agent or per-model overrides (USD per 1M tokens)
pricing:
  claude:
    input_per_1m: 3.00    # default for claude-sonnet-4-6
    output_per_1m: 15.00
  codex:
    input_per_1m: 3.00
    output_per_1m: 15.00
  # Or use the model name directly:
  claude-opus-4-6:
    input_per_1m: 15.00
    output_per_1m: 75.00
"""

# what `coderace init my-task` writes (coderace/task.py create_template), optional blocks commented out
INIT_TEMPLATE_FORM = """\
name: my-task
description: |
  Describe the task here. What should the agent fix or build?
  Be specific about which files to change and what the expected behavior is.
repo: .
test_command: pytest tests/ -x
lint_command: ruff check .
timeout: 300
agents:
  - claude
  - codex
  - aider
  - opencode
# Optional: customize scoring weights (defaults shown, will be normalized)
# scoring:
#   tests: 40
# Optional: verification test suite (written into workspace after test_command)
# verify_command: python3 -m pytest verify_tests.py -x -q
# Optional: override pricing for cost tracking (USD per 1M tokens)
# pricing:
#   claude:
#     input_per_1m: 3.00   # override if using a non-default model
#     output_per_1m: 15.00
"""

VERIFY_CANONICAL_FORM = BUILTIN_FORM.replace(
    """\
scoring:
  tests: 25
  verify: 30
  exit: 20
  lint: 15
  time: 5
  lines: 5
""",
    """\
scoring:
  tests_pass: 0.25
  verify_passed: 0.30
  exit_clean: 0.20
  lint_clean: 0.15
  wall_time: 0.05
  lines_changed: 0.05
""",
)


def load(tmp_path: Path, text: str, name: str = "task.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return load_task(p)


def test_builtin_form(tmp_path: Path) -> None:
    task = load(tmp_path, BUILTIN_FORM)
    assert task.difficulty == "medium-hard"
    assert [a.id for a in task.agents] == ["claude", "codex", "gemini", "aider", "opencode"]
    assert task.timeout == 900.0 and task.verify_command and list(task.verify_files) == ["verify_state_machine.py"]
    assert task.repo == str(tmp_path)  # `repo: .` is the task file's folder (coderace: the current directory)
    assert weights(True, task.scoring) == pytest.approx(
        {"tests": 0.25, "verify": 0.30, "exit": 0.20, "lint": 0.15, "time": 0.05, "lines": 0.05}
    )


def test_model_selection_form_canonical_score_keys(tmp_path: Path) -> None:
    task = load(tmp_path, MODEL_SELECTION_FORM)
    assert [(a.name, a.model) for a in task.agents] == [
        ("codex", "gpt-5.4"),
        ("codex", "gpt-5.3-codex"),
        ("claude", "opus-4-6"),
        ("claude", "sonnet-4-6"),
    ]
    # coderace's canonical keys mean the short ones: tests_pass = tests, exit_clean = exit, ...
    assert task.scoring == {"tests": 0.50, "exit": 0.25, "lint": 0.15, "time": 0.05, "lines": 0.05}
    assert weights(False, task.scoring) == pytest.approx(
        {"tests": 0.50, "exit": 0.25, "lint": 0.15, "time": 0.05, "lines": 0.05}
    )


def test_canonical_and_short_keys_weigh_the_same(tmp_path: Path) -> None:
    short = load(tmp_path, BUILTIN_FORM, "short.yaml")
    canonical = load(tmp_path, VERIFY_CANONICAL_FORM, "canonical.yaml")
    assert weights(True, canonical.scoring) == pytest.approx(weights(True, short.scoring))


def test_readme_pricing_form_prices_by_agent_and_by_model(tmp_path: Path) -> None:
    task = load(tmp_path, README_PRICING_FORM)
    assert task.pricing == {
        "claude": {"input": 3.0, "output": 15.0},
        "codex": {"input": 3.0, "output": 15.0},
        "claude-opus-4-6": {"input": 15.0, "output": 75.0},
    }
    tokens = Usage(input_tokens=2_000_000, output_tokens=100_000, cache_read_tokens=0, cache_write_tokens=0)
    # keyed by agent name: 2M x $3 + 0.1M x $15 = 7.5
    u = apply_pricing(tokens, AgentSpec(name="codex", id="codex"), task.pricing)
    assert u.cost_usd == pytest.approx(7.5) and u.cost_source == CostSource.PRICED
    # keyed by model name (no entry for the agent): 2M x $15 + 0.1M x $75 = 37.5
    only_model = {k: v for k, v in task.pricing.items() if k == "claude-opus-4-6"}
    u = apply_pricing(
        tokens, AgentSpec(name="claude", id="claude:claude-opus-4-6", model="claude-opus-4-6"), only_model
    )
    assert u.cost_usd == pytest.approx(37.5)


def test_init_template_form(tmp_path: Path) -> None:
    task = load(tmp_path, INIT_TEMPLATE_FORM)
    assert task.name == "my-task" and task.lint_command == "ruff check ." and not task.scoring and not task.pricing
    assert [a.id for a in task.agents] == ["claude", "codex", "aider", "opencode"]


def test_free_form_difficulty_levels(tmp_path: Path) -> None:
    base = "name: t\ndescription: d\ntest_command: x\n"
    assert load(tmp_path, base + "difficulty: Medium-Hard\n").difficulty == "Medium-Hard"  # kept as written
    assert load(tmp_path, base + "difficulty: expert\n").difficulty == "expert"
    assert load(tmp_path, base + "difficulty: 3\n").difficulty == "3"  # coderace reads str(difficulty)


def test_zero_prices_are_a_free_tier(tmp_path: Path) -> None:
    task = load(
        tmp_path,
        "name: t\ndescription: d\ntest_command: x\npricing:\n  claude: {input_per_1m: 0.0, output_per_1m: 0.0}\n",
    )
    u = apply_pricing(Usage(input_tokens=10, output_tokens=10), AgentSpec(name="claude", id="claude"), task.pricing)
    assert u.cost_usd == 0.0 and not math.isnan(u.cost_usd)


# --- --agentrace-agent as a YAML flow mapping ------------------------------------------------------------------


def test_flow_mapping_agent_spec() -> None:
    spec = parse_agent(
        Path("--agentrace-agent"),
        "--agentrace-agent",
        "{name: writer, command: 'python3 w.py {prompt_file}', kind: plain}",
        check_known=False,
    )
    assert (spec.name, spec.id, spec.command, spec.kind) == (
        "writer",
        "writer",
        ("python3", "w.py", "{prompt_file}"),
        "plain",
    )
    spec = parse_agent(Path("x"), "k", "{name: codex, model: gpt-5}")
    assert (spec.id, spec.model, spec.command) == ("codex:gpt-5", "gpt-5", None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{name: x, command: my-agent {prompt}}", "not a valid YAML flow mapping: expected ',' or '}'"),
        ("{name: x, comand: y}", "unknown key (did you mean 'command'?)"),
        ("{command: y}", "'k.name': required key is missing"),
        ("{name:x,command:y}", "'k.name:x': unknown key (did you mean 'name'?): YAML flow mappings need a space after "
                               "':' (write name: x)"),
        ("{name: x, command:y}", "'k.command:y': unknown key (did you mean 'command'?): YAML flow mappings need a space "
                                 "after ':' (write command: y)"),
    ],
)
def test_flow_mapping_errors(text: str, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_agent(Path("--agentrace-agent"), "k", text, check_known=False)
    assert message in str(exc.value)


WRITER = """\
import pathlib
pathlib.Path("utils.py").write_text("def reverse_words(s):\\n    return ' '.join(reversed(s.split()))\\n")
"""


def test_a_coderace_file_runs_with_an_agent_given_as_a_flow_mapping(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    """The model-selection form (canonical score keys), with the README's pricing block and a free-form
    difficulty, runs with only its commands and repo changed; the agent comes from ``--agentrace-agent '{name: ...,
    command: ...}'`` (rejected before as ``unknown agent '{name'``) and the file is chosen by
    ``--agentrace-difficulty medium-hard``."""
    starter = pytester.path / "starter"
    starter.mkdir()
    (starter / "check_utils.py").write_text(
        "from utils import reverse_words\nassert reverse_words('hello world') == 'world hello'\n"
    )
    (pytester.path / "writer.py").write_text(WRITER)
    pricing = README_PRICING_FORM[README_PRICING_FORM.index("# pricing:") :]
    text = (
        MODEL_SELECTION_FORM.replace("pytest tests/ -x -q", "python check_utils.py")
        .replace("ruff check . --select E,F --quiet", "python -c pass")
        .replace("repo: .  #", "repo: starter  #")
        .replace("timeout: 300", "timeout: 60\ndifficulty: medium-hard")
    ) + pricing
    (pytester.path / "task.yaml").write_text(text)
    (pytester.path / "other.yaml").write_text(
        "name: other\ndescription: d\ntest_command: 'false'\ndifficulty: hard\nagents: [noop]\n"
    )
    agent = f"{{name: writer, command: ['{sys.executable}', '{pytester.path / 'writer.py'}']}}"
    res = pytester.runpytest(
        "--agentrace",
        "--agentrace-no-save",
        "--agentrace-agent",
        agent,
        "--agentrace-difficulty",
        "medium-hard",
        "-v",
        *xdist,
    )
    assert res.ret == pytest.ExitCode.OK, res.stdout.str()
    res.stdout.re_match_lines(
        [r".*PASSED.*task.yaml::model-comparison\[writer-r1\]|.*task.yaml::model-comparison\[writer-r1\].*PASSED"]
    )
    assert "other.yaml::" not in res.stdout.str()
    row = next(line for line in res.stdout.lines if line.startswith("|") and " writer " in line)
    assert row.split("|")[3].strip() == "100"  # one passing run earns every part of the file's canonical weights
