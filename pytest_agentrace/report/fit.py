"""Terminal tables and lines that fit a width (characters): GitHub-style tables via tabulate, narrowed step by step.

``fit`` renders a table and, while it is wider than ``width``: (1) wraps the headers at their spaces, down to
their cells' width (``Time (s)`` over two lines); (2) drops the ``optional`` columns that hold nothing (every cell
``-``); (3) wraps cells at spaces (more lines in the same row), widest column first, to no less than ``SOFT_MIN``
characters and never breaking a word; (4) drops the other ``optional`` columns, least important first (those in
``keep`` only when wrapping every cell to its longest word would not do); (5) wraps cells down to their longest
word (a word wraps after a hyphen: ``docs-`` over ``first``); (6) breaks words, down to ``HARD_MIN`` characters. A table that still does not
fit is returned as narrow as it got (``Fitted.fits`` False), so a caller can split it (the task x agent matrix
splits its agent columns). ``fit_table`` adds a line naming the dropped columns; ``fit_lines`` wraps plain text
lines (table lines are left alone) and ``shorten`` cuts one string in its middle. ``width`` None: no limit.
No pytest import; tabulate is imported lazily.
"""

from __future__ import annotations

import re
import textwrap
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SOFT_MIN = 16  # characters a wrapped cell keeps before optional columns are dropped
HARD_MIN = 6  # the narrowest a column gets once words may be broken
ELLIPSIS = "…"


@dataclass(frozen=True)
class Fitted:
    """A rendered table: its ``lines``, the ``dropped`` column headers, whether every line ``fits`` the width, and
    whether words had to be ``broken`` to get there (step 6)."""

    lines: list[str]
    dropped: tuple[str, ...] = ()
    fits: bool = True
    broken: bool = False


def line_width(lines: Sequence[str]) -> int:
    """The widest of ``lines`` in characters (0 for none)."""
    return max((len(x) for x in lines), default=0)


def _wrap(value: Any, limit: int | None) -> Any:
    """A text cell wrapped at spaces and after hyphens (``docs-`` / ``first``) to ``limit`` characters per line (a
    longer word is broken); numbers and cells that fit are returned as they are."""
    if limit is None or not isinstance(value, str) or max(map(len, value.splitlines() or [""])) <= limit:
        return value
    return "\n".join(
        part
        for line in value.splitlines()
        for part in textwrap.wrap(line, limit, break_long_words=True, break_on_hyphens=True) or [""]
    )


def _render(
    rows: Sequence[Any],
    headers: Sequence[str],
    numparse: bool,
    limits: Sequence[int | None],
    header_limits: Sequence[int | None],
    tight: bool = False,
) -> list[str]:
    """The table as GitHub-style lines, cells and headers wrapped to their limits (multi-line cells, which tabulate
    lays out over several lines of one row; done here because tabulate's own ``maxcolwidths`` fails on ``1,000``).
    ``tight``: no column wider than its widest cell or header (tabulate otherwise makes each column 2 characters
    wider than its header, its ``MIN_PADDING``, which has no argument of its own)."""
    import tabulate as _tabulate

    body = [[_wrap(c, limits[i]) for i, c in enumerate(r)] if isinstance(r, (list, tuple)) else r for r in rows]
    heads = [_wrap(h, header_limits[i]) for i, h in enumerate(headers)]
    with _PADDING_LOCK:
        saved = _tabulate.MIN_PADDING
        _tabulate.MIN_PADDING = 0 if tight else saved
        try:
            text = _tabulate.tabulate(body, headers=heads, tablefmt="github", disable_numparse=not numparse)
        finally:
            _tabulate.MIN_PADDING = saved
    return text.splitlines()


_PADDING_LOCK = threading.Lock()


def _column_widths(lines: list[str]) -> list[int]:
    """Content widths of the columns, read from the header rule (``|-----|---|``; each cell has 1 space of padding
    each side)."""
    rule = next(x for x in lines if x.startswith(("|-", "|:")))
    return [len(part) - 2 for part in rule.strip("|").split("|")]


_PIECE = re.compile(r"[^\s-]*[A-Za-z]{2}-(?=[A-Za-z])|[^\s]+")  # what textwrap keeps whole (it breaks after a hyphen
# that has two letters before it and a letter after it)


def _longest_word(values: Sequence[Any], hyphens: bool = True) -> int:
    """The longest piece of ``values`` that wrapping keeps on one line: a word, or (``hyphens``) its part up to a
    hyphen. Headers (agent names in the matrix) are kept whole: ``hyphens`` False."""
    pieces = _PIECE.findall if hyphens else str.split
    return max((len(w) for v in values for w in pieces(str(v))), default=1)


