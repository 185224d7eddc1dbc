"""Resource limits per run: an agent that allocates without end, forks without end, writes past its disk limit or
spins on the CPU is stopped by the kernel, recorded as a ``failed`` run with the limit as its reason, and the
session and every other run go on.

Every runaway script here is bounded by itself too (a safety net on a shared machine): the allocator stops at
2 GiB, the fork loop at 2000 children that exit after 20 s, the writers at 200 MB, the spinner after 60 s.
"""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

from pytest_agentrace.argtypes import byte_size
from pytest_agentrace.errors import SpecError
from pytest_agentrace.options import BY_NAME
from pytest_agentrace.run import process
from pytest_agentrace.run.cgroup import find_parent, sweep
from pytest_agentrace.run.limits import DEFAULTS, Limits, confine, diagnose, tree_bytes
from pytest_agentrace.spec.common import parse_limits
from pytest_agentrace.spec.trial import load_trial

TEST = "test_command: python -m pytest -q test_calc.py"

HOG = """\
chunks = []
for _ in range(128):  # 128 x 16 MiB = 2 GiB at most
    chunks.append(bytearray(16 * 1024 * 1024))
print("allocated 2 GiB without being stopped")
"""
FORKER = """\
import os, sys, time
children = 0
while children < 2000:
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"fork failed after {children} children: {exc}", file=sys.stderr)
        sys.exit(3)
    if pid == 0:
        time.sleep(20)
        os._exit(0)
    children += 1
print("forked 2000 children without being stopped")
"""
BIG_FILE = """\
with open("big.bin", "wb") as fh:
    for _ in range(200):  # 200 MB at most
        fh.write(b"x" * 1_000_000)
        fh.flush()
print("wrote 200 MB without being stopped")
"""
MANY_FILES = """\
import os, time
os.makedirs("junk", exist_ok=True)
for i in range(200):  # 200 MB at most, each file far below the largest-file limit
    with open(f"junk/{i}.bin", "wb") as fh:
        fh.write(os.urandom(1_000_000))
    time.sleep(0.05)
print("wrote 200 files without being stopped")
"""
BURST = """\
import os
for i in range(8):  # 8 MB in a blink, then a clean exit (if the watch has not stopped it): the look after the run counts it
    with open(f"burst{i}.bin", "wb") as fh:
        fh.write(os.urandom(1_000_000))
"""
SPINNER = """\
import time
end = time.monotonic() + 60
while time.monotonic() < end:
    pass
print("spun 60 s without being stopped")
"""


def processes_enforceable() -> bool:
    """A process limit is kernel-enforced here: a delegated cgroup (v2, or v1 pids), or not root (RLIMIT_NPROC)."""
    return find_parent("auto") is not None or os.getuid() != 0


def runs_of(root: Path, task: str = "t") -> dict[str, dict]:
    return {p.parts[-3]: json.loads(p.read_text()) for p in root.glob(f"o/runs/{task}/default/*/1/run.json")}


