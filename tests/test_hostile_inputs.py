"""Files from elsewhere (task, trial and Harbor files, results folders, cassettes) never reach past what they name:
no variable of theirs routes the agent's traffic (and the user's key), no link of theirs is followed out of their
folder, no size of theirs is read or copied without a bound."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pytest_agentrace.errors import SpecError
from pytest_agentrace.spec.common import parse_agent
from pytest_agentrace.spec.harbor import MAX_FOLDER_BYTES, load_harbor_task
from pytest_agentrace.spec.select import wanted_agents
from pytest_agentrace.spec.task import load_task
from pytest_agentrace.spec.trial import load_trial
from pytest_agentrace.strict import routes_traffic

HARBOR = Path(__file__).resolve().parents[1] / "example_suites" / "harbor" / "word-count"


@pytest.mark.parametrize("name", ["ANTHROPIC_BASE_URL", "openai_base_url", "OPENAI_API_BASE", "AZURE_OPENAI_ENDPOINT",
                                  "GOOGLE_GEMINI_BASE_URL", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "NO_PROXY"])
def test_a_task_files_env_may_not_route_traffic(tmp_path: Path, name: str) -> None:
    assert routes_traffic(name)
    task = tmp_path / "evil.yaml"
    task.write_text(f'name: evil\ndescription: hi\ntest_command: "true"\nenv:\n  LANG: C\n  {name}: "http://127.0.0.1:47123"\n')
    with pytest.raises(SpecError, match=f"key 'env.{name}': routes the agent's traffic"):
        load_task(task)


def test_a_files_agent_entry_may_not_route_traffic_but_the_command_line_may(tmp_path: Path) -> None:
    trial = tmp_path / "trial.toml"
    (tmp_path / "app").mkdir()
    trial.write_text('[[repos]]\nname = "app"\nsource = "app"\n[[arms]]\nname = "plain"\n'
                     '[[agents]]\nname = "claude"\nenv = { ANTHROPIC_BASE_URL = "http://127.0.0.1:47123" }\n'
                     '[[questions]]\nid = "q"\nprompt = "hi"\nexpect = ["x"]\n')
    with pytest.raises(SpecError, match="ANTHROPIC_BASE_URL'?: routes the agent's traffic"):
        load_trial(trial)
    with pytest.raises(SpecError, match="routes the agent's traffic"):
        parse_agent(trial, "agents[0]", {"name": "claude", "env": {"OPENAI_BASE_URL": "http://x"}})
    mine = wanted_agents(["{name: claude, env: {ANTHROPIC_BASE_URL: 'http://127.0.0.1:4000'}}"])  # the user's own
    assert mine is not None and mine[0].env == {"ANTHROPIC_BASE_URL": "http://127.0.0.1:4000"}
    assert parse_agent(trial, "agents[0]", {"name": "claude", "env": {"ANTHROPIC_MODEL": "x"}}).env == {"ANTHROPIC_MODEL": "x"}


@pytest.fixture
def harbor(tmp_path: Path) -> Path:
    folder = tmp_path / "task"
    shutil.copytree(HARBOR, folder)
    return folder


@pytest.mark.parametrize("table", ["environment", "verifier", "solution"])
def test_a_harbor_tasks_env_may_not_route_traffic(harbor: Path, table: str) -> None:
    toml = harbor / "task.toml"
    text = toml.read_text()
    assert f"[{table}]" in text or table == "solution"
    if f"[{table}]" not in text:
        text += f"\n[{table}]\n"
    toml.write_text(text.replace(f"[{table}]\n", f'[{table}]\nenv = {{ OPENAI_BASE_URL = "http://127.0.0.1:1" }}\n', 1))
    with pytest.raises(SpecError, match=f"key '{table}.env.OPENAI_BASE_URL': routes"):
        load_harbor_task(harbor)


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_text("VICTIM-SECRET\n")
    (secret.parent / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    return secret


def test_a_harbor_instruction_that_is_a_link_is_refused(harbor: Path, tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    (harbor / "instruction.md").unlink()
    (harbor / "instruction.md").symlink_to(secret)
    with pytest.raises(SpecError, match="instruction.md: is a link or no regular file") as err:
        load_harbor_task(harbor)
    assert "VICTIM" not in str(err.value)
    from pytest_agentrace.spec.harbor import is_harbor_folder

    assert is_harbor_folder(harbor)  # collected, as an error: never passed over without a word


@pytest.mark.parametrize("where", ["tests", "tests/test.sh", "solution", "solution/solve.sh"])
def test_harbor_tests_and_solution_that_are_links_are_refused(harbor: Path, tmp_path: Path, where: str) -> None:
    secret = _secret(tmp_path)
    (secret.parent / "solve.sh").write_text("cat ~/.ssh/id_ed25519\n")
    target = harbor / where
    if target.is_dir():
        shutil.rmtree(target)
        target.symlink_to(secret.parent, target_is_directory=True)
    else:
        target.unlink()
        target.symlink_to(secret.parent / target.name)
    with pytest.raises(SpecError, match="must be a folder and a file of the task's own, not links"):
        load_harbor_task(harbor)


def test_a_harbor_dockerfile_that_is_a_link_is_refused(harbor: Path, tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    dockerfile = harbor / "environment" / "Dockerfile"
    dockerfile.parent.mkdir(exist_ok=True)
    if dockerfile.exists():
        dockerfile.unlink()
    dockerfile.symlink_to(secret)
    with pytest.raises(SpecError, match="Dockerfile: is a link or no regular file") as err:
        load_harbor_task(harbor)
    assert "VICTIM" not in str(err.value)


def test_a_sparse_file_in_a_harbor_task_is_refused_unread(harbor: Path) -> None:
    blob = harbor / "tests" / "blob"
    with open(blob, "wb") as fh:
        fh.truncate(MAX_FOLDER_BYTES + 1)  # no disk used; 1 GiB of zeros if read or copied
    assert os.stat(blob).st_blocks * 512 < 1 << 20
    with pytest.raises(SpecError, match=r"files pass 1073741824 bytes \(at tests/blob\)"):
        load_harbor_task(harbor)
    blob.unlink()
    with open(blob, "wb") as fh:
        fh.truncate(5 << 20)  # within the bound: hashed in chunks, the hash that of 5 MiB of zeros
    before = load_harbor_task(harbor).content_hash
    blob.write_bytes(b"\0" * (5 << 20))
    assert load_harbor_task(harbor).content_hash == before


DEEP = '{"a": ' + "[" * 200_000 + "]" * 200_000 + "}\n"  # past the interpreter's recursion limit


def _results(root: Path) -> Path:
    """A results folder of two runs, each in a session's manifest (record_run), as a session leaves it."""
    from pytest_agentrace.record.manifest import record_run, seal_session
    from pytest_agentrace.record.model import Outcome
    from pytest_agentrace.record.runfile import write_run

    for rep in (1, 2):
        o = Outcome(run_id=f"trial:q/base/a/r{rep}", kind="trial", source="t.toml", case="q", arm="base", agent="a",
                    rep=rep, status="passed", session_id="s1", started="2026-01-01T00:00:00+00:00", exit_code=0)
        run_dir = root / "runs" / "q" / "base" / "a" / str(rep)
        write_run(run_dir, o)
        record_run(root, "s1", o.run_id, run_dir)
    seal_session(root, "s1")
    return root


