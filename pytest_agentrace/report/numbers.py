"""Every number the reports print, formatted in one place (terminal, Markdown, HTML, the CLI's tables).

Each function takes None for a figure that is unknown or undefined and prints it as ``-``. Units: ``tokens`` a
count, ``usd`` / ``cost`` US dollars, ``pct`` a fraction 0..1, ``ratio`` a ratio (relative cost), ``seconds``
seconds. No rounding rule here differs from the one the reports printed before this module; the golden files in
``tests/golden/`` pin them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

MISSING = "-"


def fixed(x: float | None, digits: int = 2) -> str:
    """``x`` with ``digits`` decimals: ``1.50``."""
    return MISSING if x is None else f"{x:.{digits}f}"


def grouped(x: float | None, digits: int = 1) -> str:
    """``x`` with thousands separators and ``digits`` decimals: ``12,345.6``."""
    return MISSING if x is None else f"{x:,.{digits}f}"


def pct(x: float | None, digits: int = 0) -> str:
    """A fraction 0..1 as a percentage with ``digits`` decimals: ``0.25`` -> ``25%``."""
    return MISSING if x is None else f"{100 * x:.{digits}f}%"


def tokens(x: float | None) -> str:
    """A token count (a mean is rounded to a whole token), with thousands separators: ``12,345``."""
    return MISSING if x is None else f"{round(x):,}"


def usd(x: float | None) -> str:
    """US dollars with a dollar sign and 4 decimals: ``$0.0123``."""
    return MISSING if x is None else f"${x:.4f}"


def cost(x: float | None) -> str:
    """US dollars without a sign, 4 decimals (a column headed ``(USD)``): ``0.0123``."""
    return fixed(x, 4)


def ratio(x: float | None, digits: int = 2) -> str:
    """A ratio (relative cost) with ``digits`` decimals, or ``digits`` significant digits below 0.1 so a small one
    is not printed as ``0.00``: ``1.04``, ``0.50``, ``0.0024``, ``0.000051``."""
    if x is None:
        return MISSING
    if x == 0 or abs(x) >= 0.1 or not math.isfinite(x):
        return f"{x:.{digits}f}"
    return f"{x:.{digits - 1 - math.floor(math.log10(abs(x)))}f}"


def count_ratio(values: Sequence[bool]) -> str:
    """``k/n``: how many of ``values`` are true, of how many; ``-`` for none."""
    return f"{sum(values)}/{len(values)}" if values else MISSING


def p_value(p: float | None) -> str:
    """A p-value with 3 decimals, ``<0.001`` below that."""
    return MISSING if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


def seconds(x: float) -> str:
    """A duration in seconds, short: 1 decimal below 10 s (``4.2s``), else whole (``42s``)."""
    return f"{x:.1f}s" if x < 10 else f"{x:.0f}s"


def duration(x: float) -> str:
    """A duration in seconds, spelled out: 1 decimal below 10 s (``4.2 s``), else whole (``42 s``)."""
    return f"{x:.1f} s" if x < 10 else f"{x:.0f} s"


def span(lo: float | None, hi: float | None, fmt: Callable[..., str] = fixed, dash: str = "-", **kw: Any) -> str:
    """`` (lo-hi)`` for an interval (`` (lo to hi)`` when ``lo`` is negative, so the dash is not read as a minus;
    ``dash``: the separator, e.g. an en dash in Markdown); empty when either end is undefined. ``fmt`` formats
    each end (``kw`` passed on)."""
    if lo is None or hi is None:
        return ""
    if lo < 0 and dash == "-":
        return f" ({fmt(lo, **kw)} to {fmt(hi, **kw)})"
    return f" ({fmt(lo, **kw)}{dash}{fmt(hi, **kw)})"
