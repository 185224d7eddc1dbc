"""Harbor task folders (task.toml + instruction.md) as tasks: the strict loader, the reward as the verify result, and
whole sessions (serial and ``-n 2``) under the real sandbox with Harbor's paths (/app, /tests, /logs)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers.atif import check_folder

from pytest_agentrace.cli import main
from pytest_agentrace.errors import SpecError
from pytest_agentrace.run.harbor import NEEDS_SANDBOX, read_reward
from pytest_agentrace.run.sandbox import probe
from pytest_agentrace.spec.harbor import VERIFY_COMMAND, load_harbor_task

EXAMPLE = Path(__file__).parents[1] / "example_suites" / "harbor" / "word-count"
needs_bwrap = pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")

# a second task: solve.sh checks the agent's view (workspace at /app, /logs/agent writable, no /tests) and leaves a
# mark; test.sh checks the verifier's view and gives a partial reward for the mark
PATHS_SOLVE = """#!/bin/bash
set -e
test -d /app && test -f /solution/solve.sh && test ! -e /tests && test ! -e /logs/verifier
echo agent-log > /logs/agent/note.txt
test . -ef /app
echo seen > /app/seen.txt
"""
PATHS_TEST = """#!/bin/bash
[ "$PWD" = /app ] || { echo 0 > /logs/verifier/reward.txt; exit 0; }
test -f /tests/test.sh && test ! -e /solution && test -f /logs/agent/note.txt \
  || { echo 0 > /logs/verifier/reward.txt; exit 0; }
