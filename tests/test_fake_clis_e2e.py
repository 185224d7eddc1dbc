"""Issue 3 acceptance: fake claude, codex, aider, gemini, opencode, cursor-agent and copilot executables on PATH
replay recorded output and fix the bug; one task races all seven through ``pytest --agentrace``.

Each fake records the argv and environment it was started with, replays a sample from tests/samples to stdout
(aider also writes its analytics log, copilot its OTel export, where the argv/env tell them to) and edits
calc.py. The summary table must show each agent's parsed tokens and cost, and each argv must be the documented
one. Run serially and under pytest-xdist.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script
from helpers.adapters import SAMPLES
from helpers.atif import check_folder

DESC = "Fix add() in calc.py so that it adds."

FAKE = """\
import json, os, pathlib, shutil, sys
NAME, SAMPLE, VERSION, REC = {name!r}, {sample!r}, {version!r}, pathlib.Path({rec!r})
args = sys.argv[1:]
if args == ["--version"]:
    print(VERSION)
    sys.exit(0)
if args == ["features", "list"]:  # codex: the adapter disables only the features this build lists
    print("apps  stable  true\\nplugins  stable  true\\nremote_plugin  under development  false")
    sys.exit(0)
REC.mkdir(exist_ok=True)
keep = ("HOME", "CODEX_HOME", "XDG_CONFIG_HOME", "GEMINI_CLI_TRUST_WORKSPACE", "COPILOT_OTEL_FILE_EXPORTER_PATH")
(REC / f"{{NAME}}-{{os.getpid()}}.json").write_text(json.dumps({{"argv": args, "cwd": os.getcwd(), "env": {{k: os.environ.get(k) for k in keep}}}}))
calc = pathlib.Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
if NAME == "aider":
    shutil.copy({analytics!r}, args[args.index("--analytics-log") + 1])
if NAME == "copilot":
    shutil.copy({otel!r}, os.environ["COPILOT_OTEL_FILE_EXPORTER_PATH"])
