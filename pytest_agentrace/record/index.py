"""The results-folder index: ``<out>/index.jsonl``, a cache of every ``run.json`` under ``<out>/runs``.

Reports over a results folder read the index instead of opening and parsing each ``run.json`` that no manifest
covers. The files stay the record: the index is rebuilt from them whenever it is missing, damaged or out of date,
and an entry is used only while its file's ``(mtime_ns, size, inode, ctime_ns)`` are what they were when it was
parsed (``os.replace``, which ``runfile.write_run`` uses, gives a new inode; an edit in place that keeps the size
and sets the mtime back still moves the ctime, which no user can set), so a changed file is parsed again.

The index is a cache, not evidence: its checksum is a CRC and its keys can be read by ``stat``, so whoever can write
the folder can write entries that pass every check. A record whose folder a manifest names is therefore never taken
from it: the report passes the outcomes ``manifest.verify(..., keep=True)`` parsed from the very bytes it hashed
(``iter_outcomes``'s ``verified``), and the index's lines for those records are neither parsed nor required to be up
to date (the index is not even opened when every record is covered). It serves only records no manifest names (the
commands warn that they are unverifiable, and gates refuse them) and folders without manifests.

Format (UTF-8 lines): a header ``{"agentrace_index": 2, "schema_version": N}`` (format 1, whose key had no ctime, is
rebuilt), then one line per ``run.json`` in sorted path order: ``<crc32 hex>\t<key>\t<entry>`` with ``key`` the JSON ``[path, mtime_ns, size, inode, ctime_ns]``
(``path`` relative to ``<out>/runs``, POSIX), ``entry`` the JSON ``{"record": <the run.json's own object>}`` of a
readable file (checked by ``runfile.check_record`` when it was indexed) or ``{"error": why}`` of an unreadable one,
and the checksum over ``key\tentry``. A line whose checksum does not match, a bad header or a line that cannot be
split makes the whole index damaged: it is rebuilt from the files; an entry of which no outcome can be made is parsed
again from its file.

The controller refreshes the index at the end of each session (``refresh``). A report reads it once (``iter_runs``,
``iter_outcomes``): the folder is walked (``runfile.scan_runs``, one walk the caller may share with the manifest
check), then the index is read ``BATCH`` lines at a time, each line's checksum and key compared with the walk's
before its entry is used, so memory holds the outcomes and one batch of JSON, never every record's JSON at once;
when the key of any record not in ``verified`` differs the index is brought up to date (``refresh``: only new or changed files parsed) and read again.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import sys
import tempfile
import zlib
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from pytest_agentrace.record.model import SCHEMA_VERSION, Outcome
from pytest_agentrace.record.runfile import Key, check_record, load_record, read_run, scan_runs

INDEX_FILE = "index.jsonl"
INDEX_FORMAT = 2  # 2: the key holds st_ctime_ns (an index of format 1 is rebuilt)
BATCH = 256  # index lines parsed by one json.loads in _read
FREEZE_AT = 10_000  # records read at once from which their objects are frozen (``paused_gc``)


def _line(key: list[Any], entry: dict[str, Any]) -> str:
    body = json.dumps(key, separators=(",", ":")) + "\t" + json.dumps(entry, sort_keys=True, separators=(",", ":"))
    return f"{zlib.crc32(body.encode('utf-8')):08x}\t{body}\n"


def _header() -> str:
    return json.dumps({"agentrace_index": INDEX_FORMAT, "schema_version": SCHEMA_VERSION}, sort_keys=True) + "\n"


def read_index(out: Path) -> dict[str, tuple[Key, int, int]] | None:
    """``{path: ((mtime_ns, size, inode, ctime_ns), offset, length)}`` of the lines of ``<out>/index.jsonl`` (entries not
    parsed, nor kept); None when it is missing or damaged (a bad header, checksum or key), or was written for
    another record schema."""
    try:
        with open(Path(out) / INDEX_FILE, "rb") as fh:
            head = fh.readline()
            if head.decode("utf-8") != _header():
                return None
            found: dict[str, tuple[Key, int, int]] = {}
            offset = len(head)
            for line in fh:
                crc, body = line.rstrip(b"\n").split(b"\t", 1)
                if not line.endswith(b"\n") or int(crc, 16) != zlib.crc32(body):
                    return None
                path, mtime, size, inode, ctime = json.loads(body.split(b"\t", 1)[0])
                if not isinstance(path, str) or not all(type(v) is int for v in (mtime, size, inode, ctime)):
                    return None
                found[path] = ((mtime, size, inode, ctime), offset, len(line))
                offset += len(line)
            return found
    except (OSError, ValueError, TypeError, UnicodeDecodeError, RecursionError):  # missing, cut short, not ours
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


def refresh(out: Path, known: Known | None = None, files: list[tuple[str, Key]] | None = None,
            again: Collection[str] = ()) -> int:
    """Bring ``<out>/index.jsonl`` up to date with the ``run.json`` files, parsing only those that are new or
    changed (all when the index is missing or damaged); rewritten (streamed to a temp file, then ``os.replace``)
    only when something changed. ``known``: ``{run id: (record dict, outcome)}`` the caller already holds (the
    controller's runs, as their items sent them): a file whose JSON equals that dict is not made into an
    ``Outcome`` again. ``files``: ``runfile.scan_runs(out).files`` when the caller has just walked the folder.
    ``again``: paths (relative to ``out/runs``) whose entries are parsed again from their files even when their keys
    match (entries found unreadable). Returns the number of files indexed. Raises ``OSError`` when the index cannot be
    written."""
    stored = read_index(out)
    root, path = Path(out) / "runs", Path(out) / INDEX_FILE
    keys = scan_runs(out).files if files is None else files
    if stored is not None and not again and len(stored) == len(keys) and all(stored.get(rel, ((),))[0] == key for rel, key in keys):
        return len(keys)
    stored = stored or {}
    fd, tmp = tempfile.mkstemp(prefix=f".{INDEX_FILE}.", dir=out)
    try:
        with os.fdopen(fd, "wb") as new, open(path, "rb") if stored else contextlib.nullcontext() as old:
            new.write(_header().encode("utf-8"))
            for rel, key in keys:
                kept = stored.get(rel)
                if kept is not None and kept[0] == key and old is not None and rel not in again:
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


Verified = Mapping[str, Outcome | str]  # path relative to out/runs -> outcome of its hashed bytes, or why unreadable


def iter_runs(out: Path, files: list[tuple[str, Key]] | None = None,
              verified: Verified | None = None) -> Iterator[tuple[Path, Outcome]]:
    """``runfile.iter_runs`` from the index: ``(path, outcome)`` for every readable ``run.json`` under ``out/runs``
    in sorted path order, unreadable ones skipped with the same line on stderr. The index is brought up to date
    first; when it cannot be written (a read-only folder) the files are read as they are (``runfile.iter_runs``).
    ``files``: ``runfile.scan_runs(out).files`` when the caller has just walked the folder (not walked again).
    ``verified``: ``{path relative to out/runs: outcome or why unreadable}`` of the records whose bytes the manifest
    check hashed and parsed (``manifest.Verification.records``): those are taken from there, never from the index
    (whose lines for them are neither parsed nor required to be up to date)."""
    root = Path(out) / "runs"
    for rel, outcome in _indexed(out, files, verified):
        yield (root / rel if isinstance(rel, str) else rel), outcome


def iter_outcomes(out: Path, files: list[tuple[str, Key]] | None = None,
                  verified: Verified | None = None) -> Iterator[Outcome]:
    """``iter_runs(out, files, verified)`` without the paths (no ``Path`` made per run): the outcomes in sorted path
    order."""
    for _rel, outcome in _indexed(out, files, verified):
        yield outcome


def _indexed(out: Path, files: list[tuple[str, Key]] | None = None,
             verified: Verified | None = None) -> list[tuple[str | Path, Outcome]]:
    """``(path relative to out/runs, outcome)`` of every readable record, from ``verified`` when it holds the path,
    else from the index, or from the files (``_from_files``) when the index cannot be written or kept up to date; the
    skipped lines printed. The index is not opened when ``verified`` holds every path; else it is read once when it is up to date
    (``_read``), or brought up to date (``refresh``) and read again."""
    keys = scan_runs(out).files if files is None else files
    verified = verified or {}
    root = Path(out) / "runs"
    found: Read | None = None
    for attempt in range(3):  # a file changed between the walk and the read: walk and refresh again
        if attempt:
            keys = scan_runs(out).files
        if all(rel in verified for rel, _key in keys):
            found = _from_files(root, keys, verified)
        else:
            found = _read(out, keys, verified)
            if found is None or found[2]:
                try:
                    refresh(out, files=keys, again=found[2] if found else ())
                except OSError:  # a read-only folder: the files as they are (below)
                    found = None
                    break
                found = _read(out, keys, verified)
        if found is not None and not found[2]:
            break
    if found is None or found[2]:
        found = _from_files(root, scan_runs(out).files, verified)
    runs, skipped, _bad = found
    for rel, why in skipped:
        print(f"agentrace: skipped {root / rel}: {why}", file=sys.stderr)
    return runs


Read = tuple[list[tuple[str | Path, Outcome]], list[tuple[str, str]], set[str]]


def _from_files(root: Path, keys: list[tuple[str, Key]], verified: Verified) -> Read:
    """``_read``'s ``(runs, skipped, bad)`` without the index: each path of ``keys`` from ``verified`` when it holds
    it, else its file under ``root`` read and checked (``runfile.read_run``, through no link)."""
    runs: list[tuple[str | Path, Outcome]] = []
    skipped: list[tuple[str, str]] = []
    for rel, _key in keys:
        got = verified.get(rel)
        if got is None:
            try:
                got = read_run(root / rel)
            except ValueError as exc:
                got = str(exc).removeprefix(f"{root / rel}: ")
        _take(rel, got, runs, skipped)
    return runs, skipped, set()


def _take(rel: str, got: Outcome | str, runs: list[tuple[str | Path, Outcome]], skipped: list[tuple[str, str]]) -> None:
    """A verified record into ``runs`` (its outcome) or ``skipped`` (why it is unreadable)."""
    if isinstance(got, str):
        skipped.append((rel, got))
    else:
        runs.append((rel, got))


def _read(out: Path, keys: list[tuple[str, Key]], verified: Verified | None = None) -> Read | None:
    """``(runs, skipped, bad)`` from ``<out>/index.jsonl`` when it holds exactly ``keys`` (the files' paths and keys,
    in order) and every line's checksum matches: ``runs`` the ``(path, outcome)`` of each readable record, ``skipped``
    the ``(path, why)`` of each unreadable one, ``bad`` the paths whose entries are not what ``refresh`` writes (no
    outcome can be made of them: their files are to be parsed again); None when the index is missing, damaged, of
    another format or out of date. A path ``verified`` holds is taken from there: its line must name it, in its
    place, but its key and entry are not used. The file is read once, ``BATCH`` lines at a time, each batch's keys
    and entries parsed by one ``json.loads``; the outcomes are made without the collector running (``paused_gc``:
    they hold no cycles) and share their equal strings (``Outcome.from_dict``'s ``share``)."""
    try:
        with open(Path(out) / INDEX_FILE, "rb") as fh, paused_gc() as done:
            found = _parse(fh, keys, verified or {})
            done(found is not None and len(found[0]) >= FREEZE_AT)
            return found
    except OSError:  # missing, unreadable
        return None


def _parse(fh: BinaryIO, keys: list[tuple[str, Key]], verified: Verified) -> Read | None:
    """``_read`` of the open index ``fh`` (binary)."""
    runs: list[tuple[str | Path, Outcome]] = []
    skipped: list[tuple[str, str]] = []
    bad: set[str] = set()
    share: dict[Any, Any] = {}
    if fh.readline() != _header().encode("utf-8"):
        return None
    done = 0
    while lines := list(itertools.islice(fh, BATCH)):
        if done + len(lines) > len(keys):
            return None
        want = keys[done:done + len(lines)]
        parts = []
        for line in lines:
            try:
                crc, key, entry = line.split(b"\t", 2)
                if not entry.endswith(b"\n") or int(crc, 16) != zlib.crc32(line[len(crc) + 1:-1]):
                    return None
            except ValueError:
                return None
            parts.append((key, entry))
        try:
            stored = json.loads(b"[" + b",".join(k for k, _ in parts) + b"]")
            if [(k[0], tuple(k[1:])) if k[0] not in verified else k[0] for k in stored] != \
                    [(rel, key) if rel not in verified else rel for rel, key in want]:
                return None
            entries = iter(json.loads(b"[" + b",".join(e for (rel, _), (_, e) in zip(want, parts, strict=True)
                                                       if rel not in verified) + b"]"))
        except (ValueError, TypeError, IndexError, KeyError, RecursionError):  # not keys and entries this package wrote
            return None
        for rel, _key in want:
            if (got := verified.get(rel)) is not None:
                _take(rel, got, runs, skipped)
                continue
            data = next(entries)
            try:
                if type(data) is not dict or ("record" in data) == ("error" in data):
                    raise ValueError("not an index entry")
                if "record" in data:
                    runs.append((rel, Outcome.from_dict(data["record"], share=share)))
                else:
                    skipped.append((rel, str(data["error"])))
            except (ValueError, TypeError, KeyError, AttributeError):  # not an entry refresh wrote
                bad.add(rel)
        done += len(lines)
    if done != len(keys):
        return None
    return runs, skipped, bad


@contextlib.contextmanager
def paused_gc() -> Iterator[Callable[[bool], None]]:
    """The cyclic garbage collector off while a block runs (as it was after): records read by the hundred thousand
    make millions of small dicts, tuples and outcomes, none in a cycle, and each collection on the way would walk
    all of them again (it took most of the time of reading an index). The block may call the function it is given
    with True: then every object alive at its end is moved out of the collector's sight (``gc.freeze``), so that
    the collections after it (three over everything it made, and one at exit) do not walk them either; reference
    counting still frees them."""
    was = gc.isenabled()
    freeze = [False]

    def done(value: bool) -> None:
        freeze[0] = value

    gc.disable()
    try:
        yield done
    finally:
        if freeze[0]:
            gc.freeze()
        if was:
            gc.enable()
