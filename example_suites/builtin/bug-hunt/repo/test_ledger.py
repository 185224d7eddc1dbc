import datetime as dt

from ledger import Transaction, format_cents, month_bounds, paginate, statement, to_cents


def test_format_cents():
    assert format_cents(123456) == "1,234.56"
    assert format_cents(-5) == "-0.05"


def test_to_cents():
    assert to_cents("12.50") == 1250
    assert to_cents("19.99") == 1999


def test_month_bounds():
    assert month_bounds(2024, 2) == (dt.date(2024, 2, 1), dt.date(2024, 2, 29))


def test_paginate():
    assert paginate([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


def test_statement_total():
    txs = [Transaction(dt.date(2024, 3, 5), "coffee", -450), Transaction(dt.date(2024, 3, 9), "salary", 300000)]
    lines = statement(txs, 2024, 3)
    assert len(lines) == 3
    assert lines[-1].endswith("2,995.50")
