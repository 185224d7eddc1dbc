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
