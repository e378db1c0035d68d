"""OS hardening of a worker process: applied after its imports, before its first guest, with no privilege.

## The one decision
Each measure is applied by the worker to itself, in an order where each one still works, and the
worker reports the names of the measures **in force** (:data:`MEASURES`) in its hello; the host writes
that list into every receipt of a run on it (``kuro/worker.hardening``). Namespaces are used where the
kernel allows an unprivileged user to create them (``unshare --user --map-root-user --net --pid``
plus a mount namespace for a fresh ``/proc``) and otherwise left out *and not claimed*; the resource
limits, ``no_new_privs`` and the seccomp filter are required — a worker that cannot apply one of
them exits before saying hello, so no guest ever runs on a worker weaker than its receipt says.

Order: namespaces (they need ``fork``; the worker becomes PID 1 of its own pid namespace), then the
resource limits, then ``PR_SET_NO_NEW_PRIVS``, then the seccomp filter last (it forbids what came
before: ``unshare``, ``mount``, ``setrlimit``).

``RLIMIT_AS`` bounds the worker's whole address space, sized so that the worker's engine can be
*exactly* the in-process one: wasmtime's default reserves :data:`MEMORY_RESERVATION` (4 GiB plus a
32 MiB guard on each side) of address space per linear memory, so a 32-bit memory never moves when
it grows and its bounds checks are elided; the default limit (:data:`DEFAULT_ADDRESS_SPACE`) leaves
room for a store's :data:`~kuro_wasm.model.limits.DEFAULT_MAX_MEMORIES` memories at once, plus the
interpreter. (A narrower reservation that a small limit would allow makes every memory that grows
past it move — copy and commit the whole memory — on each growth: ``guests/grow.wat`` took 5 s and
5 GB of RSS in a worker against 25 ms and 41 MB in-process; and its compiled code differs, so
artifacts could not be shared with the host.) A limit below :data:`MIN_ADDRESS_SPACE` would refuse
every guest with a memory and is refused when made; a run whose memories need more than the limit
leaves gets ``host-error`` ("Cannot allocate memory"), and a guest's own bound is
``max_memory_bytes``, as in-process. ``RLIMIT_CPU`` counts the whole life of a worker; the pool
retires a worker before it spends half of it.

The seccomp filter (``pyseccomp`` over the system's ``libseccomp``) allows by default and refuses
:data:`DENIED_SYSCALLS` with ``EPERM``; ``clone`` only when it makes a thread (``CLONE_THREAD``),
``clone3`` with ``ENOSYS`` (its flags sit behind a pointer a filter cannot read; glibc then falls
back to ``clone``), ``kill``/``tgkill``/``rt_sigqueueinfo``/``rt_tgsigqueueinfo`` only towards the
worker itself (:data:`SELF_ONLY_SYSCALLS`: the filter is installed after the last fork, so the
worker's pid is known; ``abort()`` signals itself with ``tgkill``), and ``prlimit64`` only to read.
What reaches another process by a pid or a pidfd — ``tkill`` (a bare thread id, whose process the
filter cannot tell), ``pidfd_open``, ``pidfd_send_signal``, ``ptrace`` and the calls that read,
write, compare or move another process's memory — is refused outright.

## Effects
``unshare``, ``mount``, ``/proc/self/{uid,gid}_map``, ``fork`` (once, for the pid namespace),
``setrlimit``, ``prctl``, ``seccomp``. :func:`probe` (test hooks only) tries what the measures forbid.

## Not done here
No filesystem confinement: a worker reads and writes files with the user's rights (no landlock, no
read-only remount). No allow-list filter: Python and wasmtime use too many syscalls for one that
would not break on the next version of either.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import socket
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kuro_wasm.model.limits import DEFAULT_MAX_MEMORIES

__all__ = [
    "DEFAULT_ADDRESS_SPACE",
    "DENIED_SYSCALLS",
    "MEASURES",
    "MEMORY_RESERVATION",
    "MIN_ADDRESS_SPACE",
    "SELF_ONLY_SYSCALLS",
    "TRIES",
    "Hardening",
    "apply_limits",
    "build_seccomp",
    "enter_namespaces",
    "install_seccomp",
    "probe",
    "set_no_new_privs",
]

#: Every measure a worker may report as in force, and what it means.
MEASURES: Final[Mapping[str, str]] = {
    "rlimit-core": "RLIMIT_CORE 0: a crashing worker leaves no core file holding guest data",
    "rlimit-nofile": "RLIMIT_NOFILE: at most this many open files",
    "rlimit-fsize": "RLIMIT_FSIZE: no file the worker writes grows past this size (EFBIG)",
    "rlimit-cpu": "RLIMIT_CPU: the worker is killed (SIGXCPU, then SIGKILL) past this much CPU time",
    "rlimit-as": "RLIMIT_AS: the worker's address space is bounded (room for a store's memories at full reservation)",
    "no-new-privs": "PR_SET_NO_NEW_PRIVS: nothing the worker could execute gains privileges",
    "seccomp": "a seccomp filter refuses exec, fork, sockets, ptrace, mount, namespaces, bpf, modules",
    "user-namespace": "an unprivileged user namespace: no capability in the host's namespaces",
    "net-namespace": "a network namespace with no interface up: no network at all",
    "pid-namespace": "its own pid namespace (it is PID 1): no other process can be seen or signalled",
    "mount-namespace": "its own mount namespace, with a /proc that shows only its pid namespace",
}

#: Address space wasmtime's default configuration reserves per linear memory: 4 GiB, and a 32 MiB guard
#: before and after it (wasmtime 50; a test instantiates a memory and checks this still covers it).
MEMORY_RESERVATION: Final = (4 << 30) + (64 << 20)
#: The interpreter, wasmtime and their threads besides linear memories: a worker idles at ~0.35 GiB, and each
#: thread may add a 64 MiB malloc arena and its stack (wasmtime compiles on one thread per core).
_HEADROOM: Final = (1 << 30) + (os.cpu_count() or 1) * (128 << 20)
#: The default ``RLIMIT_AS``: a store's default maximum of memories, each at full reservation, plus headroom.
DEFAULT_ADDRESS_SPACE: Final = DEFAULT_MAX_MEMORIES * MEMORY_RESERVATION + _HEADROOM
#: The smallest ``RLIMIT_AS`` a worker accepts: one memory at full reservation, plus headroom.
MIN_ADDRESS_SPACE: Final = MEMORY_RESERVATION + _HEADROOM

#: Syscalls the filter refuses outright (EPERM), by group.
DENIED_SYSCALLS: Final[Mapping[str, tuple[str, ...]]] = {
    "exec": ("execve", "execveat"),
    "fork": ("fork", "vfork"),
    "sockets": ("socket", "socketpair"),
    "ptrace": (
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_getfd",
        "kcmp",
        "process_madvise",
        "process_mrelease",
        "move_pages",
        "migrate_pages",
    ),
    "signals": ("tkill", "pidfd_open", "pidfd_send_signal"),
    "mount": ("mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount", "move_mount", "open_tree"),
    "namespaces": ("unshare", "setns"),
    "bpf": ("bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register"),
    "modules": ("init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load"),
    "limits": ("setrlimit",),
    "keys": ("add_key", "request_key", "keyctl"),
}
#: Syscalls the filter allows only towards the worker itself: their first argument (a pid or tgid) must be its own.
SELF_ONLY_SYSCALLS: Final = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")

_CLONE_NEWNS: Final = 0x00020000
_CLONE_NEWUSER: Final = 0x10000000
_CLONE_NEWPID: Final = 0x20000000
_CLONE_NEWNET: Final = 0x40000000
_CLONE_THREAD: Final = 0x00010000
_MS_REC: Final = 0x4000
_MS_PRIVATE: Final = 1 << 18
_MS_NOSUID: Final = 2
_MS_NODEV: Final = 4
_MS_NOEXEC: Final = 8
_PR_SET_NO_NEW_PRIVS: Final = 38

_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True, slots=True)
class Hardening:
    """The limits a worker applies to itself (bytes, files, CPU seconds) and whether to try namespaces.

    Raises ValueError: a limit that is not an int >= 1, or an ``address_space`` below :data:`MIN_ADDRESS_SPACE`
    (it may be None: no ``RLIMIT_AS``).
    """

    nofile: int = 256
    fsize: int = 256 << 20
    cpu_seconds: int = 3600
    address_space: int | None = DEFAULT_ADDRESS_SPACE
    namespaces: bool = True

    def __post_init__(self) -> None:
        for name in ("nofile", "fsize", "cpu_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        space = self.address_space
        if space is not None and (isinstance(space, bool) or not isinstance(space, int) or space < MIN_ADDRESS_SPACE):
            raise ValueError(
                f"address_space must be an int >= {MIN_ADDRESS_SPACE} (one linear memory at wasmtime's full "
                f"reservation, plus the interpreter) or None, got {space!r}"
            )
        if not isinstance(self.namespaces, bool):
            raise ValueError(f"namespaces must be a bool, got {self.namespaces!r}")

    def to_data(self) -> dict[str, Any]:
        """Plain data for the fork request."""
        return {
            "nofile": self.nofile,
            "fsize": self.fsize,
            "cpu_seconds": self.cpu_seconds,
            "address_space": self.address_space,
            "namespaces": self.namespaces,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Hardening:
        """Rebuild from :meth:`to_data`. Raises ValueError (KeyError) on anything else."""
        return cls(**{k: data[k] for k in ("nofile", "fsize", "cpu_seconds", "address_space", "namespaces")})


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


def outer_pid() -> int:
    """This process's pid as the host sees it (the first NSpid entry; before /proc is remounted)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("NSpid:"):
                return int(line.split()[1])
    return os.getpid()  # pragma: no cover - kernels before 4.1


