import pytest

from cliargs import Parser, UsageError


def make():
    p = Parser()
    p.add_option("output", short="o")
    p.add_option("verbose", short="v", flag=True)
    p.add_positional("source")
    return p


def test_basic():
    assert make().parse(["-v", "in.txt", "--output", "out.txt"]) == {"output": "out.txt", "verbose": True, "source": "in.txt"}


def test_defaults():
    assert make().parse(["in.txt"]) == {"output": None, "verbose": False, "source": "in.txt"}


def test_unknown_option():
    with pytest.raises(UsageError):
        make().parse(["--nope", "in.txt"])
