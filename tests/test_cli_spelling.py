"""One output spelling on every command that writes a report (``-o/--output FILE``, ``--format text|json|markdown``),
the older spellings kept as aliases, and shell completion (shtab)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentrace.cli import build_parser, main
from pytest_agentrace.record.model import CheckResult, Outcome
from pytest_agentrace.record.runfile import write_run

WRITERS = ("report", "compare", "plan", "ratings", "parse", "leaderboard", "history", "trend", "html", "export",
           "comment", "snapshot", "merge", "render")


def _subparsers() -> dict:
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


@pytest.mark.parametrize("name", WRITERS)
def test_every_report_writer_takes_dash_o_and_output(name: str) -> None:
    flags = {flag for a in _subparsers()[name]._actions for flag in a.option_strings}
    assert {"-o", "--output"} <= flags, name
    formats = next((a.choices for a in _subparsers()[name]._actions if "--format" in a.option_strings), None)
    if name == "render":  # the report formats of report.formats.FORMATS, no text table
        assert formats is not None and {"json", "html", "md", "comment"} <= set(formats)
    elif name not in ("snapshot", "merge", "html", "export", "comment"):  # one format each: JSON, a folder, HTML, Markdown
        assert formats is not None and "json" in formats and ("text" in formats or "terminal" in formats), name


def _results(root: Path) -> Path:
    out = root / "out"
    for rep, status in ((1, "passed"), (2, "failed")):
        o = Outcome(run_id=f"task:t/default/a/r{rep}", kind="task", source="t.yaml", case="t", arm="default", agent="a",
                    rep=rep, status=status,
                    checks={"tests": CheckResult("tests", "pytest", 0 if status == "passed" else 1, 0.1, "tests.log")})
        run_dir = out / "runs" / "t" / "default" / "a" / str(rep)
        run_dir.mkdir(parents=True)
        (run_dir / "tests.log").write_text("log\n")
        write_run(run_dir, o)
    return out


def test_report_output_file_equals_standard_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _results(tmp_path)
    assert main(["report", str(out), "--format", "json"]) == 0
    printed = capsys.readouterr().out
    assert main(["report", str(out), "--format", "json", "-o", str(tmp_path / "r.json")]) == 0
    said = capsys.readouterr()  # standard error also warns that these hand-made records are in no manifest
    assert said.out == "" and said.err.endswith(f"\nagentrace: wrote {tmp_path / 'r.json'}\n")  # as html, export say
    assert json.loads((tmp_path / "r.json").read_text()) == json.loads(printed)


@pytest.mark.parametrize("argv", [["report", "OUT", "-o", "FILE"], ["schema", "task", "-o", "FILE"],
                                  ["render", "OUT", "--format", "md", "--db", "DB", "-o", "FILE"],
                                  ["export", "OUT", "--db", "DB", "-o", "FILE"]])
def test_every_command_writing_to_dash_o_says_so(argv: list[str], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out, target = _results(tmp_path), tmp_path / "written.txt"
    swap = {"OUT": str(out), "FILE": str(target), "DB": str(tmp_path / "none.db")}
    assert main([swap.get(a, a) for a in argv]) == 0
    said = capsys.readouterr()
    assert said.out == "" and said.err.count("wrote") == 1 and said.err.endswith(f"agentrace: wrote {target}\n")
    assert target.read_text().strip()


def test_bad_input_with_dash_o_does_not_say_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing"), "-o", str(tmp_path / "r.txt")]) == 2
    err = capsys.readouterr().err
    assert "no such results folder" in err and "wrote" not in err


def test_old_spellings_are_aliases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _results(tmp_path)
    assert main(["snapshot", str(out), "--to", str(tmp_path / "a.json")]) == 0
    assert main(["snapshot", str(out), "-o", str(tmp_path / "b.json")]) == 0
    assert (json.loads((tmp_path / "a.json").read_text())["cells"] ==
            json.loads((tmp_path / "b.json").read_text())["cells"])
    sub = _subparsers()
    assert sub["ratings"].parse_args(["--json"]).format == "json"
    assert sub["parse"].parse_args(["claude", "f", "--json"]).format == "json"
    assert sub["history"].parse_args(["--format", "text"]).format == "terminal"
    for name in WRITERS:  # `--format terminal` (= text) wherever a text format is offered
        formats = next((a.choices for a in sub[name]._actions if "--format" in a.option_strings), None) or ()
        if "text" in formats or "terminal" in formats:
            args = {"parse": ["claude", "f"], "merge": ["a"], "compare": ["--snapshot", "s.json"], "render": ["out"]}.get(name, [])
            assert sub[name].parse_args([*args, "--format", "terminal"]).format in ("text", "terminal"), name
    assert sub["merge"].parse_args(["a", "--to", "m"]).to == "m" == sub["merge"].parse_args(["a", "-o", "m"]).to


def test_completion_script(tmp_path: Path) -> None:
    pytest.importorskip("shtab")
    script = subprocess.run([sys.executable, "-m", "pytest_agentrace.cli", "completion", "bash"], capture_output=True,
                            text=True, check=True).stdout
    assert "complete" in script and "snapshot" in script and "--agentrace" not in script
    if shutil.which("bash"):  # the script loads in bash and completes the subcommands
        (tmp_path / "c.sh").write_text(script)
        probe = ('source c.sh; COMP_WORDS=(agentrace snap); COMP_CWORD=1; COMP_LINE="agentrace snap"; '
                 'COMP_POINT=${#COMP_LINE}; _shtab_agentrace; echo "${COMPREPLY[@]}"')
        done = subprocess.run(["bash", "-c", probe], cwd=tmp_path, capture_output=True, text=True)
        assert done.stdout.split() == ["snapshot"], done.stdout + done.stderr


# -- every -o into a folder that does not exist --------------------------------------------------------------------


def _dash_o_commands() -> list[str]:
    """The ``agentrace`` commands whose parser takes ``-o`` (subcommands of subcommands included, as ``tasks list``),
    read from the parser: a new command with ``-o`` is in this list without anyone adding it."""
    found = []

    def walk(parser, prefix: str) -> None:
        if any("-o" in a.option_strings for a in parser._actions):
            found.append(prefix)
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for name, sub in dict.fromkeys(action.choices.items()):
                    walk(sub, f"{prefix} {name}".strip())

    walk(build_parser(), "")
    return found


PATCH = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
STREAM = '{"type": "result", "subtype": "success", "result": "done", "total_cost_usd": 0.01, "num_turns": 1}\n'


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, str]:
    """What the commands read: a results folder, its snapshot, a history store, a patch, an agent's output, a task
    file and a context file."""
    from pytest_agentrace.record.store import SessionInfo, Store

    out = _results(tmp_path)
    assert main(["snapshot", str(out), "-o", str(tmp_path / "snap.json")]) == 0
    with Store(tmp_path / "history.db") as store:
        store.save_session(SessionInfo("s1", started="2026-01-01T00:00:00+00:00"), [
            Outcome(run_id=f"task:t/default/{a}/r1", kind="task", source="t.yaml", case="t", arm="default", agent=a,
                    rep=1, status="passed", score=score, session_id="s1", started="2026-01-01T00:00:00+00:00",
                    exit_code=0) for a, score in (("x", 90.0), ("y", 40.0))])
    (tmp_path / "change.patch").write_text(PATCH)
    (tmp_path / "claude.jsonl").write_text(STREAM)
    (tmp_path / "task.yaml").write_text("name: t\ndescription: d\ntest_command: 'true'\n")
    (tmp_path / "CLAUDE.md").write_text("# context\n")
    return {"out": str(out), "snap": str(tmp_path / "snap.json"), "db": str(tmp_path / "history.db"),
            "patch": str(tmp_path / "change.patch"), "stream": str(tmp_path / "claude.jsonl"),
            "task": str(tmp_path / "task.yaml"), "context": str(tmp_path / "CLAUDE.md")}


# each command's arguments besides ``-o TARGET`` ({name}: an input of the fixture), and what lands in the missing
# folder: the file TARGET itself, or for commands whose -o is a folder the path in it that must exist
DASH_O = {
    "plan": (["--cv", "0.3", "--effect", "0.2"], "."),
    "report": (["{out}"], "."),
    "snapshot": (["{out}"], "."),
    "compare": (["{out}", "--snapshot", "{snap}"], "."),
    "ratings": (["--db", "{db}"], "."),
    "parse": (["claude", "{stream}"], "."),
    "leaderboard": (["--db", "{db}"], "."),
    "history": (["--db", "{db}"], "."),
    "trend": (["--db", "{db}"], "."),
    "html": (["{out}"], "."),
    "export": (["{out}"], "."),
    "comment": (["{out}"], "."),
    "render": (["{out}", "--format", "md"], "."),
    "init": (["mytask"], "mytask.yaml"),
    "schema": (["task"], "."),
    "diff": (["--file", "{patch}"], "."),
    "merge": (["{out}"], "runs/t/default/a/1/run.json"),
    "context-eval": (["--context-file", "{context}", "--task", "{task}", "--agents", "noop"], "."),
}


@pytest.mark.parametrize("command", _dash_o_commands())
def test_every_dash_o_makes_the_missing_folders(command: str, inputs: dict[str, str], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``-o`` into a folder that does not exist makes it (README: ``agentrace schema task -o
    schemas/task.schema.json``), on every command (one writer, ``record.runfile.write_atomic``), with what the
    command writes in it."""
    assert command in DASH_O, f"`agentrace {command}` takes -o: add its arguments to DASH_O"
    args, inside = DASH_O[command]
    target = tmp_path / "missing" / "deeper" / ("out.d" if inside != "." else "out.txt")
    code = main([*command.split(), *(a.format(**inputs) for a in args), "-o", str(target)])
    err = capsys.readouterr().err
    assert code == 0, err
    written = target / inside if inside != "." else target
    assert written.is_file() and written.stat().st_size > 0, err
    if command == "schema":
        assert json.loads(written.read_text())["title"]


def test_dash_o_replaces_a_link_instead_of_writing_through_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The -o writer keeps the no-follow rule of every write (``record.safefile``): a link standing at the target is
    replaced by the file, and the file it pointed to is left as it was."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "link.json").symlink_to(victim)
    assert main(["schema", "task", "-o", str(tmp_path / "link.json")]) == 0
    assert victim.read_text() == "keep me\n"
    assert not (tmp_path / "link.json").is_symlink() and json.loads((tmp_path / "link.json").read_text())["title"]


def test_an_unknown_case_names_the_folder_found(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``agentrace report --case X`` without OUT names the results folder it found, not ``None``."""
    (tmp_path / "pyproject.toml").write_text("")
    out = _results(tmp_path)
    out.rename(tmp_path / ".agentrace")
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--case", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert f"--case nosuch: no such case in {tmp_path / '.agentrace'} (cases: t)" in err and "None" not in err
