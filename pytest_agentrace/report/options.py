"""pytest options of the reports (appended to ``options.OPTIONS``); no pytest import, so the CLI can share them."""

from __future__ import annotations

from typing import Any

REPORT_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--agentrace-html", {"default": None, "metavar": "PATH", "help": "write a self-contained HTML report (charts, sortable tables, run details)"}),
    ("--agentrace-md", {"default": None, "metavar": "PATH", "help": "write the summary as GitHub-flavoured Markdown (also appended to $GITHUB_STEP_SUMMARY when set)"}),
    ("--agentrace-json", {"default": None, "metavar": "PATH", "help": "write the JSON export (schemas/report.schema.json)"}),
]
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
