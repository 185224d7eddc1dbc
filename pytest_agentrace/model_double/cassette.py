"""Cassettes: one run's model traffic (requests and responses, streams chunk by chunk) as plain JSON, and
the matching that replays it.

A cassette is one file per run, ``<DIR>/<run id with '/' and ':' as '__'>.json`` (``cassette_path``), written
by the recording proxy (``recorder``) and played by the model double (``server``, a route with a
``Replayer``). Format, version 1 (``docs/cassettes.md``)::

    {"version": 1, "run_id": "task:hello/default/claude/r1", "agent": "claude", "adapter": "claude",
     "recorded": "2026-12-01T12:00:00+00:00", "upstream": "http://127.0.0.1:8765",
     "interactions": [
       {"turn": 1,                       # POST requests count turns (1, 2, ...); HEAD/GET have "turn": null
        "request": {"method": "POST", "path": "/v1/messages", "query": {"beta": ["true"]},
                    "headers": {...}, "body": {...}},          # body: JSON, or {"text": ...} / {"base64": ...}
        "response": {"status": 200, "headers": {...},
                     "chunks": ["event: message_start\\ndata: {...}\\n\\n", ...],   # as they arrived
                     "encoding": "utf-8"}}                     # or "base64" (then every chunk is base64)
     ]}

Nothing secret is written: auth headers and headers whose names look secret are left out, query keys such as
``key`` dropped, and every string goes through ``record.redact`` (the session's secret values, the dummy key
and known key shapes). Nothing of the recording machine is written either (``normalise``): the run's paths
(workspace, HOME, basetemp, results folder) and the host's facts (user and host name, kernel, OS) are written as
placeholders (``{{workspace}}``, ``{{home}}``, ``{{user}}``, ...) and put back on replay, so a cassette replays in
another folder, session and machine (a path split across two stream chunks is kept). Requests are stored
normalised: volatile keys dropped and volatile text marked (ids, timestamps, object addresses, temp-folder
numbers), and headers that carry session or request ids as ``<id>``.

Matching (``Replayer``): the k-th POST to a path is compared with the next unused recorded POST to that path.
``strict`` compares method, path, query and body after ``normalise.normalise`` (the same normalisers as when
recording, with the replaying run's paths and machine as placeholders); headers are never compared (user agents,
session and request ids live there). ``loose`` matches by turn only.
"""

from __future__ import annotations

import base64
import codecs
import datetime as _dt
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentrace import untrusted
from pytest_agentrace.model_double.normalise import (  # noqa: F401 - re-exported: the cassette's normalisers
    HOME,
    VOLATILE_KEYS,
    VOLATILE_TEXT,
    WORKSPACE,
    HostFacts,
    Portable,
    normalise,
    normalise_headers,
    normalise_text,
)
from pytest_agentrace.record.redact import is_secret_name, keyed, redact
from pytest_agentrace.record.safefile import write_text
from pytest_agentrace.run.runspec import REPLAY_MATCHES

VERSION = 1
MATCH_MODES = STRICT, LOOSE = REPLAY_MATCHES
# request headers never written: credentials, and hop-by-hop headers that say nothing about the request
DROP_HEADERS = {"authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie", "set-cookie",
                "proxy-authorization", "connection", "keep-alive", "transfer-encoding", "content-length", "host"}
DROP_QUERY = {"key", "api_key", "access_token"}


class CassetteError(Exception):
    """A cassette file is missing, unreadable or of an unknown version (the message names the file)."""


def cassette_path(root: Path | str, run_id: str) -> Path:
    """The cassette file of ``run_id`` under ``root``: ``task:hello/default/claude/r1`` ->
    ``<root>/task__hello__default__claude__r1.json``."""
    return Path(root) / (re.sub(r"[/:\\]", "__", run_id) + ".json")


