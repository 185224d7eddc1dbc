"""The box's small parts: the summary line, the hidden-path reason, the environment allow-list (no_proxy the same
for agents and checks), the outbox copy, and a root session that cannot drop privilege."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.report import outcome

from pytest_agentrace.plugin.controller import sandbox_line
from pytest_agentrace.report.result import Context, build_result
from pytest_agentrace.report.terminal import Shown, section
from pytest_agentrace.run import outbox
from pytest_agentrace.run.checks import clean_env, loopback_no_proxy, minimal_env
from pytest_agentrace.run.sandbox import _under, hidden_paths

BOX = {"on": True, "bwrap": "/usr/bin/bwrap", "version": "0.8.0", "uid": 1000, "offline": False, "read": [], "write": []}


def test_sandbox_line_says_on_which_bwrap_and_what_was_shown_wrapped_only_to_a_width() -> None:
    long = "/very/long/folder/of/fixtures/that/a/team/shows/to/every/run/of/its/suite/data"
    runs = [outcome(extra={"sandbox": {**BOX, "read": [long, "/srv/models"], "write": ["/var/cache/pip"]}}),
            outcome(rep=2, extra={"sandbox": BOX})]
    text = sandbox_line(runs)
    assert text == ("agentrace: sandbox on: bwrap /usr/bin/bwrap 0.8.0, uid 1000; also shown: read "
                    f"/srv/models, {long}; write /var/cache/pip")  # one line: the section wraps it, to a width only
    assert sandbox_line([outcome(extra={"sandbox": BOX})]) == (
        "agentrace: sandbox on: bwrap /usr/bin/bwrap 0.8.0, uid 1000; nothing shown beyond the default")
    result = build_result([], Context(), notes=((text, False),))
    assert section(result) == [(text, {})]  # no terminal and no $COLUMNS: kept whole, as the tables are
    wrapped = section(result, Shown(width=70))
    assert len(wrapped) > 1 and all(len(line) <= 70 and markup == {} for line, markup in wrapped), wrapped
    assert wrapped[1][0].startswith("  ")  # continued, indented; nothing lost (the long path is broken in two)
    assert "".join(line for line, _ in wrapped).replace(" ", "") == text.replace(" ", "")
    assert sandbox_line([outcome(extra={"sandbox": {"on": False}})] * 2) == "agentrace: sandbox off (2 runs unsandboxed)"
    assert sandbox_line([outcome()]) is None  # no run recorded a sandbox (in-process only, older records)


@pytest.mark.parametrize(("path", "root", "inside"), [
    ("/a/b", "/a", True), ("/a", "/a", True), ("/a/", "/a", True), ("/a//b/./c", "/a/b", True), ("/a", "/", True),
    ("/ab", "/a", False), ("/a", "/a/b", False), ("/a/../b", "/b", False), ("/a/../b", "/a", True),
    ("a/b", "a", True), ("a", ".", True), ("/a", ".", False), ("//a", "/", False), ("//a/b", "//a", True),
])
def test_under_is_pathlib_containment(path: str, root: str, inside: bool) -> None:
    # the box decides which shown folders another covers and which hidden ones to mask with it: pathlib's answer
    # (``Path(root) == Path(path) or Path(root) in Path(path).parents``), taken from strings
    assert _under(path, [root]) is inside
    assert (Path(path) == Path(root) or Path(root) in Path(path).parents) is inside


def test_hidden_paths_names_host_paths_the_box_did_not_show(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("x")
    ws = tmp_path / "ws"
    ws.mkdir()
    text = (f"FileNotFoundError: [Errno 2] No such file or directory: '{data}'\n"
            f"cat: {ws}/missing: No such file or directory\n"  # inside the workspace: shown, not hidden
            "Error: ENOENT: no such file or directory, open '/nonexistent/at/all'\n"  # not on the host either
            f"open {data}: permission denied\n")
    assert hidden_paths(text, [ws]) == [str(data)]
    assert hidden_paths(f"reading {data} went fine") == []  # no error on the line


def test_environment_allow_list_and_no_proxy_parity() -> None:
    base = {"PATH": "/usr/bin", "HOME": "/h", "LANG": "C.UTF-8", "LC_ALL": "C", "TERM": "xterm", "TZ": "UTC",
            "TMPDIR": "/t", "no_proxy": "corp.example", "ANTHROPIC_API_KEY": "sk-ant-xxx", "AWS_SECRET": "s",
            "PYTEST_XDIST_WORKER": "gw0", "PYTHONPATH": "/p"}
    env = minimal_env(base)
    assert set(env) == {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "TMPDIR", "no_proxy", "NO_PROXY"}
    assert env["no_proxy"] == env["NO_PROXY"] == "127.0.0.1,localhost,::1,corp.example"
    assert minimal_env(base, ("ANTHROPIC_",))["ANTHROPIC_API_KEY"] == "sk-ant-xxx"
    checks = clean_env(base, {"FOO": "1"})
    assert checks["no_proxy"] == env["no_proxy"] and checks["FOO"] == "1" and "ANTHROPIC_API_KEY" not in checks
    assert loopback_no_proxy("localhost, a.b") == "127.0.0.1,localhost,::1,a.b"


def test_the_model_doubles_environment_has_the_same_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_agentrace.model_double.environment import common_env

    monkeypatch.setenv("no_proxy", "corp.example")
    env = common_env(Path("/h"), "http://127.0.0.1:1/r/x")
    assert env["no_proxy"] == env["NO_PROXY"] == clean_env()["no_proxy"] == "127.0.0.1,localhost,::1,corp.example"


def test_outbox_copies_regular_files_only(tmp_path: Path) -> None:
    box, record = outbox.make(tmp_path), tmp_path / "record"
    record.mkdir()
    (record / "raw.out").write_text("the harness's")
    (box / "sub").mkdir()
    (box / "sub" / "a.txt").write_text("a")
    (box / "raw.out").write_text("the agent's")
    (box / "big.bin").write_bytes(b"x" * 2000)
    os.symlink("/etc/hostname", box / "link")
    os.symlink(tmp_path, box / "dirlink")
    os.mkfifo(box / "fifo")
    taken = outbox.collect(box, record, file_cap=1000)
    assert taken["copied"] == 2 and (record / "outbox" / "sub" / "a.txt").read_text() == "a"
    # the agent's files go under the record's outbox/: its raw.out never takes the harness's place
    assert (record / "raw.out").read_text() == "the harness's"
    assert (record / "outbox" / "raw.out").read_text() == "the agent's"
    assert set(taken["skipped"]) == {"big.bin", "link", "dirlink", "fifo"}
    assert not any(p.is_symlink() for p in record.rglob("*"))


def test_outbox_files_are_redacted_as_they_are_copied(tmp_path: Path) -> None:
    """A session key an agent writes into a side file (text or binary) and a key-shaped string in a text file reach
    the record folder as ``<redacted>``; other bytes are kept, and the count of changed files is returned."""
    secret = "s3cr3t-value-of-the-session-0123456789"
    github = "ghp_" + "A" * 36
    box, record = outbox.make(tmp_path), tmp_path / "record"
    record.mkdir()
    (box / "env.txt").write_text(f"ANTHROPIC_API_KEY={secret}\nplain words: token budget 42\n")
    (box / "blob.bin").write_bytes(b"\x00\xff" + secret.encode() + b"\x00\xfe")
    (box / "notes.md").write_text(f"pushed with {github}\n")
    (box / "clean.txt").write_text("nothing to hide: max_tokens=100\n")
    taken = outbox.collect(box, record, secrets=[secret])
    assert taken["copied"] == 4 and taken["redacted"] == 3
    copy = record / "outbox"
    assert (copy / "env.txt").read_text() == "ANTHROPIC_API_KEY=<redacted>\nplain words: token budget 42\n"
    assert (copy / "blob.bin").read_bytes() == b"\x00\xff<redacted>\x00\xfe"
    assert (copy / "notes.md").read_text() == "pushed with <redacted>\n"
    assert (copy / "clean.txt").read_text() == "nothing to hide: max_tokens=100\n"


def test_secret_inputs_and_a_git_templates_other_task_files(tmp_path: Path) -> None:
    """Other evaluations' hidden inputs are found by their contents (a task file with hidden checks, a trial file and
    the folders its questions' ``verify_files`` and arms' ``overlay`` name, a Harbor task's tests and solution) and left out of a template made from a git repository's commit; a task file
    without hidden checks, a project's YAML/TOML files and a link stay."""
    from helpers import make_repo

    from pytest_agentrace.run import inputs, workspace

    src = make_repo(tmp_path / "src", {
        "app.py": "x = 1\n",
        "ci.yml": "on: push\njobs: {}\n",
        "pyproject.toml": "[project]\nname = 'questions'\n",
        "evals/fix.yaml": "name: fix\ndescription: d\ntest_command: pytest\nsolution_patch: SOLUTION\n",
        "evals/plain.yaml": "name: p\ndescription: d\ntest_command: pytest\n",
        "evals/patched.yml": "name: pp\ndescription: d\ntest_command: pytest\nsolution_patch: ../fixes/pp.patch\n",
        "fixes/pp.patch": "SOLUTION\n",
        "evals/q.toml": "[defaults]\nreps = 1\n\n[[questions]]\nid = 'a'\nexpect = ['KEY']\n",
        "evals/bad.toml": "[[questions]]\nid = \n",
        "evals/v.toml": "[[arms]]\nname = 'docs'\noverlay = 'overlay-docs'\n\n"
                        "[[questions]]\nid = 'v'\nverify = 'pytest'\nverify_files = 'v-hidden'\n",
        "evals/overlay-docs/AGENTS.md": "the treatment: only the docs arm may see it\n",
        "evals/v-hidden/test_v.py": "HIDDEN\n",
        "evals/outside.toml": "[[questions]]\nid = 'o'\nverify = 'pytest'\nverify_files = '../../elsewhere'\n",
        "hb/task.toml": "[verifier]\ntimeout_sec = 60\n",
        "hb/instruction.md": "do it\n",
        "hb/tests/test_outputs.py": "HIDDEN\n",
        "hb/solution/solve.sh": "SOLUTION\n",
    })
    assert inputs.secret_inputs(src) == ["evals/bad.toml", "evals/fix.yaml", "evals/outside.toml", "evals/overlay-docs",
                                         "evals/patched.yml", "evals/q.toml", "evals/v-hidden", "evals/v.toml",
                                         "fixes/pp.patch", "hb/solution", "hb/tests"]
    template, _ = workspace.template_repo(src, tmp_path / "cache")
    kept = sorted(str(p.relative_to(template)) for p in template.rglob("*") if ".git" not in p.parts and p.is_file())
    assert kept == ["app.py", "ci.yml", "evals/plain.yaml", "hb/instruction.md", "hb/task.toml", "pyproject.toml"]


