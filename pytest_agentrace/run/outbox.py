"""The outbox: the one folder of a run's record an agent (and its checks) may write, and what the harness takes from it
afterwards.

``{run_dir}`` and ``$TRIAL_OUT`` name the outbox (``<scratch>/outbox``), never the run's record folder: the agent
never sees the folder the harness writes its records into. After the run, ``collect`` copies the outbox's regular
files into the record folder's own sub-folder ``outbox/`` (``record.runfile.OUTBOX_DIR``), at the same relative
paths: whatever the agent names its files (``lint.log``, ``harness-error.log``, ``codex-session.jsonl``,
``attempts/x.txt``), they never sit beside the harness's records, so no name the harness writes in any run (check
logs, setup logs, adapters' session files, the double's logs, ...) can be taken or passed off as the harness's, and
no hand list of reserved names can drift from the writers. The one exception is ``harness``: top-level names the
harness's own processes in the box wrote there this run (the model double inside the run's namespace writes its
request logs into the outbox, the only folder it can write), copied to the record folder's top level as before.

Links (to files or folders), FIFOs and devices are skipped and never followed, each file is read with no-follow
(``record.safefile.read_bytes``) and written with no-follow and exclusive create into folders the harness makes, at
most ``FILE_CAP`` bytes a file, ``TOTAL_CAP`` in all and ``COUNT_CAP`` files (what lies past it is neither copied
nor listed one by one), and a path the record folder already holds is never replaced. A file is stored under its
name as text (``stored_name``: bytes that are no UTF-8 as ``\\xNN``, secrets as ``<redacted>``); a folder too deep
to be listed by its path is named in ``skipped``. Nothing named ``run.json``
(file or folder) is copied, at any depth: the record readers take every ``runs/**/run.json`` for a run (an agent's
``sub/run.json`` was counted as another agent's passed run). Every copied file goes through redaction
(``redact_bytes``): the session's secret values are replaced in any file, and a UTF-8 text file also gets
``record.redact.redact``'s key shapes and secret assignments; an agent that writes a key into a side file leaves
``<redacted>`` in the record. What happened is returned, for the run's ``extra.outbox``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from pytest_agentrace import fstree
from pytest_agentrace.record.redact import MARK, redact
from pytest_agentrace.record.runfile import OUTBOX_DIR, RUN_FILE
from pytest_agentrace.record.safefile import TEMP_PREFIX, UnsafePath, is_regular, read_bytes, write_new
from pytest_agentrace.run.discard import remove

FILE_CAP = 64 * 1024**2  # bytes of one file copied out
TOTAL_CAP = 256 * 1024**2  # bytes copied out of one outbox
COUNT_CAP = 10_000  # entries (files, links, folders) looked at in one outbox; the rest are counted, not copied
SKIPPED_CAP = 100  # entries named one by one in ``skipped``
PATH_MAX = 4096  # bytes of a path Linux takes (linux/limits.h): a folder at a longer path cannot be listed by it
NAME = "outbox"  # the folder in the run's scratch
RECORD_NAME = "a run record's name (only the harness writes one)"


def make(scratch: Path) -> Path:
    """A fresh, empty outbox in the run's scratch folder ``scratch`` (what was there is removed)."""
    box = scratch / NAME
    remove(box)  # a link or file unlinked, a folder (unlistable ones too) removed: never followed
    box.mkdir(parents=True)
    return box


def redact_bytes(data: bytes, secrets: Sequence[str] = ()) -> bytes:
    """``data`` with each of ``secrets`` (longest first, as ``record.redact.secret_values`` gives them) replaced by
    ``<redacted>`` in its UTF-8 bytes, then, when the whole file decodes as UTF-8, passed through
    ``record.redact.redact`` (key shapes, secret assignments, authorization headers). Binary data keeps its other
    bytes as they were."""
    mark = MARK.encode()
    for s in secrets:
        if s:
            data = data.replace(s.encode("utf-8", "surrogateescape"), mark)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    cleaned = redact(text)
    return data if cleaned == text else cleaned.encode("utf-8")