def test_runaway_agents_are_stopped_and_recorded(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    for name, body in (("hog", HOG), ("bigfile", BIG_FILE), ("manyfiles", MANY_FILES), ("spinner", SPINNER),
                       ("burst", BURST), ("fixer", FIXER)):
        write_script(bin_dir / name, body)
    agents = ("{name: hog, command: hog, limits: {memory: 200M}}, {name: fixer, command: fixer}, "
              "{name: bigfile, command: bigfile, limits: {disk: 5M}}, {name: manyfiles, command: manyfiles, "
              "limits: {disk: 5M}}, {name: spinner, command: spinner, limits: {cpu_time: 1}}, "
              "{name: burst, command: burst, limits: {disk: 5M}}, "
              "{name: fixer2, command: fixer}")
    (pytester.path / "task.yaml").write_text(f"name: t\ndescription: fix add\nrepo: repo\n{TEST}\nagents: [{agents}]\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-no-save", "--agentrace-html", "r.html",
                             "--agentrace-md", "r.md", *xdist)
    res.assert_outcomes(passed=2, failed=5)
    runs = runs_of(pytester.path)
    assert sorted(runs) == ["bigfile", "burst", "fixer", "fixer2", "hog", "manyfiles", "spinner"]
    for name, limit, reason in (("hog", "memory", "resource limit: memory (200 MiB; "),
                                # the file stopped at the limit by RLIMIT_FSIZE: with the run's other new entries
                                # (a block each, run.limits.ENTRY_BYTES) the watch may see the growth first
                                ("bigfile", "disk", "resource limit: disk (5 MiB; "),
                                ("manyfiles", "disk", "resource limit: disk (5 MiB; the workspace grew past it)"),
                                ("spinner", "cpu_time", "resource limit: cpu (1 s; killed by SIGXCPU)"),
                                ("burst", "disk", "resource limit: disk (5 MiB; the workspace grew past it)")):
        run = runs[name]
        assert run["status"] == "failed", (name, run["reason"])
        assert run["reason"].startswith(reason), (name, run["reason"])
        assert run["extra"]["limit_hit"]["limit"] == limit
    assert "MemoryError" in runs["hog"]["reason"]
    assert "allocated 2 GiB" not in (pytester.path / "o/runs/t/default/hog/1/raw.out").read_text()
    assert "MemoryError" in (pytester.path / "o/runs/t/default/hog/1/raw.err").read_text()  # its data is kept
    assert runs["hog"]["extra"]["limits"]["memory"]["limit"] == 200 * 1024**2
    assert "RLIMIT_DATA" in runs["hog"]["extra"]["limits"]["memory"]["by"]
    junk = runs["manyfiles"]["files_changed"]
    assert 5 <= junk < 200  # stopped soon after passing 5 MB, its diff still recorded
    for name in ("fixer", "fixer2"):  # the runs next to the runaways are unaffected
        assert runs[name]["status"] == "passed" and runs[name]["reason"] is None
        assert "limit_hit" not in runs[name]["extra"]
        memory = runs[name]["extra"]["limits"]["memory"]
        assert memory["limit"] == DEFAULTS.memory and "RLIMIT_DATA 4 GiB per process" in memory["by"]
    out = res.stdout.str()
    assert "limit hits: 5 (cpu 1, disk 3, memory 1)" in out
    assert "| failed (memory limit) |" in out and "| failed (cpu limit)" in out
    md, page = (pytester.path / "r.md").read_text(), (pytester.path / "r.html").read_text()
    assert "7 runs: 2 passed, 5 failed, 0 timed out, 0 errors · limit hits: 5 (cpu 1, disk 3, memory 1)" in md
    assert "limit hits: 5 (cpu 1, disk 3, memory 1)" in page
    assert page.count('class="status-failed">failed (disk limit)<') == 3
    # the burst either ends before the watch looks (exit 0: the look after the run counts it) or, the watch counting
    # each file's size as it grows, is stopped mid-way (no exit code); either way its growth past 5 MiB is recorded
    assert runs["burst"]["exit_code"] in (0, None)
    assert runs["burst"]["extra"]["limits"]["disk"]["workspace_growth"] > 5 * 2**20


def test_fork_loop_is_stopped_at_a_small_process_limit(pytester: pytest.Pytester, bin_dir: Path,
                                                       xdist: list[str]) -> None:
    if not processes_enforceable():
        pytest.skip("running as root without a delegated cgroup: the kernel enforces no process limit here")
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "forker", FORKER)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(
        f"name: t\ndescription: fix add\nrepo: repo\n{TEST}\nlimits: {{max_procs: 64}}\n"
        "agents: [{name: forker, command: forker}, {name: fixer, command: fixer}]\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-no-save", *xdist)
    res.assert_outcomes(passed=1, failed=1)
    runs = runs_of(pytester.path)
    forker = runs["forker"]
    assert forker["status"] == "failed" and forker["reason"].startswith("resource limit: processes (64 processes; ")
    err = (pytester.path / "o/runs/t/default/forker/1/raw.err").read_text()
    children = int(err.split("fork failed after ")[1].split()[0])
    assert children < 64  # the interpreter's own threads count too
    assert runs["fixer"]["status"] == "passed"
    assert runs["fixer"]["extra"]["limits"]["processes"]["limit"] == 64


