"""Shards: split one trial's runs over N CI machines, each running a deterministic part.

``--agentrace-shard K/N`` (1-based, ``1 <= K <= N``) keeps the runs whose shard is K. The assignment depends only
on the collected run ids (RunSpec ids, ``"<kind>:<case>/<arm>/<agent>/r<rep>"``) and the expected durations, never
on Python's per-process ``hash()`` (randomized), the collection order or the node id, so every shard (and every
pytest-xdist worker inside it) computes the same partition, and shards 1/N..N/N together run every run exactly
once.

Balancing (as pytest-split's ``least_duration`` algorithm): each run's expected duration is the mean
``total_seconds`` (the whole run: clone, setup, agent, checks) of the history store's past runs of the same cell
(kind, case, arm, agent; every rep counts); a run with no history gets the mean of the runs that have one (1 s
when none has). Runs are then placed greedily, longest first, each on the shard with the least expected total so
far (LPT, "longest processing time first"; within 4/3 of the best makespan, Graham 1969). Ties are broken by the
sha256 of the run id and then the lowest shard number, so with no history at all the runs are dealt round-robin in
sha256 order: balanced by count and stable when runs are added.

The partition is the same on every machine only if each reads the same history: restore one history file on
every shard (the CI examples restore the merged ``history.db`` of the last run), or none. Each shard records its
split's digest (``split_digest`` of the whole assignment) in ``last-session.json``; ``agentrace merge`` refuses
shards whose digests differ (shards run one after another on one machine, sharing its history, would otherwise
have run some runs twice and others never).

``auto`` reads the CI's parallel-job variables: GitLab ``CI_NODE_INDEX``/``CI_NODE_TOTAL`` (1-based), CircleCI
``CIRCLE_NODE_INDEX``/``CIRCLE_NODE_TOTAL`` and Buildkite ``BUILDKITE_PARALLEL_JOB``/``BUILDKITE_PARALLEL_JOB_COUNT``
(0-based); with none set it is shard 1/1 (everything).
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

AUTO = "auto"
# (index variable, total variable, first index): the CI systems' parallel-job variables, in the order tried
CI_VARIABLES: tuple[tuple[str, str, int], ...] = (
    ("CI_NODE_INDEX", "CI_NODE_TOTAL", 1),  # GitLab `parallel:`
    ("CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL", 0),  # CircleCI `parallelism:`
    ("BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0),  # Buildkite `parallelism:`
)
DEFAULT_SECONDS = 1.0  # the expected duration of every run when the history has none


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``total`` (1-based); ``source`` says where it came from (``"2/3"``, ``"CI_NODE_INDEX=2
    CI_NODE_TOTAL=3"``)."""

    index: int
    total: int
    source: str = ""

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def shard_arg(text: str) -> str:
    """argparse type of ``--agentrace-shard``: ``auto`` or ``K/N``; raises ``argparse.ArgumentTypeError`` otherwise (checked again,
    with the environment, by ``parse_shard``)."""
    text = text.strip()
    if text != AUTO:
        try:
            parse_shard(text, {})
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--agentrace-shard {text}: ")) from None
    return text


def parse_shard(text: str, environ: Mapping[str, str]) -> Shard:
    """The shard of ``--agentrace-shard`` ``text`` (``K/N`` or ``auto``, read from ``environ``).

    Raises ``ValueError`` with the fix for a malformed value, ``K`` outside ``1..N``, or half-set or non-numeric CI
    variables."""
    text = text.strip()
    if text == AUTO:
        for index_var, total_var, first in CI_VARIABLES:
            index, total = environ.get(index_var), environ.get(total_var)
            if index is None and total is None:
                continue
            where = f"{index_var}={index} {total_var}={total}"
            if index is None or total is None:
                raise ValueError(f"--agentrace-shard auto: {where}: both variables must be set")
            try:
                k, n = int(index) - first + 1, int(total)
            except ValueError:
                raise ValueError(f"--agentrace-shard auto: {where}: not whole numbers") from None
            return _checked(k, n, f"--agentrace-shard auto ({where}, {first}-based)", where)
        return Shard(1, 1, "auto: no CI parallel-job variables set")
    k_text, sep, n_text = text.partition("/")
    try:
        if not sep:
            raise ValueError
        k, n = int(k_text), int(n_text)
    except ValueError:
        raise ValueError(f"--agentrace-shard {text}: use K/N (e.g. 2/3: the second of three shards, 1-based) or auto") from None
    return _checked(k, n, f"--agentrace-shard {text}", text)


