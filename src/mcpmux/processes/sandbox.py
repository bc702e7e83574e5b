"""Sandboxed stdio children: bubblewrap when it works here, else Landlock + seccomp, else a loud refusal.

A sandbox wraps the child's argv; the transport spawns whatever :func:`sandbox_command` returns.
The program keeps read-only access to what it needs to run (system directories, a few ``/etc``
files, its own install prefix), plus the configured ``filesystem`` (read) and ``writable`` paths.

- ``bubblewrap``: a private mount namespace showing only those paths, a fresh ``/tmp``, a minimal
  ``/dev`` and its own ``/proc``; its own pid namespace, killed with the host (``--die-with-parent``);
  no network namespace unless ``network: true``.
- ``landlock``: for machines where bwrap cannot create namespaces (Docker's seccomp profile, Ubuntu
  24.04's AppArmor). The launcher ``_landlock_exec`` restricts file access (everything else stays
  visible but unreadable), TCP bind/connect and, through seccomp, every IPv4/IPv6 socket (UDP too);
  it kills the child's process group when the host dies.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcpmux.config.effective import effective_sandbox, with_effective_sandbox
from mcpmux.config.models import SandboxConfig, StdioServerConfig
from mcpmux.errors import TransportError
from mcpmux.processes import _landlock_exec

__all__ = [
    "BACKEND_ENV_VAR",
    "SYSTEM_PATHS",
    "SandboxBackend",
    "bwrap_argv",
    "effective_sandbox",
    "install_prefixes",
    "landlock_argv",
    "package_runner_note",
    "sandbox_backend",
    "sandbox_command",
    "with_effective_sandbox",
]

logger = logging.getLogger("mcpmux.transports")

BackendName = Literal["bubblewrap", "landlock", "none"]
BACKEND_ENV_VAR = "MCPMUX_SANDBOX_BACKEND"
"""Forces a backend (``bubblewrap`` or ``landlock``) instead of the first that works; for tests and doctors."""
PROBE_TIMEOUT_S = 10.0
APPARMOR_USERNS_SYSCTL = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
SYSTEM_PATHS: tuple[str, ...] = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/homebrew",
    "/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf", "/etc/nsswitch.conf", "/etc/passwd",
    "/etc/group", "/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/crypto-policies", "/etc/ld.so.cache",
    "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone", "/etc/alternatives",
    "/etc/os-release", "/etc/mime.types", "/etc/gitconfig",
)  # fmt: skip
"""Read-only in every sandbox when they exist: what programs need to load, resolve names and verify TLS."""
_SCRIPT_SUFFIXES = (".js", ".mjs", ".cjs", ".py", ".pyz", ".ts")
PACKAGE_RUNNERS = frozenset({"npx", "uvx", "bunx", "pnpx", "pipx"})
"""Commands that fetch and cache a package before running it: a sandbox hides both cache and network."""
_RUNNER_SUBCOMMANDS = {"uv": ("tool", "run"), "pnpm": ("dlx",), "yarn": ("dlx",), "bun": ("x",), "npm": ("exec", "x")}
_SHEBANG_BYTES = 256


@dataclass(frozen=True, slots=True)
class SandboxBackend:
    """The sandbox backend this machine offers (what ``mcpmux doctor`` shows).

    Attributes:
        name: ``bubblewrap``, ``landlock`` or ``none``.
        enforces: what a sandboxed child is denied, one phrase each.
        unavailable: ``(backend, why not)`` for every backend that was tried and does not work here.
    """

    name: BackendName
    enforces: tuple[str, ...]
    unavailable: tuple[tuple[str, str], ...] = ()

    def explain(self) -> str:
        """One line: the backend and why the better ones are not used."""
        why = "; ".join(f"{name}: {reason}" for name, reason in self.unavailable)
        return f"{self.name}" + (f" ({why})" if why else "")


_BWRAP_ENFORCES = (
    "filesystem: only system dirs, the program's prefix and configured paths are visible",
    "writes only to 'writable' paths and a private /tmp",
    "network: own empty network namespace unless network: true",
    "own pid namespace; killed with the host",
)
_LANDLOCK_ENFORCES = (
    "filesystem: reads only in system dirs, the program's prefix and configured paths (Landlock)",
    "writes only to 'writable' paths (Landlock)",
    "network: TCP bind/connect denied (Landlock); IPv4/IPv6 sockets and io_uring denied (seccomp)",
    "signals and abstract unix sockets scoped to the sandbox (Landlock ABI >= 6)",
    "process group killed with the host (no pid namespace: a descendant calling setsid() escapes)",
)


def sandbox_command(server: StdioServerConfig, executable: str, env: Mapping[str, str]) -> list[str]:
    """The argv that runs ``executable`` with the server's args inside its sandbox (bare if none enabled).

    Raises:
        TransportError: the sandbox is required and no backend works on this machine.
    """
    sandbox = server.security.sandbox if server.security else None
    argv = [executable, *server.args]
    if sandbox is None or not sandbox.enabled:
        return argv
    backend = sandbox_backend()
    cwd = str(server.cwd) if server.cwd is not None else None
    if backend.name == "bubblewrap":
        return bwrap_argv(executable, server.args, sandbox, cwd, env)
    if backend.name == "landlock":
        return landlock_argv(executable, server.args, sandbox, cwd, env)
    reason = backend.explain()
    if sandbox.required:
        raise TransportError(
            server.name,
            f"sandbox required but no backend works here: {reason}",
            hint="install bubblewrap (apt-get install bubblewrap) and allow user namespaces, "
            "or set security.sandbox.required: false to run it unsandboxed",
        )
    logger.warning("server %r runs WITHOUT a sandbox (required: false): %s", server.name, reason)
    return argv


def package_runner_note(server: StdioServerConfig) -> str | None:
    """Why a sandboxed package runner (``npx -y``, ``uvx``, ...) may exit or hang, or ``None``.

    Its failure says little ("exited with code 1", a timeout): the sandbox gives it an empty home
    (no package cache) and, unless ``network: true``, no network to download the package.
    """
    sandbox = server.security.sandbox if server.security else None
    if sandbox is None or not sandbox.enabled:
        return None
    runner = os.path.basename(server.command)
    if runner.endswith(".cmd"):
        runner = runner[:-4]
    first = server.args[0] if server.args else ""
    if runner not in PACKAGE_RUNNERS and first not in _RUNNER_SUBCOMMANDS.get(runner, ()):
        return None
    hidden = "its package cache" + ("" if sandbox.network else " and the network")
    grant = "security.sandbox.filesystem" + ("" if sandbox.network else " and set network: true")
    return (
        f"{runner} runs inside the sandbox, which hides {hidden}: install the package and run its binary, "
        f"grant its cache in {grant}, or turn the sandbox off for this server"
    )


def command_wrapper(
    name: str, sandbox: SandboxConfig | None, root: Path
) -> Callable[[Sequence[str], Path], list[str]] | None:
    """A wrapper that runs any command inside ``sandbox`` with ``root`` writable (the built-in
    workspace's commands), or ``None`` when the sandbox is off.

    Raises:
        TransportError: the sandbox is required and no backend works on this machine.
    """
    if sandbox is None or not sandbox.enabled:
        return None
    backend = sandbox_backend()
    if backend.name == "none":
        if sandbox.required:
            raise TransportError(name, f"sandbox required but no backend works here: {backend.explain()}")
        logger.warning("built-in %r runs commands WITHOUT a sandbox (required: false): %s", name, backend.explain())
        return None
    boxed = sandbox.model_copy(update={"writable": (*sandbox.writable, str(root))})
    build = bwrap_argv if backend.name == "bubblewrap" else landlock_argv

    def wrap(argv: Sequence[str], cwd: Path) -> list[str]:
        return build(argv[0], argv[1:], boxed, str(cwd), os.environ)

    return wrap


def bwrap_argv(
    command_path: str, args: Sequence[str], sandbox: SandboxConfig, cwd: str | None, env: Mapping[str, str]
) -> list[str]:
    """The ``bwrap`` command line that runs ``command_path args`` inside ``sandbox``."""
    argv = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid"]
    argv += ["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not sandbox.network:
        argv.append("--unshare-net")
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in SYSTEM_PATHS:
        # Merged-/usr systems make /bin, /lib* symlinks: recreate them rather than bind a second copy.
        if os.path.islink(path) and path.count("/") == 1:
            argv += ["--symlink", os.readlink(path), path]
        else:
            argv += ["--ro-bind-try", path, path]
    readable = [*install_prefixes(command_path, args, env), *_absolute(sandbox.filesystem, cwd)]
    if cwd is not None:
        readable.append(cwd)
    writable = _absolute(sandbox.writable, cwd)
    home = env.get("HOME")
    if home and os.path.isabs(home) and home != "/" and not _beneath(home, [*readable, *writable]):
        # Like Landlock's launcher: an empty private home, so programs that write caches still start.
        argv += ["--tmpfs", home]
    # Parents before children, so a narrower grant inside a wider one is not hidden by it.
    mounts = [("--ro-bind-try", path) for path in readable if not _beneath(path, writable)]
    mounts += [("--bind-try", path) for path in writable]
    for flag, path in sorted(mounts, key=lambda mount: mount[1].rstrip("/").count("/")):
        argv += [flag, path, path]
    if cwd is not None:
        argv += ["--chdir", cwd]
    return [*argv, "--", command_path, *args]


def landlock_argv(
    command_path: str, args: Sequence[str], sandbox: SandboxConfig, cwd: str | None, env: Mapping[str, str]
) -> list[str]:
    """The launcher command line (``python -I -S _landlock_exec.py``) that runs ``command_path args`` under Landlock."""
    argv = [sys.executable, "-I", "-S", _landlock_exec.__file__]
    readable = [*SYSTEM_PATHS, *install_prefixes(command_path, args, env), *_absolute(sandbox.filesystem, cwd)]
    if cwd is not None:
        readable.append(cwd)
    for path in readable:
        argv += ["--ro", path]
    for path in _absolute(sandbox.writable, cwd):
        argv += ["--rw", path]
    if not sandbox.network:
        argv.append("--no-network")
    return [*argv, "--", command_path, *args]


def install_prefixes(command_path: str, args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Where the program lives: the prefix of the command (and its ``#!`` interpreter, followed
    through symlinks) and of script arguments (``node dist/index.js``), outside the system paths.
    """
    files = [command_path, *(arg for arg in args if os.path.isabs(arg) and _is_program_file(arg))]
    files += [interpreter for path in list(files) if (interpreter := _interpreter(path, env))]
    prefixes: list[str] = []
    for path in files:
        real = os.path.realpath(path)
        # A symlink's own folder (~/.local/bin) says nothing about the program: bind the link only.
        for candidate in (_prefix_of(real, generic=True), _prefix_of(path, generic=path == real)):
            if candidate not in prefixes and not _is_system(candidate):
                prefixes.append(candidate)
    return prefixes


def _is_program_file(path: str) -> bool:
    return os.path.isfile(path) and (path.endswith(_SCRIPT_SUFFIXES) or os.access(path, os.X_OK))


def _interpreter(path: str, env: Mapping[str, str]) -> str | None:
    """The interpreter of a ``#!`` script (``#!/usr/bin/env node`` resolved on the child's PATH)."""
    try:
        with open(path, "rb") as script:
            head = script.read(_SHEBANG_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env" and len(words) > 1:
        name = next((word for word in words[1:] if not word.startswith("-")), None)
        return shutil.which(name, path=env.get("PATH", os.defpath)) if name else None
    return words[0]


def _prefix_of(path: str, *, generic: bool) -> str:
    """The install root of a program file: its top-most ``node_modules``, its virtualenv, else (if
    ``generic``) the prefix above its ``bin`` when it has a ``lib``, or its folder; the file alone
    rather than ``/`` or a folder holding the user's home.
    """
    parents = Path(path).parents
    modules = [parent for parent in parents if parent.name == "node_modules"]
    if modules:
        return str(modules[-1])
    for parent in parents:
        if (parent / "pyvenv.cfg").is_file():
            return str(parent)
    folder = Path(path).parent
    if folder.name in ("bin", "sbin") and (folder.parent / "lib").is_dir():
        folder = folder.parent
    home = os.path.realpath(os.path.expanduser("~"))
    if not generic or str(folder) == "/" or home == str(folder) or home.startswith(f"{folder}/"):
        return path
    return str(folder)


def _beneath(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _is_system(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in SYSTEM_PATHS)


def _absolute(paths: Sequence[str], cwd: str | None) -> list[str]:
    return [os.path.abspath(os.path.join(cwd or os.getcwd(), os.path.expanduser(path))) for path in paths]


def sandbox_backend() -> SandboxBackend:
    """The backend sandboxed servers use here, probed once per process (and per ``MCPMUX_SANDBOX_BACKEND``)."""
    return _detect(os.environ.get(BACKEND_ENV_VAR) or None)


@functools.cache
def _detect(forced: str | None) -> SandboxBackend:
    unavailable: list[tuple[str, str]] = []
    if forced not in (None, "bubblewrap", "landlock"):
        unavailable.append((forced or "", f"unknown {BACKEND_ENV_VAR} value; use bubblewrap or landlock"))
    if forced in (None, "bubblewrap"):
        reason = _bwrap_problem()
        if reason is None:
            return SandboxBackend("bubblewrap", _BWRAP_ENFORCES, tuple(unavailable))
        unavailable.append(("bubblewrap", reason))
    if forced in (None, "landlock"):
        reason = _landlock_exec.problem()
        if reason is None:
            if unavailable:
                why = unavailable[-1][1]
                logger.warning("sandbox: bubblewrap is not usable here, falling back to Landlock: %s", why)
            return SandboxBackend("landlock", _LANDLOCK_ENFORCES, tuple(unavailable))
        unavailable.append(("landlock", reason))
    return SandboxBackend("none", (), tuple(unavailable))


def _bwrap_problem() -> str | None:
    """Why bwrap cannot sandbox here, or None: a real run, since seccomp or AppArmor may forbid namespaces."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    probe = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/", "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[-200:] or f"exit code {done.returncode}"
        return f"bwrap cannot create namespaces here: {said}{_userns_cause()}"
    return None


def _userns_cause() -> str:
    """Ubuntu 23.10+ blocks unprivileged user namespaces through AppArmor: say so, and how to lift it."""
    try:
        with open(APPARMOR_USERNS_SYSCTL, encoding="ascii") as sysctl:
            restricted = sysctl.read().strip() == "1"
    except OSError:
        restricted = False
    if not restricted:
        return ""
    return (
        " (AppArmor restricts unprivileged user namespaces: kernel.apparmor_restrict_unprivileged_userns=1, "
        "the Ubuntu 23.10+ default; give bwrap an AppArmor profile that allows userns, or set it to 0)"
    )
