"""Issue 4: the strict trial-file schema (every key loads; unknown keys name table, key and nearest valid name)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_agentrace.errors import SpecError
from pytest_agentrace.spec.trial import (
    AGENT_KEYS,
    ARM_KEYS,
    DEFAULTS_KEYS,
    QUESTION_KEYS,
    REPO_KEYS,
    TOP_KEYS,
    is_trial_data,
    load_trial,
    read_toml,
)

FULL = """\
name = "docs-layer"

[defaults]
reps = 3
parallel = 2
timeout = 45
baseline = "plain"
prompt_suffix = "Answer briefly."
claim = true

[[repos]]
name = "app"
source = "app-src"
ref = "v1"

[[repos]]
name = "other"
source = "file://other-src"

[[repos]]
name = "remote"
source = "https://example.invalid/x.git"

[[arms]]
name = "plain"

[[arms]]
name = "docs"
overlay = "docs-overlay"
repos = { app = "other" }
setup = ["echo one", "echo two"]
parallel_setup = true
prepare = "echo prep"
uses = "^mcp__graph"
prompt_prefix = "Read docs/ first."
prompt_suffix = "Cite the file."

[[agents]]
name = "claude"
model = "sonnet"
args = ["--max-turns", "3"]
env = { FOO = "bar", N = 3 }
edits = true

[[agents]]
name = "codex"
sandbox = "read-only"
model_double = "double.yaml"

[[agents]]
name = "grep-bot"
command = ["./bots/grep.py", "{prompt}"]
kind = "plain"

[[questions]]
id = "port"
repo = "app"
prompt = "Which port does the server use?"
expect = ["8123", "(?i)listen"]
min_recall = 0.5
forbid = ["8080"]
verify = "test -f app.py"
verify_files = "hidden"