def test_trial_defaults_and_agent_limits_reach_the_run(pytester: pytest.Pytester, bin_dir: Path) -> None:
    """``[defaults] limits`` in a trial file bound every run; an agent's own ``limits`` win over them; the ini keys
    set the session's limits under both."""
    make_repo(pytester.path / "repo", {"README.md": "the answer is 42\n"})
    write_script(bin_dir / "answerer", "print('42')\n")
    (pytester.path / "trial.toml").write_text(
        'name = "tr"\n[defaults]\nlimits = { memory = "300M", cpu_time = 30 }\n'
        '[[repos]]\nname = "r"\nsource = "repo"\n'
        '[[agents]]\nname = "a"\ncommand = "answerer {prompt}"\n'
        '[[agents]]\nname = "b"\ncommand = "answerer {prompt}"\nlimits = { memory = "1G", disk = 0 }\n'
        '[[questions]]\nid = "q"\nrepo = "r"\nprompt = "what is the answer?"\nexpect = ["42"]\n')
    pytester.makeini("[pytest]\nagentrace_disk = 100M\nagentrace_max_procs = 300\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-no-save")
    res.assert_outcomes(passed=2)
    a, b = (json.loads(p.read_text())["extra"]["limits"] for p in
            sorted((pytester.path / "o/runs/q/default").glob("*/1/run.json")))
    assert {k: v["limit"] for k, v in a.items()} == {"memory": 300 * 1024**2, "processes": 300,
                                                      "disk": 100 * 1024**2, "cpu_time": 30}
    assert {k: v["limit"] for k, v in b.items()} == {"memory": 1024**3, "processes": 300, "disk": 0, "cpu_time": 30}
    assert b["disk"]["by"] == "off"


@pytest.mark.parametrize(("text", "value"), [("512M", 512 * 1024**2), ("4G", 4 * 1024**3), ("1.5g", 1536 * 1024**2),
                                             ("4GiB", 4 * 1024**3), ("2KB", 2048), ("100000", 100000), ("none", 0)])
def test_sizes(text: str, value: int) -> None:
    assert byte_size(text) == value


