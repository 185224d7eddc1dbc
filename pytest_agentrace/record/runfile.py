"""run.json: write atomically, read back, walk a results folder.

A results folder (``--agentrace-out``, default ``.agentrace``) holds
``runs/<case>/<arm>/<agent>/<rep>/run.json`` beside ``raw.out``, ``raw.err``, ``prompt.txt``,
``diff.patch`` and the check logs, and ``outbox/`` with the files the agent left (``OUTBOX_DIR``). See ``model``
for the record's fields.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentrace import untrusted
from pytest_agentrace.record.model import Outcome, contradictions
from pytest_agentrace.record.safefile import read_text, write_text

RUN_FILE = "run.json"
# a record folder's sub-folder for the files an agent left in its outbox (``run.outbox.collect``): whatever names the
# agent picks, its files never sit beside the harness's own records, and the harness writes nothing else there
OUTBOX_DIR = "outbox"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file and a rename (``safefile.write_text``, fsynced): readers see
    old or new, never half; a link at ``path`` is replaced, never written through. The folder is made when
    missing; a folder that is a link is refused (``safefile.UnsafePath``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text, durable=True)


def write_run(run_dir: Path, outcome: Outcome) -> Path:
    """Write ``run_dir/run.json`` atomically (from ``outcome.record``, the record's one dict) and return its path."""
    path = run_dir / RUN_FILE
    write_atomic(path, json.dumps(outcome.record, indent=2, sort_keys=True) + "\n")
    return path


def read_run(path: Path) -> Outcome:
    """Read one ``run.json``; raises ``ValueError`` (with the path) when it is not a valid record, or when its status
    contradicts its own evidence (``model.contradictions``: such a record is rejected, never counted)."""
    return check_record(path, load_record(path))


def load_record(path: Path) -> Any:
    """The parsed JSON of one ``run.json`` (a regular file, read through no link), not yet checked; raises
    ``ValueError`` (``"<path>: not a valid run record: <why>"``) when it cannot be read or parsed."""
    try:
        text = read_text(path)
        if text is None:
            raise ValueError("not a regular file (a link, a folder or missing)")
        return untrusted.loads(text)
    except (OSError, json.JSONDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not a valid run record: {exc}") from None


def check_record(path: Path, data: Any, outcome: Outcome | None = None) -> Outcome:
    """The outcome of ``data``, the parsed ``run.json`` at ``path`` (``Outcome.from_dict`` with type checks; or
    ``outcome`` when the caller already holds the outcome this very dict was made from, so it is not parsed again);
    raises ``ValueError`` naming ``path`` as ``read_run`` does."""
    if outcome is None:
        try:
            outcome = Outcome.from_dict(data, validate=True)
        except (TypeError, KeyError, ValueError, AttributeError) as exc:  # AttributeError: not an object
            raise ValueError(f"{path}: not a valid run record: {exc}") from None
    if why := contradictions(outcome):
        raise ValueError(f"{path}: rejected, its status contradicts its evidence: {'; '.join(why)}")
    return outcome


def iter_runs(out: Path) -> Iterator[tuple[Path, Outcome]]:
    """Yield ``(path, outcome)`` for every readable ``run.json`` under ``out/runs`` in sorted path order.

    Unreadable records (truncated, wrong types, newer schema) are skipped with one line on stderr saying why.
    """
    import sys

    for path in sorted((Path(out) / "runs").glob(f"**/{RUN_FILE}")):
        try:
            yield path, read_run(path)
        except ValueError as exc:
            print(f"agentrace: skipped {exc}", file=sys.stderr)


Key = tuple[int, int, int, int]  # a file's (st_mtime_ns, st_size, st_ino, st_ctime_ns)


@dataclass(frozen=True)
class Scan:
    """One walk of ``out/<top>``: ``files``, ``(path relative to out/<top> (POSIX), key)`` of every ``run.json``
    that is a regular file (links never followed), in the order of ``sorted(Path.glob('**/run.json'))`` (by path
    components); ``folders``, every folder (relative to ``out``, ``<top>`` included) holding an entry named
    ``run.json`` that leads somewhere, as ``Path.glob`` finds them (a link to a file counts: the manifest check then
    names it), in no order."""

    files: list[tuple[str, Key]]
    folders: list[str]


def scan_runs(out: Path, top: str = "runs") -> Scan:
    """Walk ``out/<top>`` once (symlinked folders not entered; ``scandir``, one per folder, and one ``lstat`` per
    ``run.json``): the record files the index keeps and the record folders the manifests are checked for
    (``Scan``). A folder that is missing or unreadable is skipped, as ``os.walk`` and ``Path.glob`` skip it."""
    found: list[tuple[tuple[str, ...], Key]] = []
    folders: list[str] = []
    pending: list[tuple[str, tuple[str, ...]]] = [(os.path.join(out, top), ())]
    isreg, islnk, exists = stat.S_ISREG, stat.S_ISLNK, os.path.exists
    while pending:
        folder, parts = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, (*parts, name)))
                    if name == RUN_FILE:
                        folders.append("/".join((top, *parts)))
                elif name == RUN_FILE:
                    st = entry.stat(follow_symlinks=False)
                    if isreg(st.st_mode):  # a link named run.json is no record: never followed
                        found.append(((*parts, RUN_FILE), (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)))
                    if not islnk(st.st_mode) or exists(entry.path):
                        folders.append("/".join((top, *parts)))
            except OSError:
                continue
    found.sort(key=lambda f: f[0])
    return Scan([("/".join(parts), key) for parts, key in found], folders)


LAST_SESSION_FILE = "last-session.json"


