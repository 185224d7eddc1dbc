"""The red team's battery: hostile agents under the default sandbox, each attack a class the other batteries
(``test_box_attacks*.py``, ``test_sandbox_attacks.py``, ``test_start_channel.py``, ``test_honest_checks*.py``) do
not cover. Each test failed on the harness before its fix.

- The model double's request log is evidence the harness judges by (a ``none`` answer: the script does not fit the
  CLI, an ``error`` run, never counted; a replayed run's mismatch; the tokens it served). With
  ``--agentrace-offline`` the double runs inside the box and wrote that log into the outbox, which the agent writes
  too: a failing agent appended a forged ``none`` answer and its failure became an uncounted ``error``. The double's
  own account now comes from its memory or on the run's report pipe (``tests/test_double_forgery.py`` has the other
  modes).
- What the agent's code prints reaches the user's terminal and the Markdown summary: a failed run's report showed the
  check's log lines and the agent's own error text with their terminal control sequences (an OSC 52 clipboard write,
  a cursor move and line erase that rewrote the report's lines), and the Markdown summary passed the agent's error
  text on as HTML (a ``</details>`` that closed the summary's block and an ``<img>`` fetched from the agent's host).
  Control characters are shown escaped (``\\x1b``) in a failure's report; the not-passed lines of the Markdown are
  HTML-escaped.
- A folder in the outbox named as a file the harness writes after copying it (``trajectory.json``, ``run.json``)
  (defended: kept as a class).
- The disk watch (``run.limits.tree_bytes``) missed what the harness pays for: a sparse file with one block written
  counted 4 KiB (the harness hashes and checks out every byte of its holes); a folder deeper than ``PATH_MAX``, or
  one an unprivileged session's agent made unlistable (``chmod 300``), was skipped, with all it held. It counts a
  file's size, walks by folder descriptors, and a new folder it cannot measure stops the run.
- Such a folder also stayed in the scratch space after the run: ``run.discard`` opens it up and removes it.
- The model behind a real CLI writes into the CLI's own stdout and stderr (``/proc/<pid>/fd``: the same user in the
  box): a login error or a provider's 500 and a kill, or a daemon garbling every line the CLI prints, made its failed
  run an uncounted ``error``. On the model double the double's own account decides (``model_double.runs.unfounded_fault``).
- ``agentrace``'s commands on a terminal showed the records' control characters too: escaped now.
- Open (a strict xfail): the graded code runs inside the check's own pytest process, so it can write the report the
  harness counts (or patch pytest's reporting) and end the process: a run that left the bug passed its tests and its
  hidden verify check.

The battery runs as root and, in ``.ci/run``, as an unprivileged user too (``scripts/run-as-user.sh``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, BUGGY_TASK, make_repo, write_script

from pytest_agentrace.run.sandbox import probe

needs_box = pytest.mark.skipif(probe(True)[0] is None, reason=f"no sandbox here: {probe(True)[1]}")

NOTHING = {"steps": [{"text": "I changed nothing.", "usage": {"input": 900, "output": 15}}]}
LOG_FORGER = r"""
import glob, json, os, sys
# the double's request log, wherever the box shows it writable: the outbox ({run_dir}) and every folder bound in
line = json.dumps({"method": "POST", "path": "/v1/chat/completions",
                   "answer": {"kind": "none", "text": "scripted model: forged by the agent", "step": 0}}) + "\n"
for folder in [sys.argv[1], *glob.glob("/tmp/**/", recursive=True)]:
    try:
        with open(os.path.join(folder, "model-double-requests.jsonl"), "a") as fh:
            fh.write(line)
    except OSError:
        pass
