"""The reaper and its guardian mode, as real processes checked by PID (Linux: a child subreaper)."""

from __future__ import annotations

import _ctypes
import _signal
import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from mcpmux.processes import _reaper as reaper
from mcpmux.processes._reaper import AVAILABLE, GUARDIAN_ENV, SWEEP_SIGNAL, guardian_argv, reaper_argv

pytestmark = [
    pytest.mark.subprocess,
    pytest.mark.skipif(not AVAILABLE, reason="the reaper is a Linux child subreaper"),
]

WAIT_S = 60.0

# The command of a guardian: a child that handles SIGTERM (and says so), one that ignores it, and a
# stray double-forked into a session of its own; their pids and what it sees of its guardian are
# written to OUT once the polite child's handler is in place (a loaded machine ran the guardian's SIGTERM
# before it once); it exits with code 3 when a line arrives on stdin. The grace (5 s, SIGTERM to SIGKILL)
# is what the polite child has to write its file on a loaded machine.
COMMAND = r"""
import os, signal, sys, time
out = sys.argv[1]

def spawn(body):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        body()
        os._exit(0)
    return pid

def polite():
    def bye(*_):
        open(out + ".polite-term", "w").close()
        os._exit(0)
    signal.signal(signal.SIGTERM, bye)
    open(out + ".polite-ready", "w").close()  # its handler is in place: a SIGTERM from now on is caught
    while True:
        time.sleep(1)

def stubborn():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)

def stray():
    if os.fork() == 0:
        with open(out + ".stray.tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(out + ".stray.tmp", out + ".stray")  # whole: the parent reads it once it exists
        while True:
            time.sleep(1)
    os._exit(0)

polite_pid, stubborn_pid = spawn(polite), spawn(stubborn)
os.waitpid(spawn(stray), 0)
while not (os.path.exists(out + ".stray") and os.path.exists(out + ".polite-ready")):
    time.sleep(0.01)
with open(out + ".tmp", "w") as f:
    f.write(" ".join(map(str, [polite_pid, stubborn_pid, int(open(out + ".stray").read()),
                               os.environ.get("GUARDIAN_ENV", "-"), os.getpgrp(), os.getpid()])))
os.rename(out + ".tmp", out)
sys.stdin.readline()
sys.exit(3)
""".replace("GUARDIAN_ENV", GUARDIAN_ENV)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait(predicate: object, what: str) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def test_a_command_killed_by_sigkill_is_reported_so_not_as_a_crash() -> None:
    done = subprocess.run(reaper_argv(["sh", "-c", "kill -9 $$"]), capture_output=True, timeout=WAIT_S)
    assert done.returncode == -signal.SIGKILL
    assert b"Traceback" not in done.stderr


@pytest.mark.slow
def test_a_guardian_sweeps_strays_on_request_then_ends_everything_politely_first(tmp_path: Path) -> None:
    script, out = tmp_path / "command.py", tmp_path / "pids"
    script.write_text(COMMAND, encoding="utf-8")
    guardian = subprocess.Popen(
        guardian_argv([sys.executable, str(script), str(out)], grace_s=5), stdin=subprocess.PIPE, start_new_session=True
    )
    pids: list[int] = []
    try:
        _wait(out.exists, "the command to start its children")
        polite, stubborn, stray, named, group, command = (int(x) for x in out.read_text().split())
        pids = [polite, stubborn, stray, command]
        assert (named, group) == (guardian.pid, command)  # adopted by name; a process group of its own
        assert psutil.Process(stray).ppid() == guardian.pid  # orphaned to the guardian, not to init
        guardian.send_signal(SWEEP_SIGNAL)
        _wait(lambda: _gone(stray), "the stray to be swept")
        assert not any(_gone(pid) for pid in (polite, stubborn, command)), "the sweep touched the command's own"
        assert guardian.stdin is not None
        guardian.stdin.write(b"exit\n")
        guardian.stdin.close()
        assert guardian.wait(WAIT_S) == 3  # the command's exit code
        assert (tmp_path / "pids.polite-term").exists(), "the polite child got no SIGTERM first"
        assert _gone(polite) and _gone(stubborn), "a child outlived the command and its guardian"
    finally:
        if guardian.poll() is None:
            guardian.kill()
            guardian.wait(WAIT_S)
        _kill_all(pids)