def collect(outbox: Path, record: Path, file_cap: int = FILE_CAP, total_cap: int = TOTAL_CAP,
            count_cap: int = COUNT_CAP, secrets: Sequence[str] = (), harness: Collection[str] = ()) -> dict[str, Any]:
    """Copy ``outbox``'s regular files into ``record / OUTBOX_DIR`` (made only when a file is copied), each through
    ``redact_bytes(data, secrets)`` (see the module docstring); a file at the outbox's top level whose name is in
    ``harness`` (written there this run by the harness's own process in the box) goes to ``record`` itself.

    Returns ``{"copied": n}`` (the agent's files copied), with ``"folder": OUTBOX_DIR`` when n > 0, ``"harness":
    [names]`` (the ``harness`` files copied to the top), ``"skipped": {relative path: why}`` (when something was left
    out, at most ``SKIPPED_CAP`` entries), ``"redacted": n`` (files changed by redaction, when any) and
    ``"over_count_cap": n`` (entries of the folders that would pass ``count_cap``, when there were any; their
    subfolders are not walked). The caps apply to the files as the agent left them."""
    copied, total, seen, over, redacted = 0, 0, 0, 0, 0
    skipped: dict[str, str] = {}
    own: list[str] = []

    def skip(rel: Path, why: str) -> None:
        if len(skipped) < SKIPPED_CAP:
            skipped[str(rel)] = why

    if not outbox.is_dir() or outbox.is_symlink():
        return {"copied": 0}
    for root, dirs, names in fstree.walk(outbox):
        base = Path(root)
        rel_root = base.relative_to(outbox)
        if seen + len(dirs) + len(names) > count_cap:  # a flood of files: counted, never copied or listed
            over += len(dirs) + len(names)
            dirs[:] = []
            continue
        seen += len(dirs) + len(names)
        deep = set()
        for d in list(dirs):
            if os.path.islink(base / d):
                skip(rel_root / d, "a link (not followed)")
            elif d == RUN_FILE:
                skip(rel_root / d, RECORD_NAME)
            elif len(os.fsencode(base / d)) >= PATH_MAX:  # no call can list it by its path: said, not lost unnamed
                skip(rel_root / d, f"too deep to copy (a path of {PATH_MAX} bytes or more)")
                deep.add(d)
        dirs[:] = sorted(d for d in dirs if not os.path.islink(base / d) and d != RUN_FILE and d not in deep)
        for name in sorted(names):
            rel = rel_root / name
            src = base / name
            if name.startswith(TEMP_PREFIX):
                continue
            if name == RUN_FILE:  # only the harness writes a run record: readers glob runs/**/run.json
                skip(rel, RECORD_NAME)
                continue
            if not is_regular(src):
                skip(rel, "a link (not followed)" if src.is_symlink() else "not a regular file")
                continue
            theirs = rel_root == Path(".") and name in harness
            dest = record / rel if theirs else record / OUTBOX_DIR / stored_name(rel, secrets)
            if os.path.lexists(dest):
                skip(rel, "the record folder already holds this path")
                continue
            data = read_bytes(src, file_cap + 1)
            if data is None:
                skip(rel, "unreadable")
                continue
            if len(data) > file_cap or total + len(data) > total_cap:
                skip(rel, f"over the size cap ({file_cap} bytes a file, {total_cap} in all)")
                continue
            clean = redact_bytes(data, secrets)
            redacted += clean != data
            try:
                _folders(record, dest.parent.relative_to(record))
                write_new(dest, clean)
            except (UnsafePath, OSError) as exc:
                skip(rel, f"not copied: {exc}")
                continue
            if theirs:
                own.append(name)
            else:
                copied += 1
            total += len(data)
    return {"copied": copied, **({"folder": OUTBOX_DIR} if copied else {}), **({"harness": own} if own else {}),
            **({"skipped": skipped} if skipped else {}), **({"redacted": redacted} if redacted else {}),
            **({"over_count_cap": over} if over else {})}


def stored_name(rel: Path, secrets: Sequence[str] = ()) -> Path:
    """The path an outbox file ``rel`` is copied to (under the record's ``outbox/``): its bytes that are no UTF-8
    shown as ``\\xNN`` (a record's names are text: the manifest, the reports and JSON name them), then passed
    through ``record.redact.redact`` with ``secrets`` (a file named after a key is stored under ``<redacted>``)."""
    text = os.fsencode(rel).decode("utf-8", "backslashreplace")
    return Path(redact(text, secrets))


def _folders(record: Path, rel: Path) -> None:
    """Make ``record / rel`` folder by folder, refusing any part that is a link or no folder."""
    here = record
    for part in rel.parts:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            raise UnsafePath(f"{here} is a link or no folder")
        here.mkdir(exist_ok=True)
