"""Calendar helpers."""

import datetime as dt


def month_bounds(year, month):
    """Return (first day, last day) of the month as dates."""
    first = dt.date(year, month, 1)
    last = dt.date(year, month + 1, 1) - dt.timedelta(days=1)
    return first, last