sys.stdout.write(pathlib.Path(SAMPLE).read_text())
"""

# executable -> (sample replayed on stdout, what `--version` prints)
FAKES = {
    "claude": ("claude/captured-2.1.197-stream-json-bash-tool.jsonl", "2.1.197 (Claude Code)"),
    "codex": ("codex/captured-0.171.0-exec-json-command.jsonl", "codex-cli 0.171.0"),
    "aider": ("aider/captured-0.86.2-stdout-whole-edit.txt", "aider 0.86.2"),
    "gemini": ("gemini/captured-0.61.0-stream-json-shell-tool.jsonl", "0.61.0"),
    "opencode": ("opencode/captured-1.18.33-run-json-bash-tool.jsonl", "1.18.33"),
    "cursor-agent": ("cursor/handwritten-stream-json-shell-tool.jsonl", "2026.08.11-e8db854"),
    "copilot": ("copilot/captured-1.0.102-output-json-bash-tool.jsonl", "GitHub Copilot CLI 1.0.102."),
}

TASK = f"""\
name: fix-add
description: {DESC}
repo: repo
test_command: python -m pytest -q test_calc.py
timeout: 120
agents: [claude, "codex:gpt-5", aider, gemini, opencode, cursor, copilot]
pricing:
  gemini: {{input: 0.3, output: 2.5, cache_read: 0.03}}
  opencode: {{input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}
  cursor: {{input: 1.25, output: 10, cache_read: 0.125, cache_write: 1.25}}
  test: {{input: 2, output: 8}}
"""

# the fakes replay recorded samples
# the fakes replay recorded samples from this checkout: the sandbox shows only what it is told to (sandbox.read)
SHOW_SAMPLES: tuple[str, ...] = (f"--agentrace-sandbox-read={Path(__file__).parent / 'samples'}",)

# agent id -> (Tokens column, Cost (USD) column), worked out by hand from the samples:
EXPECTED_TABLE = {
    "claude": ("2,260", "0.0125"),  # total_cost_usd as reported
    "codex:gpt-5": ("2,260", "0.0034 (priced)"),  # 2200 x $1.25/M + 60 x $10/M = 0.00335 (table price of gpt-5)
    "aider": ("1,050", "0.0011"),  # analytics log: 1000 + 50 tokens, total_cost 0.0011
    "gemini": ("2,565", "0.0009 (priced)"),  # 2500 x 0.3/M + 65 x 2.5/M = 0.0009125 (task price for the agent)
    "opencode": ("2,260", "0.0075 (priced)"),  # steps summed: 2200 x 3/M + 60 x 15/M = 0.0075 (its cost 0 = not reported)
    "cursor": ("17,098", "0.0077 (priced)"),  # 4210 x 1.25/M + 88 x 10/M + 12800 x 0.125/M = 0.0077425
    "copilot": ("2,260", "0.0049 (priced)"),  # OTel: 2200 x 2/M + 60 x 8/M = 0.00488 (task price for model "test")
}


def without_shell_policy(argv: list[str]) -> list[str]:
    """``argv`` without Codex's ``-c shell_environment_policy...`` pairs (the run's PATH is in them)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "-c" and i + 1 < len(argv) and argv[i + 1].startswith("shell_environment_policy."):
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def expected_argv(outbox: Path) -> dict[str, list[str]]:
    """Each fake's argv; side files name the run's outbox (run.outbox), never its record folder."""
    return {
        "claude": ["-p", DESC, "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits", "--allowedTools", "Bash"],
        "codex": ["exec", "--json", "-s", "workspace-write", "--disable", "plugins", "--disable", "remote_plugin", "--disable", "apps",
                  "-c", "analytics.enabled=false", "--model", "gpt-5", DESC],
        "aider": ["--message", DESC, "--yes-always", "--no-auto-commits", "--no-pretty", "--no-stream", "--no-check-update",
                  "--no-gitignore", "--analytics-disable", "--no-show-release-notes",
                  "--analytics-log", str(outbox / "aider-events.jsonl")],
        "gemini": ["-p", DESC, "--output-format", "stream-json", "--yolo"],
        "opencode": ["run", "--format", "json", "--auto", "--title", "agentrace", DESC],
        "cursor-agent": ["-p", "--force", "--output-format", "stream-json", DESC],
        "copilot": ["-p", DESC, "--output-format", "json", "--allow-all-tools"],
    }


