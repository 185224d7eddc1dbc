import pytest

from jsonparser import JSONParseError, parse


def test_scalars():
    assert parse("true") is True
    assert parse("null") is None
    assert parse("42") == 42
    assert parse('"hi"') == "hi"


def test_nested():
    assert parse('{"a": [1, 2, {"b": null}]}') == {"a": [1, 2, {"b": None}]}


def test_trailing_comma_is_an_error():
    with pytest.raises(JSONParseError):
        parse("[1, 2,]")
