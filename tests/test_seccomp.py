"""``run.seccomp``: the filter every boxed command starts under refuses setuid and setgid bits and nothing else.
Run here on a child process without the box (the filter needs no privilege: ``PR_SET_NO_NEW_PRIVS`` first)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentrace.run import seccomp

pytestmark = pytest.mark.skipif(not seccomp.supported(), reason="the filter's tables cover x86-64 and AArch64")

CHILD = r"""
import ctypes, json, os, stat, sys
d = sys.argv[1]
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as exc:
        out[name] = exc.errno
f = os.path.join(d, "f")
open(f, "w").close()
for mode in (0o6755, 0o4755, 0o2755, 0o1777, 0o755):
    attempt(f"chmod {mode:o}", lambda: os.chmod(f, mode))
    attempt(f"fchmod {mode:o}", lambda: os.fchmod(os.open(f, os.O_RDONLY), mode))
for name, mode in (("g", 0o4755), ("h", 0o2644), ("i", 0o644)):
    attempt(f"open {mode:o}", lambda: os.close(os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY, mode)))
attempt("mknod fifo 4644", lambda: os.mkfifo(os.path.join(d, "p"), 0o4644))
attempt("mkdir", lambda: os.mkdir(os.path.join(d, "sub")))
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out["openat2"] = (libc.syscall(437, -100, b"/etc/hostname", None, 0), ctypes.get_errno())
out["io_uring_setup"] = (libc.syscall(425, 1, None), ctypes.get_errno())
out["modes"] = {n: oct(os.lstat(os.path.join(d, n)).st_mode & 0o7777) for n in sorted(os.listdir(d))}
print(json.dumps(out))
"""


def test_the_filter_refuses_setuid_and_setgid_bits_only(tmp_path: Path) -> None:
    res = subprocess.run(seccomp.wrapped([sys.executable, "-c", CHILD, str(tmp_path)]), capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    for mode in ("6755", "4755", "2755"):
        assert got[f"chmod {mode}"] == got[f"fchmod {mode}"] == 1  # EPERM
    assert got["chmod 1777"] == got["chmod 755"] == got["fchmod 755"] == "ok"  # the sticky bit and the rest: as ever
    assert (got["open 4755"], got["open 2644"], got["open 644"], got["mknod fifo 4644"]) == (1, 1, "ok", 1)
    assert got["mkdir"] == "ok"
    assert got["openat2"] == [-1, 38] and got["io_uring_setup"] == [-1, 38]  # ENOSYS: callers fall back to openat
    assert got["modes"] == {"f": "0o755", "i": "0o644", "sub": "0o755"}


def test_a_filter_that_cannot_be_set_stops_the_command(tmp_path: Path) -> None:
    """Fails closed: a program the kernel refuses (here a jump out of the program) is exit 125, and the command
    never runs."""
    bad = struct.pack("=HBBI", seccomp.JEQ_K, 200, 0, 0).hex()
    marker = tmp_path / "ran"
    argv = seccomp.wrapped([sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    argv[argv.index(seccomp.program().hex())] = bad
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 125 and "agentrace seccomp: cannot set the filter" in res.stderr
    assert not marker.exists()


def test_every_jump_of_the_program_lands_inside_it() -> None:
    prog = seccomp.program()
    records = [struct.unpack("=HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    assert len(records) < 4096  # BPF_MAXINSNS
    for at, (code, jt, jf, _k) in enumerate(records):
        if code & 0x07 == 0x05:  # BPF_JMP
            assert at + 1 + max(jt, jf) < len(records)
    assert records[-1][0] == seccomp.RET_K


def test_every_boxed_command_starts_under_the_filter(tmp_path: Path) -> None:
    from pytest_agentrace.run.sandbox import Sandbox, probe

    bwrap = probe()[0]
    if bwrap is None:
        pytest.skip("no sandbox here")
    argv, _ = Sandbox(bwrap).wrap(["true"], writable=[tmp_path], home=None, env={})
    after = argv[argv.index("--") + 1:]
    assert after[:5] == [sys.executable, "-S", "-I", "-c", seccomp.INSTALLER] and after[-1] == "true"
    # a box that shows nothing else still shows the installer's interpreter and its standard library
    shown = {argv[i + 1] for i, flag in enumerate(argv[:-2]) if flag == "--ro-bind"}
    assert any(os.path.abspath(sys.base_prefix).startswith(p) for p in shown), shown
    assert os.path.basename(argv[0]).startswith("bwrap")