def probe_rows(rows: Sequence[Any]) -> list[Any]:
    """Rows that render exactly as wide as ``rows``, column by column: each column holds the distinct values of that
    column of ``rows`` (by type and value, in the order first seen), padded with its first value, plus one separating
    line when ``rows`` have one. tabulate lays out each column from the set of its values alone (its type, the
    alignment of its numbers, its width; a multi-line layout when any cell has a line break), so narrowing a table
    measures the probe: a column of 2,000 runs with a dozen distinct values is rendered as a dozen rows. ``rows``
    themselves when they are not all of one length (tabulate would pad the short ones)."""
    body = [r for r in rows if isinstance(r, (list, tuple))]
    if not body or len({len(r) for r in body}) > 1:
        return list(rows)
    columns: list[dict[Any, Any]] = [{} for _ in body[0]]
    for r in body:
        for seen, value in zip(columns, r, strict=True):
            try:
                seen.setdefault((type(value), value), value)
            except TypeError:  # an unhashable cell: kept as it is
                seen[(type(value), id(value))] = value
    values = [list(seen.values()) for seen in columns]
    depth = max(map(len, values))
    probe: list[Any] = [[v[i] if i < len(v) else v[0] for v in values] for i in range(depth)]
    separator = next((r for r in rows if not isinstance(r, (list, tuple))), None)
    if separator is not None:
        probe.insert(1, separator)
    return probe


