"""run.discard: a finished run's scratch folders leave their names at once and are deleted behind, never through a
link."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_agentrace.run.discard import TRASH, discard, drain


def test_scratch_names_go_at_once_and_the_folders_are_deleted(tmp_path: Path) -> None:
    for name in ("ws", "clean"):
        for i in range(50):
            p = tmp_path / name / f"d{i % 5}" / f"f{i}.txt"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("x")
    (tmp_path / "kept").mkdir()
    discard(tmp_path, ["ws", "clean", "missing"])
    assert not (tmp_path / "ws").exists() and not (tmp_path / "clean").exists()
    drain()
    assert sorted(os.listdir(tmp_path)) == ["kept"]
    assert not (tmp_path / TRASH).exists()


def test_links_are_removed_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    scratch = tmp_path / "run"
    (scratch / "ws" / "sub").mkdir(parents=True)
    (scratch / "ws" / "sub" / "to-outside").symlink_to(outside)
    (scratch / "home").symlink_to(outside)  # a scratch name that is itself a link
    discard(scratch, ["ws", "home"])
    drain()
    assert (outside / "precious.txt").read_text() == "keep me"
    assert os.listdir(scratch) == []
