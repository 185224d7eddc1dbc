"""Small statistics helpers."""


def median(values):
    """Return the median of a non-empty sequence of numbers."""
    if not values:
        raise ValueError("median() of an empty sequence")
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid]