def _checked(k: int, n: int, what: str, source: str) -> Shard:
    if n < 1 or not 1 <= k <= n:
        raise ValueError(f"{what}: shard {k} of {n} does not exist; K must be 1..N and N at least 1")
    return Shard(k, n, source)


def cell_of(run_id: str) -> str:
    """The cell part of a run id (``"trial:q1/arm/agent/r3"`` -> ``"trial:q1/arm/agent"``): runs of one cell share an
    expected duration."""
    head, sep, rep = run_id.rpartition("/")
    return head if sep and rep.startswith("r") and rep[1:].isdigit() else run_id


def stable_key(run_id: str) -> str:
    """sha256 hex of the run id: the same on every machine and Python process."""
    return hashlib.sha256(run_id.encode("utf-8")).hexdigest()


def expected_seconds(run_ids: Iterable[str], history: Mapping[str, float]) -> dict[str, float]:
    """Expected seconds per run id: ``history`` of its cell (``cell_of``), else the mean of those found, else 1 s."""
    ids = list(run_ids)
    known = {i: history[cell_of(i)] for i in ids if cell_of(i) in history}
    fill = sum(known.values()) / len(known) if known else DEFAULT_SECONDS
    return {i: known.get(i, fill) for i in ids}


def assign(run_ids: Sequence[str], total: int, seconds: Mapping[str, float] | None = None) -> dict[str, int]:
    """``{run id: shard (1..total)}``: greedy LPT over ``seconds`` (expected seconds per run id; missing or None:
    every run the same), ties by sha256 of the run id, then the lowest shard. Duplicate ids get one shard."""
    durations = expected_seconds(dict.fromkeys(run_ids), {}) if seconds is None else dict(seconds)
    order = sorted(dict.fromkeys(run_ids), key=lambda i: (-durations.get(i, DEFAULT_SECONDS), stable_key(i)))
    loads = [(0.0, shard) for shard in range(1, total + 1)]  # a heap of (expected total seconds, shard)
    result: dict[str, int] = {}
    for run_id in order:
        load, shard = heapq.heappop(loads)
        result[run_id] = shard
        heapq.heappush(loads, (load + durations.get(run_id, DEFAULT_SECONDS), shard))
    return result


def select(run_ids: Sequence[str], shard: Shard, history: Mapping[str, float]) -> set[str]:
    """The run ids of ``shard`` among ``run_ids``, balanced by ``history`` (``record.store.cell_seconds``)."""
    return split(run_ids, shard, history)[0]


def split(run_ids: Sequence[str], shard: Shard, history: Mapping[str, float]) -> tuple[set[str], str | None]:
    """``(the run ids of shard, the split's digest)``: ``select``'s ids, and ``split_digest`` of the whole
    assignment (every shard's runs; None for a shard of 1), which every shard of one split computes alike."""
    if shard.total == 1:
        return set(run_ids), None
    placed = assign(run_ids, shard.total, expected_seconds(run_ids, history))
    return {i for i, k in placed.items() if k == shard.index}, split_digest(placed)


def split_digest(placed: Mapping[str, int]) -> str:
    """The first 16 hex digits of the sha256 of ``placed`` (``{run id: shard}``) as canonical JSON (sorted pairs):
    shards that read different histories place some runs differently, and their digests differ (``agentrace
    merge`` refuses to merge them: some runs ran twice and others never)."""
    body = json.dumps(sorted(placed.items()), separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]
