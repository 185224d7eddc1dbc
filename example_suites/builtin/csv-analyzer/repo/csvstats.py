"""Summaries of the columns of a CSV file, as a library and a command."""


def summarize(text):
    """Return ``{column: summary}`` for the CSV document ``text``."""
    raise NotImplementedError


def main(argv=None):
    """Command line: ``python csvstats.py FILE [--column NAME]``; returns the exit status."""
    raise NotImplementedError


if __name__ == "__main__":
    raise SystemExit(main())
