"""A regular expression engine written from scratch."""


class RegexError(ValueError):
    """The pattern is not valid."""


def compile(pattern):
    """Compile ``pattern`` into an object with fullmatch(text) and search(text)."""
    raise NotImplementedError


def fullmatch(pattern, text):
    """True when the whole of ``text`` matches ``pattern``."""
    return compile(pattern).fullmatch(text)


def search(pattern, text):
    """(start, end) of the leftmost-longest match of ``pattern`` in ``text``, or None."""
    return compile(pattern).search(text)
