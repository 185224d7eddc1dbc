"""The results-folder index: ``<out>/index.jsonl``, a cache of every ``run.json`` under ``<out>/runs``.

Reports over a results folder read the index instead of opening and parsing each ``run.json``. The files stay the
record: the index is rebuilt from them whenever it is missing, damaged or out of date, and an entry is trusted only
while its file's ``(mtime_ns, size, inode)`` are what they were when it was parsed (``os.replace``, which
``runfile.write_run`` uses, gives a new inode), so a changed file is parsed again. Nothing is ever read from the
index that its file does not say.

Format (UTF-8 lines): a header ``{"agentrace_index": 1, "schema_version": N}``, then one line per ``run.json`` in
sorted path order: ``<crc32 hex>\t<key>\t<entry>`` with ``key`` the JSON ``[path, mtime_ns, size, inode]``
(``path`` relative to ``<out>/runs``, POSIX), ``entry`` the JSON ``{"record": <the run.json's own object>}`` of a
readable file (checked by ``runfile.check_record`` when it was indexed) or ``{"error": why}`` of an unreadable one, and the checksum over ``key\tentry``. A line whose checksum does
not match, a bad header or a line that cannot be split makes the whole index damaged: it is rebuilt from the files.
Checking the index reads only checksums and keys; the records are parsed one at a time as a report reads them, so
memory holds the outcomes, never every record's JSON at once.

The controller refreshes the index at the end of each session (``refresh``); ``iter_runs`` refreshes it on demand.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import stat
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_agentrace.record.model import SCHEMA_VERSION, Outcome
from pytest_agentrace.record.runfile import RUN_FILE, check_record, load_record
from pytest_agentrace.record.runfile import iter_runs as runfile_iter_runs

INDEX_FILE = "index.jsonl"
INDEX_FORMAT = 1
BATCH = 256  # index lines parsed by one json.loads in iter_runs


def run_files(out: Path) -> list[tuple[str, os.stat_result]]:
    """``(path relative to out/runs, stat)`` of every ``run.json`` regular file under ``out/runs`` (symlinked folders
    and files not followed), in the order of ``sorted(Path.glob('**/run.json'))`` (by path components). One
    ``scandir`` per folder; only the ``run.json`` entries are stat'ed."""
    found: list[tuple[tuple[str, ...], os.stat_result]] = []
    pending: list[tuple[str, tuple[str, ...]]] = [(os.path.join(out, "runs"), ())]
    while pending:
        folder, parts = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:  # missing, not a folder, unreadable: os.walk skips it too
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, (*parts, entry.name)))
                elif entry.name == RUN_FILE:
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode):  # a link named run.json is no record: never followed
                        found.append(((*parts, RUN_FILE), st))
            except OSError:
                continue
    found.sort(key=lambda f: f[0])
    return [("/".join(parts), st) for parts, st in found]


def _line(key: list[Any], entry: dict[str, Any]) -> str:
    body = json.dumps(key, separators=(",", ":")) + "\t" + json.dumps(entry, sort_keys=True, separators=(",", ":"))
    return f"{zlib.crc32(body.encode('utf-8')):08x}\t{body}\n"


def _header() -> str:
    return json.dumps({"agentrace_index": INDEX_FORMAT, "schema_version": SCHEMA_VERSION}, sort_keys=True) + "\n"


def read_index(out: Path) -> dict[str, tuple[tuple[int, int, int], int, int]] | None:
    """``{path: ((mtime_ns, size, inode), offset, length)}`` of the lines of ``<out>/index.jsonl`` (entries not
    parsed, nor kept); None when it is missing or damaged (a bad header, checksum or key), or was written for
    another record schema."""
    try:
        with open(Path(out) / INDEX_FILE, "rb") as fh:
            head = fh.readline()
            if head.decode("utf-8") != _header():
                return None
            found: dict[str, tuple[tuple[int, int, int], int, int]] = {}
            offset = len(head)
            for line in fh:
                crc, body = line.rstrip(b"\n").split(b"\t", 1)
                if not line.endswith(b"\n") or int(crc, 16) != zlib.crc32(body):
                    return None
                path, mtime, size, inode = json.loads(body.split(b"\t", 1)[0])
                if not isinstance(path, str) or not all(type(v) is int for v in (mtime, size, inode)):
                    return None
                found[path] = ((mtime, size, inode), offset, len(line))
                offset += len(line)
            return found
    except (OSError, ValueError, TypeError, UnicodeDecodeError):  # missing, cut short, not ours
        return None


Known = Mapping[str, tuple[Mapping[str, Any], Outcome]]  # run id -> (its record's dict as received, its outcome)