def write_last_session(out: Path, session_id: str, run_ids: list[str], shards: tuple[int, list[int]] | None = None,
                       stopped: list[int] = (), rootdir: Path | str | None = None,
                       splits: dict[int, str] | None = None) -> Path:
    """Record which runs the session that just ended produced or reused: ``<out>/last-session.json``,
    ``{"session_id": str, "run_ids": [str, ...]}`` (sorted), and ``"shards": {"total": N, "ran": [K, ...]}`` when
    the session was shard K of N (``shards``: ``(N, [K, ...])``; a merge of shards lists each it holds), with
    ``"stopped": [K, ...]``, the shards whose session stopped before every run ran (Ctrl-C, a CI job's timeout,
    ``-x``), when there are some; ``"rootdir"``: pytest's rootdir of the session (what its node ids, and JUnit's
    classnames, are relative to; ``session_rootdir``); ``"split": {"K": digest}``, each shard's digest of its split
    of the runs over all shards (``spec.shard.split_digest``; ``shard_splits``). Written atomically by the
    controller. A results folder keeps
    every run ever made; ``--last-session`` in the ``agentrace`` commands reads only these, and ``missing_shards``
    the shards."""
    doc: dict[str, Any] = {"session_id": session_id, "run_ids": sorted(set(run_ids))}
    if rootdir is not None:
        doc["rootdir"] = str(rootdir)
    if shards is not None:
        doc["shards"] = {"total": shards[0], "ran": sorted(set(shards[1]))}
        if stopped:
            doc["shards"]["stopped"] = sorted(set(stopped))
        if splits:
            doc["shards"]["split"] = {str(k): v for k, v in sorted(splits.items())}
    path = Path(out) / LAST_SESSION_FILE
    write_atomic(path, json.dumps(doc, indent=1) + "\n")
    return path


def session_shards(data: Any) -> tuple[int, list[int]] | None:
    """``(N, [K, ...])`` of a parsed ``last-session.json`` (``write_last_session``), None when it names no shards or
    not in that shape."""
    shards = data.get("shards") if isinstance(data, dict) else None
    if not isinstance(shards, dict):
        return None
    total, ran = shards.get("total"), shards.get("ran")
    if type(total) is not int or total < 1 or not isinstance(ran, list) or not all(type(k) is int for k in ran):
        return None
    return total, sorted(set(ran))


def session_rootdir(out: Path) -> Path | None:
    """The rootdir ``<out>/last-session.json`` names (``write_last_session``); None when it names none, or the file
    is missing or unreadable."""
    try:
        data = read_json(Path(out) / LAST_SESSION_FILE)
    except (OSError, ValueError):
        return None
    root = data.get("rootdir") if isinstance(data, dict) else None
    return Path(root) if isinstance(root, str) and root.startswith("/") else None


def shard_splits(data: Any) -> dict[int, str]:
    """``{K: digest}`` of a parsed ``last-session.json``: each shard's digest of its split of the runs (``{}``: none
    recorded, or not in that shape)."""
    shards = data.get("shards") if isinstance(data, dict) else None
    found = shards.get("split") if isinstance(shards, dict) else None
    if not isinstance(found, dict):
        return {}
    return {int(k): v for k, v in found.items() if isinstance(k, str) and k.isdigit() and isinstance(v, str)}


def stopped_shards(data: Any) -> list[int]:
    """The shards of a parsed ``last-session.json`` whose session stopped before every run ran (``[]``: none, or
    not in that shape)."""
    shards = data.get("shards") if isinstance(data, dict) else None
    stopped = shards.get("stopped") if isinstance(shards, dict) else None
    return sorted({k for k in stopped if type(k) is int}) if isinstance(stopped, list) else []


def missing_shards(out: Path) -> str | None:
    """Why ``out`` holds part of a sharded session's runs: its ``last-session.json`` says shards K of N ran and not
    all N did (a shard's artifact missing from a merge, or one shard's folder read alone), or that a shard's
    session stopped before every run ran (its folder merged all the same); None when it names no shards, all ran
    to their end, or it cannot be read."""
    try:
        data = read_json(Path(out) / LAST_SESSION_FILE)
    except (OSError, ValueError):
        return None
    found = session_shards(data)
    if found is None:
        return None
    total, ran = found
    missing = [k for k in range(1, total + 1) if k not in ran]
    if not missing:
        if stopped := stopped_shards(data):
            return (f"{out}: shard{'s' if len(stopped) != 1 else ''} {', '.join(map(str, stopped))} of {total} stopped "
                    "before every run ran (interrupted, a CI job's time limit, -x): its cells hold part of their runs "
                    "(run it again with --agentrace-resume into its folder, then merge again)")
        return None
    return (f"{out} holds shard{'s' if len(ran) != 1 else ''} {', '.join(map(str, ran)) or 'none'} of {total}; shard"
            f"{'s' if len(missing) != 1 else ''} {', '.join(map(str, missing))} of {total} missing (merge every shard's "
            "folder with `agentrace merge`)")


def read_json(path: Path) -> Any:
    """The parsed JSON of ``path``. Raises ``FileNotFoundError`` when it is missing and ``ValueError``
    (``"<path>: not readable as JSON (<why>)"``) when it cannot be read or parsed."""
    try:
        return untrusted.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not readable as JSON ({exc})") from None


def last_session_ids(out: Path) -> set[str]:
    """The run ids of ``<out>/last-session.json``. Raises ``ValueError`` naming the file when it is missing or
    not such a record."""
    path = Path(out) / LAST_SESSION_FILE
    try:
        data = read_json(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: no record of the last session (written at the end of each pytest --agentrace session)") from None
    ids = data.get("run_ids") if isinstance(data, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"{path}: key 'run_ids' must be a list of run ids")
    return set(ids)
