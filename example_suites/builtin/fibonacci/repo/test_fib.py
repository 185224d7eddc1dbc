import pytest

from fib import fib_sequence, fibonacci


def test_small_values():
    assert [fibonacci(n) for n in range(8)] == [0, 1, 1, 2, 3, 5, 8, 13]


def test_sequence():
    assert fib_sequence(5) == [0, 1, 1, 2, 3]


def test_negative_is_rejected():
    with pytest.raises(ValueError):
        fibonacci(-1)
