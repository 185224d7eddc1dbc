import json

import pytest

from report import generate_report

ROWS = [
    {"sku": "A1", "name": "bolt", "category": "hardware", "qty": "100", "price": "0.25"},
    {"sku": "B2", "name": "drill", "category": "tools", "qty": "3", "price": "89.90"},
    {"sku": "C3", "name": "glue", "category": "", "qty": "12", "price": "4.5"},
]


def test_text():
    assert generate_report(ROWS) == (
        "STOCK REPORT\n============\n"
        "hardware                   25.00\n"
        "tools                     269.70\n"
        "uncategorized              54.00\n"
        "--------------------------------\n"
        "TOTAL                     348.70\n"
        "LOW STOCK: B2\n"
    )


def test_csv():
    assert generate_report(ROWS, "csv") == "category,value\nhardware,25.00\ntools,269.70\nuncategorized,54.00\nTOTAL,348.70\n"


def test_json():
    assert json.loads(generate_report(ROWS, "json")) == {
        "categories": {"hardware": 25.0, "tools": 269.7, "uncategorized": 54.0},
        "items": 3, "low_stock": ["B2"], "total": 348.7,
    }


def test_errors():
    with pytest.raises(ValueError):
        generate_report(ROWS, "xml")
    with pytest.raises(ValueError):
        generate_report([{"sku": "X", "name": "x", "qty": "-1", "price": "1"}])