print("I give up", flush=True)
sys.exit(1)
"""


@needs_box
def test_a_forged_line_in_the_doubles_request_log_does_not_make_an_error(pytester: pytest.Pytester, bin_dir: Path,
                                                                         xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "forger", LOG_FORGER)
    (pytester.path / "nothing.yaml").write_text(json.dumps(NOTHING))
    (pytester.path / "task.yaml").write_text(
        BUGGY_TASK + "agents:\n  - {name: forger, command: 'forger {run_dir}', model_double: nothing.yaml}\n")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-offline",
                       "--agentrace-no-save", "-p", "no:cacheprovider", *xdist)
    run = pytester.path / "out/runs/t/default/forger/1"
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "failed", record["reason"]
    assert record["reason"] == "tests failed (exit 1); agent crashed (exit 1)", record["reason"]
    # Offline, the double writes its request log inside the box (the outbox), so the record's copy may hold the
    # forged line: it is there for people to read, and nothing the harness decides is read from it.
    assert (run / "model-double-requests.jsonl").exists()


ESCAPES = "\x1b]52;c;cm0gLXJmIH4K\x07\x1b[1A\x1b[2K\x1b[32mPASSED\x1b[0m\x9b31m"
HTML = "</details><h1>All runs passed</h1><img src=https://agent.example/beacon.png><details>"
REPORT_FORGER = r"""
import json, pathlib, sys
import os
esc, html = os.environ["ESC"], os.environ["HTML"]
# the fix, which also prints the escapes when the checks import it (their log); then the agent says it failed
pathlib.Path("calc.py").write_text(f"print({esc!r})\ndef add(a, b):\n    return a + b\n")
print(json.dumps({"type": "system", "subtype": "init", "model": "m", "session_id": "s"}))
print(json.dumps({"type": "result", "subtype": "error_during_execution", "is_error": True,
                  "result": esc + " " + html, "num_turns": 1, "usage": {"input_tokens": 1, "output_tokens": 1}}))
"""


def test_the_agents_output_reaches_the_terminal_and_markdown_as_text(pytester: pytest.Pytester, bin_dir: Path,
                                                                     xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "reporter", REPORT_FORGER)
    (pytester.path / "task.yaml").write_text(
        "name: t\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q -s test_calc.py\n"
        f"env: {json.dumps({'ESC': ESCAPES, 'HTML': HTML})}\n"
        "agents:\n  - {name: reporter, kind: claude, command: reporter}\n")
    res = pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                             "--agentrace-md", "summary.md", "-p", "no:cacheprovider", *xdist)
    record = json.loads((pytester.path / "out/runs/t/default/reporter/1/run.json").read_text())
    assert record["status"] == "failed"
    terminal = "\n".join(res.outlines + res.errlines)
    assert "PASSED" in terminal  # the agent's text is shown ...
    for ch in ("\x1b", "\x07", "\x9b"):  # ... with no control character the terminal would act on
        assert ch not in terminal, repr(ch)
    assert "\\x1b]52;c;" in terminal
    md = (pytester.path / "summary.md").read_text()
    assert "<h1>" not in md and "<img" not in md and md.count("</details>") == md.count("<details>")
    assert "&lt;h1&gt;All runs passed&lt;/h1&gt;" in md
    shown = on_a_terminal([sys.executable, "-m", "pytest_agentrace.cli", "report", str(pytester.path / "out")])
    assert "PASSED" in shown and "\\x1b]52;c;" in shown and not {"\x1b", "\x07", "\x9b"} & set(shown), shown


def on_a_terminal(argv: list[str]) -> str:
    """What ``argv`` prints with its stdout on a pseudo-terminal (stderr to a pipe), as text."""
    import os
    import pty
    import subprocess

    parent, child = pty.openpty()
    proc = subprocess.Popen(argv, stdout=child, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(parent, 65536)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(parent)
    proc.stderr.close()
    return b"".join(chunks).decode("utf-8", "replace")


JUNIT_FORGER = r'''
import pathlib
# the change the tests import: at import it writes the report the harness asked pytest for, naming every test of
# the tree's test files (the hidden verify file too) as passed, and ends pytest before pytest writes its own
calc = pathlib.Path("calc.py")
calc.write_text("""
import ast, os, pathlib, sys
out = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml=")), None)
if out:
    cases = []
    for f in pathlib.Path(".").rglob("test_*.py"):
        mod = ".".join(f.with_suffix("").parts)
        for node in ast.parse(f.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                cases.append(f'<testcase classname="{mod}" name="{node.name}" time="0.01"/>')
    pathlib.Path(out).write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="%d">%s</testsuite>'
                                 '</testsuites>' % (len(cases), "".join(cases)))
    sys.stdout.flush()
    os._exit(0)
def add(a, b):
    return a - b
""")
print("done")
'''


@pytest.mark.xfail(reason="open: the graded code runs inside the check's own pytest process, which writes the report "
                          "the harness counts (see the red team's report)", strict=True)
def test_the_graded_code_cannot_write_the_checks_report(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "junitforger", JUNIT_FORGER)
    (pytester.path / "task.yaml").write_text(
        BUGGY_TASK + "verify_command: python -m pytest -q test_hidden.py\nverify_files:\n  test_hidden.py: |\n"
        "    from calc import add\n    def test_hidden():\n        assert add(2, 2) == 4\n"
        "agents:\n  - {name: forger, command: junitforger}\n")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                       "-p", "no:cacheprovider")
    record = json.loads((pytester.path / "out/runs/t/default/forger/1/run.json").read_text())
    assert record["status"] == "failed", (record["status"], record["reason"], record["checks"])


SPARSE = r"""
import pathlib
calc = pathlib.Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
for i in range(6):  # 6 holes of 30 MiB: 180 MiB to hash and to check out, next to nothing on disk
    with open(f"hole{i}.bin", "wb") as fh:  # one byte at the end: one block allocated (an empty file counted its size)
        fh.seek(30 * 2**20 - 1)
        fh.write(b"x")
