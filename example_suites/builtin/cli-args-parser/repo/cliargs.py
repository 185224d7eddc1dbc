"""A command-line argument parser written from scratch."""


class UsageError(Exception):
    """The command line does not fit the parser's options and positionals."""


class Parser:
    """Declare options and positionals, then ``parse(argv)`` into a dict."""

    def add_option(self, name, short=None, type=str, default=None, required=False, flag=False, multiple=False, choices=None):
        raise NotImplementedError

    def add_positional(self, name, type=str):
        raise NotImplementedError

    def parse(self, argv):
        raise NotImplementedError
