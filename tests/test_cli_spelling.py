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