def _entry(path: Path, known: Known | None = None) -> dict[str, Any]:
    """The index entry of one ``run.json``: its own parsed object once it checks out (``runfile.check_record``; a file
    whose object equals the one ``known`` holds for its run id is checked against ``known``'s outcome instead of being
    parsed into a second one), else the reason it is unreadable."""
    try:
        data = load_record(path)
        sent = known.get(data.get("run_id")) if known and isinstance(data, dict) else None
        check_record(path, data, sent[1] if sent is not None and sent[0] == data else None)
        return {"record": data}
    except ValueError as exc:  # kept without the path: the folder may move, the message names where it is now
        return {"error": str(exc).removeprefix(f"{path}: ")}


def refresh(out: Path, known: Known | None = None) -> int:
    """Bring ``<out>/index.jsonl`` up to date with the ``run.json`` files, parsing only those that are new or
    changed (all when the index is missing or damaged); rewritten (streamed to a temp file, then ``os.replace``)
    only when something changed. ``known``: ``{run id: (record dict, outcome)}`` the caller already holds (the
    controller's runs, as their items sent them): a file whose JSON equals that dict is not made into an
    ``Outcome`` again. Returns the number of files indexed. Raises ``OSError`` when the index cannot be written."""
    stored = read_index(out)
    root, path = Path(out) / "runs", Path(out) / INDEX_FILE
    keys = [(rel, (st.st_mtime_ns, st.st_size, st.st_ino)) for rel, st in run_files(out)]
    if stored is not None and len(stored) == len(keys) and all(stored.get(rel, ((),))[0] == key for rel, key in keys):
        return len(keys)
    stored = stored or {}
    fd, tmp = tempfile.mkstemp(prefix=f".{INDEX_FILE}.", dir=out)
    try:
        with os.fdopen(fd, "wb") as new, open(path, "rb") if stored else contextlib.nullcontext() as old:
            new.write(_header().encode("utf-8"))
            for rel, key in keys:
                kept = stored.get(rel)
                if kept is not None and kept[0] == key and old is not None:
                    old.seek(kept[1])
                    new.write(old.read(kept[2]))
                else:
                    new.write(_line([rel, *key], _entry(root / rel, known)).encode("utf-8"))
            new.flush()
            os.fsync(new.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return len(keys)


def iter_runs(out: Path) -> Iterator[tuple[Path, Outcome]]:
    """``runfile.iter_runs`` from the index: ``(path, outcome)`` for every readable ``run.json`` under ``out/runs``
    in sorted path order, unreadable ones skipped with the same line on stderr. The index is refreshed first; when
    it cannot be written (a read-only folder) the files are read as they are (``runfile.iter_runs``)."""
    root = Path(out) / "runs"
    for rel, outcome in _indexed(out):
        yield (root / rel if isinstance(rel, str) else rel), outcome


def iter_outcomes(out: Path) -> Iterator[Outcome]:
    """``iter_runs(out)`` without the paths (no ``Path`` made per run): the outcomes in sorted path order."""
    for _rel, outcome in _indexed(out):
        yield outcome


def _indexed(out: Path) -> Iterator[tuple[str | Path, Outcome]]:
    """``(path relative to out/runs, outcome)`` from the index, or ``(path, outcome)`` from the files when the
    index cannot be written. The index is read in batches of ``BATCH`` lines, each batch's keys and entries parsed
    by one ``json.loads`` (one C call per batch, its object keys shared), so memory holds one batch of JSON at a
    time."""
    try:
        refresh(out)
        fh = open(Path(out) / INDEX_FILE, encoding="utf-8")
    except OSError:
        yield from runfile_iter_runs(out)
        return
    root = Path(out) / "runs"
    shared = _sharing({})
    with fh:
        fh.readline()
        while lines := list(itertools.islice(fh, BATCH)):
            parts = [line.rstrip("\n").split("\t", 2) for line in lines]
            keys = json.loads("[" + ",".join(p[1] for p in parts) + "]")
            entries = json.loads("[" + ",".join(p[2] for p in parts) + "]", object_hook=shared)
            for key, data in zip(keys, entries, strict=True):
                if "record" not in data:
                    print(f"agentrace: skipped {root / key[0]}: {data.get('error')}", file=sys.stderr)
                    continue
                yield key[0], Outcome.from_dict(data["record"])


def _sharing(memo: dict[str, str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A ``json.loads`` ``object_hook`` that replaces each short string value of an object by an equal one seen
    before: the runs of a folder repeat their names, sources, models, commands and tool calls, and one copy of each
    saves about a third of the memory the outcomes take (keys are shared by the parser within one batch)."""
    get = memo.setdefault

    def hook(obj: dict[str, Any]) -> dict[str, Any]:
        for key, value in obj.items():
            if type(value) is str and len(value) <= 256:
                obj[key] = get(value, value)
        return obj

    return hook