@dataclass
class Cassette:
    """One run's recorded traffic (see the module docstring for the file format)."""

    run_id: str
    interactions: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)  # agent, adapter, recorded, upstream, ...

    @property
    def turns(self) -> list[dict[str, Any]]:
        """The POST interactions (model requests), in order."""
        return [i for i in self.interactions if i.get("turn") is not None]

    def to_dict(self) -> dict[str, Any]:
        return {"version": VERSION, "run_id": self.run_id, **self.info, "interactions": self.interactions}

    def save(self, path: Path) -> Path:
        """Write the cassette (indented JSON, keys in file order) atomically; returns ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_text(path, json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n")  # no link followed

    @classmethod
    def load(cls, path: Path | str) -> Cassette:
        """Read a cassette file. Raises ``CassetteError`` naming the file for a missing or broken file, a
        ``version`` other than 1, or interactions that are not a list of objects."""
        path = Path(path)
        try:
            data = untrusted.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CassetteError(f"{path}: no cassette (record it first with --agentrace-record DIR)") from None
        except (OSError, ValueError) as exc:
            raise CassetteError(f"{path}: not a readable JSON cassette: {exc}") from None
        if not isinstance(data, dict) or data.get("version") != VERSION:
            got = data.get("version") if isinstance(data, dict) else None
            raise CassetteError(f"{path}: key 'version': cassette version {got!r}, this package reads version "
                                f"{VERSION}")
        inter = data.pop("interactions", None)
        if not isinstance(inter, list) or not all(isinstance(i, dict) and isinstance(i.get("request"), dict)
                                                  and isinstance(i.get("response"), dict) for i in inter):
            raise CassetteError(f"{path}: key 'interactions' must be a list of {{request, response}} objects")
        data.pop("version")
        return cls(str(data.pop("run_id", "")), inter, data)


# --- writing: secrets out, local paths as placeholders -------------------------------------------------------


@dataclass(frozen=True)
class Scrubber:
    """Makes recorded values safe and portable: ``secrets`` (literal values) redacted, this run's paths and this
    machine's facts written as placeholders (``portable``, ``normalise.Portable``); ``restore`` puts this run's
    values back."""

    secrets: tuple[str, ...] = ()
    portable: Portable = field(default_factory=Portable)

    @classmethod
    def make(cls, secrets: Iterable[str], workspace: Path | str | None, home: Path | str | None,
             other_homes: Iterable[Path | str] = (), *, basetemp: Path | str | None = None,
             results: Path | str | None = None, facts: HostFacts | None = None) -> Scrubber:
        """``home`` is the HOME the CLI sees (restored on replay); ``other_homes`` are only scrubbed (the per-run
        HOME outside a sandbox whose CLI sees another); ``basetemp`` and ``results`` are the session's; ``facts``
        the machine's (``HostFacts.read()`` when None). See ``normalise.Portable.make``."""
        portable = Portable.make(workspace, home, other_homes, basetemp, results, facts)
        return cls(tuple(sorted({s for s in secrets if s}, key=len, reverse=True)), portable)

    def text(self, value: str) -> str:
        return redact(self.portable.apply(value), self.secrets)

    def data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return keyed(((k, self.data(v)) for k, v in value.items()), self.text)
        if isinstance(value, list):
            return [self.data(v) for v in value]
        return value

    def restore(self, value: str) -> str:
        """``value`` with the placeholders replaced by this run's paths and this machine's facts."""
        return self.portable.restore(value)

    def headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        """Headers fit to write: credentials, secret-looking names and hop-by-hop headers left out."""
        return {k: self.text(v) for k, v in headers.items()
                if k.lower() not in DROP_HEADERS and not is_secret_name(k)}

    def request(self, method: str, path: str, query: Mapping[str, list[str]], headers: Mapping[str, str],
                raw: bytes) -> dict[str, Any]:
        """A request as stored: scrubbed (``text``), then normalised (``normalise.normalise``; headers by
        ``normalise.normalise_headers``): what strict matching compares, with nothing volatile or of this machine."""
        body = request_body(raw, self)
        return {"method": method, "path": path, "query": normalise(self.query(query)),
                "headers": normalise_headers(self.headers(headers)),
                "body": body if isinstance(body, dict) and set(body) == {"base64"} else normalise(body)}

    def query(self, query: Mapping[str, list[str]]) -> dict[str, list[str]]:
        return keyed(((k, [self.text(x) for x in v]) for k, v in query.items() if k.lower() not in DROP_QUERY), self.text)

    def chunks(self, raw: list[bytes]) -> tuple[list[str], str]:
        """``(chunks, encoding)``: the stream as UTF-8 text chunks (a character split across reads goes with
        the chunk that completes it), scrubbed; ``base64`` when it is not UTF-8. A secret or path that spans
        chunks is caught by scrubbing the joined text, which then becomes one chunk."""
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            texts = [decoder.decode(c) for c in raw] + [decoder.decode(b"", final=True)]
        except UnicodeDecodeError:
            return [base64.b64encode(c).decode() for c in raw], "base64"
        texts = [t for t in texts if t]
        clean = [self.text(t) for t in texts]
        whole = "".join(clean)
        if self.text(whole) != whole:
            clean = [self.text("".join(texts))]
        return clean, "utf-8"


