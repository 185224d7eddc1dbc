import pytest

from evaluator import ParseError, UnknownName, evaluate


def test_precedence():
    assert evaluate("1 + 2 * 3") == 7
    assert evaluate("(1 + 2) * 3") == 9


def test_variables():
    assert evaluate("x * x + 1", {"x": 4}) == 17


def test_errors():
    with pytest.raises(ParseError):
        evaluate("1 +")
    with pytest.raises(UnknownName):
        evaluate("y + 1")
