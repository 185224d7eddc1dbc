"""A Ctrl-C (or SIGTERM made one) while a record is being written never leaves a temp file: the atomic writer holds
SIGINT and SIGTERM from its temp file to the rename and delivers them right after (``safefile.signals_held``)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pytest_agentrace.record import safefile
from pytest_agentrace.run import resume


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_a_write_lands_after_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: int) -> None:
    real_fsync = os.fsync

    def fsync_then_signal(fd: int) -> None:  # the signal comes while the temp file is open and not yet renamed
        real_fsync(fd)
        signal.raise_signal(sig)

    monkeypatch.setattr(os, "fsync", fsync_then_signal)
    previous = signal.signal(signal.SIGTERM, resume._raise_interrupt)  # what --agentrace installs for SIGTERM
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with SIGINT ignored
    try:
        with pytest.raises(KeyboardInterrupt):
            safefile.write_text(tmp_path / "run.json", "{}\n", durable=True)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers put back
        assert signal.getsignal(signal.SIGTERM) is resume._raise_interrupt
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    assert (tmp_path / "run.json").read_text() == "{}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no .agentrace-tmp.* left


def test_a_signal_ignored_before_stays_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started with SIGINT ignored (``nohup ... &``): a SIGINT during a write is still ignored after it."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        real_fsync = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: (real_fsync(fd), signal.raise_signal(signal.SIGINT))[0])
        safefile.write_text(tmp_path / "a.json", "x", durable=True)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
