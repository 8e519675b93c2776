"""The network of a shell command when the user turned it on (`bash_network`): outbound only.

The command keeps its own network namespace (bubblewrap's `--unshare-net`, as with the network off), and
slirp4netns gives it a user-mode connection to the outside (`--disable-host-loopback`: the host's loopback,
10.0.2.2 in slirp's terms, is unreachable). The host's own addresses (192.0.2.2 on eth0: a service bound to
all addresses) are made unreachable by a `prohibit` route each in the command's namespace, added before the
command starts (it has no capability to remove them). So no sandboxed command reaches the server's approval
page, its database or any other service of the host, whatever relay it starts.

The sequence: bubblewrap writes the command's pid to `--info-fd` and waits on `--block-fd`; slirp4netns joins
that pid's namespace and says it is ready on `--ready-fd`; the routes are added (`nsenter ... ip route`); a byte
on the block descriptor lets the command start. slirp4netns ends when its `--exit-fd` closes (after the command).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

SLIRP_DNS = "10.0.2.3"
"""slirp4netns's DNS forwarder, the command's only name server (the host's may be a loopback address)."""
SETUP_SECONDS = 10.0
INSTALL = "install slirp4netns (Debian/Ubuntu: `sudo apt-get install slirp4netns`, or run scripts/sandbox.sh as root)"


class NetworkSetupError(RuntimeError):
    """The outbound-only network could not be set up: the command must not run."""


def available() -> str | None:
    """None when outbound-only networking can be set up here, else why not and how to fix it."""
    missing = [name for name in ("slirp4netns", "nsenter", "ip") if shutil.which(name) is None]
    if missing:
        return f"{', '.join(missing)} not found; {INSTALL}"
    return None


def host_addresses() -> list[str]:
    """The host's own IPv4 addresses other than loopback ones (from /proc/net/fib_trie: `/32 host LOCAL`)."""
    try:
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
    except OSError:
        return []
    found: dict[str, None] = {}
    for before, line in zip(lines, lines[1:], strict=False):
        if "/32 host LOCAL" in line and "|--" in before:
            address = before.split("|--", 1)[1].strip()
            if not address.startswith("127."):
                found[address] = None
    return list(found)


class Outbound:
    """One command's outbound-only network: `args()` go on bubblewrap's command line, `fds()` to its process;
    `start(proc)` right after bubblewrap started, `close()` after it ended."""

    def __init__(self) -> None:
        self.info_r, self.info_w = os.pipe()
        self.block_r, self.block_w = os.pipe()
        self.exit_r, self.exit_w = os.pipe()
        self.slirp: subprocess.Popen[bytes] | None = None

    def args(self) -> list[str]:
        return ["--info-fd", str(self.info_w), "--block-fd", str(self.block_r)]

    def fds(self) -> tuple[int, ...]:
        return self.info_w, self.block_r

    def start(self) -> None:
        """Connect the started command's namespace, then let the command run; raises NetworkSetupError (the
        caller kills the waiting command)."""
        _close(self.info_w, self.block_r)  # (the sandbox's ends)
        self.info_w = self.block_r = -1
        deadline = time.monotonic() + SETUP_SECONDS
        pid = self._child_pid(deadline)
        self._await_loopback(pid, deadline)
        ready_r, ready_w = os.pipe()
        try:
            self.slirp = subprocess.Popen(
                ["slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback", "--ready-fd", str(ready_w),
                 "--exit-fd", str(self.exit_r), str(pid), "tap0"],
                pass_fds=(ready_w, self.exit_r), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE)
            os.close(ready_w)
            ready_w = -1
            if _read(ready_r, deadline) != b"1":
                raise NetworkSetupError(f"slirp4netns did not start: {self._slirp_error()}")
        except OSError as exc:
            raise NetworkSetupError(f"slirp4netns could not run ({exc}); {INSTALL}") from None
        finally:
            _close(ready_r, ready_w)
        self._block_host_addresses(pid, deadline)
        os.write(self.block_w, b"1")

    def _child_pid(self, deadline: float) -> int:
        data = b""
        while b"}" not in data:
            chunk = _read(self.info_r, deadline, 4096)
            if not chunk:
                raise NetworkSetupError("the sandbox did not say which process to connect")
            data += chunk
        try:
            return int(json.loads(data)["child-pid"])
        except (ValueError, KeyError, TypeError):
            raise NetworkSetupError(f"the sandbox said {data[:200]!r}, not its process id") from None

    def _await_loopback(self, pid: int, deadline: float) -> None:
        """bubblewrap brings the namespace's loopback up over netlink before it waits on the block descriptor;
        slirp4netns configuring the namespace at the same time makes that fail: wait until lo is up."""
        while "UP" not in _ip(pid, ["link", "show", "lo"], deadline).partition(">")[0]:
            if time.monotonic() > deadline or not os.path.exists(f"/proc/{pid}"):
                raise NetworkSetupError(f"the sandbox's loopback did not come up in {SETUP_SECONDS:.0f} s")
            time.sleep(0.005)

    def _block_host_addresses(self, pid: int, deadline: float) -> None:
        for address in host_addresses():
            _ip(pid, ["route", "add", "prohibit", f"{address}/32"], deadline, f"the host's address {address}")

    def _slirp_error(self) -> str:
        if self.slirp is None:
            return "not started"
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.slirp.wait(timeout=0.5)
        if self.slirp.returncode is None or self.slirp.stderr is None:
            return "no answer"
        return self.slirp.stderr.read(300).decode("utf-8", "replace").strip() or f"exit {self.slirp.returncode}"

    def close(self) -> None:
        """Stop slirp4netns (its exit descriptor closes) and close every descriptor."""
        _close(self.info_r, self.info_w, self.block_r, self.block_w, self.exit_w, self.exit_r)
        self.info_r = self.info_w = self.block_r = self.block_w = self.exit_w = self.exit_r = -1
        if self.slirp is not None:
            try:
                self.slirp.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.slirp.kill()
                self.slirp.wait()
            if self.slirp.stderr is not None:
                self.slirp.stderr.close()


def _ip(pid: int, args: list[str], deadline: float, what: str = "") -> str:
    """`ip ARGS` in `pid`'s network namespace (its user namespace too, when not root); its output. Raises
    NetworkSetupError when `what` is given and it fails."""
    enter = ["nsenter", "-t", str(pid), "-n"] if os.geteuid() == 0 else \
        ["nsenter", "-t", str(pid), "-U", "-n", "--preserve-credentials"]
    try:
        done = subprocess.run([*enter, "ip", *args], capture_output=True, stdin=subprocess.DEVNULL, check=False,
                              timeout=max(1.0, deadline - time.monotonic()))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkSetupError(f"{what or 'the sandbox network'} could not be set up ({exc})") from None
    if what and done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip()[:200]
        raise NetworkSetupError(f"{what} could not be closed off ({why})")
    return done.stdout.decode("utf-8", "replace")


def _read(fd: int, deadline: float, size: int = 1) -> bytes:
    ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
    if not ready:
        raise NetworkSetupError(f"the network setup took over {SETUP_SECONDS:.0f} s")
    return os.read(fd, size)


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
