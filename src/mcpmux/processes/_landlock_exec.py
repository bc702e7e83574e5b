"""The Landlock + seccomp launcher: ``python -I -S _landlock_exec.py [--ro P].. [--rw P].. [--no-network] -- CMD``.

Run as a file with ``-I -S`` (stdlib only: no site-packages, no user paths) where bubblewrap cannot
make namespaces. It stays as a small supervisor that kills its whole process group when the host
dies (``PR_SET_PDEATHSIG``), and forks the command, which before ``execve`` restricts itself:

- Landlock: reads (and execution) only beneath ``--ro`` paths, writes only beneath ``--rw`` paths and
  a private temporary directory (``TMPDIR``, and ``HOME`` unless granted); TCP bind/connect denied
  with ``--no-network`` (ABI >= 4); signals and, without network, abstract unix sockets scoped to
  the sandbox (ABI >= 6).
- seccomp (``--no-network``): ``socket(AF_INET|AF_INET6|AF_PACKET)`` and ``io_uring_setup`` fail with
  EACCES, so UDP is blocked too (Landlock only knows TCP).
"""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import signal
import struct
import sys
import tempfile

__all__ = ["landlock_abi", "main", "problem"]

_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446  # same on every arch
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_PDEATHSIG, _PR_SET_SECCOMP, _PR_SET_NO_NEW_PRIVS = 1, 22, 38
_SECCOMP_MODE_FILTER = 2

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_NET_TCP = 0b11  # BIND_TCP | CONNECT_TCP
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1

_DEVICES_RW = ("/dev/null", "/dev/zero", "/dev/full")
_DEVICES_RO = ("/dev/urandom", "/dev/random")
_PROC_RO = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg", "/proc/uptime", "/proc/version",
            "/proc/filesystems", "/proc/sys/kernel", "/proc/sys/vm")  # fmt: skip

# (AUDIT_ARCH_*, __NR_socket, __NR_io_uring_setup, reject x32 syscalls) per machine.
_SECCOMP_ARCH = {"x86_64": (0xC000003E, 41, 425, True), "aarch64": (0xC00000B7, 198, 425, False)}
_BLOCKED_FAMILIES = (2, 10, 17)  # AF_INET, AF_INET6, AF_PACKET
_EACCES = 13

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def landlock_abi() -> int:
    """The Landlock ABI version of the running kernel (0: none, or disabled)."""
    version = int(_libc.syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION))
    return max(version, 0)


