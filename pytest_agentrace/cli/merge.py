"""``agentrace merge OUT... --to MERGED``: gather the results folders of several shards or machines into one.

What is merged:

- every run folder ``runs/<case>/<arm>/<agent>/<rep>/`` holding a readable ``run.json`` (with its logs, prompt and
  diff: regular files only; a link in a run folder is neither copied nor followed), keyed by the record's run id. A run id found in two folders (or already in MERGED) is fine when the two
  ``run.json`` records are equal (the same run copied twice); otherwise the merge stops with exit status 2 naming
  both files, before anything is written. An unreadable ``run.json`` stops it too (a shard's output is evidence;
  nothing is dropped silently). Folders without ``run.json`` (a run interrupted midway) are not copied.
- the histories: each ``OUT/history.db`` that exists, and every ``--db PATH``, into ``MERGED/history.db`` (or
  ``--to-db``) with ``Store.merge_from`` (sessions and runs by id; a conflicting run record is an error).
- ``last-session.json``: the union of the inputs' last-session run ids, so ``--last-session`` on MERGED means
  "the last session of every shard".

Because the statistics read only the run records, ``agentrace report/snapshot/compare/plan/html/export`` on MERGED
give what one session that ran every run would have given (the run ids, and so rep numbers, never collide: each
shard ran its own part of one partition, ``spec.shard``).

Manifests: every input is verified against its sessions' manifests first (``record.manifest``); an unverifiable
record stops the merge (exit 2). The manifests are copied into ``MERGED/manifests``, so ``agentrace verify MERGED``
checks the merged folder too.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pytest_agentrace import untrusted
from pytest_agentrace.record.manifest import MANIFEST_DIR, SEAL_SUFFIX, manifest_key, verify
from pytest_agentrace.record.runfile import (
    LAST_SESSION_FILE,
    RUN_FILE,
    missing_shards,
    read_json,
    read_run,
    session_shards,
    shard_splits,
    stopped_shards,
    write_last_session,
)
from pytest_agentrace.record.safefile import make_folders, read_bytes, read_text, regular_files, write_bytes, write_new
from pytest_agentrace.record.store import Store, StoreError
from pytest_agentrace.record.storepath import DEFAULT_NAME


class MergeError(Exception):
    """The folders cannot be merged (message names the files and the fix); exit status 2."""


@dataclass(frozen=True)
class Found:
    """One run record of an input: ``run_id``, its ``folder`` (the run's directory), ``rel`` (relative to the
    results folder) and ``record`` (the parsed ``run.json``)."""

    run_id: str
    folder: Path
    rel: Path
    record: dict[str, Any]


def register(sub: Any) -> None:
    """Add ``agentrace merge`` to the ``agentrace`` parser."""
    p = sub.add_parser("merge", help="gather the results folders of several shards or machines into one",
                       description="Copy the runs of each results folder OUT into MERGED (a run id present twice must have "
                                   "identical records) and merge their history stores; reports on MERGED then equal one "
                                   "session that ran everything.")
    p.add_argument("outs", nargs="+", metavar="OUT", help="results folders to merge (e.g. the shards' .agentrace)")
    p.add_argument("-o", "--output", "--to", dest="to", required=True, metavar="MERGED", help="the merged results folder (made when missing; runs "
                   "already in it count as one more input)")
    p.add_argument("--db", action="append", default=[], metavar="PATH", help="another history file to merge (repeatable; "
                   f"each OUT/{DEFAULT_NAME} is merged without it)")
    p.add_argument("--to-db", metavar="PATH", help=f"the merged history file (default MERGED/{DEFAULT_NAME})")
    p.set_defaults(func=cmd_merge)


def manifest_problems(out: Path) -> list[str]:
    """Why ``out``'s records are unverifiable against its sessions' manifests (``record.manifest.verify``; empty:
    every record matches). A folder with no manifest at all (written before manifests existed) has none to check."""
    if not (out / MANIFEST_DIR).is_dir():
        return []
    return verify(out, key=manifest_key()).lines()


def manifest_note(out: Path) -> str | None:
    """The line ``merge`` prints for a folder it could not check (None: it was checked)."""
    if not (out / MANIFEST_DIR).is_dir():
        return f"agentrace merge: {out}: no manifests (written before they existed): its runs are merged unchecked"
    return None


def copy_manifests(outs: list[Path], target: Path) -> int:
    """Copy every input's manifests (``manifests/*.json``, ``*.jsonl``) into ``target/manifests`` (a run folder's path relative to its results
    folder is the same in MERGED, so the entries hold as they are); a name taken by a different file gets a suffix.
    Returns how many were copied."""
    folder = target / MANIFEST_DIR
    copied = 0
    for out in outs:
        for src in sorted(p for p in (out / MANIFEST_DIR).glob("*") if p.suffix in (".json", ".jsonl", SEAL_SUFFIX)):
            data = read_bytes(src)  # regular files only: a link among the manifests is not copied
            if out == target or data is None:
                continue
            dest, n = folder / src.name, 1
            while (dest.exists() or dest.is_symlink()) and read_bytes(dest) != data:
                n += 1
                dest = folder / f"{src.stem}.{n}{src.suffix}"
            if not dest.exists():
                folder.mkdir(parents=True, exist_ok=True)
                write_new(dest, data)
                copied += 1
    return copied


def copy_run(src: Path, target: Path, rel: Path) -> int:
    """Copy the regular files of the run folder ``src`` into ``target / rel`` (folders made, no link on the way
    followed: ``safefile.make_folders``; links, FIFOs and devices in ``src`` neither copied nor followed; a link
    where a file goes is replaced). Returns the files copied. Raises ``UnsafePath`` for a link among the folders."""
    copied = 0
    for path in regular_files(src):
        data = read_bytes(path)
        if data is None:
            continue
        write_bytes(make_folders(target, (rel / path.relative_to(src)).parent) / path.name, data)
        copied += 1
    return copied


def linked(out: Path, names: tuple[str, ...]) -> str | None:
    """The first of ``out / name`` that is a link, as a message; None when none is."""
    for name in names:
        if (out / name).is_symlink():
            return f"{out / name} is a link; a results folder's {name} must be its own (remove the link)"
    return None


def gather(out: Path) -> list[Found]:
    """The run records of the results folder ``out`` (sorted by path). Raises ``MergeError`` for an unreadable one."""
    found = []
    for path in sorted((out / "runs").glob(f"**/{RUN_FILE}")):
        try:
            outcome = read_run(path)  # a run.json that is a link is unreadable: never followed
            record = untrusted.loads(read_text(path) or "")
        except (ValueError, OSError) as exc:
            raise MergeError(f"{exc}; fix or remove that run folder, then merge again") from None
        found.append(Found(outcome.run_id, path.parent, path.parent.relative_to(out), record))
    return found


def plan(outs: list[Path], target: Path) -> tuple[list[Found], int, list[Found]]:
    """The run folders to copy into ``target``, how many duplicates were equal (skipped), and every record the
    merged folder will hold. Raises ``MergeError`` for a run id with two different records, or two run ids in one
    run folder."""
    seen: dict[str, Found] = {}
    by_rel: dict[Path, Found] = {}
    copies: list[Found] = []
    same = 0
    sources = ([target] if (target / "runs").is_dir() else []) + [o for o in outs if o != target]
    for source in sources:
        for f in gather(source):
            first = seen.get(f.run_id)
            if first is not None:
                if first.record != f.record:
                    raise MergeError(f"run {f.run_id} is in {first.folder / RUN_FILE} and {f.folder / RUN_FILE} with different "
                                     "records (the same run made twice, e.g. two shards with different splits or a folder "
                                     "merged from an older session); remove one of the two run folders, then merge again")
                same += 1
                continue
            other = by_rel.get(f.rel)
            if other is not None:
                raise MergeError(f"{other.folder / RUN_FILE} ({other.run_id}) and {f.folder / RUN_FILE} ({f.run_id}) would "
                                 f"share the run folder {f.rel}; remove one, then merge again")
            seen[f.run_id] = by_rel[f.rel] = f
            if source != target:
                copies.append(f)
    return copies, same, list(seen.values())


def split_files(found: list[Found]) -> list[str]:
    """Warnings for one task or trial file whose runs name it by different paths (the same file name and content
    hash, its runs from shards that ran it from different checkout folders): the reports take each path as a file
    of its own, so one trial's cells and comparisons would be split in two."""
    paths: dict[tuple[str, str, str], set[str]] = {}
    for f in found:
        record = f.record if isinstance(f.record, dict) else {}
        source, digest = str(record.get("source") or ""), str(record.get("content_hash") or "")
        if source and digest:
            paths.setdefault((str(record.get("kind")), Path(source).name, digest), set()).add(source)
    return [f"agentrace merge: warning: the {kind} file {name} was run from {len(where)} folders ({', '.join(sorted(where))}): "
            "the reports take each as a file of its own; run every shard from the same checkout path"
            for (kind, name, _), where in sorted(paths.items()) if len(where) > 1]


