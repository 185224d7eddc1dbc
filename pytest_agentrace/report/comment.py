"""The pull-request comment (``agentrace comment OUT``, ``agentrace render OUT --format comment``): the Markdown
report with a hidden marker line, cut to GitHub's 65,536 characters (``markdown.comment_body``)."""

from __future__ import annotations

from pytest_agentrace.report.markdown import comment_body
from pytest_agentrace.report.result import SessionResult


def render(result: SessionResult) -> str:
    """The comment body of ``result`` (``result.context.full_report``: where the full report is, named when the
    report is cut to fit)."""
    return comment_body(result, full_report=result.context.full_report)
