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
