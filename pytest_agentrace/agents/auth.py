"""Recognise login / auth / account-setup failures, and model-provider outages, in a CLI's error output.

Such a run is our environment's fault (no login in the per-run HOME, a missing API key, an untrusted
workspace), not the agent's: the parser reports ``AgentStatus.ERROR`` and the runner makes the run status
``error`` with the matched line as the reason, so it is never scored as a failure.

Only error channels of runs that did not complete are searched (stderr, error events, failed results, non-JSON
stdout): a successful run whose answer mentions "401 Unauthorized" is not an auth failure.

Messages, by CLI (from their error texts as quoted in public issue threads and docs):
- Claude Code: ``Invalid API key · Please run /login``, ``Not logged in``, ``OAuth token has expired``,
  ``authentication_error``, ``Credit balance is too low``.
- Codex: ``unexpected status 401 Unauthorized``, ``Not logged in``, ``run `codex login```.
- Gemini CLI: ``Please set an Auth method``, ``When using Gemini API, you must specify the GEMINI_API_KEY
  environment variable``, exit 55 ``not running in a trusted directory``.
- Cursor: ``Authentication required``, ``cursor-agent login``, ``Workspace Trust Required``.
- Copilot: ``No authentication information found``, ``gh auth login``.
- OpenCode: ``ProviderAuthError``, ``AI_LoadAPIKeyError``; aider/litellm: ``AuthenticationError``,
  ``The API provider is not able to authenticate you``.

A model provider that keeps answering with a server error (HTTP 5xx, "overloaded") after the CLI's own retries
is not the agent's fault either: such a run is ``error`` too ("model provider failed"), so it is excluded from the
statistics, counted as an error, and re-run by ``--agentrace-retry-failed``. What each CLI prints for a 500 on
every attempt (seen against the model double): claude ``API Error: 500 ...``, codex ``We're currently
experiencing high demand``, gemini ``[API Error: {"error":{"code":500, ...``, opencode ``APIError: ... (500)``,
copilot ``... Last error: 500 ...``, aider ``litellm.InternalServerError`` / ``The API provider's servers are
down or overloaded``. Aider (litellm) reports a malformed model response with the same InternalServerError, so
for aider a malformed stream is an ``error`` as well; the other CLIs name it a parse failure, which stays a
failed run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pytest_agentrace.agents.parsing import one_line
from pytest_agentrace.record.model import AgentStatus


def _compile(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


AUTH_FAULT = "login/auth or setup problem"  # how an auth/setup error's text starts (``settle``)
PROVIDER_FAULT = "model provider failed"  # how a provider outage's text starts (``settle``)

PATTERNS: tuple[re.Pattern[str], ...] = _compile(
    r"invalid api[ _-]?key",
    r"incorrect api key",
    r"invalid x-api-key",
    r"authentication_?error",
    r"not able to authenticate you",
    r"\b401\b\W+unauthori[sz]ed",
    r"\b(status|http|code|error)\W{0,3}401\b",
    r"\bnot (logged|signed) in\b",
    r"please (run )?/login",
    r"please (log|sign) ?in",
    r"\b(codex|cursor-agent|agent|copilot|gemini|claude|opencode|gh auth|aider) login\b",
    r"(login|authentication|auth) (is )?required",
    r"no authentication information",
    r"api[ _-]?key (is )?(missing|not (set|found|provided|configured))",
    r"(missing|no) api[ _-]?key",
    r"must specify the \w*api_key",
    r"please set an auth method",
    r"(oauth )?token (has )?expired",
    r"failed to (log ?in|authenticate)",
    r"provider_?auth_?error",
    r"load_?api_?key_?error",
    r"credit balance is too low",
    r"workspace trust required",
    r"not running in a trusted (directory|folder)",
)


PROVIDER_PATTERNS: tuple[re.Pattern[str], ...] = _compile(
    r"\b(status|http|code|error)\W{0,3}5\d\d\b",
    r"\bapi ?error\b.*\(5\d\d\)",
    r"internal ?server ?error",
    r"service unavailable",
    r"bad gateway",
    r"overloaded_error",
    r"servers are down or overloaded",
    r"experiencing high demand",
)


def detect(texts: Iterable[str | None], patterns: tuple[re.Pattern[str], ...] = PATTERNS) -> str | None:
    """The first line of ``texts`` matching one of ``patterns`` (default: a login/auth/setup failure), as one
    line of at most 200 characters, or ``None``."""
    for text in texts:
        for line in (text or "").splitlines():
            if any(p.search(line) for p in patterns):
                return one_line(line, 200)
    return None


def settle(status: str, error: str | None, texts: Iterable[str | None]) -> tuple[str, str | None]:
    """``(status, error)`` of a parsed run, turned into ``AgentStatus.ERROR`` with the matched line when the
    run did not complete and ``error`` or ``texts`` show an auth/setup failure, or ``error`` (the CLI's final error,
    never the rest of its output, which may quote code such as ``res.status(500)``) a model-provider outage."""
    if status == AgentStatus.COMPLETED:
        return status, error
    texts = [*texts, error]
    found = detect(texts)
    if found:
        return AgentStatus.ERROR, f"{AUTH_FAULT}: {found}"
    found = detect([error], PROVIDER_PATTERNS)  # the CLI's final error only: its output may quote server code
    if found:
        return AgentStatus.ERROR, f"{PROVIDER_FAULT} (server error after the CLI's retries): {found}"
    return status, error
