"""The box holds: hostile custom agents, one test per class of attack, under the default sandbox (serial and -n 2).

Each agent tries one attack, named by ``$ATTACK``, and prints what it got as ``RESULT <json>``. After every
attack the user's HOME, the user's project (task folders, history DB, earlier results, cassettes) are
byte-identical. The battery runs as root here and, in ``.ci/run``, as an unprivileged user too
(``scripts/run-as-user``): what it asserts holds for both.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script

from pytest_agentrace.run.sandbox import probe

pytestmark = pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")

SECRET = "BOX-SECRET-5150"
# the provider network's bridge points the agent at its proxy (run.netbridge.proxy_env)
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy")
SESSION_KEY = "sk-ant-api03-" + "Q" * 48  # a session's provider key: never a custom agent's

HOSTILE = r"""
import glob, json, os, stat, subprocess, sys, time
attack, target = os.environ.get("ATTACK", ""), os.environ.get("TARGET", "")
got = {}
def attempt(name, fn):
    try:
        got[name] = fn()
    except Exception as exc:
        got[name] = f"failed: {type(exc).__name__}: {exc}"
def run(*argv):
    res = subprocess.run(argv, capture_output=True, text=True)
    return f"exit {res.returncode}: {res.stderr.strip()[-200:]}"
if attack == "privilege":
    status = open("/proc/self/status").read()
    got["CapEff"] = [l.split()[1] for l in status.splitlines() if l.startswith("CapEff")][0]
    got["uid"] = os.getuid()
    attempt("umount_proc", lambda: run("umount", "-l", "/proc"))
    attempt("umount_tmp", lambda: run("umount", "-l", "/tmp"))
    attempt("remount_rw", lambda: run("mount", "-o", "remount,rw", "/"))
    attempt("write_root", lambda: open("/pwned", "w").write("x"))
    attempt("environ_1", lambda: open("/proc/1/environ", "rb").read().decode("utf-8", "replace"))
    attempt("environ_parent", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read().decode("utf-8", "replace"))
elif attack == "read":
    for path in target.split(os.pathsep):
        attempt(path, lambda: open(path).read() if os.path.isfile(path) else sorted(os.listdir(path)))
elif attack == "siblings":
    time.sleep(2)  # the other worker's run is under way by now
    base = target
    attempt("listing", lambda: sorted(glob.glob(base + "/**/calc.py", recursive=True)))
elif attack == "environment":
    got = {"names": sorted(os.environ), "values": " ".join(os.environ.values())}
elif attack in ("fill_tmp", "fill_shm"):
    folder = "/tmp" if attack == "fill_tmp" else "/dev/shm"
    for i in range(40):
        with open(f"{folder}/fill{i}.bin", "wb") as fh:
            fh.write(os.urandom(1_000_000))
        time.sleep(0.1)
    got = "filled 40 MB"
elif attack == "outbox_links":
    out, home = sys.argv[1], os.environ.get("TARGET", "")
    os.symlink(home + "/planted.txt", out + "/leak.txt")
    os.symlink(home + "/.bashrc", out + "/raw.out")
    os.symlink(home, out + "/homedir")
    os.symlink(home + "/new-file", out + "/run.json")
    os.mkfifo(out + "/pipe")
    open(out + "/note.txt", "w").write("a regular file")
    open(out + "/keyed.txt", "w").write("pushed with ghp_" + "A" * 36 + "; DEPLOY_PASSWORD=correct-horse-battery\n")
    got = "links left"
elif attack == "setuid":  # a setuid program left where a user of the host could run it
    import shutil
    for where in (".", sys.argv[1], target):
        copy = os.path.join(where, "myid")
        attempt("copy " + where, lambda: shutil.copy("/usr/bin/id", copy) and "copied")
        for mode in (0o6755, 0o4755, 0o2755):
            attempt(f"chmod {mode:o} {where}", lambda: os.chmod(copy, mode) or "set")
        attempt("creat " + where, lambda: os.close(os.open(os.path.join(where, "made"), os.O_CREAT | os.O_WRONLY, 0o4755)) or "made")
    got = {k: (v if v in ("set", "made", "copied") else v.split(":")[1].strip()) for k, v in got.items()}
