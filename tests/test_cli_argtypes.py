"""Numeric CLI options reject values that would crash or mean nothing (exit 2 with one usage line)."""

from __future__ import annotations

import pytest

from pytest_agentrace.cli import main


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "out", "--resamples", "0"],
        ["report", "out", "--resamples", "-1"],
        ["trend", "--days", "-5"],
        ["trend", "--days", "99999999999"],
        ["trend", "--days", "nan"],
        ["compare", "out", "--snapshot", "s.json", "--alpha", "5"],
        ["compare", "out", "--snapshot", "s.json", "--alpha", "0"],
        ["compare", "out", "--snapshot", "s.json", "--tolerance", "-3"],
        ["regress", "out", "--snapshot", "s.json", "--tolerance", "nan"],
    ],
)
def test_bad_numbers_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument" in err and "Traceback" not in err


def test_unwritable_output_path_is_one_line(tmp_path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "afile").write_text("")
    assert main(["init", "x", "-o", str(tmp_path / "afile")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agentrace init: ") and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--agentrace-regression-alpha", "2", "must be between 0 and 1 (e.g. 0.05), not 2"),
    ("--agentrace-tolerance", "-1", "must be 0 or more (and finite), not -1"),
])
def test_bad_statistics_options_are_usage_errors(pytester: pytest.Pytester, option: str, value: str, message: str) -> None:
    res = pytester.runpytest("--agentrace", option, value)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert f"argument {option}: {message}" in res.stderr.str()
