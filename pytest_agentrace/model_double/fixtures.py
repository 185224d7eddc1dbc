"""pytest side of the model double (registered through the ``pytest11`` entry point ``agentrace_model_double``).

- fixture ``model_double``: a started ``ModelDouble`` on 127.0.0.1 (free port) whose default script ends at
  once with the text ``DONE`` and whose request log is ``<tmp_path>/model-double-requests.jsonl``; tests call
  ``model_double.register(load_script(path), log)`` for a run of their own, or ``use(script)`` to change the
  default script. Stopped after the test.
- ``--agentrace-model-double SCRIPT``: checked at start-up (a bad script is a usage error naming file and key).
- ``--agentrace-offline`` where network namespaces are not permitted: said once, as a warning at start-up,
  and the runs go on without one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def model_double(tmp_path: Path) -> Iterator[object]:
    """A started model double (``.url``, ``.register(script, log)``, ``.use(script)``, ``.requests()``)."""
    from pytest_agentrace.model_double.server import ModelDouble

    double = ModelDouble(log=tmp_path / "model-double-requests.jsonl").start()
    try:
        yield double
    finally:
        double.stop()


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("agentrace", False):
        return
    from pytest_agentrace.model_double.opts import script_option

    script = script_option(config)
    if script:  # a bad --agentrace-model-double script stops the session at once, with file and key
        from pytest_agentrace.errors import SpecError
        from pytest_agentrace.model_double.script import load_script

        try:
            load_script(script)
        except SpecError as exc:
            raise pytest.UsageError(f"--agentrace-model-double: {exc}") from None
    if not config.getoption("agentrace_offline", False):
        return
    if hasattr(config, "workerinput"):  # said once, by the controller
        return
    from pytest_agentrace.model_double.netns import probe

    prefix, why = probe()
    if prefix is None:
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(f"--agentrace-offline: {why}; agents run without a network namespace"), stacklevel=2,
        )
