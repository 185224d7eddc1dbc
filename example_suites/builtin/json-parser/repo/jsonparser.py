"""A JSON parser written from scratch."""


class JSONParseError(ValueError):
    """Raised for text that is not valid JSON.

    ``position`` is the index in the text where the parser met something it did not expect
    (``len(text)`` when the text ended too early).
    """

    def __init__(self, message, position):
        super().__init__(f"{message} at position {position}")
        self.position = position


def parse(text):
    """Parse the JSON document ``text`` and return the Python value."""
    raise NotImplementedError