class Last(NamedTuple):
    """What the inputs' ``last-session.json`` files say together (``last_session``)."""

    sessions: list[str]
    ids: list[str]
    shards: tuple[int, list[int]] | None  # (N, [K, ...])
    stopped: list[int]  # the shards whose session stopped before every run ran
    root: str | None  # the rootdir they share, None when they differ
    splits: dict[int, str]  # shard -> the digest of its split of the runs


def last_session(outs: list[Path]) -> Last | None:
    """What the inputs' ``last-session.json`` files say (``Last``; None when none has one). Raises ``MergeError``
    for an unreadable one, for shards of different totals, and for shards that split the runs differently (they
    read different histories: some runs ran twice and others never)."""
    sessions, ids, any_found = [], set(), False
    totals, ran, stopped, roots = set(), set(), set(), set()
    splits: dict[int, str] = {}
    for out in outs:
        path = out / LAST_SESSION_FILE
        if not path.is_file():
            continue
        try:
            data = read_json(path)
        except (OSError, ValueError) as exc:
            raise MergeError(f"{exc}; remove it (or the whole input) and merge again") from None
        if isinstance(data, dict) and isinstance(data.get("run_ids"), list):
            any_found = True
            ids.update(str(i) for i in data["run_ids"])
            if data.get("session_id"):
                sessions.append(str(data["session_id"]))
            if isinstance(data.get("rootdir"), str):
                roots.add(data["rootdir"])
            if (shards := session_shards(data)) is not None:
                totals.add(shards[0])
                ran.update(shards[1])
                stopped.update(stopped_shards(data))
                splits.update(shard_splits(data))
    if len(totals) > 1:
        raise MergeError(f"the inputs are shards of {' and '.join(map(str, sorted(totals)))} machines: shards of one "
                         "session share their total (--agentrace-shard K/N); merge those of one session")
    if len(set(splits.values())) > 1:
        groups: dict[str, list[int]] = {}
        for k, digest in sorted(splits.items()):
            groups.setdefault(digest, []).append(k)
        seen = "; ".join(f"shard{'s' if len(ks) > 1 else ''} {', '.join(map(str, ks))}: {d}" for d, ks in groups.items())
        raise MergeError(f"the shards split the runs differently ({seen}): each read another history of run durations, "
                         "so some runs ran twice and others never. Give every shard the same history file "
                         "(--agentrace-db FILE restored on each, as the CI examples do) or each an empty one of its own "
                         "(--agentrace-db shardK/history.db), and run the shards again")
    root = roots.pop() if len(roots) == 1 else None  # shards run from different folders have no one rootdir
    if not any_found:
        return None
    return Last(sessions, sorted(ids), (totals.pop(), sorted(ran)) if totals else None, sorted(stopped), root, splits)