def request_body(raw: bytes, scrub: Scrubber) -> Any:
    """A request body as written to a cassette: its JSON, else ``{"text": ...}``, else ``{"base64": ...}``."""
    if not raw:
        return None
    try:
        return scrub.data(untrusted.loads(raw))
    except ValueError:
        pass
    try:
        return {"text": scrub.text(raw.decode("utf-8"))}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode()}


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


# --- matching ------------------------------------------------------------------------------------------------


def comparable(request: Mapping[str, Any]) -> dict[str, Any]:
    """What strict matching compares of a recorded or live request: method, path, query (without keys), body,
    normalised."""
    query = {k: v for k, v in (request.get("query") or {}).items() if k.lower() not in DROP_QUERY}
    return {"method": request.get("method"), "path": request.get("path"), "query": normalise(query),
            "body": normalise(request.get("body"))}


def _show(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _differ(recorded: Any, live: Any) -> str:
    """``recorded X, got Y``; for two strings, from a little before the first character that differs."""
    if not (isinstance(recorded, str) and isinstance(live, str)):
        return f"recorded {_show(recorded)}, got {_show(live)}"
    pairs = enumerate(zip(recorded, live, strict=False))
    at = next((i for i, (a, b) in pairs if a != b), min(len(recorded), len(live)))
    start = max(0, at - 20)
    cut = "..." if start else ""
    return (f"differs at character {at}: recorded {cut}{_show(recorded[start:], 60)}, "
            f"got {cut}{_show(live[start:], 60)}")


def first_difference(recorded: Any, live: Any, where: str = "") -> tuple[str, str] | None:
    """``(field, "recorded X, got Y")`` for the first place two JSON values differ (depth first, dict keys in
    recorded order then new ones, list items by index), or None when equal. ``field`` is a path such as
    ``body.messages[0].content[1].text``."""
    if isinstance(recorded, dict) and isinstance(live, dict):
        for k in [*recorded, *(k for k in live if k not in recorded)]:
            sub = f"{where}.{k}" if where else str(k)
            if k not in live:
                return sub, f"recorded {_show(recorded[k])}, missing now"
            if k not in recorded:
                return sub, f"not recorded, now {_show(live[k])}"
            found = first_difference(recorded[k], live[k], sub)
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(live, list):
        for i, (a, b) in enumerate(zip(recorded, live, strict=False)):
            found = first_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        if len(recorded) != len(live):
            return f"{where}[{min(len(recorded), len(live))}]", f"recorded {len(recorded)} items, got {len(live)}"
        return None
    if recorded != live:
        return where or "(value)", _differ(recorded, live)
    return None


@dataclass(frozen=True)
class Reply:
    """A recorded response to play: ``status``, ``headers`` (to send), ``chunks`` (bytes, in order), ``turn``."""

    status: int
    headers: dict[str, str]
    chunks: list[bytes]
    turn: int | None
    stream: bool


@dataclass(frozen=True)
class Mismatch:
    """A request the cassette does not hold: ``turn`` (1-based POST number), ``field`` first differing, ``why``."""

    turn: int
    field: str
    why: str

    @property
    def message(self) -> str:
        return f"cassette mismatch: turn {self.turn}: {self.field}: {self.why}"


# the recorded bytes are replayed as they came, so Content-Encoding stays; framing is the double's own
_SKIP_REPLY_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive", "date", "server"}


class Replayer:
    """Plays a ``Cassette`` for one run (thread-safe). ``answer(request)`` returns the ``Reply`` of the
    matching recorded interaction, or a ``Mismatch`` (``match``: ``strict`` or ``loose``, see the module
    docstring). ``scrub`` holds this run's paths and secrets: live requests are scrubbed like recorded ones
    before they are compared, and the placeholders in replies become this run's paths."""

    def __init__(self, cassette: Cassette, match: str = STRICT, scrub: Scrubber | None = None):
        if match not in MATCH_MODES:
            raise ValueError(f"replay match must be one of {', '.join(MATCH_MODES)}, not {match!r}")
        self.cassette, self.match, self.scrub = cassette, match, scrub or Scrubber.make((), None, None)
        self._used: set[int] = set()
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        """How many recorded turns were played."""
        return len(self._used)

    def answer(self, method: str, path: str, query: Mapping[str, list[str]],
               raw_body: bytes) -> Reply | Mismatch | None:
        """The reply to one live request; None for a HEAD/GET the cassette does not hold (the double answers
        those itself)."""
        live = {"method": method, "path": path, "query": self.scrub.query(query),
                "body": request_body(raw_body, self.scrub)}
        with self._lock:
            if method != "POST":
                found = next((i for i in self.cassette.interactions if i.get("turn") is None
                              and i["request"].get("method") == method and i["request"].get("path") == path), None)
                return self._reply(found) if found else None
            turns = self.cassette.turns
            waiting = [i for i in turns if i["turn"] not in self._used]
            nxt = waiting[0]["turn"] if waiting else len(turns) + 1
            same = [i for i in waiting if i["request"].get("path") == path]
            if not same:
                if not waiting:
                    return Mismatch(nxt, "request", f"the cassette holds {len(turns)} requests, all played; "
                                                    f"got another POST {path}")
                return Mismatch(nxt, "path", f"recorded {waiting[0]['request'].get('path')!r}, got {path!r}")
            rec = same[0]
            if self.match == STRICT:
                # the recorded side through this run's placeholders too: a cassette recorded before they existed
                # still matches in the folders and on the machine it was recorded in
                recorded = {**rec["request"], "body": self.scrub.data(rec["request"].get("body"))}
                diff = first_difference(comparable(recorded), comparable(live))
                if diff is not None:
                    return Mismatch(rec["turn"], *diff)
            self._used.add(rec["turn"])
            return self._reply(rec)

    def _reply(self, rec: Mapping[str, Any]) -> Reply:
        resp = rec["response"]
        chunks = resp.get("chunks") or []
        if resp.get("encoding") == "base64":
            data = [base64.b64decode(c) for c in chunks]
        else:
            data = [self.scrub.restore(c).encode("utf-8") for c in chunks]
        headers = {k: v for k, v in (resp.get("headers") or {}).items() if k.lower() not in _SKIP_REPLY_HEADERS}
        ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
        stream = "event-stream" in ctype or bool(resp.get("stream"))
        return Reply(int(resp.get("status") or 200), headers, data, rec.get("turn"), stream)