def enter_namespaces() -> tuple[list[str], int]:
    """Move into new user, mount, network and pid namespaces; ``(measures in force, pid the host sees)``.

    The calling process must have one thread. It forks once: the child becomes PID 1 of the new pid
    namespace and returns from here, the parent exits at once (its parent, a subreaper, adopts the
    child). Where the kernel refuses the namespaces, nothing changes and ``([], pid)`` is returned.
    """
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWPID) != 0:
        return [], os.getpid()
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")
    child = os.fork()
    if child != 0:
        os._exit(0)
    pid = outer_pid()
    _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    _check(_libc.mount(b"proc", b"/proc", b"proc", flags, None), "mount proc")
    return ["mount-namespace", "net-namespace", "pid-namespace", "user-namespace"], pid


def apply_limits(hardening: Hardening) -> list[str]:
    """Set the resource limits (soft = hard, so they cannot be raised again). Raises OSError, ValueError."""
    limits = [
        ("rlimit-core", resource.RLIMIT_CORE, 0),
        ("rlimit-nofile", resource.RLIMIT_NOFILE, hardening.nofile),
        ("rlimit-fsize", resource.RLIMIT_FSIZE, hardening.fsize),
        ("rlimit-cpu", resource.RLIMIT_CPU, hardening.cpu_seconds),
    ]
    if hardening.address_space is not None:
        limits.append(("rlimit-as", resource.RLIMIT_AS, hardening.address_space))
    for _, which, value in limits:
        resource.setrlimit(which, (value, value))
    return [name for name, _, _ in limits]


