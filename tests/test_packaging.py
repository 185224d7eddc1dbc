"""Packaging facts a fresh install depends on: every third-party module the package imports is a declared
dependency (optional ones in an extra), the metadata is SPDX and classified, the sdist list holds what downstream
packagers need, and scripts/install-browser.sh installs into the active venv. The build itself, twine check and a
plain wheel install in a fresh venv run in .ci/run (scripts/check-wheel.sh)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _imports() -> set[str]:
    found = set()
    for f in (ROOT / "pytest_agentrace").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found |= {n.split(".")[0] for n in names}
    return {m for m in found if m not in sys.stdlib_module_names and m != "pytest_agentrace"}


def test_every_imported_distribution_is_declared() -> None:
    runtime = {_name(r) for r in PROJECT["dependencies"]}
    extras = {_name(r) for reqs in PROJECT["optional-dependencies"].values() for r in reqs}
    dists = packages_distributions()
    for module in sorted(_imports()):
        names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        assert names & (runtime | extras), f"{module} ({names}) is imported but not declared"
    assert {"numpy", "ruff", "jsonschema"} <= runtime  # numpy: the stats modules; ruff: built-ins' lint, init
    assert "shtab" in {_name(r) for r in PROJECT["optional-dependencies"]["completion"]}


def test_metadata_is_spdx_and_classified() -> None:
    assert PROJECT["license"] == "MIT" and (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert not any(c.startswith("License ::") for c in PROJECT["classifiers"])  # PEP 639: the expression only
    for c in ("Framework :: Pytest", "Operating System :: POSIX :: Linux", "Topic :: Software Development :: Testing",
              "Programming Language :: Python :: 3.11", "Typing :: Typed"):
        assert c in PROJECT["classifiers"]
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert any(re.fullmatch(r"setuptools>=(7[7-9]|[89]\d)(\.\d+)*", r) for r in build), build  # PEP 639 support
    assert (ROOT / "pytest_agentrace" / "py.typed").is_file()
    assert any(_name(r) == "pytest" and ">=8.3" in r for r in PROJECT["dependencies"])
    assert "agentrace" not in PROJECT["entry-points"]["pytest11"]  # the PyPI package `agentrace` takes that name


def test_sdist_manifest_lists_tests_examples_and_changelog() -> None:
    manifest = (ROOT / "MANIFEST.in").read_text()
    for line in ("include LICENSE README.md CHANGELOG.md conftest.py", "graft tests", "graft example_suites",
                 "graft examples"):
        assert line in manifest


@pytest.mark.skipif(not shutil.which("chromium"), reason="needs Debian's chromium (scripts/install-browser.sh)")
def test_install_browser_uses_the_active_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = {**os.environ, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHON", None)
    done = subprocess.run(["bash", str(ROOT / "scripts" / "install-browser.sh")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"install-browser: Playwright into {venv / 'bin' / 'python'}" in done.stdout
