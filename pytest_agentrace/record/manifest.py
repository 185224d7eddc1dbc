"""Tamper-evident results: one manifest per session, ``agentrace verify``, and records that contradict themselves.

Each run's files are hashed right after its ``run.json`` is written, in the process that ran it, before any later
agent starts (``digest_run``); the digests travel to the controller with the run's payload, never through the
results folder, and the controller writes them as ``<out>/manifests/<session id>.json`` at the session's end::

    {"version": 1, "session_id": str, "written": ISO-8601 UTC,
     "runs": {run_id: {"dir": "runs/<case>/<arm>/<agent>/<rep>", "files": {name: sha256 hex}}}}

A record is *verified* when the newest manifest that names its run folder (by ``written``, then file name) lists
exactly the files the folder holds, with the same sha256. ``verify`` names every record that was changed, added
or removed after its session; ``contradictions`` names a record whose status contradicts its own evidence
(``passed`` while ``tampered`` is non-empty, a tests or verify check failed, the answer key said incorrect, or the
agent timed out). sha256 is ``hashlib.sha256`` (FIPS 180-4).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentrace.record.model import Outcome, contradictions
from pytest_agentrace.record.runfile import RUN_FILE, write_atomic

MANIFEST_DIR = "manifests"
MANIFEST_VERSION = 1
DIGEST_PROPERTY = "agentrace.digest"  # the item's user property carrying {"dir": ..., "files": {...}}
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """The sha256 hex digest of one file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _files(run_dir: Path) -> Iterable[Path]:
    for root, dirs, names in os.walk(run_dir):
        dirs.sort()
        for name in sorted(names):
            if not name.startswith(f".{RUN_FILE}."):  # write_atomic's temp file, gone once it is replaced
                yield Path(root) / name


def digest_run(out: Path, run_dir: Path) -> dict[str, Any]:
    """``{"dir": run_dir relative to out (posix), "files": {relative name: sha256}}`` of every file in ``run_dir``."""
    run_dir = Path(run_dir)
    files = {p.relative_to(run_dir).as_posix(): sha256_file(p) for p in _files(run_dir) if p.is_file()}
    return {"dir": run_dir.resolve().relative_to(Path(out).resolve()).as_posix(), "files": files}


def write_manifest(out: Path, session_id: str, digests: Mapping[str, Mapping[str, Any]]) -> Path:
    """Write ``<out>/manifests/<session_id>.json`` (atomically) for ``digests`` (run id -> ``digest_run``)."""
    path = Path(out) / MANIFEST_DIR / f"{session_id}.json"
    doc = {"version": MANIFEST_VERSION, "session_id": session_id,
           "written": _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds"),
           "runs": {rid: {"dir": d["dir"], "files": dict(d["files"])} for rid, d in sorted(digests.items())}}
    write_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


@dataclass
class Verification:
    """What ``verify`` found: ``problems`` maps a run folder (relative to out) to why it is unverifiable
    (``changed: run.json``, ``added after its session``, ``removed``, ``status contradicts ...``); ``verified``
    counts the records that match; ``manifest_errors`` lists unreadable manifests."""

    verified: int = 0
    problems: dict[str, str] = field(default_factory=dict)
    manifest_errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.manifest_errors

    def lines(self) -> list[str]:
        """One line per problem, sorted by run folder."""
        return [*self.manifest_errors, *(f"{where}: {why}" for where, why in sorted(self.problems.items()))]


def load_manifests(out: Path) -> tuple[dict[str, dict[str, str]], list[str]]:
    """``(run folder -> {file: sha256} from the newest manifest naming it, errors)`` for ``out``."""
    entries: list[tuple[str, str, dict[str, Any]]] = []
    errors: list[str] = []
    for path in sorted((Path(out) / MANIFEST_DIR).glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("version") != MANIFEST_VERSION or not isinstance(doc.get("runs"), dict):
                raise ValueError(f"not a version-{MANIFEST_VERSION} manifest")
            entries += [(str(doc.get("written", "")), path.name, run) for run in doc["runs"].values()]
        except (OSError, ValueError, AttributeError) as exc:
            errors.append(f"{path}: unreadable manifest ({exc})")
    known: dict[str, dict[str, str]] = {}
    for _written, _name, run in sorted(entries, key=lambda e: (e[0], e[1])):
        if isinstance(run, dict) and isinstance(run.get("files"), dict) and isinstance(run.get("dir"), str):
            known[run["dir"]] = run["files"]
    return known, errors


def verify(out: Path, *, artifacts: bool = True) -> Verification:
    """Check every run folder under ``out/runs`` against the manifests (``artifacts=False``: ``run.json`` only, and
    no check for files added beside it), and every record's status against its evidence."""
    out = Path(out)
    known, errors = load_manifests(out)
    result = Verification(manifest_errors=errors)
    present = {p.parent.relative_to(out).as_posix(): p.parent for p in (out / "runs").glob(f"**/{RUN_FILE}")}
    for where in sorted(set(known) - set(present)):
        result.problems[where] = "removed after its session (in a manifest, not on disk)"
    for where, run_dir in sorted(present.items()):
        why = check_run(run_dir, known.get(where), artifacts)
        if why:
            result.problems[where] = why
        else:
            result.verified += 1
    return result


def check_run(run_dir: Path, files: Mapping[str, str] | None, artifacts: bool = True) -> str:
    """Why the run folder ``run_dir`` is unverifiable against its manifest entry ``files`` (None: in no
    manifest), or ``""`` when it matches and its status agrees with its evidence."""
    if files is None:
        return "added after its session (in no manifest)"
    why = _changed(run_dir, files, artifacts)
    if why:
        return why
    try:
        outcome = Outcome.from_dict(json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return f"not a valid run record ({exc})"
    return "; ".join(f"status contradicts its evidence: {c}" for c in contradictions(outcome))


def _changed(run_dir: Path, files: Mapping[str, str], artifacts: bool) -> str:
    names = sorted(files) if artifacts else [RUN_FILE]
    changed = []
    for name in names:
        path = run_dir / name
        if not path.is_file():
            changed.append(f"{name} removed")
        elif sha256_file(path) != files.get(name):
            changed.append(f"{name} changed")
    if artifacts:
        extra = sorted(p.relative_to(run_dir).as_posix() for p in _files(run_dir))
        changed += [f"{name} added" for name in extra if name not in files]
    return "changed after its session: " + ", ".join(changed) if changed else ""
