"""pytest options of the model double (appended to ``options.OPTIONS``) and the run options they become.

Kept free of heavy imports: ``options`` imports this module for ``pytest --help``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--agentrace-offline", {
        "action": "store_true", "default": False,
        "help": "run each agent in a network namespace with only loopback (Linux, unshare -n); the model double runs inside it",
    }),
    ("--agentrace-model-double", {
        "default": None, "metavar": "SCRIPT",
        "help": "run every CLI agent against the scripted local model SCRIPT (YAML) unless its entry names a model_double of its own",
    }),
]


def script_option(config: Any) -> str | None:
    """``--agentrace-model-double`` as an absolute path (relative to the directory pytest was started in)."""
    value = config.getoption("agentrace_model_double", None)
    if not value:
        return None
    return str((Path(config.invocation_params.dir) / value).resolve())


def run_options(config: Any) -> dict[str, Any]:
    """The runner options these flags set: ``offline`` (bool) and ``model_double`` (script path or None)."""
    return {"offline": bool(config.getoption("agentrace_offline", False)), "model_double": script_option(config)}