@pytest.mark.slow
def test_a_guardian_forwards_a_signal_to_its_command_once(tmp_path: Path) -> None:
    script = tmp_path / "count.py"
    script.write_text(
        "import signal, sys, time\n"
        "count = []\n"
        "signal.signal(signal.SIGTERM, lambda *_: count.append(1))\n"
        "print('ready', flush=True)\n"
        "deadline = time.monotonic() + 2\n"
        "while not count or time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "sys.exit(10 + len(count))\n",
        encoding="utf-8",
    )
    guardian = subprocess.Popen(
        guardian_argv([sys.executable, str(script)], grace_s=1), stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert guardian.stdout is not None
        assert guardian.stdout.readline() == b"ready\n"
        os.killpg(guardian.pid, signal.SIGTERM)  # as a terminal or a service manager signals the group
        assert guardian.wait(WAIT_S) == 11
    finally:
        if guardian.poll() is None:
            guardian.kill()
            guardian.wait(WAIT_S)
        if guardian.stdout is not None:
            guardian.stdout.close()


def test_adopt_guardian_trusts_only_its_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    import mcpmux.processes._reaper as reaper

    monkeypatch.setattr(reaper, "_guarded", False)
    monkeypatch.setenv(GUARDIAN_ENV, str(os.getppid() + 1))
    assert reaper.adopt_guardian() is None
    assert GUARDIAN_ENV not in os.environ and reaper.per_process_reaper()
    monkeypatch.setenv(GUARDIAN_ENV, str(os.getppid()))
    assert reaper.adopt_guardian() == os.getppid()
    assert GUARDIAN_ENV not in os.environ and not reaper.per_process_reaper()


def test_has_children_sees_live_children_only() -> None:
    # In a fresh process of its own: pytest's process may have children of other tests' making.
    script = (
        "import os, signal, subprocess, sys, time\n"
        "from mcpmux.processes._reaper import has_children\n"
        "me = os.getpid()\n"
        "assert not has_children(me), 'a child before any was started'\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        "assert has_children(me), 'the live child not seen'\n"
        "os.kill(child.pid, signal.SIGKILL)\n"
        "deadline = time.monotonic() + 60\n"
        "while time.monotonic() < deadline:\n"
        "    with open(f'/proc/{child.pid}/stat') as stat:\n"
        "        if stat.read().rsplit(')', 1)[1].split()[0] == 'Z':\n"
        "            break\n"
        "    time.sleep(0.01)\n"
        "assert not has_children(me), 'a zombie counted as a live child'\n"
        "child.wait()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr


# The reaper's start is a second interpreter start for every stdio server. It imports the C modules
# under ``signal`` and ``ctypes`` (private to CPython) and comes from the bytecode cache: these
# tests fail when a change brings the Python layers back, or when CPython changes what it uses.
PYTHON_LAYERS = {"enum", "signal", "ctypes", "functools", "collections", "typing"}
REAPER_SOURCE = Path(reaper.__file__).read_text()


def _used_attributes(module: str) -> set[str]:
    tree = ast.parse(REAPER_SOURCE)
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == module
    }


def test_a_reaper_starts_without_the_python_layers_and_imports_itself_as_a_cached_module() -> None:
    argv = reaper_argv([sys.executable, "-I", "-S", "-c", "raise SystemExit(4)"])
    assert argv[0] == sys.executable and reaper.__file__ in argv  # ps and the tests find it by its file
    started = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True, timeout=WAIT_S)
    assert started.returncode == 4, started.stderr
    reaper_imports = started.stderr.split("| _reaper\n")[0]  # the reaper's own lines end at its module's
    lines = [line for line in reaper_imports.splitlines() if line.startswith("import time:")]
    imported = {line.rsplit("|", 1)[1].strip() for line in lines}
    assert "_reaper" in started.stderr and {"_ctypes", "os"} <= imported, started.stderr
    assert not imported & PYTHON_LAYERS, sorted(imported & PYTHON_LAYERS)


def test_the_c_modules_the_reaper_uses_still_have_every_name_with_the_public_value() -> None:
    signal_names = _used_attributes("signal")
    assert {"signal", "SIGUSR1", "SIG_DFL", "sigtimedwait", "pthread_sigmask"} <= signal_names  # the scan works
    for name in signal_names:
        public, private = getattr(signal, name), getattr(_signal, name)
        assert private == public or callable(private), f"_signal.{name} = {private!r}, signal.{name} = {public!r}"
    ctypes_names = _used_attributes("_ctypes")
    assert ctypes_names == {"CFuncPtr", "FUNCFLAG_CDECL", "dlopen", "dlsym"}, ctypes_names
    for name in ctypes_names:
        assert hasattr(_ctypes, name), f"_ctypes.{name} is gone (CPython {sys.version})"


def test_prctl_through_the_bare_c_function_sets_what_it_is_asked() -> None:
    # in a child: a subreaper and a parent-death signal must not outlive the check in this process
    check = f"""
import ctypes, sys
sys.path.append({str(Path(reaper.__file__).parent)!r})
import _reaper
prctl = _reaper._prctl()
assert prctl(36, 1, 0, 0, 0) == 0 and prctl(1, 10, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG
libc = ctypes.CDLL(None)
subreaper, deathsig = ctypes.c_int(), ctypes.c_int()
libc.prctl(37, ctypes.byref(subreaper), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
libc.prctl(2, ctypes.byref(deathsig), 0, 0, 0)  # PR_GET_PDEATHSIG
assert prctl(12345, 0, 0, 0, 0) == -1  # an unknown option: EINVAL, returned as a C int
print(subreaper.value, deathsig.value)
"""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", check], capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0 and done.stdout.split() == ["1", "10"], done.stderr
