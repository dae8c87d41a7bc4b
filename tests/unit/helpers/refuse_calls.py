# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs a command with system calls refused the way a container's seccomp profile refuses them:
``python refuse_calls.py unshare,kcmp -- COMMAND...`` installs a seccomp filter that answers EPERM to those calls
(x86_64 and aarch64), then execs COMMAND, which inherits the filter with all its children.

Where the kernel refuses the filter itself, it prints ``REFUSED seccomp <errno>`` and exits 0 (bounded.line reads
that as a test not run)."""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

# System call numbers by machine (AUDIT_ARCH_* as seccomp_data.arch gives it).
SYSCALLS = {
    0xC000003E: {"unshare": 272, "kcmp": 312, "ptrace": 101, "setns": 308},  # x86_64
    0xC00000B7: {"unshare": 97, "kcmp": 272, "ptrace": 117, "setns": 268},  # aarch64
}
BPF_LD_W_ABS = 0x20
BPF_JMP_JEQ_K = 0x15
BPF_RET_K = 0x06
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


def filter_program(calls, refusal=errno.EPERM):
    """The BPF program, as (code, jt, jf, k) tuples: refusal for the calls named, any other call allowed."""
    program = [(BPF_LD_W_ABS, 0, 0, 4)]  # seccomp_data.arch
    to_refusal = []
    for arch, numbers in SYSCALLS.items():
        block = [(BPF_LD_W_ABS, 0, 0, 0)]  # seccomp_data.nr
        for call in calls:
            to_refusal.append(len(program) + 1 + len(block))
            block.append((BPF_JMP_JEQ_K, None, 0, numbers[call]))
        block.append((BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
        program.append((BPF_JMP_JEQ_K, 0, len(block), arch))  # another machine: past this block
        program += block
    program.append((BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    refused_at = len(program)
    program.append((BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | refusal))
    for index in to_refusal:
        code, _jt, jf, k = program[index]
        program[index] = (code, refused_at - index - 1, jf, k)
    return program


def install(calls):
    """Refuse the calls in this process and every process it starts or execs from now on."""
    program = filter_program(calls)
    packed = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(packed, len(packed))

    class SockFprog(ctypes.Structure):  # pylint: disable=too-few-public-methods
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return ctypes.get_errno()
    return 0


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: refuse_calls.py CALL[,CALL...] -- COMMAND...")
    calls = argv[1].split(",")
    unknown = [call for call in calls if call not in SYSCALLS[0xC000003E]]
    if unknown:
        sys.exit("refuse_calls.py: no system call number for %s" % ", ".join(unknown))
    refused = install(calls)
    if refused:
        print("REFUSED seccomp %s" % errno.errorcode.get(refused, refused), flush=True)
        sys.exit(0)
    # The tests run under this filter are not-run by design: they stay out of make test's list of what this machine
    # refused (tests/unit/conftest.py).
    os.environ["GPUOPS_CALLS_REFUSED_ON_PURPOSE"] = argv[1]
    os.execvp(argv[3], argv[3:])


if __name__ == "__main__":
    main(sys.argv)
