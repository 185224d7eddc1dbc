import pytest

from regex import RegexError, fullmatch, search


def test_fullmatch():
    assert fullmatch("ab*c", "abbbc")
    assert not fullmatch("ab*c", "abd")


def test_search():
    assert search("b+", "aabbbc") == (2, 5)
    assert search("x", "abc") is None


def test_error():
    with pytest.raises(RegexError):
        fullmatch("(ab", "ab")
