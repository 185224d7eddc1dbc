"""Process control: own process group, timeout kills the group, bounded capture, UTF-8 with replacement."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from pytest_agentrace.record.redact import redact
from pytest_agentrace.run import process, resume

GRANDCHILD_CODE = "import sys, time, pathlib; time.sleep(2); pathlib.Path(sys.argv[1]).write_text('x')"


def py(code: str) -> list[str]:
    return [sys.executable, "-c", f"GRANDCHILD = {GRANDCHILD_CODE!r}\n" + code]


def test_exit_code_and_output(tmp_path: Path) -> None:
    res = process.run(py("import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"), cwd=tmp_path)
    assert (res.exit_code, res.stdout, res.stderr, res.timed_out) == (3, "out\n", "err\n", False)
    assert res.stdout_bytes == 4


def test_shell_string_and_not_found(tmp_path: Path) -> None:
    assert process.run("no-such-command-xyz", cwd=tmp_path).exit_code == 127
    res = process.run(["no-such-command-xyz"], cwd=tmp_path)
    assert res.exit_code is None and "FileNotFoundError" in res.error


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    marker = tmp_path / "late"
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', GRANDCHILD, {str(marker)!r}])\n"
        "time.sleep(30)\n"
    )
    res = process.run(py(code), cwd=tmp_path, timeout=0.5, grace=0.5)
    assert res.timed_out and res.exit_code is None
    time.sleep(3)
    assert not marker.exists()


def test_background_grandchild_killed_after_normal_exit(tmp_path: Path) -> None:
    marker = tmp_path / "late"
    code = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', GRANDCHILD, {str(marker)!r}], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    )
    res = process.run(py(code), cwd=tmp_path, timeout=10)
    assert res.exit_code == 0
    time.sleep(3)
    assert not marker.exists()


def test_flood_is_bounded_head_and_tail_kept(tmp_path: Path) -> None:
    code = "import sys\nsys.stdout.write('HEAD\\n' + 'x' * 5_000_000 + '\\nTAIL\\n')"
    res = process.run(py(code), cwd=tmp_path, head=1000, tail=1000)
    assert res.stdout_bytes == 5 + 5_000_000 + 6
    assert res.stdout.startswith("HEAD\n") and res.stdout.endswith("\nTAIL\n")
    assert len(res.stdout) < 3000
    # the cut is marked on a line of its own, with the exact byte counts, and reported in the result
    lines = res.stdout.splitlines()
    marker = [line for line in lines if line.startswith("[agentrace:")]
    assert marker == ["[agentrace: output cut here: 4998011 of 5000011 bytes dropped, kept the first 1000 and the last 1000]"]
    m = process.CUT_RE.search(res.stdout)
    assert m and [int(g) for g in m.groups()] == [5_000_011 - 2000, 5_000_011, 1000, 1000]
    assert res.cut == {"stdout": 5_000_011 - 2000}
    assert process.cut_notes(res.cut, {"stdout": res.stdout_bytes}) == (
        "raw.out cut: 4,998,011 of 5,000,011 bytes dropped from the middle (the file marks the place); figures printed there are missing",
    )


def test_output_within_the_bounds_is_not_cut(tmp_path: Path) -> None:
    res = process.run(py("import sys\nsys.stdout.write('x' * 2000)"), cwd=tmp_path, head=1000, tail=1000)
    assert res.stdout == "x" * 2000 and res.cut == {} and "[agentrace:" not in res.stdout


def test_garbage_bytes_decoded_with_replacement(tmp_path: Path) -> None:
    res = process.run(py("import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe done')"), cwd=tmp_path)
    assert res.stdout == "ok \ufffd\ufffd done"


def test_stdin_is_closed_or_fed(tmp_path: Path) -> None:
    assert process.run(py("import sys; print(repr(sys.stdin.read()))"), cwd=tmp_path).stdout == "''\n"
    assert process.run(py("import sys; print(sys.stdin.read())"), cwd=tmp_path, stdin="hi").stdout == "hi\n"


def test_redaction() -> None:
    text = "OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv and Authorization: Bearer abcdefghijklmnopqrstu secret-value-123"
    out = redact(text, ["secret-value-123"])
    assert "abcdefghijklmnop" not in out and "secret-value-123" not in out
    assert "OPENAI_API_KEY=<redacted>" in out


class _SignalledPopen(process.subprocess.Popen):
    """A Popen that receives ``sig`` right after the fork, before ``process.run`` has the pid (the race a Ctrl-C
    to the whole process group can hit while a run spawns its agent)."""

    sig = signal.SIGINT
    spawned: list[int] = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        type(self).spawned.append(self.pid)
        os.kill(os.getpid(), self.sig)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_while_spawning_still_kills_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: int) -> None:
    previous = signal.signal(signal.SIGTERM, resume._raise_interrupt)  # what --agentrace installs for SIGTERM
    # Python's own Ctrl-C handler, also when this suite was started with SIGINT ignored (nohup ... &)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        monkeypatch.setattr(_SignalledPopen, "sig", sig)
        monkeypatch.setattr(_SignalledPopen, "spawned", [])
        monkeypatch.setattr(process.subprocess, "Popen", _SignalledPopen)
        with pytest.raises(KeyboardInterrupt):
            process.run(["sleep", "60"], cwd=tmp_path, grace=0.5)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    [pid] = _SignalledPopen.spawned
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running in its own session
        os.kill(pid, 0)


def test_descendant_that_left_the_group_is_killed_too(tmp_path: Path) -> None:
    """A grandchild that makes itself a new session (``setsid``; here ``start_new_session``) is not in the run's
    process group; it and its own child must still be gone once the run returns (Linux subreaper sweep)."""
    pids = tmp_path / "pids"
    escapee = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(pids)!r}, 'a').write(f'{{os.getpid()}} {{child.pid}}\\n')\n"
        "time.sleep(300)\n"
    )
    code = (
        "import subprocess, sys, time, pathlib\n"
        f"subprocess.Popen([sys.executable, '-c', {escapee!r}], start_new_session=True,\n"
        "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"while not pathlib.Path({str(pids)!r}).exists(): time.sleep(0.05)\n"
    )
    res = process.run(py(code), cwd=tmp_path, timeout=60)
    assert res.exit_code == 0
    escaped = [int(x) for x in pids.read_text().split()]
    assert len(escaped) == 2
    for pid in escaped:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_every_pipe_is_closed_after_a_run(tmp_path: Path) -> None:
    import gc
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for kwargs in ({}, {"stdin": "fed"}, {"timeout": 0.5}):
            process.run(py("import sys, time; print(sys.stdin.read() if not sys.stdin.isatty() else '');"
                           "time.sleep(0.2 if len(sys.argv) < 2 else 0)"), cwd=tmp_path, **kwargs)
        gc.collect()
    assert [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)] == []


def test_children_from_proc_are_psutils_children() -> None:
    """``reaper._children`` reads /proc/self/task/*/children: the same pids psutil finds by scanning every process,
    also for a child started from another thread."""
    import subprocess
    import threading

    from pytest_agentrace.run import reaper

    procs = [subprocess.Popen(["sleep", "30"]) for _ in range(2)]
    threading.Thread(target=lambda: procs.append(subprocess.Popen(["sleep", "30"]))).start()
    try:
        deadline = time.monotonic() + 10
        while len(procs) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        mine = {p.pid for p in procs}
        assert mine <= reaper._children()
        assert reaper._children() == reaper._children_psutil()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert not mine & reaper._children()


def test_an_exited_descendant_is_reaped_without_psutil(tmp_path: Path) -> None:
    """What a sandboxed command leaves every time (bwrap's inner process, a session of its own, re-parented to the
    subreaper and already dead) is reaped by the sweep with ``waitpid``: gone afterwards, and psutil (slow to import,
    needed only to kill a live escapee) is not imported for it. Run in a fresh interpreter: this one has psutil."""
    import json
    import subprocess

    pids = tmp_path / "pid"
    leaver = ("import os, pathlib, shutil, time\n"  # a child in a session of its own that exits at once, then us
              "pid = os.spawnv(os.P_NOWAIT, shutil.which('setsid'), ['setsid', 'true'])\n"  # no Popen: not reaped
              f"pathlib.Path({str(pids)!r}).write_text(str(pid))\n"
              "time.sleep(0.5)\n")
    probe = ("import json, os, sys\n"
             "from pytest_agentrace.run import process, reaper\n"
             f"res = process.run([sys.executable, '-c', {leaver!r}], cwd={str(tmp_path)!r}, timeout=60)\n"
             f"pid = int(open({str(pids)!r}).read())\n"
             "json.dump({'exit': res.exit_code, 'left': pid in reaper._children(), 'subreaper': reaper._subreaper,\n"
             "           'psutil': 'psutil' in sys.modules}, sys.stdout)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout)
    assert got["exit"] == 0 and got["subreaper"] is True
    assert got["left"] is False  # the exited descendant was re-parented to us and reaped
    assert got["psutil"] is False
