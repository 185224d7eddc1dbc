"""No setuid or setgid file from the box: a seccomp filter every sandboxed command starts under.

A root session's box maps its user (``sandbox.BOX_UID``) to root outside, and the owner of a file may set its
setuid and setgid bits without any capability. A program the agent copied into its workspace, its outbox or a
``sandbox.write`` folder and marked ``chmod 6755`` would then be a root-owned setuid program on the host, which any
local user able to reach the folder could run as root (an unprivileged session's the same, as that user). So every
command in the box runs under a seccomp filter (seccomp(2), classic BPF over ``struct seccomp_data``) that refuses
(``EPERM``) each call that would give a file those bits:

- ``chmod``, ``fchmod``, ``fchmodat``, ``fchmodat2`` with ``S_ISUID`` or ``S_ISGID`` in the mode;
- ``open``, ``openat``, ``creat``, ``mknod``, ``mknodat`` with either bit in the mode of the file they create;
- ``openat2`` (its mode is behind a pointer, which a filter cannot read) and ``io_uring_setup`` (io_uring's
  ``openat`` would not pass the filter) answer ``ENOSYS``, as on a kernel without them: programs fall back to
  ``openat``; on x86-64 so do the x32 calls (``__X32_SYSCALL_BIT``).

Every other call is allowed; nothing else changes. The tables cover x86-64 (with its i386 calls) and AArch64,
numbers from the kernel's ``arch/x86/entry/syscalls/syscall_{64,32}.tbl`` and ``include/uapi/asm-generic/unistd.h``.
Another architecture's calls are refused (``ENOSYS``): a filter there would not know what it lets through.

``wrapped(argv)`` is ``argv`` behind the installer (``INSTALLER``: the session's Python, ``-S -I``, standard library
only) that sets ``PR_SET_NO_NEW_PRIVS`` and the filter (prctl(2)) and ``exec``\\ s ``argv``; it fails closed: a
filter that cannot be set is a message on stderr and exit 125, the command never runs. bwrap's own ``--seccomp FD``
would need a descriptor per box passed through every launch; the installer costs one interpreter start (about 10 ms).
"""

from __future__ import annotations

import functools
import os
import platform
import struct
import sys
from collections.abc import Sequence

# classic BPF (linux/filter.h, linux/bpf_common.h) and seccomp (linux/seccomp.h, linux/audit.h)
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
EPERM, ENOSYS = 1, 38
ARCH_X86_64, ARCH_I386, ARCH_AARCH64 = 0xC000003E, 0x40000003, 0xC00000B7
X32_SYSCALL_BIT = 0x40000000
SPECIAL_BITS = 0o6000  # S_ISUID | S_ISGID
NR, ARCH, ARGS = 0, 4, 16  # offsets in struct seccomp_data: nr (u32), arch (u32), ip (u64), args[6] (u64 each)

# per architecture: {syscall number: index of its mode argument, or None (refused: ENOSYS)}
CALLS: dict[int, dict[int, int | None]] = {
    ARCH_X86_64: {2: 2, 85: 1, 90: 1, 91: 1, 133: 1, 257: 3, 259: 2, 268: 2, 452: 2, 437: None, 425: None},
    ARCH_I386: {5: 2, 8: 1, 14: 1, 15: 1, 94: 1, 295: 3, 297: 2, 306: 2, 452: 2, 437: None, 425: None},
    ARCH_AARCH64: {33: 2, 52: 1, 53: 2, 56: 3, 452: 2, 437: None, 425: None},
}


@functools.cache
def program() -> bytes:
    """The filter as ``struct sock_filter`` records (u16 code, u8 jt, u8 jf, u32 k; native byte order), the mode
    argument's low 32 bits read (the mode is an ``unsigned int`` on every listed architecture). Built once per
    process: every box passes the same program."""
    code: list[tuple[int, int, int, int]] = []
    blocks: list[tuple[int, list[tuple[int, int, int, int]]]] = []  # (arch, its block) after the dispatch
    code.append((LD_W_ABS, 0, 0, ARCH))
    for arch in CALLS:  # a jump to each arch's block, patched below
        code.append((JEQ_K, 0, 0, arch))
        blocks.append((arch, _block(arch)))
    code.append((RET_K, 0, 0, RET_ERRNO | ENOSYS))  # an architecture without a table
    start = len(code)
    for i, (_arch, block) in enumerate(blocks):
        at = 1 + i
        code[at] = (JEQ_K, start - at - 1, 0, code[at][3])
        start += len(block)
    for _arch, block in blocks:
        code += block
    return b"".join(struct.pack("=HBBI", *ins) for ins in code)