@pytest.mark.parametrize(("value", "message"), [
    ({"memry": "1G"},
     "key 'limits.memry': unknown key (did you mean 'memory'?); valid keys: memory, max_procs, disk, cpu_time"),
    ({"memory": "lots"}, "key 'limits.memory': 'lots' is not a size; write e.g. 512M, 4G or 0 (no limit)"),
    ({"max_procs": -1},
     "key 'limits.max_procs': must be greater than 0 (and finite), not -1; write e.g. 512, or 0 for no limit"),
    ({"disk": True}, "key 'limits.disk': must be a number or a string, not bool True; write e.g. 2G"),
    ("4G", "key 'limits': must be a mapping, not str '4G'"),
])
def test_bad_limits_name_file_key_and_fix(tmp_path: Path, value: object, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_limits(tmp_path / "task.yaml", "limits", value)
    assert f"{tmp_path / 'task.yaml'}: {message}" in str(exc.value)


def test_bad_trial_limits_name_the_table(tmp_path: Path) -> None:
    (tmp_path / "trial.toml").write_text('[defaults]\nlimits = { memory = "4X" }\n[[repos]]\nname = "r"\nsource = "."\n'
                                         '[[agents]]\nname = "noop"\n[[questions]]\nid = "q"\nprompt = "p"\n')
    with pytest.raises(SpecError, match=r"key '\[defaults\].limits.memory': '4X' is not a size"):
        load_trial(tmp_path / "trial.toml")


def test_bad_ini_limit_names_the_key() -> None:
    with pytest.raises(ValueError, match="ini key agentrace_memory = '4 gigs': '4 gigs' is not a size"):
        BY_NAME["memory"].from_ini("4 gigs")


def test_limits_layer_agent_over_file_over_session() -> None:
    session = Limits(memory=1, processes=2, disk=3, cpu_time=4.0)
    file_level, agent_level = Limits(memory=10, disk=0), Limits(memory=100)
    assert agent_level.over(file_level.over(session)) == Limits(memory=100, processes=2, disk=0, cpu_time=4.0)


def test_diagnose_prefers_the_kernels_evidence() -> None:
    limits = Limits(memory=2**20, processes=64, disk=2**20, cpu_time=5)
    assert diagnose(limits, None, "", stopped="disk").limit == "disk"
    assert diagnose(limits, 1, "MemoryError", events={"processes": 3}).limit == "processes"
    assert diagnose(limits, -24, "").limit == "cpu_time"
    assert diagnose(limits, -25, "").limit == "disk"
    assert diagnose(limits, 1, "bash: fork: retry: Resource temporarily unavailable").limit == "processes"
    assert diagnose(limits, 0, "MemoryError") is None  # it recovered and finished: no hit
    assert diagnose(Limits(memory=0), 1, "MemoryError") is None  # a limit that is off is never the reason
    assert diagnose(limits, 1, "ordinary failure") is None


def test_rlimits_reach_the_child_and_not_the_harness(tmp_path: Path) -> None:
    confined = confine(Limits(memory=300 * 2**20, processes=0, disk=7 * 2**20, cpu_time=9), tmp_path, None)
    script = ("import resource as r; print(r.getrlimit(r.RLIMIT_DATA)[0], r.getrlimit(r.RLIMIT_FSIZE)[0], "
              "r.getrlimit(r.RLIMIT_CPU))")
    import sys

    res = process.run([sys.executable, "-c", script], cwd=tmp_path, preexec_fn=confined.preexec)
    confined.close()
    assert res.stdout.split(None, 2) == [str(300 * 2**20), str(7 * 2**20), "(9, 14)\n"]
    assert resource.getrlimit(resource.RLIMIT_DATA)[0] != 300 * 2**20


def test_tree_bytes_counts_allocated_blocks_and_a_sparse_files_size(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(os.urandom(300_000))
    assert 300_000 <= tree_bytes(tmp_path) < 300_000 + 200_000
    with open(tmp_path / "sparse", "wb") as fh:  # a hole costs little here, but the harness reads and writes it all
        fh.seek(50_000_000)
        fh.write(b"x")
    assert 50_300_001 <= tree_bytes(tmp_path) < 50_300_001 + 200_000


def test_the_disk_watch_stops_at_a_new_folder_it_cannot_measure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder deeper than ``MAX_DEPTH`` (or one it may not list) is unmeasured: new ones stop the run whatever the
    bytes, those there at the start do not. A path longer than ``PATH_MAX`` is walked by descriptor, and counted."""
    from pytest_agentrace.run import limits

    monkeypatch.setattr(limits, "MAX_DEPTH", 3)
    (tmp_path / "old" / "a" / "b" / "c" / "d").mkdir(parents=True)
    watch = limits.DiskWatch(tmp_path, 10**9)
    assert watch.check(force=True) is None and watch.known == {f"{tmp_path}/old/a/b/c"}
    (tmp_path / "new" / "a" / "b").mkdir(parents=True)
    assert watch.check(force=True) is None  # three below the root: still measured
    (tmp_path / "new" / "a" / "b" / "c").mkdir()
    assert watch.check(force=True) == "disk" and watch.grown < 10**9
    monkeypatch.undo()
    deep = tmp_path / "deep"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY)
    try:
        for _ in range(24):  # 24 * 201 characters: past PATH_MAX
            os.mkdir("d" * 200, dir_fd=fd)
            nfd = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        with open(os.open("data", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as fh:
            fh.write(os.urandom(1_000_000))
    finally:
        os.close(fd)
    unmeasured: set[str] = set()
    assert tree_bytes(deep, unmeasured) >= 1_000_000 and not unmeasured


def test_limits_hold_inside_the_sandbox(pytester: pytest.Pytester, bin_dir: Path) -> None:
    """Under ``--agentrace-sandbox bwrap`` the agent's child joins its group and gets its rlimits before bwrap
    starts, so the sandboxed tree is bounded the same way."""
    from pytest_agentrace.run.sandbox import probe

    if probe()[0] is None:
        pytest.skip(f"no sandbox here: {probe()[1]}")
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "hog", HOG)
    write_script(bin_dir / "forker", FORKER)
    write_script(bin_dir / "fixer", FIXER)
    forker = ", {name: forker, command: forker, limits: {max_procs: 64}}" if processes_enforceable() else ""
    (pytester.path / "task.yaml").write_text(
        f"name: t\ndescription: fix add\nrepo: repo\n{TEST}\n"
        f"agents: [{{name: hog, command: hog, limits: {{memory: 200M}}}}, {{name: fixer, command: fixer}}{forker}]\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-no-save",
                             "--agentrace-sandbox", "bwrap")
    res.assert_outcomes(passed=1, failed=2 if forker else 1)
    runs = runs_of(pytester.path)
    assert runs["hog"]["reason"].startswith("resource limit: memory (200 MiB; 'MemoryError'")
    if forker:
        assert runs["forker"]["reason"].startswith("resource limit: processes (64 processes; ")
    assert runs["fixer"]["status"] == "passed"


def test_without_a_cgroup_root_records_the_process_limit_as_not_enforced(pytester: pytest.Pytester,
                                                                         bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(f"name: t\ndescription: fix add\nrepo: repo\n{TEST}\n"
                                             "agents: [{name: fixer, command: fixer}]\n")
    pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-no-save", "--agentrace-cgroup", "off",
                       "--agentrace-max-procs", "100").assert_outcomes(passed=1)
    processes = runs_of(pytester.path)["fixer"]["extra"]["limits"]["processes"]
    assert processes["limit"] == 100
    if os.getuid() == 0:
        assert processes["by"].startswith("not enforced: running as root, where the kernel ignores RLIMIT_NPROC")
    else:
        assert processes["by"].startswith("RLIMIT_NPROC ")


def test_a_cgroup_folder_that_cannot_be_used_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    (pytester.path / "task.yaml").write_text(f"name: t\ndescription: d\n{TEST}\nagents: [noop]\n")
    res = pytester.runpytest("--agentrace", "--agentrace-cgroup", str(tmp_path))
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines([f"*--agentrace-cgroup: {tmp_path} is no writable cgroup folder with memory and pids*"])


def test_rlimit_nproc_budget_for_a_user_without_a_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a group a non-root user's process limit is RLIMIT_NPROC at the user's tasks now plus the limit (the
    kernel counts per user); here a user id that runs nothing, so the budget is the limit itself."""
    monkeypatch.setattr(os, "getuid", lambda: 54321)
    confined = confine(Limits(memory=0, processes=64, disk=0, cpu_time=0), None, None)
    assert confined.rlimits == [(resource.RLIMIT_NPROC, 64, 64)]
    assert confined.enforced["processes"] == "RLIMIT_NPROC 64 (this user's tasks at the start + 64)"


def test_checks_run_the_agents_code_within_the_same_limits(pytester: pytest.Pytester, bin_dir: Path) -> None:
    """The test command runs what the agent left; a test that allocates without end is stopped at the run's memory
    limit too, and its log says so."""
    make_repo(pytester.path / "repo", {**BUGGY_REPO, "test_calc.py": "def test_hog():\n" + "".join(
        f"    {line}\n" for line in HOG.splitlines())})
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(
        f"name: t\ndescription: fix add\nrepo: repo\n{TEST}\nlimits: {{memory: 200M}}\n"
        "agents: [{name: fixer, command: fixer}]\n")
    pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-no-save").assert_outcomes(failed=1)
    run = runs_of(pytester.path)["fixer"]
    assert run["status"] == "failed"
    assert run["reason"].startswith("resource limit: memory (200 MiB; 'MemoryError' in the output) in the tests")
    assert run["checks"]["tests"]["limit"].startswith("resource limit: memory (200 MiB; ")
    log = (pytester.path / "o/runs/t/default/fixer/1/tests.log").read_text()
    assert "allocated 2 GiB" not in log
    assert log.rstrip().splitlines()[-1].startswith("--- exit 1; resource limit: memory (200 MiB; 'MemoryError' in ")


def test_cgroup_counts_are_read_from_its_event_files(tmp_path: Path) -> None:
    """``memory.events`` ``oom_kill`` and ``pids.events`` ``max`` (cgroup v2 format; v1 pids writes the same
    ``max N`` line) become hits; ``pids.peak`` / ``memory.peak`` the peaks. A folder standing in for the group."""
    from pytest_agentrace.run.cgroup import Parent, RunGroup

    group = RunGroup(Parent(tmp_path, 2, frozenset({"memory", "pids"})), tmp_path / "g")
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "memory.events").write_text("low 0\nhigh 0\nmax 17\noom 1\noom_kill 1\noom_group_kill 1\n")
    (tmp_path / "g" / "pids.events").write_text("max 0\n")
    (tmp_path / "g" / "pids.peak").write_text("12\n")
    assert group.hits() == {"memory": 1} and group.peaks() == {"processes": 12}
    assert group.limits == {"memory", "processes"}
    assert RunGroup(Parent(tmp_path, 1, frozenset({"pids"})), tmp_path / "g").limits == {"processes"}
    hit = diagnose(Limits(memory=2**30), -9, "", events=group.hits())
    assert hit.reason == "resource limit: memory (1 GiB; 1 out-of-memory kills counted by its cgroup)"


def test_sweep_removes_empty_groups_of_gone_processes_only(tmp_path: Path) -> None:
    """A killed session leaves its empty ``agentrace-<pid>-<n>-<random>`` groups; the next group's creation removes
    those whose process is gone and keeps a live process's group, a non-empty one and other folders."""
    gone = 2**22 + 17  # above the kernel's pid_max: no such process
    for name in (f"agentrace-{gone}-1-ab12cd", f"agentrace-{os.getpid()}-1-ef34ab", "other-1", f"agentrace-{gone}-2-full"):
        (tmp_path / name).mkdir()
    (tmp_path / f"agentrace-{gone}-2-full" / "cgroup.procs").write_text("")
    sweep(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"agentrace-{os.getpid()}-1-ef34ab", "other-1", f"agentrace-{gone}-2-full"])