def merge(outs: list[Path], target: Path, dbs: list[Path], to_db: Path) -> list[str]:
    """Merge ``outs`` into ``target`` (see the module docstring); returns the lines to print. Raises ``MergeError``
    before writing anything when the run records conflict or a folder is missing, and before copying any run when
    the histories conflict (each history file is merged in one transaction)."""
    for out in outs:
        if not out.is_dir():
            raise MergeError(f"{out}: no such results folder")
        if why := linked(out, ("runs", MANIFEST_DIR)):
            raise MergeError(why)
        if problems := manifest_problems(out):
            raise MergeError(f"{out}: {len(problems)} unverifiable records ({problems[0]}); run `agentrace verify {out}`, "
                             "and re-run or remove what it names")
    if why := linked(target, ("runs", MANIFEST_DIR, DEFAULT_NAME)) or (to_db.is_symlink() and f"{to_db} is a link; "
                                                                       "name the history file itself"):
        raise MergeError(why)
    found = last_session([o for o in outs if o != target])  # before the records: a split that differs says so first
    copies, same, held = plan(outs, target)
    lines = [note for out in outs if (note := manifest_note(out))] + split_files(held)
    histories = [d for d in dict.fromkeys([*(o / DEFAULT_NAME for o in outs), *dbs]) if d.is_file() and d != to_db]
    if histories:
        try:
            with Store(to_db) as store:
                added = [store.merge_from(d) for d in histories]
        except StoreError as exc:
            raise MergeError(str(exc)) from None
        lines.append(f"agentrace merge: history {to_db}: {sum(a[0] for a in added)} sessions, {sum(a[1] for a in added)} "
                     f"runs added from {len(histories)} files")
    target.mkdir(parents=True, exist_ok=True)
    for f in copies:
        try:
            copy_run(f.folder, target, f.rel)
        except OSError as exc:
            raise MergeError(f"{exc.strerror or exc}; {len(copies) - copies.index(f)} runs were not copied") from None
    copy_manifests(outs, target)
    lines.append(f"agentrace merge: {len(copies)} runs copied into {target}" + (f" ({same} identical duplicates skipped)" if same else ""))
    if found is not None:
        write_last_session(target, "+".join(found.sessions) or "merged", found.ids, found.shards, found.stopped, found.root,
                           found.splits)
        if why := missing_shards(target):
            lines.append(f"agentrace merge: warning: {why}")
    return lines


def cmd_merge(args: argparse.Namespace) -> int:
    target = Path(args.to).resolve()
    outs = [Path(o).resolve() for o in args.outs]
    to_db = Path(args.to_db).resolve() if args.to_db else target / DEFAULT_NAME
    try:
        lines = merge(outs, target, [Path(d).resolve() for d in args.db], to_db)
    except MergeError as exc:
        print(f"agentrace merge: {exc}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    return 0
