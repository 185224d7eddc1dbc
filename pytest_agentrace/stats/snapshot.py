"""Snapshots: a saved per-cell baseline that later sessions are compared with. No pytest import.

Snapshot file (JSON, ``schema`` ``agentrace-snapshot``, ``version`` 1)::

    {"schema": "agentrace-snapshot", "version": 1, "name": str, "created": ISO-8601 UTC,
     "cells": {"<kind>:<case>/<arm>/<agent>": {"kind", "case", "arm", "agent", "passed": int, "total": int,
               "errors": int, "tokens": [int, ...], "cli_versions": [str], "models": [str]}}}

``total`` counts valid runs (infrastructure errors excluded, counted in ``errors``); ``tokens`` lists every
valid run's ``total_tokens`` in rep order (unknown ones left out). Keys are built from the RunSpec id without
the rep, never from pytest node ids.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.record.runfile import read_json, write_atomic
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import strata
from pytest_agentrace.stats.verdict import (
    FIXED,
    REGRESSION_ALPHA,
    SAME_NOTE,
    Verdict,
    snapshot_tests,
)

SCHEMA = "agentrace-snapshot"
VERSION = 1


class SnapshotError(ValueError):
    """A snapshot file that cannot be used; the message names the file and the fix."""


def cell_key(kind: str, case: str, arm: str, agent: str) -> str:
    """``<kind>:<case>/<arm>/<agent>``: the RunSpec id without its rep."""
    return f"{kind}:{case}/{arm}/{agent}"


def _cells(outcomes: Iterable[Outcome]) -> dict[str, list[Outcome]]:
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for o in sorted(outcomes, key=lambda o: o.rep):
        groups[cell_key(o.kind, o.case, o.arm, o.agent)].append(o)
    return groups


def cell_record(runs: Sequence[Outcome]) -> dict[str, Any]:
    """The snapshot entry of one cell's runs (race mode's ``stopped`` runs left out: neither samples nor errors)."""
    first = runs[0]
    runs = [o for o in runs if o.status != Status.STOPPED]
    valid = [o for o in runs if o.is_sample]
    return {
        "kind": first.kind, "case": first.case, "arm": first.arm, "agent": first.agent,
        "passed": sum(o.status == Status.PASSED for o in valid), "total": len(valid), "errors": len(runs) - len(valid),
        "tokens": [o.usage.total_tokens for o in valid if o.usage.total_tokens is not None],
        "cli_versions": sorted({o.usage.cli_version for o in runs if o.usage.cli_version}),
        "models": sorted({m for o in runs for m in (o.usage.model or o.model,) if m}),
    }


def make_snapshot(outcomes: Iterable[Outcome], name: str | None = None) -> dict[str, Any]:
    """A snapshot (see module docstring) of every cell in ``outcomes``."""
    return {
        "schema": SCHEMA, "version": VERSION, "name": name or "",
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cells": {k: cell_record(runs) for k, runs in sorted(_cells(outcomes).items())},
    }


def updated_snapshot(path: Path, snapshot: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``snapshot`` (this session's cells) over the snapshot file at ``path``: its cells that this session did not
    run are kept (a session of some cells, ``-k``, ``--lf``, one shard or arm, updates those cells only, as syrupy
    updates the snapshots of the tests it ran); returns the snapshot and how many cells it kept. A missing or
    unreadable file is replaced whole (kept: 0)."""
    try:
        old = read_snapshot(path)
    except SnapshotError:
        return snapshot, 0
    kept = {k: c for k, c in old["cells"].items() if k not in snapshot["cells"]}
    return {**snapshot, "name": snapshot["name"] or old.get("name") or "",
            "cells": dict(sorted({**kept, **snapshot["cells"]}.items()))}, len(kept)


def write_snapshot(path: Path, snapshot: dict[str, Any]) -> Path:
    """Write ``snapshot`` to ``path`` atomically (readers never see half a file)."""
    path = Path(path)
    write_atomic(path, json.dumps(snapshot, indent=2, sort_keys=True) + "\n")
    return path


