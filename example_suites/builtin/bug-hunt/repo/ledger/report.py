"""Reports over transactions."""

from .dates import month_bounds
from .money import format_cents


def by_category(transactions, categories):
    """Group transactions as {category: [transactions]} for the given categories, in input order.

    Transactions of any other category go under "other".
    """
    groups = dict.fromkeys([*categories, "other"], [])
    for tx in transactions:
        key = tx.category if tx.category in groups else "other"
        groups[key].append(tx)
    return groups


def statement(transactions, year, month):
    """The lines of a monthly statement: the month's transactions by date, then a total line."""
    first, last = month_bounds(year, month)
    rows = sorted((t for t in transactions if first <= t.date < last), key=lambda t: t.date)
    lines = [f"{t.date.isoformat()}  {t.description:<20}  {format_cents(t.cents):>12}" for t in rows]
    total = sum(t.cents for t in rows)
    lines.append(f"{'TOTAL':<32}  {format_cents(total):>12}")
    return lines