[[questions]]
id = "name"
repo = "other"
prompt = "What is the app called?"
expect = "demo"
"""


@pytest.fixture
def trial_dir(tmp_path: Path) -> Path:
    for d in ("app-src", "other-src", "docs-overlay", "hidden/sub"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "hidden" / "test_port.py").write_text("def test_port():\n    assert True\n")
    (tmp_path / "hidden" / "sub" / "data.txt").write_text("8123\n")
    return tmp_path


def write(tmp: Path, text: str, name: str = "trial.toml") -> Path:
    p = tmp / name
    p.write_text(textwrap.dedent(text))
    return p


def load_text(tmp: Path, text: str) -> object:
    return load_trial(write(tmp, text))


def test_every_key_loads(trial_dir: Path) -> None:
    t = load_text(trial_dir, FULL)
    assert t.name == "docs-layer"
    assert (t.reps, t.parallel, t.timeout, t.baseline, t.prompt_suffix, t.claim) == (3, 2, 45.0, "plain", "Answer briefly.", True)
    app, other, remote = t.repos
    assert app.source == str(trial_dir / "app-src") and app.ref == "v1"
    assert other.source == str(trial_dir / "other-src") and other.ref is None
    assert remote.source == "https://example.invalid/x.git"
    plain, docs = t.arms
    assert plain.overlay is None and plain.setup == () and plain.parallel_setup is False and plain.uses is None
    assert docs.overlay == str(trial_dir / "docs-overlay")
    assert docs.repos == {"app": "other"}
    assert docs.setup == ("echo one", "echo two") and docs.prepare == ("echo prep",) and docs.parallel_setup is True
    assert docs.uses == "^mcp__graph" and docs.prompt_prefix == "Read docs/ first." and docs.prompt_suffix == "Cite the file."
    claude, codex, bot = t.agents
    assert (claude.id, claude.model, claude.args, claude.env, claude.edits) == ("claude:sonnet", "sonnet", ("--max-turns", "3"), {"FOO": "bar", "N": "3"}, True)
    assert codex.edits is None and codex.sandbox == "read-only" and codex.model_double == str(trial_dir / "double.yaml")
    assert bot.command == ("./bots/grep.py", "{prompt}") and bot.adapter == "plain"
    port, name = t.questions
    assert (port.id, port.repo, port.expect, port.min_recall, port.forbid, port.verify) == ("port", "app", ("8123", "(?i)listen"), 0.5, ("8080",), "test -f app.py")
    assert (name.expect, name.min_recall, name.forbid, name.verify) == (("demo",), 1.0, (), None)
    assert (port.verify_dir, port.verify_files) == (str(trial_dir / "hidden"), {
        "sub/data.txt": "8123\n", "test_port.py": "def test_port():\n    assert True\n"})
    assert (name.verify_dir, name.verify_files) == (None, {})
    assert len(t.content_hash) == 64


def test_defaults_when_omitted(trial_dir: Path) -> None:
    t = load_text(trial_dir, """\
        [[repos]]
        name = "app"
        source = "app-src"
        [[agents]]
        name = "noop"
        [[questions]]
        id = "q"
        prompt = "?"
    """)
    assert t.name == "trial"  # the file's stem
    assert (t.reps, t.parallel, t.timeout, t.claim, t.prompt_suffix) == (1, None, 300.0, False, None)
    assert [a.name for a in t.arms] == ["default"] and t.baseline == "default"
    assert t.questions[0].repo == "app"  # the only repo


def test_baseline_defaults_to_first_arm(trial_dir: Path) -> None:
    t = load_text(trial_dir, FULL.replace('baseline = "plain"\n', ""))
    assert t.baseline == "plain"


@pytest.mark.parametrize(
    ("old", "new", "key", "suggestion"),
    [
        ('name = "docs-layer"', 'nmae = "x"', "nmae", "name"),
        ("reps = 3", "repz = 3", "[defaults].repz", "reps"),
        ("parallel = 2", "paralel = 2", "[defaults].paralel", "parallel"),
        ("claim = true", "claims = true", "[defaults].claims", "claim"),
        ('ref = "v1"', 'refs = "v1"', "[[repos]] 'app'.refs", "ref"),
        ('overlay = "docs-overlay"', 'overlays = "docs-overlay"', "[[arms]] 'docs'.overlays", "overlay"),
        ("parallel_setup = true", "paralel_setup = true", "[[arms]] 'docs'.paralel_setup", "parallel_setup"),
        ('prompt_prefix = "Read docs/ first."', 'prompt_prefx = "x"', "[[arms]] 'docs'.prompt_prefx", "prompt_prefix"),
        ('uses = "^mcp__graph"', 'use = "x"', "[[arms]] 'docs'.use", "uses"),
        ('model = "sonnet"', 'modle = "sonnet"', "[[agents]] 'claude'.modle", "model"),
        ('sandbox = "read-only"', 'sandbx = "read-only"', "[[agents]] 'codex'.sandbx", "sandbox"),
        ('min_recall = 0.5', 'min_recal = 0.5', "[[questions]] 'port'.min_recal", "min_recall"),
        ('forbid = ["8080"]', 'forbidden = ["8080"]', "[[questions]] 'port'.forbidden", "forbid"),
        ('verify = "test -f app.py"', 'verfy = "x"', "[[questions]] 'port'.verfy", "verify"),
    ],
)
def test_misspelt_key_names_table_key_and_nearest(trial_dir: Path, old: str, new: str, key: str, suggestion: str) -> None:
    assert old in FULL
    with pytest.raises(SpecError) as exc:
        load_text(trial_dir, FULL.replace(old, new, 1))
    assert exc.value.key == key
    assert f"did you mean '{suggestion}'?" in str(exc.value)
    assert str(trial_dir / "trial.toml") in str(exc.value)


def test_unknown_table_at_top(trial_dir: Path) -> None:
    with pytest.raises(SpecError, match=r"key 'default'.*did you mean 'defaults'"):
        load_text(trial_dir, FULL.replace("[defaults]", "[default]"))


def test_task_only_agent_key_is_rejected(trial_dir: Path) -> None:
    with pytest.raises(SpecError, match=r"\[\[agents\]\] 'codex'\.expect'.*unknown key"):
        load_text(trial_dir, FULL.replace('sandbox = "read-only"', 'sandbox = "read-only"\nexpect = "fail"'))


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ("reps = 3", "reps = 0", r"\[defaults\]\.reps'.*1 or more"),
        ("reps = 3", 'reps = "3"', r"\[defaults\]\.reps'.*must be an integer"),
        ("parallel = 2", "parallel = true", r"\[defaults\]\.parallel'.*must be an integer"),
        ("timeout = 45", "timeout = -1", r"\[defaults\]\.timeout'.*greater than 0"),
        ('baseline = "plain"', 'baseline = "dcos"', r"no arm named 'dcos' \(did you mean 'docs'\?\)"),
        ("claim = true", 'claim = "yes"', r"\[defaults\]\.claim'.*true/false"),
        ('prompt_suffix = "Answer briefly."', "prompt_suffix = 3", r"prompt_suffix'.*must be a string"),
        ('source = "app-src"', 'source = ""', r"source'.*is empty"),
        ('ref = "v1"', "ref = 1", r"ref'.*must be a string"),
        ('overlay = "docs-overlay"', 'overlay = "nope"', r"overlay'.*does not exist"),
        ('repos = { app = "other" }', 'repos = { app = "othr" }', r"repos\.app'.*'othr' is not a \[\[repos\]\] name \(did you mean 'other'\?\)"),
        ('repos = { app = "other" }', 'repos = { ap = "other" }', r"repos\.ap'.*key 'ap' is not a \[\[repos\]\] name"),
        ("parallel_setup = true", "parallel_setup = 1", r"parallel_setup'.*true/false"),
        ('prepare = "echo prep"', 'prepare = [""]', r"prepare\[0\]'.*empty command"),
        ('setup = ["echo one", "echo two"]', "setup = [1]", r"setup\[0\]'.*must be a string"),
        ('uses = "^mcp__graph"', 'uses = "(unclosed"', r"uses'.*not a valid regular expression"),
        ('args = ["--max-turns", "3"]', 'args = "--max-turns"', r"args'.*must be a list"),
        ('env = { FOO = "bar", N = 3 }', 'env = { FOO = ["x"] }', r"env\.FOO'.*must be a string"),
        ("edits = true", 'edits = "yes"', r"edits'.*true/false"),
        ('sandbox = "read-only"', 'sandbox = "readonly"', r"sandbox'.*unknown sandbox mode 'readonly' \(did you mean 'read-only'\?\)"),
        ('command = ["./bots/grep.py", "{prompt}"]', 'command = ["./bots/grep.py"]', r"command'.*no \{prompt\}"),
        ('kind = "plain"', 'kind = "plian"', r"kind'.*unknown output kind 'plian' \(did you mean 'plain'\?\)"),
        ('repo = "app"', 'repo = "ap"', r"repo'.*no \[\[repos\]\] entry named 'ap' \(did you mean 'app'\?\)"),
        ('id = "port"', 'id = "a port"', r"id'.*cannot be used as a name"),
        ('prompt = "Which port does the server use?"', 'prompt = " "', r"prompt'.*is empty"),
        ('expect = ["8123", "(?i)listen"]', 'expect = ["8123", "[bad"]', r"expect\[1\]'.*not a valid regular expression"),
        ('expect = ["8123", "(?i)listen"]', 'expect = ["8123", "(x)?"]', r"expect\[1\]'.*matches the empty string, so every answer would pass"),
        ('forbid = ["8080"]', 'forbid = [""]', r"forbid\[0\]'.*matches the empty string, so it would forbid every answer"),
        ("min_recall = 0.5", "min_recall = 1.5", r"min_recall'.*fraction from 0 to 1"),
        ('forbid = ["8080"]', "forbid = [8080]", r"forbid\[0\]'.*must be a string"),
        ('verify = "test -f app.py"', 'verify = ""', r"verify'.*is empty"),
    ],
)
def test_bad_values_name_key_and_fix(trial_dir: Path, old: str, new: str, match: str) -> None:
    assert old in FULL
    with pytest.raises(SpecError, match=match):
        load_text(trial_dir, FULL.replace(old, new, 1))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[[questions]]\nid = "q"\nprompt = "?"\n', r"\[\[repos\]\]'.*no \[\[repos\]\] entries"),
        ('questions = "x"\n', r"needs a \[\[questions\]\] array"),
        ('[[repos]]\nname = "a"\nsource = "app-src"\n[[agents]]\nname = "noop"\n[[questions]]\nid = "q"\n', r"prompt'.*required key is missing"),
        ('[[repos]]\nname = "a"\nsource = "app-src"\n[[questions]]\nid = "q"\nprompt = "?"\n', r"\[\[agents\]\]'.*no \[\[agents\]\] entries"),
        ('defaults = 3\n[[repos]]\nname = "a"\nsource = "app-src"\n[[agents]]\nname = "noop"\n[[questions]]\nid = "q"\nprompt = "?"\n', r"defaults'.*must be a mapping"),
        ('[[repos]]\nname = "a"\nsource = "app-src"\n[[repos]]\nname = "a"\nsource = "app-src"\n[[agents]]\nname = "noop"\n[[questions]]\nid = "q"\nprompt = "?"\n', r"\[\[repos\]\]\.name'.*used twice"),
        ('[[repos]]\nname = "a"\nsource = "app-src"\n[[repos]]\nname = "b"\nsource = "app-src"\n[[agents]]\nname = "noop"\n[[questions]]\nid = "q"\nprompt = "?"\n', r"repo'.*required when there are several"),
        ('[[repos]]\nname = "a"\nsource = "app-src"\n[[agents]]\nname = "noop"\n[[questions]]\nid = "q"\nprompt = "?"\n[[questions]]\nid = "q"\nprompt = "?"\n', r"\[\[questions\]\]\.id'.*used twice"),
        ('[[repos]]\nname = "a"\nsource = "app-src"\n[[agents]]\nname = "noop"\n[[arms]]\nname = "x"\n[[arms]]\nname = "x"\n[[questions]]\nid = "q"\nprompt = "?"\n', r"\[\[arms\]\]\.name'.*used twice"),
        ("[[questions]]\nid = \n", r"not valid TOML: .*line 2"),
    ],
)
def test_structure_errors(trial_dir: Path, text: str, match: str) -> None:
    with pytest.raises(SpecError, match=match):
        load_text(trial_dir, text)


def test_key_lists_are_the_issue_keys() -> None:
    # the issue's list, nothing else (model_double: issue 7 adds it to trial [[agents]]; limits: resource limits;
    # max_answer_chars: honest checks; network: the network mode and allow-list)
    assert set(TOP_KEYS) == {"name", "defaults", "repos", "arms", "agents", "questions"}
    assert set(DEFAULTS_KEYS) == {"reps", "parallel", "timeout", "baseline", "prompt_suffix", "claim", "limits",
                                 "max_answer_chars", "network", "sandbox"}
    assert set(REPO_KEYS) == {"name", "source", "ref"}
    assert set(ARM_KEYS) == {"name", "overlay", "repos", "setup", "parallel_setup", "prepare", "uses", "prompt_prefix", "prompt_suffix"}
    assert set(AGENT_KEYS) == {"name", "model", "args", "env", "edits", "sandbox", "command", "kind", "model_double",
                               "isolate", "limits", "network"}
    assert set(QUESTION_KEYS) == {"id", "repo", "prompt", "expect", "min_recall", "forbid", "verify",
                                 "verify_files", "max_answer_chars"}


def test_is_trial_data(trial_dir: Path) -> None:
    assert is_trial_data(read_toml(write(trial_dir, FULL)))
    assert not is_trial_data(read_toml(write(trial_dir, '[project]\nname = "x"\n', "pyproject.toml")))
    assert not is_trial_data({"questions": "not an array"})


def test_content_hash_covers_the_file_and_overlays(trial_dir: Path) -> None:
    first = load_text(trial_dir, FULL).content_hash
    assert load_text(trial_dir, FULL).content_hash == first  # stable
    (trial_dir / "docs-overlay" / "CLAUDE.md").write_text("v2")
    second = load_text(trial_dir, FULL).content_hash
    assert second != first
    assert load_text(trial_dir, FULL.replace("Answer briefly.", "Answer.")).content_hash != second
    (trial_dir / "hidden" / "test_port.py").write_text("def test_port():\n    assert False\n")
    assert load_text(trial_dir, FULL).content_hash != second  # a hidden check edited: resume runs the cells again


def test_verify_files_errors_name_key_and_fix(trial_dir: Path) -> None:
    where = r"key '\[\[questions\]\] 'port'\.verify_files': "
    with pytest.raises(SpecError, match=where + ".*folder .*nope does not exist"):
        load_text(trial_dir, FULL.replace('verify_files = "hidden"', 'verify_files = "nope"'))
    with pytest.raises(SpecError, match=where + ".*needs verify"):
        load_text(trial_dir, FULL.replace('verify = "test -f app.py"\n', ""))
    (trial_dir / "hidden" / "blob.bin").write_bytes(b"\xff\xfe")
    with pytest.raises(SpecError, match=where + ".*blob.bin .* not UTF-8 text"):
        load_text(trial_dir, FULL)
    (trial_dir / "hidden" / "blob.bin").unlink()
    (trial_dir / "hidden" / "link.py").symlink_to(trial_dir / "trial.toml")
    with pytest.raises(SpecError, match=where + ".*link.py .* is a link"):
        load_text(trial_dir, FULL)
    (trial_dir / "empty").mkdir()
    with pytest.raises(SpecError, match=where + ".*holds no file"):
        load_text(trial_dir, FULL.replace('verify_files = "hidden"', 'verify_files = "empty"'))
