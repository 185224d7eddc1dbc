"""Writing files into a tree the agent had (its workspace, a clean tree after a check), never through a link: each
folder on the way opened with ``O_NOFOLLOW``, each file created with ``O_EXCL``."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from pytest_agentrace import fstree
from pytest_agentrace.errors import WorkspaceError


class Tampered(WorkspaceError):
    """Files the harness refused to write because a folder on their way is a link (``paths``: relative, POSIX)."""

    def __init__(self, paths: list[str]):
        super().__init__("refused to write through a linked folder: " + ", ".join(paths))
        self.paths = paths


_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def write_files(dest: Path, files: Mapping[str, str]) -> None:
    """Write ``{relative path: content}`` into ``dest`` without following a link: each folder on the way is opened
    with ``O_NOFOLLOW`` from ``dest`` down (made when missing; a file in its place is removed) and the file is
    created with ``O_EXCL | O_NOFOLLOW`` after whatever stood at its name (a link, a file, a folder) is removed.

    Raises ``Tampered`` naming every path whose folder (or ``dest`` itself) is a link: nothing is written through
    it (the other files are written)."""
    refused: list[str] = []
    for rel, content in files.items():
        parts = [part for part in rel.split("/") if part not in ("", ".")]
        try:
            fd = os.open(dest, _DIR_OPEN)
        except OSError:
            refused.append(rel)
            continue
        try:
            for part in parts[:-1]:
                try:
                    nfd = os.open(part, _DIR_OPEN, dir_fd=fd)
                except FileNotFoundError:
                    os.mkdir(part, dir_fd=fd)
                    nfd = os.open(part, _DIR_OPEN, dir_fd=fd)
                except OSError:
                    if stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode):
                        raise
                    os.unlink(part, dir_fd=fd)  # a file where the folder goes
                    os.mkdir(part, dir_fd=fd)
                    nfd = os.open(part, _DIR_OPEN, dir_fd=fd)
                os.close(fd)
                fd = nfd
            name = parts[-1]
            try:
                st = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                pass
            else:
                if stat.S_ISDIR(st.st_mode):
                    fstree.rmtree(name, dir_fd=fd)  # then the file is made (or refused: the folder stayed)
                else:
                    os.unlink(name, dir_fd=fd)
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
            with os.fdopen(out, "w", encoding="utf-8") as fh:
                fh.write(content)
        except OSError:
            refused.append(rel)
        finally:
            os.close(fd)
    if refused:
        raise Tampered(refused)
