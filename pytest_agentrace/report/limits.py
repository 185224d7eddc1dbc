"""Resource-limit hits in the reports: which limit a run hit (``run.json`` ``extra.limit_hit``, else its reason
``resource limit: memory ...``), its status as shown in tables (``failed (memory limit)``) and the session's count
(``limit hits: 3 (disk 1, memory 2)``). Works on an ``Outcome`` or its dict (the JSON export's runs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_agentrace.record.model import Outcome
from pytest_agentrace.run.limits import REASON_RE, REASON_WORD


def limit_word(run: Outcome | Mapping[str, Any]) -> str | None:
    """``"memory"``, ``"processes"``, ``"disk"`` or ``"cpu"`` for a run that hit a resource limit, else None."""
    extra = (run.extra if isinstance(run, Outcome) else run.get("extra")) or {}
    reason = (run.reason if isinstance(run, Outcome) else run.get("reason")) or ""
    hit = extra.get("limit_hit") if isinstance(extra, Mapping) else None
    if isinstance(hit, Mapping) and hit.get("limit") in REASON_WORD:
        return REASON_WORD[hit["limit"]]
    found = REASON_RE.match(str(reason))
    return found.group(1) if found else None


def status_text(run: Outcome | Mapping[str, Any]) -> str:
    """The run's status for a table cell: ``failed (memory limit)`` for a limit hit, else the status."""
    status = str(run.status if isinstance(run, Outcome) else run.get("status"))
    word = limit_word(run)
    return f"{status} ({word} limit)" if word else status


def hits_line(runs: Iterable[Outcome | Mapping[str, Any]]) -> str | None:
    """``limit hits: 3 (disk 1, memory 2)`` over ``runs`` (limits in name order), or None when none hit one."""
    counts = Counter(w for w in map(limit_word, runs) if w)
    if not counts:
        return None
    return f"limit hits: {sum(counts.values())} (" + ", ".join(f"{w} {n}" for w, n in sorted(counts.items())) + ")"
