"""Top-level conftest: the project's own tests use pytester (see tests/conftest.py for shared fixtures)."""
