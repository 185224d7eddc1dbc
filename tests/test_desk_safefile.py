"""record.safefile: harness writes replace a link instead of writing through it, refuse a linked folder; reads
return only regular files (never a link's target, never a FIFO, which would block)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_agentrace.errors import SpecError
from pytest_agentrace.record import safefile
from pytest_agentrace.spec.task import load_task


def test_a_write_replaces_a_link_and_never_writes_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "raw.out").symlink_to(victim)
    (run_dir / "diff.patch").mkdir()  # a folder where a file goes
    (run_dir / "diff.patch" / "x").symlink_to(victim)
    safefile.write_text(run_dir / "raw.out", "harness output\n", durable=True)
    safefile.write_text(run_dir / "diff.patch", "patch\n")
    assert victim.read_text() == "the user's file\n"
    assert not (run_dir / "raw.out").is_symlink() and (run_dir / "raw.out").read_text() == "harness output\n"
    assert (run_dir / "diff.patch").read_text() == "patch\n"
    assert sorted(os.listdir(run_dir)) == ["diff.patch", "raw.out"]  # no temp file left


def test_a_linked_folder_and_an_existing_name_are_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "run").symlink_to(elsewhere)
    with pytest.raises(safefile.UnsafePath):
        safefile.write_text(tmp_path / "run" / "run.json", "{}")
    with pytest.raises(safefile.UnsafePath):
        safefile.append_bytes(tmp_path / "run" / "log.jsonl", b"x\n")
    assert list(elsewhere.iterdir()) == []
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "taken").symlink_to(tmp_path / "victim")
    with pytest.raises(FileExistsError):
        safefile.write_new(tmp_path / "real" / "taken", b"x")
    with pytest.raises(safefile.UnsafePath):
        safefile.append_bytes(tmp_path / "real" / "taken", b"x")
    assert not (tmp_path / "victim").exists()


def test_reads_return_only_regular_files(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("SECRET")
    (tmp_path / "regular").write_text("ok")
    (tmp_path / "link").symlink_to(tmp_path / "secret")
    os.mkfifo(tmp_path / "fifo")
    assert safefile.read_text(tmp_path / "regular") == "ok"
    assert safefile.read_text(tmp_path / "link") is None
    assert safefile.read_bytes(tmp_path / "fifo") is None  # returns at once: opened non-blocking, then refused
    assert safefile.read_text(tmp_path / "missing") is None
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f").write_text("f")
    (tmp_path / "linkdir").symlink_to(tmp_path / "sub")
    assert [p.name for p in safefile.regular_files(tmp_path)] == ["regular", "secret", "f"]


def test_binary_diffs_is_a_strict_boolean_task_key(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("name: t\ndescription: d\ntest_command: 'true'\nbinary_diffs: true\n")
    assert load_task(path).binary_diffs is True
    path.write_text("name: t\ndescription: d\ntest_command: 'true'\nbinary_diffs: 'yes'\n")
    with pytest.raises(SpecError, match="binary_diffs"):
        load_task(path)
