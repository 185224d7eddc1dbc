"""Inline SVG charts for the HTML report: scatter, interval plot, line chart. Pure string building, no imports
beyond the standard library; every text is escaped. Colours are CSS variables (``--fg``, ``--muted``, ``--grid``,
``--c0`` .. ``--c7``, ``--good``, ``--bad``) so the light and dark themes restyle the charts.

Shapes: ``scatter(points)`` with ``points = [{x, y, series, label}]``; ``intervals(rows)`` with
``rows = [{label, value, lo, hi, tone}]``; ``lines(series)`` with ``series = {name: [(x, y), ...]}``.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

PALETTE = 8  # colours --c0 .. --c7 (Okabe-Ito, see report.css)
WIDTH = 640
FONT = 12
EMPTY_CHARS = 80  # an empty chart's sentence is wrapped at this many characters (12 px text in a 640-wide box)


def nice_ticks(lo: float, hi: float, count: int = 5, integer: bool = False) -> list[float]:
    """About ``count`` round tick values (1, 2, 2.5, 5 x 10^k steps) covering ``lo..hi``; ``integer``: whole steps."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in ((1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)) if m * mag >= raw)
    if integer:
        step = max(1.0, round(step))
    start = math.floor(lo / step) * step
    ticks, t = [start], start
    while ticks[-1] < hi - step * 1e-9:  # the last tick is at or beyond hi, so every value lies inside
        t += step
        ticks.append(round(t, 10))
    return ticks


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.2g}" if v != round(v) else f"{v:.0f}"
    return f"{v:.2g}"