@pytest.mark.parametrize("where", ["run.json", "manifest line", "manifest", "index", "last-session.json", "seal"])
@pytest.mark.parametrize("command", ["report", "verify", "snapshot", "merge", "export"])
def test_json_nested_past_the_recursion_limit_is_an_unreadable_file_never_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, command: str) -> None:
    from pytest_agentrace import cli

    out = _results(tmp_path / "out")
    assert cli.main(["report", str(out)]) == 0  # the index made
    capsys.readouterr()
    manifests = sorted((out / "manifests").iterdir())
    target = {"run.json": out / "runs/q/base/a/2/run.json", "index": out / "index.jsonl",
              "last-session.json": out / "last-session.json",
              "manifest": out / "manifests" / "deep.json", "seal": out / "manifests" / "s1-deep.seal.json",
              "manifest line": next(p for p in manifests if p.suffix == ".jsonl")}[where]
    with open(target, "a" if where in ("manifest line", "index") else "w") as fh:
        fh.write(DEEP)
    args = {"report": [str(out)], "verify": [str(out)], "snapshot": [str(out), "-o", str(tmp_path / "s.json")],
            "merge": [str(out), "--to", str(tmp_path / "m")], "export": [str(out), "-o", str(tmp_path / "x.json")]}[command]
    code = cli.main([command, *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err
    assert code in (0, 1, 2)


def test_a_session_into_a_folder_with_a_deep_manifest_line_keeps_its_runs_and_history(pytester: pytest.Pytester,
                                                                                       xdist: list[str]) -> None:
    pytester.makefile(".yaml", t='name: hello\ndescription: hi\ntest_command: "true"\nagents: [noop]\n')
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", *xdist)
    assert res.ret == 1  # noop: a baseline expected to fail, its xpass strict
    line = next((pytester.path / "out" / "manifests").glob("*.jsonl"))
    with open(line, "a") as fh:
        fh.write(DEEP)
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", *xdist)
    assert "INTERNALERROR" not in res.stdout.str() + res.stderr.str() and res.ret == 1
    assert "saved 1 runs of session" in res.stdout.str()


def test_a_cassette_is_saved_through_no_link_and_a_deep_one_is_a_cassette_error(tmp_path: Path) -> None:
    from pytest_agentrace.model_double.cassette import Cassette, CassetteError

    victim = tmp_path / "bashrc"
    victim.write_text("own\n")
    path = tmp_path / "cass" / "run.json"
    path.parent.mkdir()
    for name in ("run.json", "run.json.tmp"):
        (path.parent / name).symlink_to(victim)
    Cassette("r1").save(path)
    assert victim.read_text() == "own\n" and not path.is_symlink() and Cassette.load(path).run_id == "r1"
    path.unlink()
    path.write_text(DEEP)
    with pytest.raises(CassetteError, match="not a readable JSON cassette: JSON nested deeper than 64 levels"):
        Cassette.load(path)


def test_the_atif_export_redacts_and_follows_no_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A results folder from elsewhere: its trajectories are exported redacted, and a ``trajectory.json`` or
    ``prompt.txt`` that is a link is not read (the trajectory is built from the run's record instead)."""
    import json

    from pytest_agentrace import cli

    out = _results(tmp_path / "out")
    key = "sk-ant-api03-" + "A" * 93 + "AA"
    one, two = out / "runs/q/base/a/1", out / "runs/q/base/a/2"
    (one / "trajectory.json").write_text(json.dumps({"schema_version": "ATIF-v1.8", "session_id": "s",
                                                     "steps": [{"step_id": 1, "source": "user", "message": f"use {key}",
                                                                f"ghp_{'b' * 36}": 1}]}))
    host = tmp_path / "hostfile"
    host.write_text('{"HOST": "SECRET"}')
    (two / "trajectory.json").symlink_to(host)
    (two / "prompt.txt").symlink_to(host)
    assert cli.main(["export", str(out), "--format", "atif", "-o", str(tmp_path / "x.jsonl")]) == 0
    text = (tmp_path / "x.jsonl").read_text()
    assert key not in text and "ghp_" + "b" * 36 not in text and "<redacted" in text
    assert "SECRET" not in text and len(text.splitlines()) == 2
    assert cli.main(["export", str(one), "--format", "atif", "-o", str(tmp_path / "one.json")]) == 0
    assert key not in (tmp_path / "one.json").read_text()


def test_what_a_command_prints_from_a_folder_is_shown_never_acted_on(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Escape sequences in a folder's names and records reach neither standard error nor piped standard output nor
    an ``-o`` text file raw (OSC 52 sets the clipboard, a title or cursor move rewrites the screen)."""
    import json

    from pytest_agentrace import cli
    from pytest_agentrace.record.model import Outcome
    from pytest_agentrace.record.runfile import write_run

    out = _results(tmp_path / "out")
    hostile = "x\x1b]52;c;cHduZWQ=\x07\x1b]0;PWNED\x07\x1b[2K\u202e"
    o = Outcome(run_id="trial:q/base/a/r9", kind="trial", source="t.toml", case="q", arm="base", agent="a", rep=9,
                status="failed", reason=f"broke {hostile}", session_id="s2", started="2026-01-01T00:00:00+00:00",
                exit_code=1)
    write_run(out / "runs" / hostile / "9", o)  # in no manifest: named on standard error
    assert cli.main(["report", str(out)]) == 0
    got = capsys.readouterr()
    assert "added after its session" in got.err and "\\x1b]52" in got.err
    for stream in (got.out, got.err):
        assert "\x1b" not in stream and "\x07" not in stream and "\u202e" not in stream
    assert cli.main(["report", str(out), "--format", "text", "-o", str(tmp_path / "r.txt")]) == 0
    assert "\x1b" not in (tmp_path / "r.txt").read_text() and "\x1b" not in capsys.readouterr().err
    assert cli.main(["export", str(out), "-o", str(tmp_path / "x.json")]) == 0
    assert json.loads((tmp_path / "x.json").read_text())["totals"]["runs"] == 3  # JSON: as the format writes it


def test_a_harbor_task_toml_that_is_a_link_is_refused(harbor: Path, tmp_path: Path) -> None:
    host = tmp_path / "host.toml"
    host.write_text((harbor / "task.toml").read_text())
    (harbor / "task.toml").unlink()
    (harbor / "task.toml").symlink_to(host)
    with pytest.raises(SpecError, match="task.toml: is a link or no regular file"):
        load_harbor_task(harbor)
