"""SQLite history of sessions and runs (stdlib ``sqlite3``), read by ``agentrace leaderboard/history/trend``.

Where: ``--agentrace-db PATH``, else ``$AGENTRACE_DB``, else ``<rootdir>/.agentrace/history.db`` (the CLI uses
the current directory in place of the rootdir; ``record.storepath``). ``--agentrace-no-save`` writes nothing at all.

Schema (``PRAGMA user_version`` holds its version; ``MIGRATIONS[i]`` takes a database from version ``i`` to
``i + 1``, so an old file is upgraded in place the first time a newer package opens it)::

    sessions  id TEXT PK, started, finished (ISO-8601 UTC), git_sha (HEAD of the rootdir, NULL outside git),
              args (JSON list: the pytest arguments), host, version (pytest-agentrace), rootdir, out, python
    runs      id INTEGER PK, session_id -> sessions.id, run_id (RunSpec id), kind, source, case_name, arm,
              agent, model, rep, status, reason, started, seconds, total_seconds, exit_code, timed_out,
              lines_added, lines_removed, lines_changed, files_changed, tampered (JSON), input_tokens,
              output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, cost_usd, cost_source,
              turns, tool_calls (count), cli_version, agent_status, answer_correct, answer_recall, used_tool,
              claim_status, score, reused, replayed (1: the agent ran against a recorded cassette,
              ``--agentrace-replay``; its ``extra.replay`` names the cassette), outcome (the whole
              ``Outcome.to_dict`` as JSON: nothing is lost)
              UNIQUE (session_id, run_id): saving the same session twice replaces its runs.
    meta      key TEXT PK, value: the store's own settings; ``ratings_since`` (ISO-8601 UTC) is when the Elo
              ratings were last reset (``agentrace ratings --reset``)

Elo ratings are not a table of their own: they are derived from the task runs of the sessions started since
``ratings_since`` (``Store.rating_outcomes``, then ``stats.ratings.elo``), so they can never disagree with the
history they come from.

Concurrency: the file runs in WAL mode (readers never block the writer); every write is one
``BEGIN IMMEDIATE`` transaction with a busy timeout, retried with jittered exponential backoff when SQLite
still says ``database is locked`` / ``busy``, so several writer processes (two sessions at once, or many
writers in a test) lose no rows. A write that still fails after ``RETRIES`` attempts raises ``StoreError``.
"""

from __future__ import annotations

import datetime as _dt
import json
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pytest_agentrace import __version__, untrusted
from pytest_agentrace.record.model import Outcome
from pytest_agentrace.record.safefile import make_own_folder

BUSY_TIMEOUT = 10.0  # seconds SQLite waits on a lock before it says "database is locked"
RETRIES = 12  # attempts of one write transaction (with backoff) after that
T = TypeVar("T")

RUN_COLUMNS = (
    "session_id", "run_id", "kind", "source", "case_name", "arm", "agent", "model", "rep", "status", "reason",
    "started", "seconds", "total_seconds", "exit_code", "timed_out", "lines_added", "lines_removed",
    "lines_changed", "files_changed", "tampered", "input_tokens", "output_tokens", "cache_read_tokens",
    "cache_write_tokens", "total_tokens", "cost_usd", "cost_source", "turns", "tool_calls", "cli_version",
    "agent_status", "answer_correct", "answer_recall", "used_tool", "claim_status", "score", "reused", "outcome",
    "replayed",
)
SESSION_COLUMNS = ("id", "started", "finished", "git_sha", "args", "host", "version", "rootdir", "out", "python",
                   "digest")