elif attack == "needs_file":  # an honest agent that needs a fixture outside its workspace, then fixes add()
    print(open(target).read())
    open("calc.py", "w").write("def add(a, b):\n    return a + b\n")
    got = "read it"
print("RESULT " + json.dumps(got))
"""


def snapshot(root: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes, but for the top-level folders named in ``skip``."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[0] not in skip}


@pytest.fixture
def project(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """The user's project: a task with a hidden verify file, its repo, another task folder, a history DB, an
    earlier results folder and a cassette folder, all holding ``SECRET``; a real HOME with a planted file; a
    provider key in the session's environment; and the hostile agent."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    home = tmp_path_factory.mktemp("realhome")
    (home / "planted.txt").write_text(f"PLANTED-HOME {SECRET}")
    (home / ".bashrc").write_text("# the user's bashrc\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_API_KEY", SESSION_KEY)
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-" + "z" * 30)
    planted = {
        "other-task/task.yaml": f"name: other\nverify_files:\n  test_secret.py: '# {SECRET}'\n",
        ".agentrace/history.db": f"SQLite format 3 {SECRET}",
        "old-results/runs/t/default/a/1/diff.patch": f"+{SECRET}\n",
        "cassettes/t__default__claude__1.json": f'{{"secret": "{SECRET}"}}',
    }
    for rel, text in planted.items():
        (pytester.path / rel).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / rel).write_text(text)
    write_script(pytester.path / "hostile.py", HOSTILE)
    return pytester, home, planted


def run_attack(pytester: pytest.Pytester, attack: str, target: str, xdist: list[str], *extra: str, reps: int = 1,
               command_args: str = "", more: str = ""):
    (pytester.path / "task.yaml").write_text(
        "name: box\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        f"verify_command: python -m pytest -q test_hidden.py\nverify_files:\n  test_hidden.py: |\n    # {SECRET}\n"
        "    def test_x():\n        assert True\n"
        f"env: {{ATTACK: {attack}, TARGET: '{target}'}}\n{more}"
        f"agents:\n  - {{name: hostile, command: '{pytester.path / 'hostile.py'}{command_args}'}}\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-reps", str(reps), "--agentrace-no-save",
                             "-p", "no:cacheprovider", *extra, *xdist)
    runs = sorted((pytester.path / "out" / "runs").glob("box/default/hostile/*"))
    results = [json.loads(line[len("RESULT "):]) for r in runs if (r / "raw.out").is_file()
               for line in (r / "raw.out").read_text().splitlines() if line.startswith("RESULT ")]
    records = [json.loads((r / "run.json").read_text()) for r in runs if (r / "run.json").is_file()]
    return res, results, records


def untouched(pytester: pytest.Pytester, home: Path, before: tuple[dict, dict]) -> None:
    assert snapshot(home) == before[0], "HOME changed"
    assert snapshot(pytester.path, ("out", "basetemp", "task.yaml")) == before[1], "the user's project changed"


def states(pytester: pytest.Pytester, home: Path) -> tuple[dict, dict]:
    return snapshot(home), snapshot(pytester.path, ("out", "basetemp", "task.yaml"))


def test_no_capability_no_remount_no_other_process_environ(project, xdist) -> None:
    pytester, home, _ = project
    before = states(pytester, home)
    _, results, _ = run_attack(pytester, "privilege", "", xdist)
    assert len(results) == 1
    got = results[0]
    assert got["CapEff"] == "0000000000000000"
    if os.geteuid() == 0:
        assert got["uid"] == 1000  # a root session's agent is not root inside its box
    for name in ("umount_proc", "umount_tmp", "remount_rw"):
        assert not got[name].startswith("exit 0"), (name, got[name])
    assert got["write_root"].startswith("failed")
    for name in ("environ_1", "environ_parent"):
        assert SESSION_KEY not in got[name] and "MY_SERVICE_TOKEN" not in got[name]
    untouched(pytester, home, before)