def set_no_new_privs() -> list[str]:
    """``prctl(PR_SET_NO_NEW_PRIVS, 1)``. Raises OSError."""
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    return ["no-new-privs"]


def build_seccomp(me: int) -> Any:
    """The filter (a ``pyseccomp.SyscallFilter``, not loaded) for a worker whose pid, as it sees it, is ``me``.

    Raises ImportError/RuntimeError: no libseccomp.
    """
    import pyseccomp as sc  # a ctypes binding; raises RuntimeError at import when libseccomp is missing

    deny = sc.ERRNO(errno.EPERM)
    rules = sc.SyscallFilter(sc.ALLOW)
    for names in DENIED_SYSCALLS.values():
        for name in names:
            if sc.resolve_syscall(sc.Arch.NATIVE, name) < 0:
                continue  # not a syscall of this architecture (e.g. fork on aarch64): nothing to refuse
            rules.add_rule(deny, name)
    rules.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for name in SELF_ONLY_SYSCALLS:  # abort() is tgkill(getpid(), gettid(), SIGABRT): a worker may signal itself
        rules.add_rule(deny, name, sc.Arg(0, sc.NE, me))
    rules.add_rule(deny, "prlimit64", sc.Arg(2, sc.NE, 0))
    return rules


def install_seccomp() -> list[str]:
    """Load the filter described in the module docstring. Raises OSError, or ImportError without libseccomp."""
    build_seccomp(os.getpid()).load()
    return ["seccomp"]