# Each migration is a list of single statements (executescript would commit mid-transaction).
MIGRATIONS: list[list[str]] = [
    [  # 0 -> 1
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY, started TEXT NOT NULL, finished TEXT, git_sha TEXT, args TEXT NOT NULL DEFAULT '[]',
            host TEXT, version TEXT, rootdir TEXT, out TEXT, python TEXT)""",
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            run_id TEXT NOT NULL, kind TEXT NOT NULL, source TEXT, case_name TEXT NOT NULL, arm TEXT NOT NULL,
            agent TEXT NOT NULL, model TEXT, rep INTEGER NOT NULL, status TEXT NOT NULL, reason TEXT, started TEXT,
            seconds REAL, total_seconds REAL, exit_code INTEGER, timed_out INTEGER, lines_added INTEGER,
            lines_removed INTEGER, lines_changed INTEGER, files_changed INTEGER, tampered TEXT,
            input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER, cache_write_tokens INTEGER,
            total_tokens INTEGER, cost_usd REAL, cost_source TEXT, turns INTEGER, tool_calls INTEGER,
            cli_version TEXT, agent_status TEXT, answer_correct INTEGER, answer_recall REAL, used_tool INTEGER,
            claim_status TEXT, score REAL, reused INTEGER, outcome TEXT NOT NULL,
            UNIQUE (session_id, run_id))""",
        "CREATE INDEX runs_case_agent ON runs (kind, case_name, agent)",
        "CREATE INDEX runs_started ON runs (started)",
        "CREATE INDEX sessions_started ON sessions (started)",
    ],
    [  # 1 -> 2: settings of the store itself (e.g. ratings_since, when the Elo ratings were last reset)
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ],
    [  # 2 -> 3: runs replayed from a cassette (--agentrace-replay) are marked as such
        "ALTER TABLE runs ADD COLUMN replayed INTEGER NOT NULL DEFAULT 0",
    ],
    [  # 3 -> 4: the results digest the session printed at its end (record.manifest.results_digest)
        "ALTER TABLE sessions ADD COLUMN digest TEXT",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)


