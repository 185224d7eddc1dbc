"""The transaction record."""

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class Transaction:
    date: dt.date
    description: str
    cents: int
    category: str = "other"