if [ -f /app/seen.txt ]; then echo '{"reward": 0.5, "style": 1}' > /logs/verifier/reward.json
else echo 0 > /logs/verifier/reward.txt; fi
exit 3
"""


def harbor_task(folder: Path, toml: str, solve: str | None, test: str, dockerfile: str | None = None) -> Path:
    """A Harbor task folder: task.toml, instruction.md, tests/test.sh, solution/solve.sh, environment/Dockerfile."""
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(toml)
    (folder / "instruction.md").write_text("Leave a mark in /app.\n")
    (folder / "tests" / "test.sh").write_text(test)
    if solve is not None:
        (folder / "solution").mkdir()
        (folder / "solution" / "solve.sh").write_text(solve)
    if dockerfile is not None:
        (folder / "environment").mkdir()
        (folder / "environment" / "Dockerfile").write_text(dockerfile)
    return folder / "task.toml"


def test_example_loads_as_a_task() -> None:
    task = load_harbor_task(EXAMPLE)
    assert (task.name, task.path, task.difficulty, task.timeout) == ("word-count", EXAMPLE / "task.toml", "easy", 300.0)
    assert task.description == (EXAMPLE / "instruction.md").read_text()
    assert task.verify_command == VERIFY_COMMAND and task.test_command == ""
    h = task.harbor
    assert (h.verify_timeout, h.workdir, h.keywords, h.environment) == (120.0, "/app", ("python", "text"), None)
    assert h.tests == EXAMPLE / "tests" and h.solution == EXAMPLE / "solution"
    assert h.ignored == ("environment.build_timeout_sec",)
    assert len(task.content_hash) == 64


@pytest.mark.parametrize(("toml", "key", "words"), [
    ("[agent]\ntimeout_secs = 10\n", "agent.timeout_secs", "did you mean 'timeout_sec'"),
    ("[verifer]\ntimeout_sec = 10\n", "verifer", "did you mean 'verifier'"),
    ("[agent]\ntimeout_sec = -1\n", "agent.timeout_sec", "greater than 0"),
    ("[[steps]]\nname = 'one'\n", "steps", "multi-step"),
    ("[environment]\nos = 'windows'\n", "environment.os", "not supported"),
    ("[task]\nname = 'acme/'\n", "task.name", "org/name"),
    ("schema_version = [1\n", None, "not valid TOML"),
])
def test_bad_task_toml_names_the_key(tmp_path: Path, toml: str, key: str | None, words: str) -> None:
    path = harbor_task(tmp_path / "t", toml, None, "echo 1 > /logs/verifier/reward.txt\n")
    with pytest.raises(SpecError) as info:
        load_harbor_task(path)
    assert info.value.key == key and words in str(info.value) and str(path) in str(info.value)
    if key in ("agent.timeout_secs", "agent.timeout_sec", "environment.os", "task.name"):  # the key's own line
        assert str(info.value).endswith(f"(line {path.read_text().splitlines().index(toml.splitlines()[1]) + 1})")


def test_missing_test_sh_and_empty_instruction(tmp_path: Path) -> None:
    path = harbor_task(tmp_path / "t", "", None, "")
    (tmp_path / "t" / "tests" / "test.sh").unlink()
    with pytest.raises(SpecError, match="tests/test.sh"):
        load_harbor_task(path)
    (tmp_path / "t" / "tests" / "test.sh").write_text("")
    (tmp_path / "t" / "instruction.md").write_text("  \n")
    with pytest.raises(SpecError, match="instruction.md.*is empty"):
        load_harbor_task(path)


def test_metadata_keywords_limits_and_a_dockerfile_that_does_more(tmp_path: Path) -> None:
    toml = ("[task]\nname = 'acme/mark'\nkeywords = ['a']\n[metadata]\ndifficulty = 'hard'\ntags = ['b', 'a']\n"
            "anything = 1\n[environment]\nmemory_mb = 512\nenv = {X = '1'}\n[verifier]\nenv = {Y = '2'}\n")
    dockerfile = "FROM ubuntu:24.04\nRUN apt-get install -y jq\n"
    task = load_harbor_task(harbor_task(tmp_path / "t", toml, None, "", dockerfile))
    assert (task.name, task.difficulty, task.harbor.keywords, task.env) == ("mark", "hard", ("a", "b"), {"X": "1"})
    assert task.limits.memory == 512 * 1024 * 1024 and task.harbor.verifier_env == {"Y": "2"}
    assert task.harbor.solution is None
    assert "RUN apt-get install -y jq" in task.harbor.environment and "may differ" in task.harbor.environment


@pytest.mark.parametrize(("name", "text", "want"), [
    ("reward.txt", "1\n", (1.0, None, None)),
    ("reward.txt", "0.25", (0.25, None, None)),
    ("reward.json", '{"reward": 1, "style": 0.5}', (1.0, {"reward": 1.0, "style": 0.5}, None)),
    ("reward.json", "0", (0.0, None, None)),
    ("reward.txt", "yes", (None, None, "/logs/verifier/reward.txt holds 'yes', not a number")),
    ("reward.json", '{"reward": true}', (None, None, "/logs/verifier/reward.json holds no finite number(s)")),
    ("reward.txt", "nan", (None, None, "reward.txt: not a finite number")),
])
def test_read_reward(tmp_path: Path, name: str, text: str, want: tuple) -> None:
    (tmp_path / name).write_text(text)
    assert read_reward(tmp_path) == want


def test_reward_json_wins_and_links_are_not_followed(tmp_path: Path) -> None:
    assert read_reward(tmp_path)[2].startswith("no reward")
    (tmp_path / "reward.txt").write_text("0")
    (tmp_path / "reward.json").write_text("1")
    assert read_reward(tmp_path) == (1.0, None, None)
    secret = tmp_path / "secret"
    secret.write_text("1")
    (tmp_path / "reward.json").unlink()
    (tmp_path / "reward.txt").unlink()
    (tmp_path / "reward.txt").symlink_to(secret)
    assert read_reward(tmp_path)[0] is None and "cannot be read" in read_reward(tmp_path)[2]


def runs(out: Path) -> dict[tuple[str, str], dict]:
    return {(d["case"], d["agent"]): d for d in (json.loads(p.read_text()) for p in out.glob("runs/**/run.json"))}


@needs_bwrap
def test_harbor_folders_run_unchanged_in_harbors_layout(pytester: pytest.Pytester, xdist: list[str]) -> None:
    shutil.copytree(EXAMPLE, pytester.path / "suite" / "word-count")
    harbor_task(pytester.path / "suite" / "paths", "[task]\nname = 'acme/paths'\n", PATHS_SOLVE, PATHS_TEST,
                "FROM ubuntu:24.04\nRUN pip install jq\n")
    items = [x for x in pytester.runpytest("--agentrace", "--collect-only", "-q", "suite").stdout.lines if "::" in x]
    assert sorted(items) == ["suite/paths/task.toml::paths[noop-r1]", "suite/paths/task.toml::paths[oracle-r1]",
                             "suite/word-count/task.toml::word-count[noop-r1]",
                             "suite/word-count/task.toml::word-count[oracle-r1]"]  # tests/test_outputs.py is no test
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "suite", *xdist)
    res.assert_outcomes(passed=1, failed=1, xfailed=2)
    found = runs(pytester.path / "out")
    oracle, noop = found[("word-count", "oracle")], found[("word-count", "noop")]
    assert oracle["status"] == "passed" and oracle["extra"]["reward"] == 1.0 and oracle["checks"]["verify"]["passed"]
    assert noop["status"] == "failed" and noop["extra"]["reward"] == 0.0
    assert noop["reason"] == "verify failed (reward 0)"
    assert oracle["checks"]["verify"]["command"] == "cd /app && bash /tests/test.sh"
    assert oracle["lines_added"] > 10 and "count_words" in (
        pytester.path / "out/runs/word-count/default/oracle/1/diff.patch").read_text()
    paths = found[("paths", "oracle")]  # every path check of solve.sh and test.sh held: the partial reward
    assert paths["status"] == "failed" and paths["reason"] == "verify failed (reward 0.5)", paths["reason"]
    assert paths["extra"]["rewards"] == {"reward": 0.5, "style": 1.0} and paths["extra"]["verify_exit_code"] == 3
    assert found[("paths", "noop")]["extra"]["reward"] == 0.0
    text = res.stdout.str()
    assert text.count("Harbor task word-count: environment/Dockerfile not built") == 1
    line = next(x for x in res.stdout.lines if "Harbor task paths:" in x)
    assert "does more than pick a base image ('RUN pip install jq'" in line
    assert check_folder(pytester.path / "out") == 4
    assert not any(p.name.startswith("test_") for p in (pytester.path / "out").rglob("*.py"))


@needs_bwrap
def test_the_oracle_offline_runs_its_script_without_a_model_and_without_a_network(pytester: pytest.Pytester) -> None:
    """Under ``--agentrace-offline`` with a model double script for the session, the Harbor oracle runs
    ``solve.sh`` as is (no double around it, no price from one), in a namespace with no network."""
    shutil.copytree(EXAMPLE, pytester.path / "suite" / "word-count")
    solve = pytester.path / "suite" / "word-count" / "solution" / "solve.sh"
    solve.write_text(solve.read_text() + "\ncurl -sS --max-time 3 http://example.com >/dev/null 2>&1 && exit 9 || true\n")
    (pytester.path / "script.yaml").write_text("steps:\n  - text: done\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "suite", "--agentrace-agent", "oracle",
                             "--agentrace-offline", "--agentrace-model-double", "script.yaml")
    res.assert_outcomes(passed=1)
    oracle = runs(pytester.path / "out")[("word-count", "oracle")]
    argv = json.loads((pytester.path / "out/runs/word-count/default/oracle/1/argv.json").read_text())
    assert argv == ["bash", "/solution/solve.sh"] and oracle["extra"]["network_mode"] == "none"
    assert oracle["usage"]["cost_source"] == "none" and oracle["usage"]["cost_usd"] is None


@needs_bwrap
def test_an_agent_of_ones_own_named_oracle_still_gets_the_model_double(pytester: pytest.Pytester) -> None:
    """Only the Harbor oracle that runs ``solve.sh`` goes without a model double: an agent of one's own that is
    merely named ``oracle`` (its own command) is put in front of the double like any other."""
    shutil.copytree(EXAMPLE, pytester.path / "word-count")
    (pytester.path / "script.yaml").write_text("steps:\n  - text: done\n")
    agent = "{name: oracle, command: 'sh -c \"echo base=$OPENAI_BASE_URL\"'}"
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-agent", agent,
                             "--agentrace-model-double", "script.yaml", "word-count")
    res.assert_outcomes(failed=1)
    run_dir = pytester.path / "out/runs/word-count/default/oracle/1"
    url = (run_dir / "raw.out").read_text().strip().removeprefix("base=")
    assert url.startswith("http://") and url.endswith("/v1"), url
    assert (run_dir / "model-double.json").is_file()  # the double served the run (no request came)


@needs_bwrap
def test_validate_and_an_agent_of_ones_own(pytester: pytest.Pytester) -> None:
    shutil.copytree(EXAMPLE, pytester.path / "word-count")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-validate", "word-count")
    res.assert_outcomes(passed=2)
    assert any("word-count" in x and "| valid" in x for x in res.stdout.lines)
    agent = "{name: writer, command: 'sh -c \"echo count_words = len > /app/wordcount.py\"'}"
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out2", "--agentrace-agent", agent, "word-count")
    res.assert_outcomes(failed=1)
    run = runs(pytester.path / "out2")[("word-count", "writer")]
    assert run["files_changed"] == 1 and run["extra"]["reward"] == 0.0


FILL = "python3 -c \"import os, sys\nfor i in range(8):\n    open(os.path.join(sys.argv[1], 'f%d' % i), 'wb').write(bytes(4 << 20))\" "
FILL_TEST = "#!/bin/bash\npython3 -c \"import os\nfor i in range(8):\n    open('/logs/verifier/f%d' % i, 'wb').write(bytes(4 << 20))\"\necho 1 > /logs/verifier/reward.txt\n"


@needs_bwrap
def test_harbors_writable_folders_count_against_the_disk_limit(pytester: pytest.Pytester) -> None:
    """What an agent writes into /logs/agent, and the verifier's code into /logs/verifier, counts against
    ``--agentrace-disk`` as the workspace does (each folder the box shows writable): 32 MiB of 4 MiB files, each
    under the per-file limit, stopped a run limited to 8 MiB in all."""
    harbor_task(pytester.path / "fill", "[task]\nname = 'acme/fill'\n", None, FILL_TEST)
    agent = "{name: logs, command: '" + FILL.replace("'", "''") + "/logs/agent'}"
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-disk", "8M", "--agentrace-agent", agent,
                             "--agentrace-agent", "noop", "fill")
    found = runs(pytester.path / "out")
    logs, noop = found[("fill", "logs")], found[("fill", "noop")]
    assert logs["status"] == "failed" and logs["reason"].startswith("resource limit: disk"), logs["reason"]
    assert noop["status"] == "failed" and noop["reason"].startswith("resource limit: disk"), noop["reason"]
    assert noop["reason"].endswith("in the verify check"), noop["reason"]
    res.assert_outcomes(failed=1, xfailed=1)


def test_without_the_sandbox_a_harbor_run_is_an_error(pytester: pytest.Pytester) -> None:
    shutil.copytree(EXAMPLE, pytester.path / "word-count")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-sandbox", "off", "word-count")
    assert res.ret != 0
    found = runs(pytester.path / "out")
    assert {k: (v["status"], v["reason"]) for k, v in found.items()} == {
        ("word-count", "oracle"): ("error", NEEDS_SANDBOX), ("word-count", "noop"): ("error", NEEDS_SANDBOX)}
    assert not os.path.exists("/app")


def test_tasks_list_shows_harbor_tasks(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "word-count")
    harbor_task(tmp_path / "more", "", None, "", "FROM x\nCOPY . /app\n")
    assert main(["tasks", "list", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    table = {r[0]: r[1:] for r in ([c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()
                                    if line.startswith("| ") and not line.startswith("| Name"))}
    assert table["word-count"][0] == "harbor" and table["word-count"][2:4] == ["easy", "reward (tests/test.sh)"]
    assert table["more"][0] == "harbor" and table["more"][2:4] == ["-", "reward (tests/test.sh) *"]
    assert table["word-count"][1].startswith(str(tmp_path / "word-count"))
    assert "2 task(s)" in out and "* environment/Dockerfile does more" in out


def test_sandbox_mounts_bind_last_over_a_root_of_the_hosts_entries(tmp_path: Path) -> None:
    from pytest_agentrace.run.sandbox import Mount, Sandbox

    plain, _ = Sandbox("bwrap").wrap(["true"], writable=[tmp_path], home=None, env={})
    assert ["--ro-bind", "/", "/"] not in [plain[i:i + 3] for i in range(len(plain))]  # an allow-list root, always
    argv, _ = Sandbox("bwrap").mounting(Mount(tmp_path, "/app", writable=True), Mount(tmp_path, "/tests")).wrap(
        ["true"], writable=[tmp_path], home=None, env={})
    assert ["--ro-bind", "/", "/"] not in [argv[i:i + 3] for i in range(len(argv))]
    assert ["--ro-bind", "/usr", "/usr"] == argv[argv.index("/usr") - 1:argv.index("/usr") + 2]
    # the mounts come after the writable folders, then the root is made read-only
    tail = argv[argv.index("--"):][:1], argv[argv.index("--") - 8:argv.index("--")]
    assert tail == (["--"], ["--bind", str(tmp_path), "/app", "--ro-bind", str(tmp_path), "/tests", "--remount-ro", "/"])
