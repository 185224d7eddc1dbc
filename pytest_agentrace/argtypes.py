"""argparse ``type`` functions shared by the pytest options and the ``agentrace`` CLI (imports nothing of ours)."""

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