def test_the_users_project_does_not_exist_in_the_box(project, xdist) -> None:
    """The history DB, an earlier results folder, a cassette folder, another task's file, the task file itself and
    HOME: none of them is in the box (not hidden behind a permission: absent)."""
    pytester, home, planted = project
    targets = [str(pytester.path / rel) for rel in planted] + [str(pytester.path / "task.yaml"), str(home / "planted.txt"),
                                                                str(pytester.path / "old-results")]
    before = states(pytester, home)
    _, results, _ = run_attack(pytester, "read", os.pathsep.join(targets), xdist)
    assert len(results) == 1
    for path, got in results[0].items():
        assert SECRET not in json.dumps(got) and "FileNotFoundError" in got, (path, got)
    untouched(pytester, home, before)


def test_another_workers_workspace_is_absent_with_tmpdir_outside_tmp(project, monkeypatch) -> None:
    """TMPDIR outside /tmp puts pytest's basetemp, and so every worker's workspace, there: a run sees its own
    workspace only, never its sibling's (two reps side by side under -n 2)."""
    pytester, home, _ = project
    outside = Path(tempfile.mkdtemp(prefix="agentrace-box-", dir="/var/tmp"))
    try:
        monkeypatch.setenv("TMPDIR", str(outside))
        base = outside / "basetemp"
        before = states(pytester, home)
        _, results, _ = run_attack(pytester, "siblings", str(base), ["-p", "xdist", "-n", "2"], f"--basetemp={base}",
                                   reps=2)
        assert len(results) == 2
        for got in results:
            found = got["listing"]
            assert isinstance(found, list) and len(found) <= 1, found  # its own workspace's calc.py at most
        untouched(pytester, home, before)
    finally:
        import shutil

        shutil.rmtree(outside, ignore_errors=True)


def test_a_custom_agent_gets_no_session_keys(project, xdist) -> None:
    pytester, home, _ = project
    _, results, records = run_attack(pytester, "environment", "", xdist)
    names, values = results[0]["names"], results[0]["values"]
    assert "ANTHROPIC_API_KEY" not in names and "MY_SERVICE_TOKEN" not in names and SESSION_KEY not in values
    assert {"PATH", "HOME", "TMPDIR", "ATTACK", "no_proxy", "NO_PROXY"} <= set(names)
    assert not set(names) - {"PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "no_proxy", "NO_PROXY",
                             "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8", "PYTHONIOENCODING", "PYTHONHASHSEED",
                             "ATTACK", "TARGET", "PWD", "SHLVL", "_", *PROXY_VARS} - {n for n in names if n.startswith("LC_")}


@pytest.mark.parametrize("where", ["fill_tmp", "fill_shm"])
def test_filling_tmp_or_shm_past_the_disk_limit_stops_the_run(project, xdist, where) -> None:
    pytester, home, _ = project
    before = states(pytester, home)
    _, results, records = run_attack(pytester, where, "", xdist, "--agentrace-disk", "5M")
    assert len(records) == 1
    run = records[0]
    assert run["status"] == "failed" and run["reason"].startswith("resource limit: disk"), run["reason"]
    assert results == []  # stopped before it could say it filled 40 MB
    untouched(pytester, home, before)


def test_links_left_in_the_outbox_are_never_followed(project, xdist) -> None:
    pytester, home, _ = project
    before = states(pytester, home)
    _, results, records = run_attack(pytester, "outbox_links", str(home), xdist, command_args=" {run_dir}")
    assert results == ["links left"]
    run_dir = pytester.path / "out" / "runs" / "box" / "default" / "hostile" / "1"
    assert (run_dir / "outbox" / "note.txt").read_text() == "a regular file"  # regular files are copied out
    assert (run_dir / "outbox" / "keyed.txt").read_text() == "pushed with <redacted>; DEPLOY_PASSWORD=<redacted>\n"
    assert records[0]["extra"]["outbox"]["redacted"] == 1
    for name in ("leak.txt", "homedir", "pipe"):
        assert not os.path.lexists(run_dir / name) and not os.path.lexists(run_dir / "outbox" / name), name
    assert not any(p.is_symlink() for p in run_dir.rglob("*"))
    assert all(SECRET not in p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())
    skipped = records[0]["extra"]["outbox"]["skipped"]
    assert {"leak.txt", "homedir", "pipe", "raw.out", "run.json"} <= set(skipped)
    untouched(pytester, home, before)


