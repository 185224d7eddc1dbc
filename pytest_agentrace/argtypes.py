"""argparse ``type`` functions shared by the pytest options and the ``agentrace`` CLI, and the few words they name
(the standard difficulty levels; sizes in bytes both ways). Standard library only, nothing of ours: ``options``
reads it in every pytest process."""

from __future__ import annotations

import argparse
import math


def positive_int(value: str) -> int:
    """argparse ``type``: an integer > 0 (``ArgumentTypeError`` otherwise)."""
    return _positive(value, int)


def positive_float(value: str) -> float:
    """argparse ``type``: a finite number > 0 (``ArgumentTypeError`` otherwise)."""
    return _positive(value, float)


def _positive(value: str, kind: type) -> float | int:
    """argparse ``type``: a finite number > 0 of ``kind`` (int or float); raises ``ArgumentTypeError`` otherwise."""
    try:
        number = kind(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not {'an integer' if kind is int else 'a number'}") from None
    if not math.isfinite(number) or number <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0 (and finite), not {value}")
    return number


def probability(value: str) -> float:
    """argparse ``type``: a significance level, strictly between 0 and 1 (``ArgumentTypeError`` otherwise)."""
    number = _number(value)
    if not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (e.g. 0.05), not {value}")
    return number


def non_negative_float(value: str) -> float:
    """argparse ``type``: a finite number >= 0 (``ArgumentTypeError`` otherwise)."""
    number = _number(value)
    if not math.isfinite(number) or number < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more (and finite), not {value}")
    return number


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None


OFF_WORDS = ("0", "none", "off", "unlimited")  # a resource limit switched off (stored as 0)
_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def byte_size(value: str) -> int:
    """argparse ``type``: a size in bytes, ``512M``/``4G``/``1.5G``/``100000`` (binary units: K = 1024 bytes, also
    ``KiB``/``KB``, case-insensitive); ``0``, ``none``, ``off`` or ``unlimited`` give 0 (no limit). Raises
    ``ArgumentTypeError`` for anything else."""
    text = str(value).strip()
    if text.lower() in OFF_WORDS:
        return 0
    upper = text.upper().replace(" ", "")
    for suffix in ("IB", "B"):
        if upper.endswith(suffix) and upper[:-len(suffix)][-1:] in "KMGT" and len(upper) > len(suffix):
            upper = upper[:-len(suffix)]
            break
    unit = upper[-1:] if upper[-1:] in "KMGTB" else ""
    number = upper[:-1] if unit else upper
    try:
        amount = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a size; write e.g. 512M, 4G or 0 (no limit)") from None
    if not math.isfinite(amount) or amount <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a size greater than 0 (e.g. 512M, 4G) or 0 for no limit, not {value}")
    return max(1, int(amount * _SIZE_UNITS[unit]))


def limit_count(value: str) -> int:
    """argparse ``type``: a count > 0, or ``0``/``none``/``off``/``unlimited`` for no limit (0)."""
    if str(value).strip().lower() in OFF_WORDS:
        return 0
    return positive_int(str(value).strip())


def limit_seconds(value: str) -> float:
    """argparse ``type``: seconds > 0, or ``0``/``none``/``off``/``unlimited`` for no limit (0)."""
    if str(value).strip().lower() in OFF_WORDS:
        return 0.0
    return positive_float(str(value).strip())


def human_bytes(n: int) -> str:
    """``4294967296`` -> ``"4 GiB"``, ``1536 * 1024**2`` -> ``"1.5 GiB"``, ``100`` -> ``"100 B"`` (binary units, as
    ``byte_size`` reads them)."""
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


DIFFICULTIES = ("easy", "medium", "hard")  # the standard levels of a task's difficulty, easiest first


def difficulty_list(value: str) -> tuple[str, ...]:
    """argparse ``type`` for ``--agentrace-difficulty``: ``"easy,medium-hard"`` -> ``("easy", "medium-hard")``.

    Levels are free-form names (a task file's ``difficulty`` may be any level, e.g. ``medium-hard``), so any
    non-empty name is accepted here; a level that no collected task has is reported after collection
    (``deselect_by_difficulty``). Raises ``argparse.ArgumentTypeError`` for an empty list.
    """
    levels = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not levels:
        raise argparse.ArgumentTypeError(f"give one or more levels separated by commas, e.g. {', '.join(DIFFICULTIES)} "
                                         "or medium-hard")
    return levels


def name_list(value: str) -> tuple[str, ...]:
    """argparse ``type`` for ``--agentrace-builtin``: ``"fibonacci,lru-cache"`` -> a tuple of names (the names are
    checked against the built-in tasks by ``spec.builtin.select_builtin``). Raises ``argparse.ArgumentTypeError``
    for an empty list."""
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    if not names:
        raise argparse.ArgumentTypeError("give a built-in task name (see `agentrace tasks list`) or 'all'")
    return names
