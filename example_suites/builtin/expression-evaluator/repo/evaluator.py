"""Evaluate arithmetic expressions with variables and functions, without eval()."""


class EvalError(Exception):
    """The expression cannot be evaluated."""


class ParseError(EvalError):
    """The expression is not well formed; ``position`` is where the problem was found."""

    def __init__(self, message, position):
        super().__init__(f"{message} at position {position}")
        self.position = position


class UnknownName(EvalError):
    """A variable or function name that is not defined."""


def evaluate(expression, variables=None, functions=None):
    """Return the value of ``expression`` (an int or a float)."""
    raise NotImplementedError