class _Table:
    """The table being narrowed: rows, headers, and per-column limits for cells and headers (None: none).

    ``lines`` are those of ``probe_rows`` (as wide as the table's, column by column): narrowing renders the table
    once per step; ``full`` renders every row with the limits reached."""

    def __init__(self, rows: Sequence[Any], headers: Sequence[str], numparse: bool):
        self.rows = list(rows)
        self.probe = probe_rows(self.rows)
        self.headers = list(headers)
        self.numparse = numparse
        self.limits: list[int | None] = [None] * len(self.headers)
        self.header_limits: list[int | None] = [None] * len(self.headers)
        self.tight = False
        self.lines = self.render()

    def render(self) -> list[str]:
        return _render(self.probe, self.headers, self.numparse, self.limits, self.header_limits, self.tight)

    def full(self) -> list[str]:
        """Every row, rendered with the limits reached (as wide as ``lines``)."""
        if self.probe == self.rows:
            return self.lines
        return _render(self.rows, self.headers, self.numparse, self.limits, self.header_limits, self.tight)

    def column(self, i: int) -> list[Any]:
        """Column ``i``'s values (those of the probe: every distinct value, some repeated)."""
        return [r[i] for r in self.probe if isinstance(r, (list, tuple))]

    def drop(self, name: str) -> None:
        i = self.headers.index(name)
        for values in (self.headers, self.limits, self.header_limits):
            values.pop(i)
        self.rows = [[c for j, c in enumerate(r) if j != i] if isinstance(r, (list, tuple)) else r for r in self.rows]
        self.probe = probe_rows(self.rows)
        self.lines = self.render()

    def wrap_headers(self) -> None:
        """Wrap each header at its spaces down to its column's cell width (no narrower than its longest word)."""
        cells = [
            max((len(x) for c in self.column(i) for x in str(c).splitlines()), default=0)
            for i in range(len(self.headers))
        ]
        self.header_limits = [max(_longest_word([h], hyphens=False), cells[i]) for i, h in enumerate(self.headers)]
        self.lines = self.render()

    def narrow(self, width: int, floors: Sequence[int], header_too: bool = False) -> None:
        """Lower the cell limits, widest column first, until the table fits ``width`` or no column can get narrower
        than its floor (tabulate never wraps a number). Wrapping at spaces (``header_too`` False) narrows the widest
        columns evenly; breaking words (``header_too``) takes the whole excess from the widest column first, so
        one long name is broken rather than every column."""
        stuck: set[int] = set()
        while line_width(self.lines) > width:
            widths = _column_widths(self.lines)
            candidates = [i for i, w in enumerate(widths) if w > floors[i] and i not in stuck]
            if not candidates:
                return
            i = max(candidates, key=lambda j: (widths[j], -j))
            excess = line_width(self.lines) - width
            second = max((widths[j] for j in candidates if j != i), default=floors[i]) if not header_too else floors[i]
            new = max(floors[i], widths[i] - excess, second)
            if new >= widths[i]:
                new = max(floors[i], widths[i] - max(1, excess // len(candidates)))
            before = self.limits[i], self.header_limits[i]
            for limit in range(new, floors[i] - 1, -1):
                self.limits[i] = limit
                if header_too:  # tabulate pads a header by 2 more characters than its cells
                    self.header_limits[i] = max(1, min(limit - 2, self.header_limits[i] or limit))
                rendered = self.render()
                if _column_widths(rendered)[i] < widths[i]:
                    self.lines = rendered
                    break
            else:
                self.limits[i], self.header_limits[i] = before
                stuck.add(i)


def fit(
    rows: Sequence[Any],
    headers: Sequence[str],
    width: int | None = None,
    optional: Sequence[str] = (),
    numparse: bool = True,
    keep: Sequence[str] = (),
) -> Fitted:
    """Render ``rows`` under ``headers`` as a GitHub-style table no wider than ``width`` (module docstring).

    ``rows``: lists of cells, or ``tabulate.SEPARATING_LINE``; ``optional``: headers of columns that may be
    dropped, least important first; ``keep``: those of them that matter most, dropped (when they hold something)
    only when wrapping every cell down to its longest word does not make the table fit; ``numparse``: let tabulate
    align numbers (as ``tabulate`` does by default)."""
    if width is None:
        return Fitted(_render(rows, headers, numparse, [None] * len(headers), [None] * len(headers)))
    table = _Table(rows, headers, numparse)
    if line_width(table.lines) <= width:
        return Fitted(table.full())
    table.tight = True  # narrowing: columns no wider than their contents
    table.wrap_headers()
    natural = {
        h: max((len(x) for c in table.column(i) for x in str(c).splitlines()), default=0)
        for i, h in enumerate(table.headers)
    }

    def floors(least: int) -> list[int]:  # never break a word; keep ``least`` characters of cells that long
        return [
            max(_longest_word([h], hyphens=False), _longest_word(table.column(i)), min(least, natural[h]))
            for i, h in enumerate(table.headers)
        ]

    dropped: list[str] = []

    def drop(names: Sequence[str]) -> None:
        for name in names:
            if line_width(table.lines) <= width:
                return
            if name in table.headers:
                table.drop(name)
                dropped.append(name)
                table.narrow(width, floors(SOFT_MIN))

    present = [n for n in optional if n in table.headers]
    empty = [n for n in present if all(str(c).strip() in ("", "-") for c in table.column(table.headers.index(n)))]
    for name in empty:  # columns with nothing in them go first, before any cell is wrapped: no figure is lost
        if line_width(table.lines) <= width:
            break
        table.drop(name)
        dropped.append(name)
    table.narrow(width, floors(SOFT_MIN))
    drop([n for n in present if n not in empty and n not in keep])
    for name in [n for n in present if n not in empty and n in keep]:
        if line_width(table.lines) <= width:
            break
        before = list(table.limits), list(table.header_limits), table.lines
        table.narrow(width, floors(0))
        if line_width(table.lines) <= width:
            break
        table.limits, table.header_limits, table.lines = list(before[0]), list(before[1]), before[2]
        drop([name])
    if line_width(table.lines) > width:
        table.narrow(width, floors(0))
    broken = line_width(table.lines) > width
    if broken:
        table.narrow(width, [HARD_MIN] * len(table.headers), header_too=True)
    return Fitted(table.full(), tuple(dropped), line_width(table.lines) <= width, broken)


def dropped_note(dropped: Sequence[str], width: int | None) -> list[str]:
    """The line saying which columns were left out to fit ``width`` (none when nothing was dropped)."""
    if not dropped:
        return []
    return fit_lines([f"(left out to fit {width} columns: {', '.join(dropped)}; a wider terminal shows them)"], width)


def fit_table(
    rows: Sequence[Any],
    headers: Sequence[str],
    width: int | None = None,
    optional: Sequence[str] = (),
    numparse: bool = True,
    keep: Sequence[str] = (),
) -> list[str]:
    """``fit`` as lines, followed by the ``dropped_note`` when columns were dropped."""
    fitted = fit(rows, headers, width, optional, numparse, keep)
    return fitted.lines + dropped_note(fitted.dropped, width)


def fit_lines(lines: Sequence[str], width: int | None) -> list[str]:
    """Wrap each plain line longer than ``width`` at spaces (a word longer than the width is broken), continuing
    with its own indentation plus 2 spaces; table lines (starting with ``|``) are kept as they are."""
    if width is None:
        return list(lines)
    out: list[str] = []
    for line in lines:
        if len(line) <= width or line.startswith("|"):
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out.extend(
            textwrap.wrap(
                line.strip(),
                width=max(width, len(indent) + 10),
                initial_indent=indent,
                subsequent_indent=indent + "  ",
                break_on_hyphens=False,
            )
            or [""]
        )
    return out


def shorten(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` characters by replacing its middle with ``…`` (kept whole when it fits)."""
    if width is None or len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = (width - 1) // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def _columns() -> int | None:
    import os

    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def terminal_width(reporter: Any) -> int | None:
    """The width the session summary should fit: the terminal's (pytest's ``TerminalWriter.fullwidth``) when the
    output is a terminal, else ``$COLUMNS`` when set, else None (no limit: a CI log keeps every column).
    ``reporter`` is pytest's terminal reporter (``isatty``, ``_tw``), duck-typed so this module imports no pytest."""
    if reporter is not None and bool(getattr(reporter, "isatty", False)):
        return int(reporter._tw.fullwidth)
    return _columns()


def stdout_width() -> int | None:
    """The same rule for the ``agentrace`` command's standard output: the terminal's width when it is one, else
    ``$COLUMNS`` when set, else None."""
    import shutil
    import sys

    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return _columns()
