"""The reaper: ``python -I -S _reaper.py -- CMD ARGS...`` (:func:`reaper_argv`) runs a command so
that no descendant survives it.

A process group is not enough: a child that calls ``setsid()`` (``setsid sleep 1000 &``) or
double-forks a daemon leaves the group, and ``killpg`` misses it. The reaper is a Linux *child
subreaper* (``PR_SET_CHILD_SUBREAPER``): every orphan among the command's descendants is
reparented to it instead of to init, so it can always find them (``/proc/*/stat`` parent links).

- It forks the command and waits. When the command exits, it SIGKILLs every remaining descendant,
  reaps them and exits with the command's status (a signal death is re-raised on itself).
- ``SIGUSR1`` (sent by the host before it gives up on the group, and set as the reaper's
  ``PR_SET_PDEATHSIG``, so it also arrives when the host is SIGKILLed) kills every descendant,
  the command included, at once.
- ``SIGTERM``/``SIGINT``/``SIGHUP`` reach the command: through the process group when the host
  signals the group; the reaper forwards them to the command's own group when it left ours.

Run with ``-I -S`` (stdlib only, fast start), importing only C modules (``_signal``, ``_ctypes``)
and loaded from the bytecode cache: a reaper starts in 5-8 ms of CPU more than a bare interpreter,
against ~24 ms as a script importing ``signal`` and ``ctypes`` (whose Python layers import ``enum``,
``functools`` and ``collections``). Used by the stdio transport and by the workspace's commands;
it lives in the built-in servers' package, the lower of the two layers. Elsewhere than Linux it is
not used (:data:`AVAILABLE`).

**Guardian mode** (``--guardian``, :func:`guardian_argv`): one reaper for a long-lived process and
every process it will ever start, such as the daemon (:mod:`mcpmux.daemon.service`), which then
starts its stdio servers without a reaper each (:func:`per_process_reaper`):

- It has no host: it lives as long as the command, and its command is not killed with a parent.
  The command gets :data:`GUARDIAN_ENV` (the guardian's pid, to be :func:`adopted <adopt_guardian>`),
  its own process group (a signal sent to the guardian is forwarded to it, once) and
  ``PR_SET_PDEATHSIG(SIGTERM)``: a killed guardian stops it cleanly.
- When the command exits, however it ended (SIGKILL included), every remaining descendant (the
  command's servers, and whatever left their groups, orphaned to the guardian) gets SIGTERM, then
  SIGKILL after ``--grace`` seconds.
- ``SIGUSR2`` (:data:`SWEEP_SIGNAL`, sent by the command when it runs nothing) kills every descendant
  that is not the command's own: the strays its stopped servers left behind.
"""

from __future__ import annotations

import _ctypes
import os
import sys
import time

TYPE_CHECKING = False  # typing itself costs a few ms of start-up: mypy honours a local flag too
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
    from types import FrameType
else:  # the C modules under ``signal`` and ``ctypes``: their Python layers (enum, ...) double our start
    import _signal as signal

__all__ = [
    "AVAILABLE",
    "GUARDIAN_ENV",
    "KILL_SIGNAL",
    "SWEEP_SIGNAL",
    "adopt_guardian",
    "guardian_argv",
    "has_children",
    "main",
    "per_process_reaper",
    "reaper_argv",
]

AVAILABLE = sys.platform == "linux" and os.path.isdir("/proc")
KILL_SIGNAL = signal.SIGUSR1
"""Sent to the reaper: kill every descendant now and exit."""
SWEEP_SIGNAL = signal.SIGUSR2
"""Sent to a guardian: kill every descendant outside the command's own tree, and go on."""
GUARDIAN_ENV = "MCPMUX_GUARDIAN"
"""Set for a guardian's command: the guardian's pid."""
_guarded = False
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_SWEEP_PAUSE_S = 0.005
_MAX_SWEEPS = 2000
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _CFunction(_ctypes.CFuncPtr):
    """A C function at an address, called with ``int`` arguments; returns a C ``int``."""

    _flags_ = _ctypes.FUNCFLAG_CDECL