def read_snapshot(path: Path) -> dict[str, Any]:
    """Read and check a snapshot file. Raises ``SnapshotError`` naming the file, what is wrong and the fix."""
    path = Path(path)
    fix = "write one with `agentrace snapshot OUT --to FILE` or `pytest --agentrace --agentrace-snapshot FILE --agentrace-snapshot-update`"

    try:
        data = read_json(path)
    except FileNotFoundError:
        raise SnapshotError(f"{path}: snapshot file not found; {fix}") from None
    except ValueError as exc:
        raise SnapshotError(f"{exc}; {fix}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("cells"), dict):
        raise SnapshotError(f"{path}: not an agentrace snapshot (key 'schema' must be {SCHEMA!r} with a 'cells' mapping); {fix}")
    if int(data.get("version", 0)) > VERSION:
        raise SnapshotError(f"{path}: snapshot version {data.get('version')} is newer than this pytest-agentrace supports ({VERSION}); upgrade")
    for key, cell in data["cells"].items():
        missing = [k for k in ("kind", "case", "arm", "agent", "passed", "total", "tokens") if k not in cell]
        if missing:
            raise SnapshotError(f"{path}: cell {key!r} lacks key {missing[0]!r}; {fix}")
        _check_cell(path, key, cell, fix)
    return data


def _check_cell(path: Path, key: str, cell: dict[str, Any], fix: str) -> None:
    """Types and ranges of one snapshot cell: counts are integers with 0 <= passed <= total, tokens a list of
    non-negative numbers. Raises ``SnapshotError`` naming the cell and key."""
    def bad(k: str, why: str) -> SnapshotError:
        return SnapshotError(f"{path}: cell {key!r} key {k!r}: {why}; {fix}")

    for k in ("passed", "total"):
        if not isinstance(cell[k], int) or isinstance(cell[k], bool) or cell[k] < 0:
            raise bad(k, f"must be a whole number >= 0, not {cell[k]!r}")
    if cell["passed"] > cell["total"]:
        raise bad("passed", f"{cell['passed']} is more than total {cell['total']}")
    tokens = cell["tokens"]
    if not isinstance(tokens, list) or not all(isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0 for t in tokens):
        raise bad("tokens", "must be a list of token counts >= 0")


@dataclass(frozen=True)
class SnapshotRow:
    """One cell compared with the snapshot: ``old_*`` from the snapshot, ``new_*`` from this session's runs.

    ``arm`` reads ``A -> B`` when arms were mapped (``--old-arm A --new-arm B``). ``ratio`` is the token ratio
    (new / old) contrast (``stats.Contrast.to_dict``) or None; ``verdict`` see ``verdict.snapshot_verdict``.
    ``pooled`` rows (``case`` reads ``all N cases``) compare every case of one arm and agent at once (see ``compare``).
    """

    kind: str
    case: str
    arm: str
    agent: str
    old_passed: int | None
    old_total: int | None
    new_passed: int | None
    new_total: int | None
    verdict: str
    detail: str
    ratio: dict[str, Any] | None = None
    ratio_p: float | None = None
    also: tuple[str, ...] = ()  # further verdicts that hold (``dearer`` of a ``regressed`` cell); gates see them too
    pooled: bool = False  # a row over all compared cases of one (kind, arm, agent), for the inference target
    gate_p: dict[str, float] | None = None  # per gateable verdict the p-value of its test (``verdict.snapshot_tests``)

    def passed_text(self) -> str:
        old = "-" if self.old_total is None else f"{self.old_passed}/{self.old_total}"
        new = "-" if self.new_total is None else f"{self.new_passed}/{self.new_total}"
        return f"{old} -> {new}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _version_notes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    notes = []
    for key, label in (("cli_versions", "agent CLI version"), ("models", "model")):
        a, b = old.get(key) or [], new.get(key) or []
        if a and b and a != b:
            notes.append(f"different {label}: {', '.join(a)} -> {', '.join(b)}")
    return notes


def compare(snapshot: dict[str, Any], outcomes: Iterable[Outcome], old_arm: str | None = None, new_arm: str | None = None,
            tolerance: float = 0.10, seed: int = 0, resamples: int = 10_000, alpha: float = REGRESSION_ALPHA,
            target: str = FIXED) -> list[SnapshotRow]:
    """Compare this session's cells with ``snapshot`` (as read by ``read_snapshot``).

    With ``old_arm``/``new_arm`` the snapshot's ``old_arm`` cells are compared with the session's ``new_arm``
    cells of the same kind, case and agent. Cells of the snapshot that did not run read ``not run``; cells not in
    the snapshot read ``new``; neither is a regression. ``alpha``: one-sided level of the pass-rate tests
    (``verdict.snapshot_verdict``). Rows sorted by (agent, case, arm); after the rows of each (kind, arm, agent)
    with two or more compared cases, one ``pooled`` row over them (``pooled_row``, for ``target``).
    """
    if (old_arm is None) != (new_arm is None):
        raise ValueError("compare: give both old_arm and new_arm, or neither")
    old_cells = {k: c for k, c in snapshot["cells"].items() if old_arm is None or c["arm"] == old_arm}
    new_groups = {k: rs for k, rs in _cells(outcomes).items() if new_arm is None or rs[0].arm == new_arm}

    def match(c: dict[str, Any]) -> str:
        return cell_key(c["kind"], c["case"], new_arm if new_arm is not None else c["arm"], c["agent"])

    arm_label = (lambda a: f"{old_arm} -> {new_arm}") if old_arm is not None else (lambda a: a)
    rows: list[SnapshotRow] = []
    seen: set[str] = set()
    for old in old_cells.values():
        key = match(old)
        runs = new_groups.get(key)
        if not runs:
            rows.append(SnapshotRow(old["kind"], old["case"], arm_label(old["arm"]), old["agent"], old["passed"], old["total"], None, None,
                                    Verdict.NOT_RUN.value, "in the snapshot, not run in this session"))
            continue
        seen.add(key)
        new = cell_record(runs)
        if not new["total"]:  # every run an infrastructure error: no sample, so no verdict but that
            rows.append(SnapshotRow(old["kind"], old["case"], arm_label(old["arm"]), old["agent"], old["passed"], old["total"],
                                    0, 0, Verdict.ERRORS.value,
                                    f"every run an infrastructure error ({new['errors']}): nothing to compare"))
            continue
        ratio = ratio_p = None
        if old["tokens"] and new["tokens"]:
            rng = stats.rng_for(seed, "snapshot", key)
            ratio = stats.cluster_contrast([(new["tokens"], old["tokens"])], "ratio", 0.95, resamples, rng)
            ratio_p = stats.permutation_p(new["tokens"], old["tokens"], resamples, rng)
        (verdict, *also), detail, gate_p = snapshot_tests(old["passed"], old["total"], new["passed"], new["total"], ratio, ratio_p,
                                                          tolerance, alpha)
        detail = detail + _version_notes(old, new)
        rows.append(SnapshotRow(old["kind"], old["case"], arm_label(old["arm"]), old["agent"], old["passed"], old["total"],
                                new["passed"], new["total"], verdict, "; ".join(detail),
                                ratio.to_dict() if ratio is not None else None, ratio_p, tuple(also), gate_p=gate_p))
    for key, runs in new_groups.items():
        if key not in seen:
            new = cell_record(runs)
            rows.append(SnapshotRow(new["kind"], new["case"], new["arm"], new["agent"], None, None, new["passed"], new["total"],
                                    Verdict.NEW.value, "not in the snapshot"))
    rows = sorted(rows, key=lambda r: (r.agent, r.case, r.arm))
    pairs: dict[tuple[str, str, str], list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for old in old_cells.values():
        runs = new_groups.get(match(old))
        if runs and any(o.is_sample for o in runs):
            pairs[(old["kind"], arm_label(old["arm"]), old["agent"])].append((old, cell_record(runs)))
    for (kind, arm, agent), found in sorted(pairs.items()):
        if len(found) > 1:
            rows.append(pooled_row(kind, arm, agent, found, tolerance, seed, resamples, alpha, target))
    return sorted(rows, key=lambda r: (r.agent, r.pooled, r.case, r.arm))


def pooled_row(kind: str, arm: str, agent: str, found: Sequence[tuple[dict[str, Any], dict[str, Any]]], tolerance: float, seed: int,
               resamples: int, alpha: float, target: str) -> SnapshotRow:
    """One row over the compared cells (``(old, new)`` snapshot records, one per case) of an arm and agent.

    ``fixed`` (the cases compared): token ratio new / old by the bootstrap stratified by case with the stratified
    permutation test, pass rate by the stratified exact test (one-sided), each case weighted equally. ``cases``
    (new cases like these): clustered-t interval with the sign-flip test over the per-case log ratios, pass rate by the
    one-sided sign-flip test over the per-case differences (below 6 cases it cannot reach 0.05). The verdict rules
    are ``verdict.snapshot_verdicts``' with these tests."""
    import math

    key = ("snapshot-pooled", kind, arm, agent, tuple(o["case"] for o, _ in found))

    def rng(what: str):
        return stats.rng_for(seed, what, *key)

    tables = [(n["passed"], n["total"], o["passed"], o["total"]) for o, n in found if n["total"] and o["total"]]
    rates = None
    if tables:
        rates = (sum(b / m for _, _, b, m in tables) / len(tables), sum(a / n for a, n, _, _ in tables) / len(tables))
    tok = [(n["tokens"], o["tokens"]) for o, n in found if n["tokens"] and o["tokens"]]
    ratio = ratio_p = None
    if target == FIXED:
        test = ("stratified exact", strata.stratified_binary_p(tables, "less"), strata.stratified_binary_p(tables, "greater")) if tables else None
        if tok:
            ratio = strata.stratified_contrast(tok, "ratio", 0.95, resamples, rng("ratio"))
            ratio_p, _ = strata.stratified_permutation_p(tok, "ratio", resamples, rng("ratio-p"))
    else:
        d = [a / n - b / m for a, n, b, m in tables]
        two = stats.sign_flip_p(d, resamples, rng("pass-p")) if len(d) > 1 else None
        half = None if two is None else min(1.0, two / 2)
        test = ("sign-flip", half if rates and rates[1] < rates[0] else 1.0, half if rates and rates[1] > rates[0] else 1.0) if tables else None
        usable = stats.usable_cases(tok, "ratio")
        if len(usable) > 1 and min(min(a) for a, _ in usable) > 0:
            ratio = stats.cluster_contrast(usable, "ratio", 0.95, resamples, rng("ratio"))
            ratio_p = stats.sign_flip_p([math.log((sum(a) / len(a)) / (sum(b) / len(b))) for a, b in usable], resamples, rng("ratio-p"))
    runs_side = min((min(len(a), len(b)) for a, b in tok), default=0)
    old_p, old_t = sum(o["passed"] for o, _ in found), sum(o["total"] for o, _ in found)
    new_p, new_t = sum(n["passed"] for _, n in found), sum(n["total"] for _, n in found)
    (verdict, *also), detail, gate_p = snapshot_tests(old_p, old_t, new_p, new_t, ratio, ratio_p, tolerance, alpha, pass_test=test,
                                                      runs_per_side=runs_side, pass_rates=rates)
    what = "these cases" if target == FIXED else "new cases like these"
    return SnapshotRow(kind, f"all {len(found)} cases", arm, agent, old_p, old_t, new_p, new_t, verdict, "; ".join([*detail, f"target: {what}"]),
                       ratio.to_dict() if ratio is not None else None, ratio_p, tuple(also), pooled=True, gate_p=gate_p)


def closing_line(rows: Sequence[SnapshotRow]) -> str:
    """``N cells: a regressed, b dearer, ... .`` (pooled rows apart: ``over all cases: ...``) plus the reminder of
    what ``same`` means."""
    cells = [r for r in rows if not r.pooled]
    pooled = [r for r in rows if r.pooled]
    counts = Counter(v for r in cells for v in (r.verdict, *r.also))  # a regressed and dearer cell counts in both
    order = [v.value for v in (Verdict.REGRESSED, Verdict.DEARER, Verdict.IMPROVED, Verdict.SAME, Verdict.NOT_RUN, Verdict.NEW)]
    parts = ", ".join(f"{counts.get(v, 0)} {v}" for v in order)
    if counts.get(Verdict.ERRORS.value):  # cells of infrastructure errors alone: said only when there are some
        parts += f", {counts[Verdict.ERRORS.value]} {Verdict.ERRORS.value}"
    over = ""
    if pooled:
        both = Counter(v for r in pooled for v in (r.verdict, *r.also))
        over = f" Over all cases ({len(pooled)} arm{'s' if len(pooled) != 1 else ''}): " + ", ".join(
            f"{both.get(v, 0)} {v}" for v in order[:4]) + "."
    return f"{len(cells)} cells: {parts}.{over} {SAME_NOTE}."
