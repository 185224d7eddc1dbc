"""pytest side of the model double (registered through the ``pytest11`` entry point ``agentrace_model_double``).

- fixture ``model_double``: a started ``ModelDouble`` on 127.0.0.1 (free port) whose default script ends at
  once with the text ``DONE`` and whose request log is ``<tmp_path>/model-double-requests.jsonl``; tests call
  ``model_double.register(load_script(path), log)`` for a run of their own, or ``use(script)`` to change the
  default script. Stopped after the test.

The ``--agentrace-model-double`` and ``--agentrace-offline`` settings are checked by the plugin's
``pytest_configure`` (``plugin``). Every pytest process loads this entry point, so the server module
(``http.server`` and the CLIs' wire formats) is imported when a test uses the fixture, not before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def model_double(tmp_path: Path) -> Iterator[object]:
    """A started model double (``.url``, ``.register(script, log)``, ``.use(script)``, ``.requests()``)."""
    from pytest_agentrace.model_double.server import ModelDouble  # here: a test run that uses no double never loads it

    double = ModelDouble(log=tmp_path / "model-double-requests.jsonl").start()
    try:
        yield double
    finally:
        double.stop()
