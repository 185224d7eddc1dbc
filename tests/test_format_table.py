"""A report format is one module with ``render(result)`` and one line in ``report.formats.FORMATS``: the table gives
it its pytest option and ini key, the controller writes it, and ``agentrace render --format`` renders it from a
results folder. Shown with a dummy format that exists only in this test."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

from pytest_agentrace import cli
from pytest_agentrace.report import formats

DUMMY = '''
def render(result):
    """One line per run: run id, status, composite score (the session result's scored outcomes)."""
    lines = [f"{o.run_id} {o.status} {o.score}" for o in result.outcomes]
    return "dummy report\\n" + "\\n".join(lines) + f"\\nleaders: {[s.agent for s in result.leaderboard]}\\n"
'''
TASK = ("name: fix-add\ndescription: Fix add().\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        "timeout: 60\nagents:\n  - {name: fixer, command: fixer}\n  - noop\n")


@pytest.fixture
def dummy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> formats.Format:
    """The dummy format: its own module on ``sys.path``, and one line added to the table."""
    folder = tmp_path / "formats"
    folder.mkdir()
    (folder / "dummy_format.py").write_text(DUMMY)
    monkeypatch.syspath_prepend(str(folder))
    fmt = formats.Format("dummy", "dummy_format", "write the dummy report")
    monkeypatch.setattr(formats, "FORMATS", (*formats.FORMATS, fmt))
    return fmt


def test_a_new_format_is_one_module_and_one_table_line(pytester: pytest.Pytester, bin_dir: Path, dummy: formats.Format,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(TASK)
    assert "--agentrace-dummy=PATH" in pytester.runpytest("--help").stdout.str()
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "--agentrace-resamples=200", "--agentrace-dummy=d.txt",
                             "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1, xfailed=1)
    res.stdout.fnmatch_lines([f"agentrace: wrote dummy report {pytester.path / 'd.txt'}"])
    session = (pytester.path / "d.txt").read_text().splitlines()
    assert session[0] == "dummy report" and session[-1] == "leaders: ['fixer', 'noop']"
    runs = sorted(session[1:-1])
    assert runs == ["task:fix-add/default/fixer/r1 passed 100.0", "task:fix-add/default/noop/r1 failed 35.0"]
    # the ini key comes from the same line
    (pytester.path / "pytest.ini").write_text("[pytest]\nagentrace_dummy = from-ini.txt\n")
    pytester.runpytest("--agentrace", "--agentrace-no-save", "--agentrace-resamples=200", "-p", "no:cacheprovider")
    assert sorted((pytester.path / "from-ini.txt").read_text().splitlines()[1:-1]) == runs
    # and the CLI renders it from the results folder
    capsys.readouterr()
    assert cli.main(["render", str(pytester.path / ".agentrace"), "--format", "dummy", "--resamples", "200",
                     "--db", str(pytester.path / "none.db")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "dummy report" and sorted(printed[1:-1]) == runs


def test_every_format_of_the_table_renders_a_results_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``agentrace render`` knows every format of the table; an unknown one is refused by argparse."""
    with pytest.raises(SystemExit):
        cli.main(["render", str(tmp_path), "--format", "nonesuch"])
    assert "invalid choice: 'nonesuch'" in capsys.readouterr().err
    with pytest.raises(KeyError, match="no report format 'nonesuch'"):
        formats.by_name("nonesuch")
