"""A small bookkeeping library."""

from .dates import month_bounds
from .models import Transaction
from .money import format_cents, to_cents
from .paging import page_count, paginate
from .report import by_category, statement

__all__ = [
    "Transaction", "by_category", "format_cents", "month_bounds", "page_count", "paginate", "statement", "to_cents",
]
