"""Tamper-evident results: manifests of each session's runs, ``agentrace verify``, and records that contradict
themselves.

Each run's files are hashed right after its ``run.json`` is written, by the process that ran it (an xdist worker or
the controller), before any later agent starts, and appended at once as one line to that process's manifest
``<out>/manifests/<session id>-<worker>.jsonl`` (``record_run``; an interrupted session keeps what it finished)::

    {"run_id": str, "dir": "runs/<case>/<arm>/<agent>/<rep>", "files": {name: sha256 hex}, "written": ISO-8601 UTC}

``write_manifest`` writes the same entries as one JSON document (``<name>.json``: ``{"version": 1, "written", "runs":
{run_id: {"dir", "files"}}}``; ``agentrace rescore`` uses it). A record is *verified* when the newest entry naming its
run folder (by ``written``) lists exactly the files the folder holds, with the same sha256. ``verify`` names every
record that was changed, added or removed after its session; ``model.contradictions`` a record whose status
contradicts its own evidence. sha256 is ``hashlib.sha256`` (FIPS 180-4). Only regular files are hashed, read
and compared: a link in a run folder is never followed (``record.safefile``).

The reports use what the check read: ``verify(..., keep=True)`` hands back, for each ``run.json`` whose folder a
manifest names, the outcome parsed from the bytes it hashed (``Verification.records``; one read, one hash, one parse
per record, the bytes dropped once parsed), so a report or gate never takes such a record from a cache
(``record.index``) that nothing verifies.

Keyed manifests (``AGENTRACE_MANIFEST_KEY`` set, e.g. a CI secret): each line also carries ``session``, ``worker``,
``seq`` (1, 2, ... within its file), ``prev`` (the ``mac`` of the line before it, ``""`` for the first) and
``mac``, an HMAC-SHA256 (RFC 2104) with the key over the line's canonical JSON without ``mac`` (sorted keys, no
spaces): the run's id, folder and file hashes are bound, and each line to the one before it. At the session's end
the controller writes ``<out>/manifests/<session id>.seal``: ``{"session", "chains": [{"count", "last"}, ...],
"runs", "written", "mac"}``, one chain per process file, HMAC'd the same way. ``verify`` with the key then names a
line whose MAC is wrong (an edited line re-hashed, a forged line of an added run), a chain with a gap (a line
removed), a chain or session that no seal lists or whose seal differs (lines removed at the end, a process file
removed), and a seal whose chain is missing. Without the key lines are read as written (see the README for what
that can and cannot catch).

The results digest (``results_digest``): sha256 over the canonical JSON of the verified state, every run folder's
newest manifest entry (``{dir: {file: sha256}}``, sorted). The session prints it at its end; ``agentrace verify OUT
--digest D`` recomputes it without a key: any change of a manifest entry, an added entry or a removed one changes
it, and the usual check ties the files to the entries.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import hashlib
import hmac
import json
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pytest_agentrace import untrusted
from pytest_agentrace.record.attempts import ATTEMPTS_DIR, KEPT
from pytest_agentrace.record.index import FREEZE_AT, paused_gc
from pytest_agentrace.record.model import Outcome, contradictions
from pytest_agentrace.record.runfile import RUN_FILE, check_record, scan_runs, write_atomic
from pytest_agentrace.record.safefile import append_bytes, read_bytes, regular_files

MANIFEST_DIR = "manifests"
MANIFEST_VERSION = 1
KEY_ENV = "AGENTRACE_MANIFEST_KEY"
SEAL_SUFFIX = ".seal"
_CHUNK = 1 << 20
_LOCK = threading.Lock()
_CHAINS: dict[str, tuple[int, str]] = {}  # manifest file -> (last seq, last mac) written by this process


def manifest_key(env: Mapping[str, str] | None = None) -> bytes | None:
    """The HMAC key from ``$AGENTRACE_MANIFEST_KEY`` (UTF-8 bytes), None when unset or empty."""
    value = (os.environ if env is None else env).get(KEY_ENV, "")
    return value.encode("utf-8") if value else None


def _canonical(data: Mapping[str, Any]) -> bytes:
    return json.dumps({k: v for k, v in data.items() if k != "mac"}, sort_keys=True, separators=(",", ":")).encode()


def sign(key: bytes, data: Mapping[str, Any]) -> str:
    """HMAC-SHA256 hex of ``data``'s canonical JSON without its ``mac`` key."""
    return hmac.new(key, _canonical(data), hashlib.sha256).hexdigest()