def test_no_setuid_or_setgid_file_leaves_the_box(project, xdist, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The box's user is the session's outside (root here): a program the agent copies into its workspace, its outbox
    or a ``sandbox.write`` folder and marks setuid would run as that user for anyone. Every such chmod and creat is
    refused (``EPERM``) and no file with either bit is left, on the host or in the records."""
    pytester, home, _ = project
    shared = tmp_path_factory.mktemp("shared")
    shared.chmod(0o755)
    _, results, records = run_attack(pytester, "setuid", str(shared), xdist, command_args=" {run_dir}",
                                     more=f"sandbox: {{write: ['{shared}']}}\n")
    assert len(results) == 1 and len(records) == 1
    got = results[0]
    assert [k for k, v in got.items() if k.startswith("copy")] == [k for k, v in got.items() if v == "copied"]
    refused = {k: v for k, v in got.items() if k.startswith(("chmod", "creat"))}
    assert len(refused) == 12 and set(refused.values()) == {"PermissionError"}, refused
    made = [p for p in [*shared.rglob("*"), *(pytester.path / "out").rglob("*")] if p.is_file()]
    assert shared / "myid" in made
    assert [p for p in made if p.lstat().st_mode & 0o6000] == []


def test_sandbox_read_exposes_a_path_and_the_reason_names_it_when_missing(project, xdist) -> None:
    pytester, home, _ = project
    data = pytester.path / "data" / "fixture.txt"
    data.parent.mkdir()
    data.write_text("fixture data")
    _, results, records = run_attack(pytester, "needs_file", str(data), xdist)
    assert records[0]["status"] == "failed"
    assert f"sandbox: {data} is not visible (add it to sandbox.read)" in records[0]["reason"]
    assert records[0]["extra"]["sandbox"]["on"] is True
    _, results, records = run_attack(pytester, "needs_file", str(data), xdist, more="sandbox: {read: [data]}\n")
    assert records[0]["status"] == "passed", records[0]["reason"]
    assert results == ["read it"] and records[0]["extra"]["sandbox"]["read"] == [str(data.parent)]


def test_a_custom_agent_script_imports_a_module_beside_it(pytester: pytest.Pytester) -> None:
    """The folder a custom command's script sits in is shown when it holds no task file (a project's tools/)."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    tools = pytester.path / "tools"
    tools.mkdir()
    (tools / "helper.py").write_text("GREETING = 'hello from the helper'\n")
    write_script(tools / "agent.py", "import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n"
                                      "import helper\nprint(helper.GREETING)\n")
    (pytester.path / "task.yaml").write_text(
        "name: box\ndescription: fix add\nrepo: repo\ntest_command: 'true'\n"
        "agents:\n  - {name: mine, command: 'tools/agent.py', sandbox: {read: [tools]}}\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-no-save", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    assert "hello from the helper" in (pytester.path / "out/runs/box/default/mine/1/raw.out").read_text()


def test_a_command_naming_proc_sys_or_dev_files_starts(pytester: pytest.Pytester) -> None:
    """A custom command that names ``/proc/self/...``, ``/dev/null`` or a ``/sys`` file reads the box's own (bwrap
    could not bind the harness's ``/proc/<pid>`` in, and the run was charged as an agent crash)."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    (pytester.path / "task.yaml").write_text(
        "name: box\ndescription: fix add\nrepo: repo\ntest_command: 'true'\n"
        "agents:\n  - {name: mine, command: \"sh -c 'cat /proc/self/mountinfo /dev/null "
        "/sys/kernel/mm/transparent_hugepage/enabled > /dev/null; echo started'\"}\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-no-save", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    assert "started" in (pytester.path / "out/runs/box/default/mine/1/raw.out").read_text()