def _prctl() -> _CFunction:
    """libc's ``prctl`` (its arguments are C ``long``s; our ``int`` values are passed in the same registers)."""
    program = _ctypes.dlopen(None, os.RTLD_NOW)  # type: ignore[arg-type]  # dlopen(NULL): the program and its libraries
    return _CFunction(_ctypes.dlsym(program, "prctl"))


class _KillNow(Exception):
    """Raised from the SIGUSR1 handler to leave the wait."""


class _Sweep(Exception):
    """Raised from a guardian's SIGUSR2 handler: end the strays, then wait on."""


# Imported, not run as a script: a script is compiled at every start (~2 ms), a module comes from
# the bytecode cache the host's own import wrote. The file's path stays in the command line (ps).
_BOOT = "import sys;sys.path.append(sys.argv[1].rpartition('/')[0]);import _reaper;sys.exit(_reaper.main(sys.argv[2:]))"


def _python(*options: str) -> list[str]:
    return [sys.executable, "-I", "-S", "-c", _BOOT, os.path.abspath(__file__), *options]


def reaper_argv(argv: list[str]) -> list[str]:
    """``argv`` run under the reaper (unchanged where it is not available)."""
    if not AVAILABLE:
        return list(argv)
    return [*_python("--"), *argv]


def guardian_argv(argv: list[str], *, grace_s: float) -> list[str]:
    """``argv`` run under a guardian (see the module); Linux only (:data:`AVAILABLE`)."""
    return [*_python("--guardian", "--grace", f"{grace_s:g}", "--"), *argv]


def adopt_guardian() -> int | None:
    """In a guardian's command: the guardian's pid, and stdio servers started from now on go without
    a reaper each (:func:`per_process_reaper`); ``None`` when this process has no guardian.

    The variable is removed from the environment either way (no child inherits it), and it is
    trusted only when it names this process's parent.
    """
    global _guarded
    named = os.environ.pop(GUARDIAN_ENV, "")
    if not (AVAILABLE and named.isdigit() and int(named) == os.getppid()):
        return None
    _guarded = True
    return int(named)


def per_process_reaper() -> bool:
    """Whether a stdio server should be started under a reaper of its own (not under a guardian)."""
    return AVAILABLE and not _guarded


def has_children(pid: int) -> bool:
    """Whether process ``pid`` has a live child (``/proc`` parent links; zombies not counted)."""
    return bool(_children_of().get(pid))


