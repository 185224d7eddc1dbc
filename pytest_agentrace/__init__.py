"""pytest-agentrace: a pytest plugin that turns coding-agent trials into test cases."""

from __future__ import annotations

import functools


@functools.cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-agentrace")
    except PackageNotFoundError:  # running from a source tree without install
        return "0.0.0"


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata on first use (a helper process started inside a run's
    namespace imports this package and must start fast)."""
    if name == "__version__":
        return _version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
