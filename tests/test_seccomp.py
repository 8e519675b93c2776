"""The seccomp filter under every bubblewrap command (tools/seccomp.py), run by a classic-BPF interpreter over
random system calls of every architecture: only Unix sockets that could connect somewhere are refused.
The real sandbox's behaviour is tested in tests/test_sandbox.py (test_no_unix_socket_reaches_the_host)."""

from __future__ import annotations

import socket
import struct

from hypothesis import given
from hypothesis import strategies as st

from tools import seccomp

ARCHES = {0xC000003E: (41, 53, None), 0x40000003: (359, 360, 102), 0xC00000B7: (198, 199, None),
          0x40000028: (281, 288, None), 0xC00000F3: (198, 199, None), 0xC0000102: (198, 199, None),
          0xC0000015: (326, 327, 102), 0x80000016: (359, 360, 102)}
BIG_ENDIAN = {0x80000016}
X86_64, X32_BIT = 0xC000003E, 0x40000000


def run_filter(arch: int, nr: int, args: tuple[int, ...]) -> int:
    """What the filter returns for one system call (struct seccomp_data as the kernel lays it out)."""
    word = ">Q" if arch in BIG_ENDIAN else "<Q"
    data = struct.pack("<iIQ", nr - (1 << 32) if nr >= 1 << 31 else nr, arch, 0)
    data += b"".join(struct.pack(word, a) for a in args)
    program = seccomp.unix_socket_filter()
    pc, acc = 0, 0
    for _ in range(len(program) // 8 + 1):
        code, jt, jf, k = struct.unpack_from("=HBBI", program, pc * 8)
        pc += 1
        if code == 0x20:  # ld [k]: the kernel reads 32-bit words in host order
            acc = struct.unpack_from("=I" if arch not in BIG_ENDIAN else ">I", data, k)[0] if k >= 16 else \
                struct.unpack_from("<I", data, k)[0]
        elif code == 0x54:
            acc &= k
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected BPF op {code:#x}")
    raise AssertionError("the filter ran off its end")


def expected(arch: int, nr: int, args: tuple[int, ...]) -> int:
    if arch not in ARCHES:
        return seccomp.RET_KILL_PROCESS
    sock, pair, socketcall = ARCHES[arch]
    if arch == X86_64:
        nr &= ~X32_BIT
    family, kind = args[0] & 0xFFFFFFFF, args[1] & 0xF
    if nr == seccomp.IO_URING_SETUP:
        return seccomp.RET_EPERM
    if nr == sock and family == socket.AF_UNIX:
        return seccomp.RET_EPERM
    if nr == pair and family == socket.AF_UNIX and kind not in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
        return seccomp.RET_EPERM
    if nr == socketcall and args[0] & 0xFFFFFFFF in (1, 8):
        return seccomp.RET_EPERM
    return seccomp.RET_ALLOW


interesting_nrs = st.sampled_from([41, 53, 102, 198, 199, 281, 288, 326, 327, 359, 360, 425])
nrs = st.one_of(interesting_nrs, interesting_nrs.map(lambda n: n | X32_BIT), st.integers(0, 2**32 - 1))
arg = st.one_of(st.sampled_from([0, 1, 2, 3, 5, 8, 10, 16, 1 | 0x80000, 2 | 0x800, 5 | 0x80800, 1 | (1 << 32)]),
                st.integers(0, 2**64 - 1))


@given(arch=st.one_of(st.sampled_from(sorted(ARCHES)), st.integers(0, 2**32 - 1)), nr=nrs,
       args=st.tuples(arg, arg, arg, arg, arg, arg))
def test_the_filter_refuses_exactly_the_unix_sockets_that_could_connect(arch: int, nr: int,
                                                                         args: tuple[int, ...]) -> None:
    assert run_filter(arch, nr, args) == expected(arch, nr, args)


def test_the_examples() -> None:
    unix, stream, dgram = socket.AF_UNIX, socket.SOCK_STREAM, socket.SOCK_DGRAM
    assert run_filter(X86_64, 41, (unix, stream, 0, 0, 0, 0)) == seccomp.RET_EPERM  # socket(AF_UNIX)
    assert run_filter(X86_64, 41 | X32_BIT, (unix, stream, 0, 0, 0, 0)) == seccomp.RET_EPERM  # x32
    assert run_filter(X86_64, 41, (socket.AF_INET, stream, 0, 0, 0, 0)) == seccomp.RET_ALLOW
    assert run_filter(X86_64, 53, (unix, stream | socket.SOCK_CLOEXEC, 0, 0, 0, 0)) == seccomp.RET_ALLOW
    assert run_filter(X86_64, 53, (unix, dgram, 0, 0, 0, 0)) == seccomp.RET_EPERM  # could sendto() anywhere
    assert run_filter(0x40000003, 102, (1, 0, 0, 0, 0, 0)) == seccomp.RET_EPERM  # i386 socketcall(SYS_SOCKET)
    assert run_filter(0x80000016, 359, (unix, stream, 0, 0, 0, 0)) == seccomp.RET_EPERM  # big-endian s390x
    assert run_filter(0x12345678, 0, (0,) * 6) == seccomp.RET_KILL_PROCESS