# ---- test hooks: what a taken-over worker would try (only a pool started with test hooks answers these)


def _errno_of(action: Any) -> dict[str, Any]:
    try:
        action()
    except OSError as exc:
        return {"ok": False, "errno": errno.errorcode.get(exc.errno or 0, str(exc.errno))}
    except ValueError as exc:  # resource.setrlimit reports EPERM as ValueError
        return {"ok": False, "error": str(exc)}
    return {"ok": True}


def _fork() -> None:
    if os.fork() == 0:
        os._exit(0)


def _fill_file(size: int) -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"\0" * size)
        f.flush()


def _open_many() -> dict[str, Any]:
    fds: list[int] = []
    try:
        while len(fds) < 1 << 16:
            fds.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as exc:
        return {"opened": len(fds), "errno": errno.errorcode.get(exc.errno or 0, "?")}
    finally:
        for fd in fds:
            os.close(fd)
    return {"opened": len(fds)}


def _siginfo() -> Any:
    """A ``siginfo_t`` a process may queue to another of its user: signo 0, ``si_code`` ``SI_QUEUE`` (-1)."""
    info = ctypes.create_string_buffer(128)
    ctypes.memmove(info, (ctypes.c_int * 3)(0, 0, -1), 12)
    return info


#: Test hooks: one call of each syscall the filter refuses, with arguments that make the kernel itself answer
#: something other than EPERM where it can (bad pointers, bad fds, signal 0) — so an EPERM is the filter's.
#: ``t`` is the pid to aim at (another process, or the worker itself), ``i`` a siginfo the kernel accepts.
TRIES: Final[Mapping[str, Any]] = {
    "kill": lambda t, i: (t, 0),
    "tkill": lambda t, i: (t, 0),
    "tgkill": lambda t, i: (t, t, 0),
    "rt_sigqueueinfo": lambda t, i: (t, 0, ctypes.addressof(i)),
    "rt_tgsigqueueinfo": lambda t, i: (t, t, 0, ctypes.addressof(i)),
    "pidfd_open": lambda t, i: (t, 0),
    "pidfd_send_signal": lambda t, i: (-1, 0, 0, 0),
    "pidfd_getfd": lambda t, i: (-1, 0, 0),
    "ptrace": lambda t, i: (-1, t, 0, 0),
    "process_vm_readv": lambda t, i: (t, 0, 1, 0, 1, 0),
    "process_vm_writev": lambda t, i: (t, 0, 1, 0, 1, 0),
    "kcmp": lambda t, i: (t, t, -1, 0, 0),
    "process_madvise": lambda t, i: (-1, 0, 0, 0, 0),
    "move_pages": lambda t, i: (t, 0, 0, 0, 0, -1),
    "mount": lambda t, i: (1, 1, 1, 0, 0),
    "chroot": lambda t, i: (1,),
    "fsopen": lambda t, i: (1, 0),
    "bpf": lambda t, i: (-1, 0, 0),
    "perf_event_open": lambda t, i: (0, 0, -1, -1, 0),
    "userfaultfd": lambda t, i: (-1,),
    "io_uring_setup": lambda t, i: (0, 0),
    "init_module": lambda t, i: (0, 0, 0),
    "finit_module": lambda t, i: (-1, 0, -1),
    "delete_module": lambda t, i: (1, 0),
    "kexec_file_load": lambda t, i: (-1, -1, 0, 0, -1),
}


