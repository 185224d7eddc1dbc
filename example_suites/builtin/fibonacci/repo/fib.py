"""Fibonacci numbers."""


def fibonacci(n):
    """Return the n-th Fibonacci number (F(0) = 0, F(1) = 1)."""
    raise NotImplementedError


def fib_sequence(count):
    """Return the first ``count`` Fibonacci numbers as a list."""
    raise NotImplementedError