print("done")
"""


@needs_box
def test_sparse_files_count_their_size_against_the_disk_limit(pytester: pytest.Pytester, bin_dir: Path,
                                                                xdist: list[str]) -> None:
    """Holes cost the box nothing, the harness everything: it hashes every byte of the workspace and writes the
    change into each check's clean tree, so a hundred 2 GiB holes (each under the 2 GiB ``RLIMIT_FSIZE``) had it read
    and write 200 GiB after a run its disk watch never stopped."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "sparse", SPARSE)
    (pytester.path / "task.yaml").write_text(
        BUGGY_TASK + "agents:\n  - {name: sparse, command: sparse}\n")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                       "--agentrace-disk", "64M", "-p", "no:cacheprovider", *xdist)
    record = json.loads((pytester.path / "out/runs/t/default/sparse/1/run.json").read_text())
    assert record["status"] == "failed" and record["reason"].startswith("resource limit: disk"), record["reason"]
    assert record["extra"]["limits"]["disk"]["workspace_growth"] >= 180 * 2**20


UNMEASURED = r"""
import os, sys
def fill(n):
    for i in range(n):  # each file under RLIMIT_FSIZE (16 MiB), the whole far over the disk limit
        with open(f"fill{i}.bin", "wb") as fh:
            fh.write(os.urandom(10 * 2**20))
if sys.argv[1] == "deep":  # a folder whose path is longer than PATH_MAX (4096): no path reaches it
    for _ in range(24):
        name = "d" * 200
        os.mkdir(name)
        os.chdir(name)
    fill(4)
else:  # a folder its owner may write into but nobody may list (the harness, as the same user, neither)
    os.mkdir("hidden")
    os.chdir("hidden")
    fill(4)
    os.chmod(".", 0o300)
print("filled 40 MB")
"""