def try_syscall(name: str, target: int) -> dict[str, Any]:
    """Make the :data:`TRIES` call of syscall ``name`` aimed at pid ``target``: ``{"ok": bool, "errno": name}``.

    Harmless by construction (signal 0, invalid arguments); a pidfd it happens to get is closed.
    """
    import pyseccomp as sc

    number = sc.resolve_syscall(sc.Arch.NATIVE, name)
    info = _siginfo()
    call = _libc.syscall
    call.restype = ctypes.c_long
    ctypes.set_errno(0)
    result = call(ctypes.c_long(number), *(ctypes.c_long(a) for a in TRIES[name](target, info)))
    if result < 0:
        code = ctypes.get_errno()
        return {"ok": False, "errno": errno.errorcode.get(code, str(code))}
    if name == "pidfd_open":
        os.close(result)
    return {"ok": True}


def probe(what: str) -> dict[str, Any]:
    """Try one forbidden thing and say how it went (test hooks only): ``{"ok": bool, "errno": name}`` or facts."""
    if what == "socket":
        return _errno_of(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
    if what == "unix-socket":
        return _errno_of(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
    if what == "exec":
        return _errno_of(lambda: os.execv(sys.executable, [sys.executable, "-c", "pass"]))
    if what == "fork":
        return _errno_of(_fork)
    if what == "unshare":
        return _errno_of(lambda: _check(_libc.unshare(_CLONE_NEWUSER), "unshare"))
    if what == "lower-nofile":  # lowering is always allowed by the kernel: only the filter refuses it
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return _errno_of(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft - 1, hard - 1)))
    if what.startswith("fsize:"):
        return _errno_of(lambda: _fill_file(int(what.partition(":")[2])))
    if what.startswith("syscall:"):  # syscall:NAME:PID (PID "self": the worker itself)
        _, name, target = what.split(":")
        return try_syscall(name, os.getpid() if target == "self" else int(target))
    if what == "self-signals":  # what the filter must still allow: signal 0 to itself, by each self-only call
        me, tid, info = os.getpid(), threading.get_native_id(), _siginfo()
        calls = {
            "kill": (me, 0),
            "tgkill": (me, tid, 0),
            "rt_sigqueueinfo": (me, 0, ctypes.addressof(info)),
            "rt_tgsigqueueinfo": (me, tid, 0, ctypes.addressof(info)),
        }
        import pyseccomp as sc

        out = {}
        for name, args in calls.items():
            ctypes.set_errno(0)
            number = ctypes.c_long(sc.resolve_syscall(sc.Arch.NATIVE, name))
            rc = _libc.syscall(number, *(ctypes.c_long(a) for a in args))  # full-width: the filter compares 64 bits
            out[name] = "ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
        return out
    if what == "nofile":
        return _open_many()
    if what == "status":
        fields = {}
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in ("NoNewPrivs", "Seccomp", "NSpid"):
                    fields[key] = value.strip()
        with open("/proc/self/net/dev", encoding="ascii") as dev:
            interfaces = sorted(line.split(":")[0].strip() for line in dev.readlines()[2:])
        return {
            "status": fields,
            "pid": os.getpid(),
            "interfaces": interfaces,
            "core": resource.getrlimit(resource.RLIMIT_CORE)[1],
            "visible-pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        }
    if what == "engine":  # the engine configuration runs get here (it must be the in-process one)
        from kuro_wasm.host import engine

        profile = engine.memory_profile()
        return {
            "key": engine.engine_key(engine.EngineConfig()),
            "fuel-key": engine.engine_key(engine.EngineConfig(fuel=True)),
            "profile": None if profile is None else [profile.reservation, profile.guard, profile.growth],
            "address-space": resource.getrlimit(resource.RLIMIT_AS)[1],
        }
    if what == "abort":
        os.abort()
    return {"unknown": what}