def _children_of() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def _descendants(root: int) -> list[int]:
    children = _children_of()
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def _reap(statuses: dict[int, int]) -> bool:
    """Reap every exited child; False once we have no children left."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        statuses[pid] = status


def _terminate_all(statuses: dict[int, int], grace_s: float) -> None:
    """SIGTERM every descendant and wait up to ``grace_s`` for them to exit (reaping what does)."""
    deadline = time.monotonic() + grace_s
    signalled: set[int] = set()
    while time.monotonic() < deadline:
        alive = _descendants(os.getpid())
        for pid in set(alive) - signalled:
            try:
                os.kill(pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                continue
            signalled.add(pid)
        if not _reap(statuses) and not alive:
            return
        time.sleep(_SWEEP_PAUSE_S * 10)


def _kill_all(statuses: dict[int, int], spare: int | None = None) -> None:
    """SIGKILL every descendant until none is left (killed ones' children come to us: we reap);
    with ``spare``, that process and its own descendants are left alone (and not waited for)."""
    me = os.getpid()
    for _ in range(_MAX_SWEEPS):
        alive = _descendants(me)
        if spare is not None:
            kept = {spare, *_descendants(spare)}
            alive = [pid for pid in alive if pid not in kept]
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue  # gone meanwhile, or not ours to kill
        has_children = _reap(statuses)
        if not alive and (not has_children or spare is not None):
            return
        time.sleep(_SWEEP_PAUSE_S)


def _kill_now(_signum: int, _frame: FrameType | None) -> None:
    raise _KillNow


def _forwarder(child: int) -> Callable[[int, FrameType | None], None]:
    def forward(signum: int, _frame: FrameType | None) -> None:
        try:
            group = os.getpgid(child)
            if group != os.getpgrp():
                os.killpg(group, signum)
        except OSError:
            return  # the command is gone: nothing to forward to

    return forward


def _exec(command: list[str], guardian: int | None = None, prctl: _CFunction | None = None) -> None:
    for signum in (*_FORWARDED, signal.SIGUSR1, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())  # a guardian blocks what it waits for
    if guardian is not None and prctl is not None:
        os.setpgid(0, 0)  # signals for the group reach the guardian only, which forwards them once
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != guardian:
            os._exit(137)  # the guardian died before we could watch it: start nothing
        os.environ[GUARDIAN_ENV] = str(guardian)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"mcpmux reaper: cannot start {command[0]!r}: {exc}\n")
        sys.stderr.flush()
    os._exit(127)


def _options(argv: list[str]) -> tuple[bool, float, list[str]]:
    """(guardian mode, grace seconds, command) of ``[--guardian] [--grace S] -- COMMAND...``."""
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        raise SystemExit("_reaper: usage: _reaper.py [--guardian] [--grace SECONDS] -- COMMAND [ARGS...]")
    options, command = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    guardian, grace = False, 0.0
    while options:
        option = options.pop(0)
        if option == "--guardian":
            guardian = True
        elif option == "--grace" and options:
            try:
                grace = max(0.0, float(options.pop(0)))
            except ValueError:
                raise SystemExit("_reaper: --grace takes a number of seconds") from None
        else:
            raise SystemExit(f"_reaper: unknown option {option!r}")
    return guardian, grace, command


def _guard(child: int, statuses: dict[int, int]) -> None:
    """A guardian's wait: until the command exits, reaping orphans and sweeping strays when asked."""
    while True:
        _reap(statuses)
        if child in statuses:
            return
        received = signal.sigtimedwait({SWEEP_SIGNAL, signal.SIGCHLD}, 1.0)
        if received is not None and received.si_signo == SWEEP_SIGNAL:
            _kill_all(statuses, spare=child)


def main(argv: list[str]) -> int:
    """Run the command after ``--``; return its exit code (re-raise the signal that killed it)."""
    guardian, grace_s, command = _options(argv)
    prctl = _prctl()
    prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    host = os.getppid()
    signal.signal(KILL_SIGNAL, _kill_now)
    if guardian:
        signal.pthread_sigmask(signal.SIG_BLOCK, {SWEEP_SIGNAL, signal.SIGCHLD})  # taken by sigtimedwait
    else:
        prctl(_PR_SET_PDEATHSIG, KILL_SIGNAL, 0, 0, 0)
    statuses: dict[int, int] = {}
    child = -1
    try:
        if not guardian and os.getppid() != host:
            return 137  # the host died before we could watch it: start nothing
        me = os.getpid()
        child = os.fork()
        if child == 0:
            _exec(command, me if guardian else None, prctl)
        for signum in _FORWARDED:
            signal.signal(signum, _forwarder(child))
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)  # only the command holds the host's pipes: their EOF means it is gone
        if guardian:
            _guard(child, statuses)
        while child not in statuses:
            pid, status = os.waitpid(-1, 0)
            statuses[pid] = status
    except _KillNow:
        pass
    except ChildProcessError:
        statuses.setdefault(child, 0)
    signal.signal(KILL_SIGNAL, signal.SIG_IGN)
    if grace_s:
        _terminate_all(statuses, grace_s)
    _kill_all(statuses)
    status = statuses.get(child, 9)  # killed by us before it exited: report SIGKILL
    if os.WIFSIGNALED(status):
        died_of = os.WTERMSIG(status)
        if died_of not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be handled: no handler to reset
            signal.signal(died_of, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {died_of})
        os.kill(os.getpid(), died_of)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