def problem() -> str | None:
    """Why this launcher cannot sandbox here, or None."""
    if sys.platform != "linux":
        return "Landlock and seccomp are Linux-only"
    if platform.machine() not in _SECCOMP_ARCH:
        return f"no seccomp filter for machine {platform.machine()!r}"
    if landlock_abi() < 1:
        return "the kernel has no Landlock (Linux >= 5.13 with landlock in the lsm= boot list)"
    return None


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def _restrict_filesystem(readable: list[str], writable: list[str], network: bool) -> None:
    abi = landlock_abi()
    handled = (1 << 13) - 1
    handled |= (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0) | (_IOCTL_DEV if abi >= 5 else 0)
    net = _NET_TCP if abi >= 4 and not network else 0
    scoped = (_SCOPE_SIGNAL | (0 if network else _SCOPE_ABSTRACT_UNIX)) if abi >= 6 else 0
    attr = struct.pack("=QQQ", handled, net, scoped)[: 24 if abi >= 6 else 16 if abi >= 4 else 8]
    ruleset = _check(_libc.syscall(_LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), 0), "landlock ruleset")
    try:
        rules = [(path, _READ) for path in readable] + [(path, handled) for path in writable]
        rules += [(path, _READ | _WRITE_FILE | _TRUNCATE) for path in _DEVICES_RW]
        rules += [(path, _READ) for path in (*_DEVICES_RO, *_PROC_RO, f"/proc/{os.getpid()}")]
        for path, access in rules:
            _allow(ruleset, path, access & handled)
        _check(_libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock restrict_self")
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # a configured path that does not exist grants nothing
    try:
        if not os.path.isdir(path):
            access &= _FILE_RIGHTS
        rule = struct.pack("=Qi", access, fd)
        _check(_libc.syscall(_LANDLOCK_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0), f"landlock rule {path}")
    finally:
        os.close(fd)


def _deny_inet_sockets() -> None:
    arch, nr_socket, nr_io_uring, reject_x32 = _SECCOMP_ARCH[platform.machine()]
    errno = 0x00050000 | _EACCES
    allow, kill = 0x7FFF0000, 0x80000000
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    program = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, kill), (ld, 0, 0, 0)]
    if reject_x32:
        program.append((jge, 0, 1, 0x40000000))
        program.append((ret, 0, 0, errno))
    program += [(jeq, 0, 1, nr_io_uring), (ret, 0, 0, errno), (jeq, 1, 0, nr_socket), (ret, 0, 0, allow)]
    program.append((ld, 0, 0, 16))  # args[0] (the address family), low 32 bits on little-endian
    families = _BLOCKED_FAMILIES
    for index, family in enumerate(families):
        program.append((jeq, len(families) - index, 0, family))
    program += [(ret, 0, 0, allow), (ret, 0, 0, errno)]
    filters = b"".join(struct.pack("=HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters, len(filters))
    fprog = struct.pack("=HxxxxxxQ", len(program), ctypes.addressof(buffer))
    _check(_libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog, 0, 0), "seccomp filter")


def _parse(argv: list[str]) -> tuple[list[str], list[str], bool, list[str]]:
    readable: list[str] = []
    writable: list[str] = []
    network = True
    index = 0
    while index < len(argv) and argv[index] != "--":
        option = argv[index]
        if option == "--no-network":
            network = False
        elif option in ("--ro", "--rw") and index + 1 < len(argv):
            (readable if option == "--ro" else writable).append(argv[index + 1])
            index += 1
        else:
            raise SystemExit(f"_landlock_exec: unknown option {option!r}")
        index += 1
    if index + 1 >= len(argv):
        raise SystemExit("_landlock_exec: no command after '--'")
    return readable, writable, network, argv[index + 1 :]


def _environment(granted: list[str], tmp: str) -> dict[str, str]:
    """The command's environment: ``TMPDIR`` private, and ``HOME`` too unless it was granted.

    bwrap hides an ungranted home (ENOENT); Landlock leaves it visible but unreadable (EACCES),
    which programs such as git treat as fatal. An empty private home behaves like bwrap's.
    """
    env = {**os.environ, "TMPDIR": tmp}
    home = os.path.realpath(env.get("HOME", "/"))
    if not any(home == path or home.startswith(path.rstrip("/") + "/") for path in map(os.path.realpath, granted)):
        env["HOME"] = tmp
    return env


def _kill_group(_signum: int = 0, _frame: object = None) -> None:
    os.killpg(0, signal.SIGKILL)


def _run_child(readable: list[str], writable: list[str], network: bool, command: list[str], tmp: str) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)  # SIG_IGN would survive execve
    try:
        _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _restrict_filesystem(readable, [*writable, tmp], network)
        if not network:
            _deny_inet_sockets()
        os.execve(command[0], command, _environment(readable + writable, tmp))
    except OSError as exc:
        sys.stderr.write(f"mcpmux sandbox (landlock): cannot start {command[0]!r}: {exc}\n")
        sys.stderr.flush()
    os._exit(127)


def main(argv: list[str]) -> int:
    """Run the command sandboxed; return its exit code (re-raise the signal that killed it)."""
    readable, writable, network, command = _parse(argv)
    if os.getpgrp() != os.getpid():
        os.setpgid(0, 0)  # the group killed with the host must be ours alone, never the caller's
    host = os.getppid()
    signal.signal(signal.SIGUSR1, _kill_group)
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGUSR1, 0, 0, 0), "pdeathsig")
    if os.getppid() != host:
        _kill_group()
    # The host signals the whole group: the command handles SIGTERM, the supervisor waits for it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tmp = tempfile.mkdtemp(prefix="mcpmux-sandbox-")
    pid = os.fork()
    if pid == 0:
        _run_child(readable, writable, network, command, tmp)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    _, status = os.waitpid(pid, 0)
    shutil.rmtree(tmp, ignore_errors=True)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
