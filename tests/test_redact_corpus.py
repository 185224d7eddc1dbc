"""Redaction has no false positives on ordinary text and catches every key shape it documents.

The ordinary corpus: the built-in and example task names (and names made from them, ``fix-the-<name>-deadlock``),
every identifier in the package's own source and in Python's standard-library module names and builtins, author
names, git and environment lines, and paths of the kind records hold (pytest's temp folders, cassettes). The secret
corpus: one realistic key per documented shape (random characters of the real length), credential headers, URL
passwords, ``password: ...`` lines and secret-like variables.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import random
import re
import string
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import yaml

import pytest_agentrace
from pytest_agentrace.record.model import Outcome
from pytest_agentrace.record.redact import MARK, is_secret_name, redact, redact_outcome, secret_values

PACKAGE = Path(pytest_agentrace.__file__).parent
REPO = PACKAGE.parent
RNG = random.Random(20261201)
ALNUM = string.ascii_letters + string.digits


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def task_names() -> list[str]:
    names = {p.name for p in (PACKAGE / "builtin_tasks").iterdir() if p.is_dir()}
    for f in (REPO / "example_suites").rglob("*.yaml"):
        data = yaml.safe_load(f.read_text())
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            names.add(data["name"])
    names |= {f"fix-the-{n}-deadlock" for n in list(names)}
    names |= {"fix-the-task-scheduler-deadlock", "flask-login-session-bug", "risk-model-calibration",
              "disk-usage-report", "ask-the-user", "desk-lamp", "kiosk-mode", "mask-tokens-in-logs", "tsk-tsk"}
    return sorted(names)


def identifiers() -> list[str]:
    names: set[str] = set(dir(builtins)) | set(sys.stdlib_module_names)
    for f in PACKAGE.rglob("*.py"):
        for tok in tokenize.generate_tokens(io.StringIO(f.read_text()).readline):
            if tok.type == tokenize.NAME:
                names.add(tok.string)
    return sorted(names)


ORDINARY_LINES = [
    "GIT_AUTHOR_NAME=Ada Lovelace-Byron", "GIT_COMMITTER_NAME=Grace Hopper", "GIT_AUTHOR_EMAIL=ada@example.org",
    "Author: Linus Torvalds <torvalds@example.org>", "author = 'Guido van Rossum'", "AUTHORS: Tim Peters, Barry Warsaw",
    "MAX_TOKENS=4096", "max_output_tokens: 32000", "CLAUDE_CODE_MAX_OUTPUT_TOKENS=64000", "input_tokens: 1234567",
    "SSH_KEY_PATH=/root/.ssh/id_ed25519", "KEYBOARD_LAYOUT=us-international", "key: value", "sort key=lambda x: x",
    "token = tokenize.generate_tokens(readline)", "PASSWORD_FILE=/run/secrets/db-password",
    "the task-scheduler deadlock fixed in sk-learn-ish code", "risk-adjusted-returns", "ask-for-more-information",
    "/tmp/pytest-of-root/pytest-123/test_fix_the_task_scheduler_deadlock0/out/cassettes/fix-the-task-scheduler-deadlock",
    "/work/main/.tools/bin/claude", "/home/runner/work/flask-app/flask-app/tests/test_risk_model.py",
    "commit 8fee053a1b2c3d4e5f60718293a4b5c6d7e8f901", "uuid 01a230e4-d909-77b2-b9fd-67e19020cf56",
    "sha256:" + "ab" * 32, "Bearer of bad news", "Authorization header missing", "basic auth is off",
    "AIza is the start of a Google key", "AKIA is an AWS prefix", "ghp_ is a GitHub prefix", "xoxb- is Slack",
]


def test_no_false_positive_on_task_names_identifiers_authors_and_paths() -> None:
    names = task_names()
    assert "fix-the-task-scheduler-deadlock" in names and len(names) > 40
    words = identifiers()
    assert len(words) > 2000
    corpus = [*names, *words, *ORDINARY_LINES, " ".join(names), "\n".join(words)]
    changed = [t for t in corpus if redact(t) != t]
    assert changed == []
    assert [w for w in words if is_secret_name(w) and "AUTHOR" in w.upper()] == []


SHAPES = {
    "anthropic": "sk-ant-api03-" + rand(93, ALNUM + "_-") + "AA",
    "anthropic-admin": "sk-ant-admin01-" + rand(93, ALNUM + "_-") + "AA",
    "openai-project": "sk-proj-" + rand(156, ALNUM + "_-"),
    "openai-service": "sk-svcacct-" + rand(120, ALNUM + "_-"),
    "openai-legacy": "sk-" + rand(20) + "T3BlbkFJ" + rand(20),
    "github-classic": "ghp_" + rand(36), "github-oauth": "gho_" + rand(36), "github-server": "ghs_" + rand(36),
    "github-fine-grained": "github_pat_" + rand(22) + "_" + rand(59),
    "aws": "AKIA" + rand(16, string.ascii_uppercase + string.digits),
    "aws-session": "ASIA" + rand(16, string.ascii_uppercase + string.digits),
    "google": "AIza" + rand(35, ALNUM + "_-"),
    "slack-bot": "xoxb-" + rand(12, string.digits) + "-" + rand(13, string.digits) + "-" + rand(24),
    "slack-user": "xoxp-" + rand(11, string.digits) + "-" + rand(11, string.digits) + "-" + rand(32),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("frame", ["{}", "key {} end", "'{}'", '{{"k": "{}"}}', "x={}\n", "({})", "{}."])
def test_every_key_shape_is_caught_in_any_frame(shape: str, frame: str) -> None:
    key = SHAPES[shape]
    out = redact(frame.format(key))
    assert key not in out and key[-12:] not in out and out == frame.format(MARK)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_truncated_or_glued_key_is_not_a_key(shape: str) -> None:
    key = SHAPES[shape]
    prefix = re.match(r"sk-ant-[a-z]+\d\d-|sk-[a-z]+-(?=.{40})|sk-|gh[a-z]_|github_pat_|AIza|xox[a-z]-\d+-|A[A-Z]IA", key)
    assert prefix
    short = key[: prefix.end() + 12]
    assert redact(short) == short  # shorter than the format's minimum
    glued = "task" + key if shape.startswith(("openai", "anthropic")) else "x" + key
    assert redact(glued) == glued  # part of a longer word


@pytest.mark.parametrize(("text", "expected"), [
    ("Authorization: Bearer abcdefghijklmnopqrstu", "Authorization: Bearer <redacted>"),
    ("authorization: Basic dXNlcjpodW50ZXIy", "authorization: Basic <redacted>"),
    ("Proxy-Authorization: Basic dXNlcjpodW50ZXIy", "Proxy-Authorization: Basic <redacted>"),
    ('{"Authorization": "Token abcdef0123"}', '{"Authorization": "Token <redacted>"}'),
    ("curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig'", "curl -H 'Authorization: Bearer <redacted>'"),
    ("password: hunter2", "password: <redacted>"), ("password=hunter2", "password=<redacted>"),
    ("DB_PASSWORD='correct horse'", "DB_PASSWORD='<redacted> horse'"),
    ("OPENAI_API_KEY=abc123def456", "OPENAI_API_KEY=<redacted>"), ('"api_key": "abc123"', '"api_key": "<redacted>"'),
    ("GITHUB_TOKEN=abcdef", "GITHUB_TOKEN=<redacted>"), ("client_secret: s3cr3t-value", "client_secret: <redacted>"),
    ("https://alice:s3cret@git.example.org/r.git", "https://alice:<redacted>@git.example.org/r.git"),
])
def test_credentials_in_headers_assignments_and_urls(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_secret_like_variable_names_are_whole_words() -> None:
    secret = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "PASSWORD",
              "MY_SERVICE_TOKEN", "x-api-key", "X-Session-Token", "apiKey", "HTTP_AUTH", "GOOGLE_CREDENTIALS", "Cookie"]
    plain = ["GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "AUTHOR", "MAX_TOKENS", "KEY", "KEYBOARD", "SSH_KEY_PATH",
             "TOKENIZERS_PARALLELISM", "SECRETARY", "PASSWORDLESS", "AUTHORITY", "MONKEY", "TURKEY_COUNT",
             "GOOGLE_APPLICATION_CREDENTIALS_FILE", "HOME", "PATH", "PWD", "OLDPWD", "author", "api_key_name"]
    assert [n for n in secret if not is_secret_name(n)] == []
    assert [n for n in plain if is_secret_name(n)] == []
    env = {"GIT_AUTHOR_NAME": "Ada Lovelace", "OPENAI_API_KEY": "sk-local-0123456789", "MAX_TOKENS": "123456789"}
    assert secret_values(env) == ["sk-local-0123456789"]
    assert secret_values(dict(os.environ)) == secret_values() and os.getcwd() not in secret_values()


def test_a_record_keeps_its_task_name_and_cassette_path(tmp_path: Path) -> None:
    cassette = tmp_path / "cassettes" / "fix-the-task-scheduler-deadlock" / "claude" / "1.json"
    outcome = Outcome.from_dict({
        "run_id": "fix-the-task-scheduler-deadlock/default/claude/1", "kind": "task", "source": "tasks/t.yaml", "case": "fix-the-task-scheduler-deadlock",
        "arm": "default", "agent": "claude", "rep": 1, "status": "passed",
        "extra": {"cassette": str(cassette), "author": "GIT_AUTHOR_NAME=Ada Lovelace"}})
    out = redact_outcome(outcome, ["Ada Lovelace-not-a-secret"]).to_dict()
    assert json.dumps(out, sort_keys=True) == json.dumps(outcome.to_dict(), sort_keys=True)


@pytest.mark.parametrize("text", ['{"fallback_token_limit_override":null,"model":"x"}', "api_token: none",
                                  "SECRET_ROTATION=false", "password = true", "token_budget: undefined"])
def test_literal_values_of_secret_like_names_are_kept(text: str) -> None:
    """A JSON/YAML/TOML literal (null, none, true, false, nil, undefined) holds no secret: kept as written (a
    Codex session log's ``"fallback_token_limit_override":null`` stays valid JSON)."""
    assert redact(text) == text


@pytest.mark.parametrize("text", ['{"fallback_token_limit_override":272000,"model":"x"}', '{"api_token": 12345678901}',
                                  '{"session_token": -3.5e2}', "{'auth_token': 42}", "TOKEN_BUDGET_MAX=900000",
                                  "token_limit: 128000", '{"a": {"context_window_tokens": 400000}}'])
def test_counts_of_tokens_and_bare_json_numbers_are_kept(text: str) -> None:
    """A number of tokens is no token (``TOKEN`` beside a word of counting), and a quoted key's bare number is no
    credential (a JSON credential is a string): kept as written, so a Codex session log's
    ``"fallback_token_limit_override":272000`` stays valid JSON and its line is read."""
    assert redact(text) == text
    json_part = text[text.index("{"):] if text.startswith("{") and '"' in text else None
    if json_part:
        json.loads(json_part)


@pytest.mark.parametrize(("text", "expected"), [
    ('{"api_token": "12345678901"}', '{"api_token": "<redacted>"}'),  # a string stays a credential
    ("API_TOKEN=12345678901", "API_TOKEN=<redacted>"),  # an unquoted shell value too
    ('{"a":{"api_key":abcdefghijk}}', '{"a":{"api_key":<redacted>}}'),  # the closing braces stay
    ("[password=hunter2hunter]", "[password=<redacted>]"),
])
def test_a_redacted_value_ends_before_a_closing_bracket(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_redaction_is_linear_in_hostile_text() -> None:
    """Runs of name characters with a dot, dash or separator between every letter (``a.a.a...``) made the
    assignment search quadratic: 120 KB of output took minutes of the harness's CPU. Each of these 400 KB texts is
    redacted in a child process that has 120 seconds (linear: well under one; quadratic: hours), and comes back
    unchanged (nothing in it is a secret)."""
    code = (
        "import sys\n"
        "from pytest_agentrace.record.redact import redact\n"
        "for unit in ('a.', 'a-', 'a_', 'a.1', 'a:', 'a=', 'a ', 'x =', 'key.', '--a'):\n"
        "    text = unit * (400_000 // len(unit))\n"
        "    assert redact(text) == text, unit\n"
        "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr[-2000:]
