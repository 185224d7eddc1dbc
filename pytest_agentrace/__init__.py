"""pytest-agentrace: a pytest plugin that turns coding-agent trials into test cases."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pytest-agentrace")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0"