def _block(arch: int) -> list[tuple[int, int, int, int]]:
    """One architecture's checks: the call number against each listed call, a mode argument tested for the two
    bits, the rest allowed."""
    calls = CALLS[arch]
    block: list[tuple[int, int, int, int]] = [(LD_W_ABS, 0, 0, NR)]
    if arch == ARCH_X86_64:
        block.append((JGE_K, 0, 1, X32_SYSCALL_BIT))
        block.append((RET_K, 0, 0, RET_ERRNO | ENOSYS))
    refused = [nr for nr, arg in calls.items() if arg is None]
    moded = [(nr, arg) for nr, arg in calls.items() if arg is not None]
    # layout (classic BPF jumps only forward): the tests, ALLOW, ENOSYS, per mode argument index a load, a bit
    # test and ALLOW, then EPERM last
    args = sorted({arg for _, arg in moded})
    allow = len(block) + len(refused) + len(moded)  # index of the ALLOW return
    enosys = allow + 1
    arg_at = {arg: enosys + 1 + 3 * k for k, arg in enumerate(args)}  # each: load, test, allow
    eperm = enosys + 1 + 3 * len(args)
    for nr in refused:
        block.append((JEQ_K, enosys - len(block) - 1, 0, nr))
    for nr, arg in moded:
        block.append((JEQ_K, arg_at[arg] - len(block) - 1, 0, nr))
    block += [(RET_K, 0, 0, RET_ALLOW), (RET_K, 0, 0, RET_ERRNO | ENOSYS)]
    for arg in args:
        block.append((LD_W_ABS, 0, 0, ARGS + 8 * arg))  # the low half of a little-endian u64
        block.append((JSET_K, eperm - len(block) - 1, 0, SPECIAL_BITS))
        block.append((RET_K, 0, 0, RET_ALLOW))
    block.append((RET_K, 0, 0, RET_ERRNO | EPERM))
    return block


# -S -I: no site-packages, no PYTHON* variables: nothing of the run's environment runs here
INSTALLER = (
    "import ctypes, os, sys\n"
    "prog = bytes.fromhex(sys.argv[1])\n"
    "class Fprog(ctypes.Structure):\n"
    "    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]\n"
    "buf = ctypes.create_string_buffer(prog, len(prog))\n"
    "fprog = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]\n"
    "if libc.prctl(38, 1, None, 0, 0) or libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0):\n"
    "    sys.stderr.write('agentrace seccomp: cannot set the filter: %s\\n' % os.strerror(ctypes.get_errno()))\n"
    "    sys.stderr.flush()\n"
    "    os._exit(125)\n"
    "argv = sys.argv[2:]\n"
    "try:\n"
    "    os.execvp(argv[0], argv)\n"
    "except OSError as exc:\n"
    "    sys.stderr.write('%s: %s\\n' % (argv[0], exc.strerror))\n"
    "    sys.stderr.flush()\n"
    "    os._exit(127)\n"
)


def supported() -> bool:
    """True on a machine whose calls the filter knows (x86-64, AArch64)."""
    return platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64")


@functools.cache
def interpreter_paths() -> tuple[str, ...]:
    """What the installer needs to start in a box: the session's interpreter (its real path and its install
    prefix) and its standard library (``sys.base_prefix``; ``sys.prefix`` for a virtual environment)."""
    real = os.path.realpath(sys.executable)
    return tuple(dict.fromkeys((sys.executable, os.path.dirname(os.path.dirname(real)), sys.base_prefix, sys.prefix)))


def wrapped(argv: Sequence[str]) -> list[str]:
    """``argv`` started under the filter (module docstring): ``[python, -S, -I, -c, INSTALLER, <program hex>,
    *argv]``."""
    return [sys.executable, "-S", "-I", "-c", INSTALLER, program().hex(), *argv]
