"""Money amounts as integer cents."""


def to_cents(text):
    """Parse an amount such as "1,234.56", "-0.5" or "7" into integer cents.

    Raises ValueError for text that is not an amount.
    """
    cleaned = text.strip().replace(",", "")
    if not cleaned or cleaned.count(".") > 1:
        raise ValueError(f"not an amount: {text!r}")
    value = float(cleaned)
    return int(value * 100)


def format_cents(cents):
    """Format integer cents as "1,234.56" (negative amounts get a leading "-")."""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{whole:,}.{frac:02d}"
