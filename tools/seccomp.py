"""The seccomp filter under every bubblewrap command: no Unix-domain socket can reach outside the sandbox.

A read-only bind does not stop `connect()` on a socket file, and the host's sockets lie all over the file
system (/var/snap/lxd/common/lxd/unix.socket, /var/lib/mysql/mysql.sock, ~/.docker/run/docker.sock): a list
of known places would always miss one. So a command cannot make a Unix socket that could connect anywhere:

- `socket(AF_VSOCK, ...)` fails (a virtual machine's channel to its host), and so does `socket(AF_NETLINK,
  ...)` with the network off (the kernel's own sockets: routes, interfaces, audit; nothing a command without a
  network needs);
- `socket(AF_UNIX, ...)` fails with EPERM (network on or off: Unix sockets are local IPC, not network, and
  the host's services behind them, docker, lxd, databases, are root-equivalent or hold data);
- `socketpair(AF_UNIX, SOCK_STREAM or SOCK_SEQPACKET)` still works (python's asyncio and multiprocessing,
  node's child processes, shells): such a pair is connected to itself and `connect()` on it fails
  (EISCONN). A datagram pair could be re-connected or `sendto()` a host socket, so it fails (EPERM);
- `socketcall(SYS_SOCKET / SYS_SOCKETPAIR)` (32-bit x86, s390x, ppc: the family is behind a pointer that
  a filter cannot read) fails, and so does `io_uring_setup` (io_uring makes sockets without the socket
  system call; programs fall back to plain system calls).

Abstract-namespace Unix sockets belong to a network namespace: with the network off (`--unshare-net`)
the host's are out of reach anyway; with it on, the `socket()` rule covers them.

The filter is a classic BPF program (what `bwrap --seccomp FD` reads), built here for the architectures
Linux runs on: the host's own and its 32-bit compatibility one (x32 numbers are x86-64's plus a bit).
A system call of any other architecture kills the process.
"""

from __future__ import annotations

import functools
import platform
import socket
import struct
import sys

# linux/filter.h, linux/seccomp.h
_LD_W_ABS = 0x20
_ALU_AND_K = 0x54
_JEQ_K = 0x15
_RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_NR, _ARCH, _ARGS = 0, 4, 16  # offsets in struct seccomp_data (args are 64-bit: 16, 24, ...)
_X32_BIT = 0x40000000
_SYS_SOCKET, _SYS_SOCKETPAIR = 1, 8  # socketcall's first argument
IO_URING_SETUP = 425  # the same number on every architecture
AF_NETLINK, AF_VSOCK = 16, 40  # (socket.AF_VSOCK is missing on some builds)


@functools.lru_cache(maxsize=1)
def _arches() -> tuple[tuple[int, int, int, int | None, bool], ...]:
    """(AUDIT_ARCH_*, socket, socketpair, socketcall or None, big endian) for each architecture."""
    return (
        (0xC000003E, 41, 53, None, False),  # x86_64 (and x32, its numbers with _X32_BIT)
        (0x40000003, 359, 360, 102, False),  # i386
        (0xC00000B7, 198, 199, None, False),  # aarch64
        (0x40000028, 281, 288, None, False),  # arm (EABI)
        (0xC00000F3, 198, 199, None, False),  # riscv64
        (0xC0000102, 198, 199, None, False),  # loongarch64
        (0xC0000015, 326, 327, 102, False),  # ppc64le
        (0x80000016, 359, 360, 102, True),  # s390x
    )


HOST_MACHINES = frozenset({"x86_64", "amd64", "i386", "i686", "aarch64", "arm64", "armv7l", "armv8l", "riscv64",
                           "loongarch64", "ppc64le", "s390x"})
"""Machines whose system call numbers the filter knows (on any other, no filter: `available()` says so)."""


def available() -> bool:
    return sys.platform.startswith("linux") and platform.machine().lower() in HOST_MACHINES


class _Program:
    """A tiny assembler: instructions with jumps to labels, resolved when the program is packed."""

    def __init__(self) -> None:
        self.code: list[tuple[int, str | int, str | int, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def op(self, code: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        self.code.append((code, jt, jf, k))

    def pack(self) -> bytes:
        out = bytearray()
        for at, (code, jt, jf, k) in enumerate(self.code):
            jumps = [self.labels[j] - at - 1 if isinstance(j, str) else j for j in (jt, jf)]
            if not all(0 <= j <= 255 for j in jumps):
                raise ValueError("seccomp jump out of range")
            out += struct.pack("=HBBI", code, jumps[0], jumps[1], k & 0xFFFFFFFF)
        return bytes(out)


@functools.lru_cache(maxsize=2)
def unix_socket_filter(network: bool = False) -> bytes:
    """The compiled filter (struct sock_filter[]), see the module's docstring (`network`: netlink allowed)."""
    p = _Program()
    p.op(_LD_W_ABS, _ARCH)
    for i, (arch, *_rest) in enumerate(_arches()):
        p.op(_JEQ_K, arch, jt=f"arch{i}")
    p.op(_RET_K, RET_KILL_PROCESS)
    for i, (arch, sock, pair, socketcall, big) in enumerate(_arches()):
        low = 4 if big else 0  # the low 32 bits of a 64-bit argument
        p.label(f"arch{i}")
        p.op(_LD_W_ABS, _NR)
        if arch == 0xC000003E:
            p.op(_ALU_AND_K, ~_X32_BIT)
        p.op(_JEQ_K, sock, jt=f"socket{i}")
        p.op(_JEQ_K, pair, jt=f"pair{i}")
        p.op(_JEQ_K, IO_URING_SETUP, jt="deny")
        if socketcall is not None:
            p.op(_JEQ_K, socketcall, jt=f"socketcall{i}")
        p.op(_RET_K, RET_ALLOW)
        p.label(f"socket{i}")  # socket(family, ...): no AF_UNIX
        p.op(_LD_W_ABS, _ARGS + low)
        p.op(_JEQ_K, socket.AF_UNIX, jt="deny")
        p.op(_JEQ_K, AF_VSOCK, jt="deny")
        if not network:
            p.op(_JEQ_K, AF_NETLINK, jt="deny")
        p.op(_RET_K, RET_ALLOW)
        p.label(f"pair{i}")  # socketpair(family, type, ...): AF_UNIX only connected (stream, seqpacket)
        p.op(_LD_W_ABS, _ARGS + low)
        p.op(_JEQ_K, socket.AF_UNIX, jf="allow")
        p.op(_LD_W_ABS, _ARGS + 8 + low)
        p.op(_ALU_AND_K, 0xF)  # SOCK_TYPE_MASK: without SOCK_NONBLOCK / SOCK_CLOEXEC
        p.op(_JEQ_K, socket.SOCK_STREAM, jt="allow")
        p.op(_JEQ_K, socket.SOCK_SEQPACKET, jt="allow")
        p.op(_RET_K, RET_EPERM)
        if socketcall is not None:
            p.label(f"socketcall{i}")
            p.op(_LD_W_ABS, _ARGS + low)
            p.op(_JEQ_K, _SYS_SOCKET, jt="deny")
            p.op(_JEQ_K, _SYS_SOCKETPAIR, jt="deny")
            p.op(_RET_K, RET_ALLOW)
    p.label("allow")
    p.op(_RET_K, RET_ALLOW)
    p.label("deny")
    p.op(_RET_K, RET_EPERM)
    return p.pack()
