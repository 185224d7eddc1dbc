"""The results-folder index: ``<out>/index.jsonl``, a cache of every ``run.json`` under ``<out>/runs``.

Reports over a results folder read the index instead of opening and parsing each ``run.json``. The files stay the
record: the index is rebuilt from them whenever it is missing, damaged or out of date, and an entry is trusted only
while its file's ``(mtime_ns, size, inode)`` are what they were when it was parsed (``os.replace``, which
``runfile.write_run`` uses, gives a new inode), so a changed file is parsed again. Nothing is ever read from the
index that its file does not say.

Format (JSON lines, UTF-8): a header ``{"agentrace_index": 1, "schema_version": N}``, then one line per
``run.json`` in sorted path order: ``<crc32 hex of the JSON>\\t[path, mtime_ns, size, inode, record, error]`` with
``path`` relative to ``<out>/runs`` (POSIX), ``record`` the ``Outcome.to_dict()`` of a readable file (else null)
and ``error`` why it is unreadable (else null). A line whose checksum does not match, a bad header or a line that
cannot be parsed makes the whole index damaged: it is rebuilt from the files.

The controller refreshes the index at the end of each session (``refresh``); ``iter_runs`` refreshes it on demand.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_agentrace.record.model import SCHEMA_VERSION, Outcome
from pytest_agentrace.record.runfile import RUN_FILE, read_run, write_atomic

INDEX_FILE = "index.jsonl"
INDEX_FORMAT = 1
_Entry = tuple[str, int, int, int, "dict[str, Any] | None", "str | None"]  # path, mtime_ns, size, inode, record, error


def run_files(out: Path) -> list[tuple[str, os.stat_result]]:
    """``(path relative to out/runs, stat)`` of every ``run.json`` file under ``out/runs`` (symlinked folders not
    followed), in the order of ``sorted(Path.glob('**/run.json'))`` (by path components)."""
    root = Path(out) / "runs"
    found: list[tuple[tuple[str, ...], str, os.stat_result]] = []
    for dirpath, _dirs, files in os.walk(root):
        if RUN_FILE in files:
            path = os.path.join(dirpath, RUN_FILE)
            try:
                st = os.stat(path)
            except OSError:
                continue
            rel = Path(path).relative_to(root).as_posix()
            found.append((tuple(rel.split("/")), rel, st))
    found.sort(key=lambda f: f[0])
    return [(rel, st) for _parts, rel, st in found]


def _line(entry: _Entry) -> str:
    body = json.dumps(list(entry), sort_keys=True, separators=(",", ":"))
    return f"{zlib.crc32(body.encode('utf-8')):08x}\t{body}\n"


def read_index(out: Path) -> dict[str, _Entry] | None:
    """The entries of ``<out>/index.jsonl`` by relative path; None when it is missing or damaged (a bad header,
    checksum or line), or was written for another record schema."""
    try:
        with open(Path(out) / INDEX_FILE, encoding="utf-8") as fh:
            header = json.loads(fh.readline())
            if header != {"agentrace_index": INDEX_FORMAT, "schema_version": SCHEMA_VERSION}:
                return None
            entries: dict[str, _Entry] = {}
            for line in fh:
                crc, _, body = line.rstrip("\n").partition("\t")
                if int(crc, 16) != zlib.crc32(body.encode("utf-8")):
                    return None
                path, mtime, size, inode, record, error = json.loads(body)
                if not isinstance(path, str) or not all(isinstance(v, int) for v in (mtime, size, inode)):
                    return None
                entries[path] = (path, mtime, size, inode, record, error)
            return entries
    except (OSError, ValueError, TypeError, UnicodeDecodeError, AttributeError):  # missing, cut short, not ours
        return None


def _current(out: Path) -> tuple[list[_Entry], bool]:
    """The entries for the files as they are now, and whether they differ from the stored index (parsing only the
    files that are new or changed, or all when the index is missing or damaged)."""
    stored = read_index(out)
    changed = stored is None
    stored = stored or {}
    entries: list[_Entry] = []
    root = Path(out) / "runs"
    for rel, st in run_files(out):
        old = stored.get(rel)
        if old is not None and old[1:4] == (st.st_mtime_ns, st.st_size, st.st_ino):
            entries.append(old)
            continue
        changed = True
        try:
            record, error = read_run(root / rel).to_dict(), None
        except ValueError as exc:  # kept without the path: the folder may move, the message names where it is now
            record, error = None, str(exc).removeprefix(f"{root / rel}: ")
        entries.append((rel, st.st_mtime_ns, st.st_size, st.st_ino, record, error))
    return entries, changed or len(entries) != len(stored)


def _write(out: Path, entries: list[_Entry]) -> None:
    header = json.dumps({"agentrace_index": INDEX_FORMAT, "schema_version": SCHEMA_VERSION}, sort_keys=True)
    write_atomic(Path(out) / INDEX_FILE, header + "\n" + "".join(map(_line, entries)))


def refresh(out: Path) -> int:
    """Bring ``<out>/index.jsonl`` up to date with the ``run.json`` files (rewritten only when something changed);
    returns the number of files indexed. Raises ``OSError`` when the index cannot be written."""
    entries, changed = _current(out)
    if changed:
        _write(out, entries)
    return len(entries)


def iter_runs(out: Path) -> Iterator[tuple[Path, Outcome]]:
    """``runfile.iter_runs`` from the index: ``(path, outcome)`` for every readable ``run.json`` under ``out/runs``
    in sorted path order, unreadable ones skipped with the same line on stderr. The index is refreshed first (and
    written back when it changed and the folder is writable)."""
    entries, changed = _current(out)
    if changed:
        try:
            _write(out, entries)
        except OSError:
            pass  # a read-only results folder: reports still work, from the files
    root = Path(out) / "runs"
    for rel, _mtime, _size, _inode, record, error in entries:
        if error is not None or record is None:
            print(f"agentrace: skipped {root / rel}: {error}", file=sys.stderr)
            continue
        yield root / rel, Outcome.from_dict(record)