class StoreError(Exception):
    """The history store cannot be opened, migrated or written (message names the file and the cause)."""


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _is_lock_error(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


@dataclass
class SessionInfo:
    """One session's row: ``id``, ``started``/``finished`` (ISO-8601 UTC), ``git_sha``, ``args`` (argv list),
    ``host``, ``version`` (of pytest-agentrace), ``rootdir``, ``out`` (results folder), ``python``, ``digest`` (the
    results folder's digest at the session's end, ``record.manifest.results_digest``)."""

    id: str
    started: str = field(default_factory=_now)
    finished: str | None = None
    git_sha: str | None = None
    args: Sequence[str] = ()
    host: str | None = None
    version: str | None = None
    rootdir: str | None = None
    out: str | None = None
    python: str | None = None
    digest: str | None = None

    @classmethod
    def collect(cls, session_id: str, rootdir: Path | str, args: Sequence[str] = (), out: Path | str | None = None,
                started: str | None = None) -> SessionInfo:
        """Fill host, product and Python versions and the rootdir's git HEAD (None outside a git work tree)."""
        import platform
        import socket

        return cls(
            id=session_id, started=started or _now(), git_sha=git_sha(Path(rootdir)), args=list(args),
            host=socket.gethostname(), version=__version__, rootdir=str(rootdir), out=str(out) if out else None,
            python=platform.python_version(),
        )

    def row(self) -> tuple:
        return (self.id, self.started, self.finished, self.git_sha, json.dumps(list(self.args)), self.host,
                self.version, self.rootdir, self.out, self.python, self.digest)


def git_sha(path: Path) -> str | None:
    """``git rev-parse HEAD`` in ``path`` (None when it is not a git work tree or git is missing)."""
    import subprocess

    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = res.stdout.strip()
    return sha if res.returncode == 0 and sha else None


def run_row(session_id: str, o: Outcome) -> tuple:
    """The ``runs`` row (in ``RUN_COLUMNS`` order) of one outcome."""
    u = o.usage
    a = o.answer_score or {}

    def b(x: Any) -> int | None:
        return None if x is None else int(bool(x))

    values = {
        "session_id": session_id, "run_id": o.run_id, "kind": o.kind, "source": o.source, "case_name": o.case,
        "arm": o.arm, "agent": o.agent, "model": o.model or u.model, "rep": o.rep, "status": str(o.status),
        "reason": o.reason, "started": o.started or None, "seconds": o.seconds, "total_seconds": o.total_seconds,
        "exit_code": o.exit_code, "timed_out": b(o.timed_out), "lines_added": o.lines_added,
        "lines_removed": o.lines_removed, "lines_changed": o.lines_changed, "files_changed": o.files_changed,
        "tampered": json.dumps(list(o.tampered)), "input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
        "cache_read_tokens": u.cache_read_tokens, "cache_write_tokens": u.cache_write_tokens,
        "total_tokens": u.total_tokens, "cost_usd": u.cost_usd, "cost_source": str(u.cost_source),
        "turns": u.turns, "tool_calls": len(u.tool_calls), "cli_version": u.cli_version,
        "agent_status": str(u.status), "answer_correct": b(a.get("correct")) if a else None,
        "answer_recall": a.get("recall") if a else None, "used_tool": b(o.used_tool),
        "claim_status": (o.claim or {}).get("status"), "score": o.score, "reused": b(o.reused),
        "outcome": json.dumps(o.record, sort_keys=True), "replayed": int(bool((o.extra or {}).get("replay"))),
    }
    return tuple(_storable(values[c]) for c in RUN_COLUMNS)


SQL_INT = (-(2**63), 2**63 - 1)  # SQLite's INTEGER range: a larger Python int raises OverflowError on insert


def _storable(value: Any) -> Any:
    """``value`` as a column takes it: an integer outside SQLite's range is NULL (unknown; the run's ``outcome``
    JSON keeps it), and a string that is no UTF-8 text (a lone surrogate) is ``untrusted.text``'s, so one record
    never fails the transaction that saves a whole session."""
    if type(value) is int and not SQL_INT[0] <= value <= SQL_INT[1]:
        return None
    if type(value) is str and not value.isascii():
        return untrusted.text(value)
    return value


class Store:
    """A connection to one history file. Opening creates the folder and file, sets WAL and migrates.

    Raises ``StoreError`` when the file is not a SQLite database, was written by a newer schema than this
    package knows, or stays locked through every retry. Use as a context manager or call ``close()``.
    """

    def __init__(self, path: Path | str, busy_timeout: float = BUSY_TIMEOUT, retries: int = RETRIES):
        self.path = Path(path)
        self.retries = retries
        self.lock_retries = 0  # how often a write waited for another writer and tried again
        try:
            make_own_folder(self.path.parent)  # a folder made here gets a .gitignore (.agentrace/ in a project)
            self.conn = sqlite3.connect(str(self.path), timeout=busy_timeout, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{self.path}: cannot open the history store: {exc}") from None
        self.conn.row_factory = sqlite3.Row
        try:
            self._retry(lambda: self.conn.execute("PRAGMA journal_mode=WAL").fetchone())
            self.conn.execute("PRAGMA foreign_keys=ON")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise StoreError(f"{self.path}: not a usable history store ({exc}); move it away or pass another --agentrace-db") from None
        except StoreError:
            self.conn.close()
            raise

    def __enter__(self) -> Store:  # noqa: PYI034 - Store is not meant to be subclassed
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # -- writing -------------------------------------------------------------------------------------------

    def _retry(self, fn: Callable[[], T]) -> T:
        """Call ``fn``; on ``database is locked``/``busy`` roll back, wait (jittered backoff) and call it again."""
        delay = 0.05
        for attempt in range(self.retries):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_lock_error(exc):
                    raise
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                self.lock_retries += 1
                if attempt == self.retries - 1:
                    raise StoreError(f"{self.path}: still locked after {self.retries} attempts: {exc}") from None
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    def _transaction(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body(conn)`` inside one ``BEGIN IMMEDIATE`` transaction, retried as a whole when locked."""

        def attempt() -> T:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                result = body(self.conn)
                self.conn.execute("COMMIT")
                return result
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

        return self._retry(attempt)

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path}: history schema version {version} is newer than this pytest-agentrace knows ({SCHEMA_VERSION}); upgrade pytest-agentrace")
        if version == SCHEMA_VERSION:
            return

        def body(conn: sqlite3.Connection) -> None:
            current = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have migrated
            for step in range(current, SCHEMA_VERSION):
                for statement in MIGRATIONS[step]:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {step + 1}")

        self._transaction(body)

    @property
    def version(self) -> int:
        """The file's schema version (``PRAGMA user_version``)."""
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    def save_session(self, info: SessionInfo, outcomes: Iterable[Outcome] = ()) -> int:
        """Insert (or replace) the session row and its runs in one transaction; returns the number of runs written.

        Runs are keyed by ``(session id, run id)``: saving again replaces them, never duplicates.
        """
        rows = [run_row(info.id, o) for o in outcomes]
        placeholders = ", ".join("?" for _ in RUN_COLUMNS)
        session_sql = (f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES ({', '.join('?' for _ in SESSION_COLUMNS)}) "
                       "ON CONFLICT(id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in SESSION_COLUMNS[1:]))
        run_sql = f"INSERT OR REPLACE INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({placeholders})"

        def body(conn: sqlite3.Connection) -> int:
            conn.execute(session_sql, info.row())
            conn.executemany(run_sql, rows)
            return len(rows)

        return self._transaction(body)

    def add_runs(self, session_id: str, outcomes: Iterable[Outcome]) -> int:
        """Add runs to an existing session (one transaction); raises ``StoreError`` when the session is unknown."""
        rows = [run_row(session_id, o) for o in outcomes]
        run_sql = f"INSERT OR REPLACE INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' for _ in RUN_COLUMNS)})"

        def body(conn: sqlite3.Connection) -> int:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                raise StoreError(f"{self.path}: no session {session_id!r} to add runs to")
            conn.executemany(run_sql, rows)
            return len(rows)

        return self._transaction(body)

    def merge_from(self, other: Path | str) -> tuple[int, int]:
        """Copy the sessions and runs of the history file ``other`` into this one (one transaction); returns
        ``(sessions added, runs added)``.

        A session or run already here (same session id; same session id and run id) is kept when the rows are equal
        (a history restored on several machines holds the same old sessions); a run whose stored ``outcome`` differs
        raises ``StoreError`` naming both files, the session and the run id, and nothing is written. A session row
        that differs only in ``finished`` or other metadata keeps this file's. ``ratings_since`` becomes the later
        of the two (the most recent reset wins). ``other`` is opened as a store (so an older schema is migrated)."""
        with Store(other) as src:
            sessions = [dict(r) for r in src.conn.execute(f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions")]
            runs = [dict(r) for r in src.conn.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs")]
            since = src.meta("ratings_since")
        session_sql = (f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES ({', '.join('?' for _ in SESSION_COLUMNS)}) "
                       "ON CONFLICT(id) DO NOTHING")
        run_sql = f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' for _ in RUN_COLUMNS)})"

        def body(conn: sqlite3.Connection) -> tuple[int, int]:
            added_sessions = sum(conn.execute(session_sql, tuple(row[c] for c in SESSION_COLUMNS)).rowcount
                                 for row in sessions)
            added_runs = 0
            for row in runs:
                here = conn.execute("SELECT outcome FROM runs WHERE session_id = ? AND run_id = ?",
                                    (row["session_id"], row["run_id"])).fetchone()
                if here is None:
                    conn.execute(run_sql, tuple(row[c] for c in RUN_COLUMNS))
                    added_runs += 1
                elif json.loads(here[0]) != json.loads(row["outcome"]):
                    raise StoreError(f"{other} and {self.path}: session {row['session_id']} has two different records of "
                                     f"run {row['run_id']}; keep one of the files out of the merge")
            mine = conn.execute("SELECT value FROM meta WHERE key = 'ratings_since'").fetchone()
            if since and (mine is None or since > mine[0]):
                conn.execute("INSERT INTO meta (key, value) VALUES ('ratings_since', ?) "
                             "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (since,))
            return added_sessions, added_runs

        return self._transaction(body)

    # -- reading -------------------------------------------------------------------------------------------

    def sessions(self, since: str | None = None) -> list[dict[str, Any]]:
        """Session rows (dicts, ``args`` decoded), oldest first; ``since`` is an ISO date/time lower bound."""
        sql, params = "SELECT * FROM sessions", []
        if since:
            sql, params = sql + " WHERE started >= ?", [since]
        rows = self.conn.execute(sql + " ORDER BY started, id", params).fetchall()
        return [{**dict(r), "args": json.loads(r["args"] or "[]")} for r in rows]

    def runs(self, kind: str | None = None, case: str | None = None, agent: str | None = None,
             since: str | None = None, session_id: str | None = None) -> list[dict[str, Any]]:
        """Run rows as dicts (``outcome`` left as JSON text; see ``outcomes``), oldest session first.

        ``since`` (ISO-8601) compares with the session's start, so a race is never split by the bound.
        Each row also carries ``session_started``.
        """
        where, params = [], []
        for column, value in (("r.kind", kind), ("r.case_name", case), ("r.agent", agent), ("r.session_id", session_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if since:
            where.append("s.started >= ?")
            params.append(since)
        sql = ("SELECT r.*, s.started AS session_started FROM runs r JOIN sessions s ON s.id = r.session_id"
               + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY s.started, r.session_id, r.kind, r.case_name, r.rep, r.arm, r.agent")
        return [dict(r) for r in self.conn.execute(sql, params).fetchall()]

    def outcomes(self, **filters: Any) -> list[Outcome]:
        """``runs(**filters)`` as ``Outcome`` objects (rows whose record this package cannot read are skipped)."""
        result = []
        for row in self.runs(**filters):
            try:
                result.append(Outcome.from_dict(json.loads(row["outcome"])))
            except (ValueError, TypeError, KeyError):
                continue
        return result

    def rating_outcomes(self) -> list[Outcome]:
        """The task outcomes the Elo ratings are computed from: those of the sessions started since the last
        ``reset_ratings`` (all of them when the ratings were never reset)."""
        return self.outcomes(kind="task", since=self.meta("ratings_since"))

    def reset_ratings(self) -> str:
        """Forget the Elo ratings: later ratings count only sessions started from now on. Returns the time (ISO)."""
        now = _now()
        self._transaction(lambda conn: conn.execute(
            "INSERT INTO meta (key, value) VALUES ('ratings_since', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (now,)))
        return now

    def meta(self, key: str) -> str | None:
        """A value of the ``meta`` table, or None."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def count_runs(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def save(path: Path | str, info: SessionInfo, outcomes: Iterable[Outcome]) -> int:
    """Open the store at ``path``, save one session with its runs, close; returns the number of runs."""
    with Store(path) as store:
        return store.save_session(info, outcomes)


def cell_seconds(db: Path | None) -> dict[str, float]:
    """Mean ``total_seconds`` (else ``seconds``) of the history's runs per cell (``"<kind>:<case>/<arm>/<agent>"``):
    the expected durations ``spec.shard`` balances shards by. Empty when ``db`` is None or missing (it is never created
    here) or cannot be read."""
    if db is None or not Path(db).is_file():
        return {}
    sums: dict[str, list[float]] = {}
    try:
        with Store(db) as store:
            rows = store.conn.execute(
                "SELECT kind, case_name, arm, agent, COALESCE(total_seconds, seconds) AS s FROM runs "
                "WHERE COALESCE(total_seconds, seconds) IS NOT NULL").fetchall()
    except (StoreError, OSError):
        return {}
    for row in rows:
        sums.setdefault(f"{row['kind']}:{row['case_name']}/{row['arm']}/{row['agent']}", []).append(float(row["s"]))
    return {cell: sum(v) / len(v) for cell, v in sums.items()}