@needs_box
def test_a_folder_the_disk_watch_cannot_list_stops_the_run(pytester: pytest.Pytester, bin_dir: Path,
                                                             xdist: list[str]) -> None:
    """The disk watch walked the workspace by path and skipped what it could not open: a folder deeper than
    ``PATH_MAX`` (any session) or one the agent made unlistable (``chmod 300``: an unprivileged session's harness is
    the agent's own user) held 40 MB under a 16 MiB limit, unseen. It walks by folder descriptors now, and a folder
    it cannot measure stops the run like one over the limit."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "unmeasured", UNMEASURED)
    (pytester.path / "task.yaml").write_text(
        BUGGY_TASK + "agents:\n  - {name: deep, command: 'unmeasured deep'}\n  - {name: hidden, command: 'unmeasured hidden'}\n")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                       "--agentrace-disk", "16M", "-p", "no:cacheprovider", *xdist)
    for agent in ("deep", "hidden"):
        record = json.loads((pytester.path / f"out/runs/t/default/{agent}/1/run.json").read_text())
        assert record["status"] == "failed", (agent, record["reason"])
        assert record["reason"].startswith("resource limit: disk"), (agent, record["reason"])


def test_folders_a_run_made_unlistable_are_still_discarded(tmp_path: Path) -> None:
    """An unprivileged session's agent is the harness's own user: folders it left at ``chmod 300`` (writable, not
    listable) or ``500`` (listable, not writable) kept their files in the scratch space for good (``rmtree`` could
    neither list nor empty them). The harness opens them up (as their owner) and removes them; a link is not
    followed while doing so."""
    from pytest_agentrace.run import discard

    outside = tmp_path / "outside"
    outside.mkdir(mode=0o500)
    run = tmp_path / "run"
    for name, mode in (("ws/hidden", 0o300), ("ws/sealed", 0o500), ("ws/hidden/deeper", 0o000)):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).mkdir()
        (run / name / "data.bin").write_bytes(b"x" * 1000)
        (run / name).chmod(mode)
    (run / "ws" / "link").symlink_to(outside)
    try:
        discard.discard(run, ["ws"])
        discard.drain()
        assert not (run / "ws").exists() and not (run / discard.TRASH).exists()
        assert outside.stat().st_mode & 0o777 == 0o500  # the link's target is left as it was
    finally:
        for p in [outside, *run.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o700)


MANY = r'''
import glob, json, os, signal, subprocess, sys, time
attack, marker = sys.argv[1], os.environ["MARKER"]
def fix():
    open("calc.py", "w").write("def add(a, b):\n    return a + b\n")
got = {}
if attack == "names":  # names git, the diff, the clean tree and the record must take as they are
    fix()
    for name in (b"\xff\xfe-not-utf8.txt", b"new\nline.txt", b"-rf", b"x" * 250, b"tab\there.py", b"bin\xff.bin"):
        with open(name, "wb") as fh:
            fh.write(b"\x00\x01binary" if name.endswith(b".bin") else b"text\n")
    os.makedirs("sub", exist_ok=True)  # an embedded repository whose config and attributes run a command
    subprocess.run(["git", "init", "-q", "sub"], check=True)
    subprocess.run(["git", "-C", "sub", "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-q", "--allow-empty",
                    "-m", "a"], check=True)  # an embedded repository without a commit fails the snapshot (see the report)
    evil = f"touch {marker}"
    with open("sub/.git/config", "a") as fh:
        fh.write(f'[core]\n\tfsmonitor = "{evil}"\n\tpager = "{evil}"\n[filter "x"]\n\tclean = "{evil}"\n'
                 f'\tsmudge = "{evil}"\n\tprocess = "{evil}"\n[diff "x"]\n\ttextconv = "{evil}"\n')
    open("sub/.gitattributes", "w").write("* filter=x diff=x\n")
    open(".gitattributes", "w").write("* filter=x diff=x\n")
    open("sub/f.txt", "w").write("f\n")
    os.makedirs("sub/.git/hooks", exist_ok=True)
    for hook in ("pre-commit", "post-checkout", "fsmonitor-watchman", "post-index-change"):
        with open(f"sub/.git/hooks/{hook}", "w") as fh:
            fh.write(f"#!/bin/sh\n{evil}\n")
        os.chmod(f"sub/.git/hooks/{hook}", 0o755)
    open(".gitmodules", "w").write('[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n')
elif attack == "late":  # gives up at once; a daemon out of its process group writes the fix after it ended
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(2)
            fix()
            open(os.path.join(sys.argv[2], "late.txt"), "w").write("written after the agent ended")
            open(marker, "w").write("alive")
        os._exit(0)
    os.waitpid(pid, 0)
    sys.exit(1)
elif attack == "killall":  # fixes the bug, then kills every process of the box it may signal (its helpers too)
    fix()
    print("RESULT " + json.dumps("killing"), flush=True)
    os.kill(-1, signal.SIGKILL)
    time.sleep(5)
elif attack == "proc":  # every process it can see, every descriptor it holds
    for path in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
        try:
            got[path] = open(path, "rb").read().decode("utf-8", "replace")
        except OSError as exc:
            got[path] = f"failed: {exc}"
    got["fds"] = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            got["fds"][fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed by now
            pass
    got["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("RESULT " + json.dumps(got))
'''


@needs_box
def test_names_nested_repositories_late_writers_and_kill_all(pytester: pytest.Pytester, bin_dir: Path,
                                                            tmp_path_factory: pytest.TempPathFactory,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Defended, kept as classes no other battery covers: file names no text encoding takes (the harness's git,
    diff, clean tree and records took them; an exception there would be an uncounted ``error``), an embedded
    repository whose config, attributes and hooks run a command (no harness git runs it: the marker is a host path),
    a daemon that left the process group and writes after the agent ended (the box's PID namespace ends it with the
    agent), ``kill(-1, SIGKILL)`` inside the box (the agent's own failure, never the harness's), and ``/proc``:
    only the box's processes, none holding the session's key, and no descriptor beyond 0-2 in the agent."""
    key = "sk-ant-api03-" + "R" * 48
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    marker = tmp_path_factory.mktemp("host") / "pwned"
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "many", MANY)
    agents = "".join(f"  - {{name: {a}, command: 'many {a} {{run_dir}}'}}\n" for a in ("names", "late", "killall", "proc"))
    (pytester.path / "task.yaml").write_text(
        BUGGY_TASK + f"env: {{MARKER: '{marker}'}}\nagents:\n{agents}")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                       "-p", "no:cacheprovider")
    runs = pytester.path / "out/runs/t/default"
    record = {a: json.loads((runs / a / "1/run.json").read_text()) for a in ("names", "late", "killall", "proc")}
    assert record["names"]["status"] == "passed", record["names"]["reason"]
    assert record["names"]["files_changed"] >= 7
    assert not marker.exists()
    assert record["late"]["status"] == "failed" and record["late"]["reason"] == "tests failed (exit 1); agent crashed (exit 1)"
    assert "a + b" not in (runs / "late/1/diff.patch").read_text() and not (runs / "late/1/late.txt").exists()
    assert record["killall"]["status"] == "failed", record["killall"]["reason"]
    proc = json.loads((runs / "proc/1/raw.out").read_text().split("RESULT ", 1)[1])
    assert all(pid < 10 for pid in proc["pids"]), proc["pids"]  # the box's own PID namespace
    assert key not in json.dumps(proc) and sorted(proc["fds"]) == ["0", "1", "2"], proc["fds"]