def signed(key: bytes, data: Mapping[str, Any]) -> bool:
    """True when ``data["mac"]`` is ``sign(key, data)`` (compared in constant time)."""
    mac = data.get("mac")
    return isinstance(mac, str) and hmac.compare_digest(mac, sign(key, data))


@contextlib.contextmanager
def _regular(path: Path) -> Iterator[BinaryIO | None]:
    """One regular file opened for reading, or None when ``path`` is a link, no regular file or unreadable (never
    followed: ``O_NOFOLLOW``, and ``O_NONBLOCK`` so a FIFO does not block)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    with os.fdopen(fd, "rb") as fh:
        yield fh if stat.S_ISREG(os.fstat(fh.fileno()).st_mode) else None


def sha256_file(path: Path) -> str | None:
    """The sha256 hex digest of one regular file's bytes; None when ``path`` is a link, no regular file or
    unreadable (never followed)."""
    with _regular(path) as fh:
        if fh is None:
            return None
        h = hashlib.sha256()
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _regular_bytes(path: Path) -> bytes | None:
    """The bytes of one regular file; None when ``path`` is a link, no regular file or unreadable (never
    followed), as ``sha256_file``."""
    with _regular(path) as fh:
        if fh is None:
            return None
        try:
            return fh.read()
        except OSError:
            return None


def _files(run_dir: Path) -> Iterable[Path]:
    for path in regular_files(run_dir):
        if not path.name.startswith(f".{RUN_FILE}."):  # an older write_atomic's temp file
            yield path


def digest_run(out: Path, run_dir: Path) -> dict[str, Any]:
    """``{"dir": run_dir relative to out (posix), "files": {relative name: sha256}}`` of every regular file in
    ``run_dir`` (links skipped, never followed)."""
    run_dir = Path(run_dir)
    files = {p.relative_to(run_dir).as_posix(): digest for p in _files(run_dir) if (digest := sha256_file(p))}
    return {"dir": run_dir.resolve().relative_to(Path(out).resolve()).as_posix(), "files": files}


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


def record_run(out: Path, session_id: str, run_id: str, run_dir: Path, key: bytes | None = None) -> Path:
    """Hash ``run_dir`` (``digest_run``) and append its entry to this process's manifest of the session (one line,
    ``O_APPEND``, fsynced, never through a link). The process is named by ``$PYTEST_XDIST_WORKER`` (``main``
    without xdist). ``key`` (default ``manifest_key()``): the line is chained and HMAC'd (module docstring)."""
    key = manifest_key() if key is None else key
    worker = re.sub(r"[^\w.-]", "_", os.environ.get("PYTEST_XDIST_WORKER", "main"))
    path = Path(out) / MANIFEST_DIR / f"{session_id}-{worker}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    entry: dict[str, Any] = {"run_id": run_id, **digest_run(out, run_dir), "written": _now()}
    with _LOCK:
        if key is not None:
            seq, prev = _CHAINS.get(str(path)) or _chain_end(path)
            entry.update(session=session_id, worker=worker, seq=seq + 1, prev=prev)
            entry["mac"] = sign(key, entry)
        append_bytes(path, (json.dumps(entry, sort_keys=True) + "\n").encode("utf-8"), durable=True)
        if key is not None:
            _CHAINS[str(path)] = (entry["seq"], entry["mac"])
    return path


def _chain_end(path: Path) -> tuple[int, str]:
    """``(seq, mac)`` of the last keyed line of the manifest file ``path`` (``(0, "")`` when it has none)."""
    data = read_bytes(path)
    for line in reversed((data or b"").decode("utf-8", errors="replace").splitlines()):
        try:
            entry = untrusted.loads(line)
            return int(entry["seq"]), str(entry["mac"])
        except (ValueError, KeyError, TypeError):
            continue
    return 0, ""