def series_colours(names: Sequence[str]) -> dict[str, str]:
    """A stable colour variable per series name (sorted order), cycling through the palette."""
    return {n: f"var(--c{i % PALETTE})" for i, n in enumerate(sorted(set(names)))}


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    t = escape(title)
    return (f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title>' + "".join(body) + "</svg>")


def _empty(title: str, message: str) -> str:
    """A short chart holding only ``message`` (why there is nothing to plot), wrapped into lines of at most
    ``EMPTY_CHARS`` characters so it stays inside the chart at any width."""
    rows = textwrap.wrap(message, EMPTY_CHARS) or [""]
    body = [f'<text x="10" y="{28 + 18 * i}" class="muted empty">{escape(row)}</text>' for i, row in enumerate(rows)]
    return _svg(WIDTH, 24 + 18 * len(rows), title, body)


def _legend(colours: Mapping[str, str], x: float, y: float) -> list[str]:
    out = []
    for i, (name, colour) in enumerate(colours.items()):
        yy = y + i * 16
        out.append(f'<rect x="{x}" y="{yy - 9}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{x + 14}" y="{yy}" class="label">{escape(name)}</text>')
    return out


EMPTY = "no data for this chart"


def scatter(points: Sequence[Mapping[str, Any]], title: str, x_label: str, y_label: str,
            y_range: tuple[float, float] | None = None, empty: str = EMPTY) -> str:
    """One dot per point (``x``, ``y``), coloured by ``series``, with ``label`` as its tooltip, and a legend;
    ``empty``: the sentence shown when no point has both values (why the chart is empty)."""
    pts = [p for p in points if p.get("x") is not None and p.get("y") is not None]
    if not pts:
        return _empty(title, empty)
    colours = series_colours([p["series"] for p in pts])
    left, right, top, bottom = 56, 150, 14, 42
    height = 300
    xs, ys = [float(p["x"]) for p in pts], [float(p["y"]) for p in pts]
    xt = nice_ticks(min(0.0, min(xs)), max(xs) * 1.05 if max(xs) > 0 else 1.0)
    yt = nice_ticks(*(y_range or (min(0.0, min(ys)), max(ys) or 1.0)))
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]
    pw, ph = WIDTH - left - right, height - top - bottom

    def sx(v: float) -> float:
        return left + (v - x0) / ((x1 - x0) or 1) * pw

    def sy(v: float) -> float:
        return top + ph - (v - y0) / ((y1 - y0) or 1) * ph

    body = []
    for t in xt:
        body.append(f'<line x1="{sx(t):.1f}" y1="{top}" x2="{sx(t):.1f}" y2="{top + ph}" class="grid"/>'
                    f'<text x="{sx(t):.1f}" y="{top + ph + 16}" text-anchor="middle" class="tick">{escape(_fmt(t))}</text>')
    for t in yt:
        body.append(f'<line x1="{left}" y1="{sy(t):.1f}" x2="{left + pw}" y2="{sy(t):.1f}" class="grid"/>'
                    f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" class="tick">{escape(_fmt(t))}</text>')
    body.append(f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle" class="label">{escape(x_label)}</text>'
                f'<text x="14" y="{top + ph / 2}" text-anchor="middle" class="label" transform="rotate(-90 14 {top + ph / 2})">{escape(y_label)}</text>')
    for p in pts:
        tip = escape(f"{p.get('label') or p['series']}: {x_label} {_fmt(float(p['x']))}, {y_label} {_fmt(float(p['y']))}")
        body.append(f'<circle cx="{sx(float(p["x"])):.1f}" cy="{sy(float(p["y"])):.1f}" r="6" fill="{colours[p["series"]]}" '
                    f'class="dot" data-series="{escape(str(p["series"]))}"><title>{tip}</title></circle>')
    body += _legend(colours, left + pw + 16, top + 12)
    return _svg(WIDTH, height, title, body)


def intervals(rows: Sequence[Mapping[str, Any]], title: str, x_label: str, x_range: tuple[float, float] | None = None,
              reference: float | None = None, empty: str = EMPTY) -> str:
    """One horizontal interval per row (``lo``..``hi`` with a dot at ``value``), labelled on the left.

    ``tone`` ``good`` / ``bad`` / other colours the row; ``reference`` draws a dashed vertical line (e.g. 1.00).
    Rows without an interval show the dot alone; ``empty``: the sentence shown when no row has a value.
    """
    rows = [r for r in rows if r.get("value") is not None]
    if not rows:
        return _empty(title, empty)
    left, right, top = 230, 24, 10
    row_h = max(24, 72 // len(rows))  # a single row still gets a readable plot
    height = top + row_h * len(rows) + 44
    vals = [float(v) for r in rows for v in (r.get("lo"), r.get("hi"), r.get("value")) if v is not None]
    if reference is not None:
        vals.append(reference)
    ticks = nice_ticks(*(x_range or (min(vals), max(vals))))
    x0, x1 = ticks[0], ticks[-1]
    pw = WIDTH - left - right

    def sx(v: float) -> float:
        return left + (v - x0) / ((x1 - x0) or 1) * pw

    bottom = top + row_h * len(rows)
    body = []
    for t in ticks:
        body.append(f'<line x1="{sx(t):.1f}" y1="{top}" x2="{sx(t):.1f}" y2="{bottom}" class="grid"/>'
                    f'<text x="{sx(t):.1f}" y="{bottom + 16}" text-anchor="middle" class="tick">{escape(_fmt(t))}</text>')
    if reference is not None:
        body.append(f'<line x1="{sx(reference):.1f}" y1="{top}" x2="{sx(reference):.1f}" y2="{bottom}" class="reference"/>')
    for i, r in enumerate(rows):
        y = top + row_h * i + row_h / 2
        tone = {"good": "var(--good)", "bad": "var(--bad)"}.get(r.get("tone") or "", "var(--fg)")
        label = str(r["label"])
        short = label if len(label) <= 34 else label[:33] + "…"
        tip = f"{label}: {_fmt(float(r['value']))}"
        if r.get("lo") is not None and r.get("hi") is not None:
            tip += f" (95% CI {_fmt(float(r['lo']))}–{_fmt(float(r['hi']))})"
            body.append(f'<line x1="{sx(float(r["lo"])):.1f}" y1="{y}" x2="{sx(float(r["hi"])):.1f}" y2="{y}" stroke="{tone}" class="whisker"/>')
        body.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end" class="label">{escape(short)}</text>'
                    f'<circle cx="{sx(float(r["value"])):.1f}" cy="{y}" r="5" fill="{tone}" class="dot"><title>{escape(tip)}</title></circle>')
    body.append(f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle" class="label">{escape(x_label)}</text>')
    return _svg(WIDTH, height, title, body)


def lines(series: Mapping[str, Sequence[tuple[float, float]]], title: str, x_label: str, y_label: str,
          empty: str = EMPTY) -> str:
    """One polyline per series (points ``(x, y)`` in order) with dots, a legend and axis ticks; ``empty``: the
    sentence shown when there is no point."""
    series = {k: list(v) for k, v in series.items() if v}
    if not series:
        return _empty(title, empty)
    colours = series_colours(list(series))
    left, right, top, bottom, height = 56, 150, 14, 42, 300
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts]
    integral = all(float(x).is_integer() for x in xs)
    xt = nice_ticks(min(xs), max(xs), 5, integer=integral)
    yt = nice_ticks(min(ys) - 10, max(ys) + 10)
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]
    pw, ph = WIDTH - left - right, height - top - bottom

    def sx(v: float) -> float:
        return left + (v - x0) / ((x1 - x0) or 1) * pw

    def sy(v: float) -> float:
        return top + ph - (v - y0) / ((y1 - y0) or 1) * ph

    body = []
    for t in xt:
        body.append(f'<line x1="{sx(t):.1f}" y1="{top}" x2="{sx(t):.1f}" y2="{top + ph}" class="grid"/>'
                    f'<text x="{sx(t):.1f}" y="{top + ph + 16}" text-anchor="middle" class="tick">{escape(_fmt(t))}</text>')
    for t in yt:
        body.append(f'<line x1="{left}" y1="{sy(t):.1f}" x2="{left + pw}" y2="{sy(t):.1f}" class="grid"/>'
                    f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" class="tick">{escape(_fmt(t))}</text>')
    for name, pts in series.items():
        colour = colours[name]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        body.append(f'<polyline points="{path}" fill="none" stroke="{colour}" class="line"/>')
        body += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{colour}"><title>{escape(f"{name}: {y:.0f}")}</title></circle>' for x, y in pts]
    body.append(f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle" class="label">{escape(x_label)}</text>'
                f'<text x="14" y="{top + ph / 2}" text-anchor="middle" class="label" transform="rotate(-90 14 {top + ph / 2})">{escape(y_label)}</text>')
    body += _legend(colours, left + pw + 16, top + 12)
    return _svg(WIDTH, height, title, body)