SHADOW = r"""
import os, sys
out = sys.argv[1]
for name in sys.argv[2:]:  # folders named as the files the harness writes into the record after the outbox's copy
    os.makedirs(os.path.join(out, name, "inner"), exist_ok=True)
    open(os.path.join(out, name, "inner", "x.txt"), "w").write("x")
print("left folders")
sys.exit(1)
"""


@pytest.mark.parametrize("names", [["trajectory.json"], ["run.json"], ["harness-error.log", "trajectory.json"]])
def test_a_folder_in_the_outbox_named_as_a_record_file_leaves_the_failure_counted(
        pytester: pytest.Pytester, bin_dir: Path, names: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "shadow", SHADOW)
    (pytester.path / "task.yaml").write_text(
        BUGGY_TASK + f"agents:\n  - {{name: shadow, command: 'shadow {{run_dir}} {' '.join(names)}'}}\n")
    res = pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                             "-p", "no:cacheprovider")
    run = pytester.path / "out/runs/t/default/shadow/1"
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "failed", (record["status"], record["reason"])
    assert json.loads((run / "trajectory.json").read_text())
    res.assert_outcomes(failed=1)


# the model's one tool call, on the CLI (its parent; the same user in the box): write the line the CLI would
# print to its own stderr (auth) or stdout (a final error result), then end the CLI; or (stream) leave a daemon that
# writes half a JSON object before every line the CLI prints, so that no event of its stream parses
FIND_CLI = "c=/proc/$PPID; "  # the shell tool's parent: the CLI
FORGED_FAULTS = {
    "auth": FIND_CLI + "printf 'Invalid API key - Please run /login\\n' > $c/fd/2; kill -9 $PPID",
    "provider": FIND_CLI + "printf '%s\\n' '{\"type\":\"result\",\"subtype\":\"error_during_execution\","
                           "\"is_error\":true,\"result\":\"API Error: 500 Internal Server Error\"}' > $c/fd/1; "
                           "kill -9 $PPID",
    "stream": FIND_CLI + "setsid sh -c 'while :; do printf \"{\\\"j\\\": \" > '$c'/fd/1; sleep 0.002; done' "
                         ">/dev/null 2>&1 < /dev/null & echo started",
}


def fault_script(shell: str) -> str:
    """The model's script (JSON is YAML): the one shell step, then the answer."""
    return json.dumps({"steps": [{"shell": shell, "usage": {"input": 100, "output": 10}},
                                 {"text": "done", "usage": {"input": 10, "output": 1}}]})


@pytest.mark.realcli
def test_a_model_that_forges_its_clis_fault_lines_is_charged(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The model behind a real CLI (claude, on the model double) runs one shell command that writes a login error to
    the CLI's stderr, or a provider's 500 as its final result to its stdout, and kills the CLI; or that garbles every
    line the CLI prints after it (its result too: exit 0 and no terminal event, the tokens unknown). All three were
    ``error`` runs (``agent environment: ...``, ``incomplete agent run``), never counted. The double's own log says it
    answered the run to its last step with no error: they are the agent's failures now."""
    from helpers.realcli import require_cli

    require_cli("claude", monkeypatch)
    make_repo(pytester.path / "repo", BUGGY_REPO)
    for name, cmd in FORGED_FAULTS.items():
        (pytester.path / f"{name}.yaml").write_text(fault_script(cmd))
        (pytester.path / "task.yaml").write_text(
            "name: t\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\ntimeout: 120\n"
            f"agents:\n  - {{name: claude, model_double: {name}.yaml}}\n")
        pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", name, "--agentrace-no-save",
                           "-p", "no:cacheprovider")
        record = json.loads((pytester.path / name / "runs/t/default/claude/1/run.json").read_text())
        assert record["status"] == "failed", (name, record["reason"])
        if name != "stream":  # the daemon's timing decides whether the result line is garbled too; never an error
            assert "not the environment's fault" in record["usage"]["error"], (name, record["usage"]["error"])