def seal_session(out: Path, session_id: str, key: bytes | None = None) -> Path | None:
    """Write ``<out>/manifests/<session_id>.seal`` over the session's chains (every ``<session_id>-*.jsonl``:
    its line count and last MAC) with the key (default ``manifest_key()``); None without a key. Called by the
    controller once every process has written its lines."""
    key = manifest_key() if key is None else key
    if key is None:
        return None
    folder = Path(out) / MANIFEST_DIR
    chains = []
    for path in sorted(folder.glob(f"{glob_escape(session_id)}-*.jsonl")):
        lines = []
        for line in (read_bytes(path) or b"").decode("utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError):  # an unreadable line is no link of a chain
                lines.append(untrusted.loads(line))
        mine = [e for e in lines if isinstance(e, dict) and e.get("session") == session_id and "mac" in e]
        if mine:
            chains.append({"count": len(mine), "last": mine[-1]["mac"]})
    if not chains:
        return None
    doc: dict[str, Any] = {"session": session_id, "chains": sorted(chains, key=lambda c: c["last"]),
                           "runs": sum(c["count"] for c in chains), "written": _now()}
    doc["mac"] = sign(key, doc)
    path = folder / f"{session_id}{SEAL_SUFFIX}"
    write_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


def glob_escape(text: str) -> str:
    """``text`` with glob metacharacters bracketed (``glob.escape``)."""
    import glob

    return glob.escape(text)


def write_manifest(out: Path, session_id: str, digests: Mapping[str, Mapping[str, Any]]) -> Path:
    """Write ``<out>/manifests/<session_id>.json`` (atomically) for ``digests`` (run id -> ``digest_run``)."""
    path = Path(out) / MANIFEST_DIR / f"{session_id}.json"
    doc: dict[str, Any] = {"version": MANIFEST_VERSION, "session_id": session_id, "written": _now(),
                           "runs": {rid: {"dir": d["dir"], "files": dict(d["files"])} for rid, d in sorted(digests.items())}}
    if (key := manifest_key()) is not None:
        doc["mac"] = sign(key, doc)
    write_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


@dataclass
class Verification:
    """What ``verify`` found: ``problems`` maps a run folder (relative to out) to why it is unverifiable
    (``changed: run.json``, ``added after its session``, ``removed``, ``status contradicts ...``); ``verified``
    counts the records that match; ``manifest_errors`` lists unreadable manifests. ``records`` (filled by
    ``verify(..., keep=True)``): for every ``run.json`` under ``runs/`` whose folder a manifest names, keyed by its
    path relative to ``out/runs`` (POSIX, as ``runfile.scan_runs``'s ``files``), the outcome parsed from the bytes
    that were hashed, or why they are no readable record (``check_run``'s ``parsed``)."""

    verified: int = 0
    problems: dict[str, str] = field(default_factory=dict)
    manifest_errors: list[str] = field(default_factory=list)
    records: dict[str, Outcome | str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.manifest_errors

    def lines(self) -> list[str]:
        """One line per problem, sorted by run folder."""
        return [*self.manifest_errors, *(f"{where}: {why}" for where, why in sorted(self.problems.items()))]


def _read(path: Path) -> str:
    data = read_bytes(path)
    if data is None:
        raise OSError(f"not a regular file (a link or missing): {path}")
    return data.decode("utf-8", errors="replace")


def load_manifests(out: Path, key: bytes | None = None) -> tuple[dict[str, dict[str, str]], list[str]]:
    """``(run folder -> {file: sha256} from the newest entry naming it, errors)`` for ``out``'s manifests (``*.json``
    documents and ``*.jsonl`` per-process lines). With ``key`` only signed entries count, and every wrong MAC,
    chain gap, missing or differing seal is an error (module docstring)."""
    entries: list[tuple[str, str, dict[str, Any]]] = []
    errors: list[str] = []
    folder = Path(out) / MANIFEST_DIR
    for path in sorted(folder.glob("*.json")):
        try:
            doc = untrusted.loads(_read(path))
            if doc.get("version") != MANIFEST_VERSION or not isinstance(doc.get("runs"), dict):
                raise ValueError(f"not a version-{MANIFEST_VERSION} manifest")
            if key is not None and not signed(key, doc):
                errors.append(f"{path}: manifest not signed with the key (written without it, or edited)")
                continue
            entries += [(str(doc.get("written", "")), path.name, run) for run in doc["runs"].values()]
        except (OSError, ValueError, AttributeError) as exc:
            errors.append(f"{path}: unreadable manifest ({exc})")
    chains: dict[str, list[tuple[int, str]]] = {}  # session -> [(count, last mac)] of its chains
    for path in sorted(folder.glob("*.jsonl")):
        try:
            lines = _read(path).splitlines()
        except OSError as exc:
            errors.append(f"{path}: unreadable manifest ({exc})")
            continue
        prev, seq, session = "", 0, None
        for number, line in enumerate(lines, 1):
            try:
                run = untrusted.loads(line)
                written = str(run["written"])
            except (ValueError, KeyError, TypeError):
                errors.append(f"{path}:{number}: unreadable manifest line")
                continue
            if key is not None:
                if not signed(key, run):
                    errors.append(f"{path}:{number}: manifest line not signed with the key (forged, edited, or "
                                  "written without the key)")
                    continue
                if run.get("seq") != seq + 1 or run.get("prev") != prev or session not in (None, run.get("session")):
                    errors.append(f"{path}:{number}: manifest chain broken before this line (a line was removed)")
                seq, prev, session = int(run["seq"]), run["mac"], run.get("session")
            entries.append((written, path.name, run))
        if key is not None and session is not None:
            chains.setdefault(str(session), []).append((seq, prev))
    if key is not None:
        errors += _check_seals(folder, key, chains)
    known: dict[str, dict[str, str]] = {}
    for _written, _name, run in sorted(entries, key=lambda e: (e[0], e[1])):
        if isinstance(run, dict) and isinstance(run.get("files"), dict) and isinstance(run.get("dir"), str):
            known[run["dir"]] = run["files"]
    return known, errors


def _check_seals(folder: Path, key: bytes, chains: Mapping[str, list[tuple[int, str]]]) -> list[str]:
    """Errors of the sessions' seals against the chains found (``session -> [(count, last mac)]``)."""
    errors, sealed = [], set()
    for path in sorted(folder.glob(f"*{SEAL_SUFFIX}")):
        try:
            doc = untrusted.loads(_read(path))
            session, listed = str(doc["session"]), {(int(c["count"]), str(c["last"])) for c in doc["chains"]}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            errors.append(f"{path}: unreadable seal ({exc})")
            continue
        if not signed(key, doc):
            errors.append(f"{path}: seal not signed with the key (forged or edited)")
            continue
        sealed.add(session)
        found = set(chains.get(session, ()))
        if found != listed:
            errors.append(f"{path}: session {session} does not match its seal: {len(listed)} chains of "
                          f"{sum(c for c, _ in listed)} runs sealed, {len(found)} chains of {sum(c for c, _ in found)} "
                          "runs found (lines or a manifest removed or added)")
    for session in sorted(set(chains) - sealed):
        errors.append(f"{folder}: session {session} has no seal (it was killed before its end, or its seal was "
                      "removed)")
    return errors


def verify(out: Path, *, artifacts: bool = True, key: bytes | None = None,
           runs: Iterable[str] | None = None, keep: bool = False) -> Verification:
    """Check every run folder under ``out/runs`` against the manifests (``artifacts=False``: ``run.json`` only, and
    no check for files added beside it), and every record's status against its evidence. ``key``: also check the
    manifests' MACs, chains and seals (``load_manifests``). ``runs``: ``runfile.scan_runs(out).folders`` when the
    caller has just walked ``out/runs`` (not walked again). ``keep``: hand back in ``records`` what each manifested
    record's hashed bytes say (``Verification``), for a report to use instead of a cache nothing verifies; the
    bytes themselves are dropped once parsed, and the outcomes share their equal strings."""
    out = Path(out)
    known, errors = load_manifests(out, key)
    result = Verification(manifest_errors=errors)
    present = set(record_folders(out, "runs") if runs is None else runs)
    present.update(w for w in record_folders(out, ATTEMPTS_DIR)
                   if KEPT not in w.split("/"))  # errors beside finished records (record.attempts)
    for where in sorted(set(known) - present):
        result.problems[where] = "removed after its session (in a manifest, not on disk)"
    share: dict[Any, Any] = {}
    with paused_gc() as done:  # the outcomes kept hold no cycles (as the index's)
        _check_all(out, sorted(present), known, artifacts, keep, share, result)
        done(len(result.records) >= FREEZE_AT)
    return result


def _check_all(out: Path, folders: list[str], known: dict[str, dict[str, str]], artifacts: bool, keep: bool,
               share: dict[Any, Any], result: Verification) -> None:
    """``verify``'s check of each record folder in ``folders``, into ``result``; each folder's manifest entry is
    dropped from ``known`` once checked (memory then holds the outcomes, not both)."""
    for where in folders:
        files = known.pop(where, None)
        parsed = None
        if keep and files is not None and (where == "runs" or where.startswith("runs/")):
            rel = f"{where}/{RUN_FILE}".removeprefix("runs/")
            parsed = functools.partial(result.records.__setitem__, rel)
        why = check_run(out / where, files, artifacts, parsed, share) if files is not None else NOT_IN_MANIFEST
        if why:
            result.problems[where] = why
        else:
            result.verified += 1


def results_digest(out: Path) -> str:
    """The digest of a results folder: sha256 hex over the canonical JSON of ``load_manifests(out)``'s entries
    (``[[dir, {file: sha256}], ...]`` sorted by folder). See the module docstring."""
    known, _errors = load_manifests(Path(out))
    body = json.dumps(sorted(known.items()), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


NOT_IN_MANIFEST = "added after its session (in no manifest)"


def record_folders(out: Path, top: str) -> list[str]:
    """The folders under ``out/top`` (``top`` included) that hold a ``run.json``, relative to ``out`` (POSIX), as
    ``Path.glob('**/run.json')`` finds them: symlinked folders not entered, an entry named ``run.json`` counted when
    it leads somewhere (a link to a file counts: ``check_run`` then names it). ``runfile.scan_runs``'s ``folders``."""
    return scan_runs(out, top).folders


def check_run(run_dir: Path, files: Mapping[str, str] | None, artifacts: bool = True,
              parsed: Callable[[Outcome | str], None] | None = None, share: dict[Any, Any] | None = None) -> str:
    """Why the run folder ``run_dir`` is unverifiable against its manifest entry ``files`` (None: in no
    manifest), or ``""`` when it matches and its status agrees with its evidence.

    ``parsed``: called once (when ``files`` is not None) with what a report reads from the very ``run.json`` bytes
    that were hashed: their ``Outcome`` (``runfile.check_record``: fields type-checked, a status that contradicts its
    evidence rejected), or, for bytes that are no such record or could not be read, the reason as
    ``runfile.read_run`` words it without the path. The file is read once, hashed once and parsed once, whether its
    digest matched or not (a report then shows what the file says, not what an index cached). ``share``: as
    ``Outcome.from_dict``'s, kept across the records of one folder."""
    if files is None:
        return NOT_IN_MANIFEST
    hashed: list[bytes] = []  # the run.json bytes whose digest was taken, parsed below (the file is read once)
    why = _changed(run_dir, files, artifacts, hashed)
    if why and parsed is None:
        return why
    path = run_dir / RUN_FILE
    try:
        data = untrusted.loads(hashed.pop().decode("utf-8", errors="replace") if hashed else _read(path))
    except (OSError, ValueError) as exc:
        if parsed is not None:
            parsed(f"not a valid run record: {exc}")
        return why or f"not a valid run record ({exc})"
    outcome = _outcome(data) if parsed is None else _parse_kept(path, data, parsed, share)
    if outcome is None:  # handed to ``parsed``, its status agreeing with its evidence
        return why
    if why or isinstance(outcome, str):
        return why or outcome
    return "; ".join(f"status contradicts its evidence: {c}" for c in contradictions(outcome))


def _parse_kept(path: Path, data: Any, parsed: Callable[[Outcome | str], None],
                share: dict[Any, Any] | None) -> Outcome | str | None:
    """``check_run``'s parse when a caller keeps the records: ``parsed`` gets ``data``'s type-checked ``Outcome``
    (``runfile.check_record``), or why it is none, worded as ``runfile.read_run`` words it. Returns None when
    ``parsed`` got an outcome whose status agrees with its evidence; else what ``check_run`` still judges: the
    outcome (read without type checks when they failed), or why ``data`` is no record."""
    try:
        outcome = Outcome.from_dict(data, validate=True, share=share)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:  # worded as runfile.check_record does
        parsed(f"not a valid run record: {exc}")
        return _outcome(data)
    try:
        parsed(check_record(path, data, outcome))
    except ValueError as exc:  # its status contradicts its evidence
        parsed(str(exc).removeprefix(f"{path}: "))
        return outcome
    return None


def _outcome(data: Any) -> Outcome | str:
    """``Outcome.from_dict(data)`` (not type-checked), or why it is no record (as ``check_run`` words it)."""
    try:
        return Outcome.from_dict(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return f"not a valid run record ({exc})"


def _changed(run_dir: Path, files: Mapping[str, str], artifacts: bool, hashed: list[bytes]) -> str:
    """Why ``run_dir``'s files differ from ``files`` (``""``: they do not); the bytes of its ``run.json`` appended to
    ``hashed`` when they were read (a regular file, never followed)."""
    names = sorted(files) if artifacts else [RUN_FILE]
    changed = []
    for name in names:
        if name == RUN_FILE:
            data = _regular_bytes(run_dir / name)
            digest = None if data is None else hashlib.sha256(data).hexdigest()
            if data is not None:
                hashed.append(data)
        else:
            digest = sha256_file(run_dir / name)
        if digest is None:
            changed.append(f"{name} removed")
        elif digest != files.get(name):
            changed.append(f"{name} changed")
    if artifacts:
        extra = sorted(p.relative_to(run_dir).as_posix() for p in _files(run_dir))
        changed += [f"{name} added" for name in extra if name not in files]
    return "changed after its session: " + ", ".join(changed) if changed else ""
