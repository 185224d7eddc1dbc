"""``--agentrace-shard`` in the session: parse it once per process, adjust what cannot work on a part of the runs,
and deselect the other shards' runs (``spec.shard`` holds the partition itself).

Under a shard of N > 1:

- ``--agentrace-stop-when-decided`` is turned off with a warning: its looks need every rep of a cell, and a shard
  holds only some of them, so each shard would stop on a different part of the evidence. All reps up to the cap
  run; decide on the merged folder (``agentrace merge``, then ``agentrace report`` / ``agentrace plan``).
- ``--agentrace-resume`` / ``--agentrace-retry-failed`` work per run id as without shards: a shard reuses the
  records of *its* runs found in its results folder (restore the merged folder there to resume a sharded trial).
- Deselected runs are reported through ``pytest_deselected`` (pytest's "N deselected").
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_agentrace.options import Settings
from pytest_agentrace.plugin.session import SETTINGS_KEY
from pytest_agentrace.record.store import default_path
from pytest_agentrace.spec.shard import Shard, cell_seconds, parse_shard, select

SHARD_KEY = pytest.StashKey[Shard]()
STOP_OFF_WARNING = ("--agentrace-stop-when-decided is off under --agentrace-shard {shard}: a shard holds only some reps "
                    "of each cell, so its looks would see part of the evidence; every rep up to the cap runs (decide on "
                    "the merged folder with `agentrace report --stop-when-decided CAP`)")


def configure(config: pytest.Config, found: Settings, warn: bool) -> Settings:
    """Parse ``--agentrace-shard`` (``pytest.UsageError`` when it is malformed) into ``config.stash[SHARD_KEY]`` and
    return the session's settings, with stop-when-decided off under a shard of N > 1 (``warn``: say so, on the
    controller only)."""
    if found.shard is None:
        return found
    try:
        shard = parse_shard(found.shard, os.environ)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SHARD_KEY] = shard
    if shard.total > 1 and found.stop_when_decided:
        found = found.replace(stop_when_decided=False)
        config.stash[SETTINGS_KEY] = found
        if warn:
            config.issue_config_time_warning(pytest.PytestConfigWarning(STOP_OFF_WARNING.format(shard=shard)), stacklevel=2)
    return found


def history_path(config: pytest.Config, found: Settings) -> Path:
    """The history file the durations come from: ``--agentrace-db``, else ``$AGENTRACE_DB`` / the default."""
    return Path(found.db).expanduser().resolve() if found.db else default_path(config.rootpath)


def deselect(config: pytest.Config, found: Settings, items: list[pytest.Item], spec_of, unit=None) -> None:
    """Keep only this shard's run items (``spec_of(item)``: its RunSpec, or None for a plain pytest test, which only
    shard 1 keeps, so it too runs once over all shards); the others go to ``pytest_deselected``. ``unit(spec)``: the
    id a shard assigns as a whole (default the run id; a race's runs stay together)."""
    shard = config.stash.get(SHARD_KEY, None)
    if shard is None or shard.total == 1:
        return
    unit = unit or (lambda spec: spec.id)
    ids = [unit(spec) for item in items if (spec := spec_of(item)) is not None]
    mine = select(ids, shard, cell_seconds(history_path(config, found)))
    keep, drop = [], []
    for item in items:
        spec = spec_of(item)
        kept = unit(spec) in mine if spec is not None else shard.index == 1
        (keep if kept else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def header(config: pytest.Config) -> list[str]:
    """The report-header line of the shard (none without ``--agentrace-shard``)."""
    shard = config.stash.get(SHARD_KEY, None)
    if shard is None:
        return []
    where = f" ({shard.source})" if shard.source != str(shard) else ""
    return [f"agentrace: shard {shard} of the runs{where}: split by run id, balanced by the history's durations"]