def test_probe_ahead_answers_later_calls_once_and_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """``probe_ahead`` runs the probes on a thread that holds the probe lock from before it returns: a ``probe`` or
    ``overlay_bwrap`` call made meanwhile waits for the thread's answers instead of starting its own box; an error
    on the thread is not raised there, and the later call meets it itself."""
    import functools
    import threading
    import time

    from pytest_agentrace.run import sandbox

    calls: list[str] = []
    release = threading.Event()

    def slow_probe(offline: bool) -> tuple[str | None, str]:
        calls.append(f"probe {offline}")
        release.wait(5)
        return "/bin/bwrap", ""

    def slow_overlay() -> str | None:
        calls.append("overlay")
        return "/bin/bwrap-new"

    monkeypatch.setattr(sandbox, "_probe", functools.cache(slow_probe))  # kept once made, as the real ones
    monkeypatch.setattr(sandbox, "_overlay_bwrap", functools.cache(slow_overlay))
    thread = sandbox.probe_ahead(True, overlay=True)
    answers: list[object] = []
    waiter = threading.Thread(target=lambda: answers.append((sandbox.probe(True), sandbox.overlay_bwrap())))
    waiter.start()
    deadline = time.monotonic() + 0.5  # time for a waiter that does not wait to start a probe of its own
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert answers == [] and calls == ["probe True"]  # the waiter waits on the thread's probe, starts none
    release.set()
    thread.join(5)
    waiter.join(5)
    assert answers == [(("/bin/bwrap", ""), "/bin/bwrap-new")]
    assert calls == ["probe True", "overlay"]  # each made once, on the thread

    def failing(offline: bool) -> tuple[str | None, str]:
        raise OSError("no bwrap today")

    monkeypatch.setattr(sandbox, "_probe", failing)
    sandbox.probe_ahead(False, overlay=False).join(5)  # nothing raised on the thread, nothing printed
    with pytest.raises(OSError, match="no bwrap today"):
        sandbox.probe(False)