@pytest.fixture
def only_fakes_on_path(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH = the fakes, this Python, and the system folders (git): no real agent CLI can be found."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), "/usr/bin", "/bin"]))
    return bin_dir


def install_fakes(bin_dir: Path, rec: Path, names=FAKES) -> None:
    for exe in names:
        rel, version = FAKES[exe]
        write_script(bin_dir / exe, FAKE.format(
            name=exe, sample=str(SAMPLES / rel), version=version, rec=str(rec),
            analytics=str(SAMPLES / "aider/captured-0.86.2-analytics-log.jsonl"),
            otel=str(SAMPLES / "copilot/captured-1.0.102-otel-export.jsonl"),
        ))


def task_table(text: str) -> list[list[str]]:
    """The cells of the ranked task table (the first table after the ``task fix-add`` title)."""
    lines = text.split("agentrace ===", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("task fix-add")) + 1
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append([c.strip() for c in line.strip().strip("|").split("|")])
    return [row for row in table if not set(row[0]) <= {"-", ":"}]


def header_cells(text: str) -> list[str]:
    return task_table(text)[0]


def table_rows(text: str) -> dict[str, list[str]]:
    return {row[1]: row for row in task_table(text)[1:]}


def test_seven_fake_clis_race_with_parsed_tokens_cost_and_documented_argv(pytester: pytest.Pytester, only_fakes_on_path: Path, xdist):
    rec = pytester.path / "argv-records"
    install_fakes(only_fakes_on_path, rec)
    make_repo(pytester.path / "repo", BUGGY_REPO)
    (pytester.path / "task.yaml").write_text(TASK)
    # the fakes record their argv outside their workspaces (argv-records): no sandbox here (test_sandbox_attacks.py)
    res = pytester.runpytest("--agentrace", "--agentrace-out", "results", "--agentrace-sandbox", "off", *xdist)
    res.assert_outcomes(passed=7)
    assert check_folder(pytester.path / "results") == 7  # trajectory.json: valid ATIF with run.json's calls and tokens
    text = res.stdout.str()
    cols = header_cells(text)
    rows = table_rows(text)
    assert set(rows) == set(EXPECTED_TABLE)
    for agent, (tokens, cost) in EXPECTED_TABLE.items():
        assert rows[agent][cols.index("Status")] == "passed", rows[agent]
        assert (rows[agent][cols.index("Tokens")], rows[agent][cols.index("Cost (USD)")]) == (tokens, cost), agent

    records = {}
    for path in rec.glob("*.json"):
        data = json.loads(path.read_text())
        records[path.name.rsplit("-", 1)[0]] = data
    assert set(records) == set(FAKES), "each fake ran exactly once"
    run_dirs = pytester.path / "results" / "runs" / "fix-add" / "default"
    aider_log = Path(records["aider"]["argv"][records["aider"]["argv"].index("--analytics-log") + 1])
    # the agent writes its side files to an outbox outside the results folder; they are copied into the record
    assert aider_log.parent.name == "outbox" and run_dirs not in aider_log.parents
    for exe, argv in expected_argv(aider_log.parent).items():
        assert without_shell_policy(records[exe]["argv"]) == argv, exe
    homes = {exe: r["env"]["HOME"] for exe, r in records.items()}
    assert len(set(homes.values())) == 7 and os.environ.get("HOME") not in homes.values()  # one fresh HOME per run
    assert records["codex"]["env"]["CODEX_HOME"] == str(Path(homes["codex"]) / ".codex")
    assert records["gemini"]["env"]["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    otel = Path(records["copilot"]["env"]["COPILOT_OTEL_FILE_EXPORTER_PATH"])
    assert otel.name == "copilot-otel.jsonl" and otel.parent.name == "outbox" and run_dirs not in otel.parents
    # copied out of the outbox, into the record's outbox/: the agent's files, never beside the harness's
    for name in ("aider/1/outbox/aider-events.jsonl", "copilot/1/outbox/copilot-otel.jsonl"):
        assert (run_dirs / name).is_file() and not (run_dirs / name).is_symlink(), name
        assert not (run_dirs / name.replace("outbox/", "")).exists(), name

    outcomes = {p.parts[-3]: json.loads(p.read_text()) for p in run_dirs.glob("*/1/run.json")}
    versions = {agent: o["usage"]["cli_version"] for agent, o in outcomes.items()}
    assert versions == {
        "claude": "2.1.197", "codex:gpt-5": "0.171.0", "aider": "0.86.2", "gemini": "0.61.0", "opencode": "1.18.33",
        "cursor": "2026.08.11-e8db854", "copilot": "1.0.102",
    }
    assert outcomes["codex:gpt-5"]["usage"]["cost_source"] == "priced"
    assert outcomes["claude"]["usage"]["tool_calls"] == [{"name": "Bash", "summary": "printf 'hi\\n' > hello.txt"}]


def test_no_cost_option_hides_tokens_and_cost(pytester: pytest.Pytester, only_fakes_on_path: Path, xdist):
    install_fakes(only_fakes_on_path, pytester.path / "rec", ["claude"])
    make_repo(pytester.path / "repo", BUGGY_REPO)
    (pytester.path / "task.yaml").write_text(TASK.replace('agents: [claude, "codex:gpt-5", aider, gemini, opencode, cursor, copilot]', "agents: [claude]"))
    res = pytester.runpytest("--agentrace", "--agentrace-no-cost", *SHOW_SAMPLES, *xdist)
    res.assert_outcomes(passed=1)
    cols = header_cells(res.stdout.str())
    assert "Agent" in cols and "Tokens" not in cols and "Cost (USD)" not in cols


def test_missing_cli_is_skipped_with_its_name(pytester: pytest.Pytester, only_fakes_on_path: Path, xdist):
    install_fakes(only_fakes_on_path, pytester.path / "rec", ["claude"])
    make_repo(pytester.path / "repo", BUGGY_REPO)
    (pytester.path / "task.yaml").write_text(TASK.replace('agents: [claude, "codex:gpt-5", aider, gemini, opencode, cursor, copilot]', "agents: [claude, codex, cursor]"))
    res = pytester.runpytest("--agentrace", "-rs", *SHOW_SAMPLES, *xdist)
    res.assert_outcomes(passed=1, skipped=2)
    assert any(line.rstrip().endswith(": agent 'codex' not found on PATH") for line in res.stdout.lines)
    assert any(line.rstrip().endswith("agent 'cursor' not found on PATH (looked for cursor-agent)") for line in res.stdout.lines)


AUTH_FAIL = {
    "claude": '{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key \\u00b7 Please run /login","usage":{"input_tokens":0,"output_tokens":0}}\n',
    "codex": (
        '{"type":"thread.started","thread_id":"t"}\n{"type":"turn.started"}\n'
        '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Missing bearer or basic authentication in header"}}\n'
    ),
}


def test_auth_error_output_is_status_error_not_a_failure(pytester: pytest.Pytester, only_fakes_on_path: Path, xdist):
    for exe, out in AUTH_FAIL.items():
        write_script(only_fakes_on_path / exe, f"import sys\nsys.stdout.write({out!r})\nsys.exit(1)\n")
    make_repo(pytester.path / "repo", BUGGY_REPO)
    (pytester.path / "task.yaml").write_text(TASK.replace('agents: [claude, "codex:gpt-5", aider, gemini, opencode, cursor, copilot]', "agents: [claude, codex]"))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "results", *SHOW_SAMPLES, *xdist)
    res.assert_outcomes(errors=2)
    runs = {p.parts[-3]: json.loads(p.read_text()) for p in (pytester.path / "results/runs/fix-add/default").glob("*/1/run.json")}
    assert runs["claude"]["status"] == "error" and "Invalid API key" in runs["claude"]["reason"]
    assert runs["codex"]["status"] == "error" and "401 Unauthorized" in runs["codex"]["reason"]
    assert "tests" not in runs["claude"]["checks"]  # never scored: the checks did not run


def test_custom_command_with_an_adapter_kind_parses_like_that_adapter(pytester: pytest.Pytester, only_fakes_on_path: Path, xdist):
    """``{name: mine, command: "my-wrapper {prompt}", kind: claude}``: the wrapper's output is read as Claude Code's."""
    write_script(only_fakes_on_path / "my-wrapper", f"""\
        import pathlib, sys
        calc = pathlib.Path("calc.py")
        calc.write_text(calc.read_text().replace("a - b", "a + b"))
        sys.stdout.write(pathlib.Path({str(SAMPLES / FAKES["claude"][0])!r}).read_text())
    """)
    write_script(only_fakes_on_path / "my-gemini", f"""\
        import pathlib, sys
        calc = pathlib.Path("calc.py")
        calc.write_text(calc.read_text().replace("a - b", "a + b"))
        sys.stdout.write(pathlib.Path({str(SAMPLES / FAKES["gemini"][0])!r}).read_text())
    """)
    make_repo(pytester.path / "repo", BUGGY_REPO)
    agents = 'agents: [{name: mine, command: "my-wrapper {prompt}", kind: claude}, {name: gem, command: "my-gemini {prompt}", kind: gemini}]'
    (pytester.path / "task.yaml").write_text(TASK.replace('agents: [claude, "codex:gpt-5", aider, gemini, opencode, cursor, copilot]', agents))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "results", *SHOW_SAMPLES, *xdist)
    res.assert_outcomes(passed=2)
    rows = table_rows(res.stdout.str())
    cols = header_cells(res.stdout.str())
    assert (rows["mine"][cols.index("Tokens")], rows["mine"][cols.index("Cost (USD)")]) == ("2,260", "0.0125")
    assert rows["gem"][cols.index("Tokens")] == "2,565"
    mine = json.loads((pytester.path / "results/runs/fix-add/default/mine/1/run.json").read_text())
    assert mine["usage"]["cli_version"] == "2.1.197" and mine["usage"]["turns"] == 2
