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
resource limits, then ``PR_SET_NO_NEW_PRIVS``, then Landlock (it needs ``no_new_privs``), then the
seccomp filter last (it forbids what came before: ``unshare``, ``mount``, ``setrlimit``).

``RLIMIT_AS`` bounds the worker's whole address space, sized so that the worker's engine can be
*exactly* the in-process one: wasmtime's default reserves :data:`MEMORY_RESERVATION` (4 GiB plus a
32 MiB guard on each side) of address space per linear memory, so a 32-bit memory never moves when
it grows and its bounds checks are elided; the default limit (:data:`DEFAULT_ADDRESS_SPACE`) leaves
room for :data:`MEMORY_ROOM` (16) memories at once, plus the interpreter — more than a run's default
``max_memories`` (1), so a run that raises it to 16 still fits. (A narrower reservation that a small
limit would allow makes every memory that grows past it move — copy and commit the whole memory — on
each growth: ``guests/grow.wat`` took 5 s and 5 GB of RSS in a worker against 25 ms and 41 MB
in-process; and its compiled code differs, so artifacts could not be shared with the host.) A limit
below :data:`MIN_ADDRESS_SPACE` would refuse every guest with a memory and is refused when made; a
run whose memories need more than the limit leaves gets ``host-error`` ("Cannot allocate memory",
explained by :func:`explain_address_space`), and a guest's own bound is ``max_memory_bytes``, as
in-process. ``RLIMIT_CPU`` counts the whole life of a worker; the pool retires a worker before it
spends half of it.

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
``setrlimit``, ``prctl``, ``landlock_*``, ``seccomp``. :func:`probe` (test hooks only) tries what the measures forbid.

The filesystem is confined with Landlock (:func:`confine_filesystem`, after ``no_new_privs`` and
before the filter): a worker reads only its code, system libraries, its own ``/proc`` entry and the
block store directories the pool grants (``Hardening.stores``), and writes no file but
``/dev/null`` — above all it can neither read the module cache's key nor write an artifact the host
or another worker would run. It is required unless the pool opts out (``filesystem=False``); on
Landlock ABI 6+ signals and abstract sockets are also scoped to the worker's own domain
(``signal-scope``).

## Not done here
No allow-list filter: Python and wasmtime use too many syscalls for one that would not break on the
next version of either. No separate user: a worker runs as the host's user (a user namespace maps
it). Confinement of what a worker may *read* stops at the directories above.
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

from kuro_fs.home import resolve_home

__all__ = [
    "DEFAULT_ADDRESS_SPACE",
    "DENIED_SYSCALLS",
    "MEASURES",
    "MEMORY_RESERVATION",
    "MEMORY_ROOM",
    "MIN_ADDRESS_SPACE",
    "SELF_ONLY_SYSCALLS",
    "TRIES",
    "Hardening",
    "apply_limits",
    "build_seccomp",
    "check_stores",
    "closed_homes",
    "confine_filesystem",
    "landlock_abi",
    "readable_paths",
    "enter_namespaces",
    "explain_address_space",
    "memories_that_fit",
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
    "landlock": "Landlock: the worker reads only code, system libraries and the block stores given; it writes no file",
    "signal-scope": "Landlock scope: no signal reaches a process outside the worker's own Landlock domain",
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
#: How many linear memories at full reservation the default ``RLIMIT_AS`` has room for. Address space, not RAM:
#: a reservation is PROT_NONE until the guest grows into it. Independent of the run's ``max_memories`` (default
#: :data:`~kuro_wasm.model.limits.DEFAULT_MAX_MEMORIES`, which it must stay at or above).
MEMORY_ROOM: Final = 16
#: The default ``RLIMIT_AS``: :data:`MEMORY_ROOM` memories, each at full reservation, plus headroom.
DEFAULT_ADDRESS_SPACE: Final = MEMORY_ROOM * MEMORY_RESERVATION + _HEADROOM
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
    """The limits a worker applies to itself (bytes, files, CPU seconds), whether to try namespaces, whether to
    confine its filesystem (Landlock; required when asked), and the block store directories it may read
    (``stores``; None: the default kuro home's, resolved when the pool starts).

    Raises ValueError: a limit that is not an int >= 1, or an ``address_space`` below :data:`MIN_ADDRESS_SPACE`
    (it may be None: no ``RLIMIT_AS``).
    """

    nofile: int = 256
    fsize: int = 256 << 20
    cpu_seconds: int = 3600
    address_space: int | None = DEFAULT_ADDRESS_SPACE
    namespaces: bool = True
    filesystem: bool = True
    stores: tuple[str, ...] | None = None

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
        for name in ("namespaces", "filesystem"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        stores = self.stores
        if stores is not None and not (isinstance(stores, tuple) and all(isinstance(d, str) and d for d in stores)):
            raise ValueError(f"stores must be a tuple of directory names or None, got {stores!r}")

    def to_data(self) -> dict[str, Any]:
        """Plain data for the fork request."""
        return {
            "nofile": self.nofile,
            "fsize": self.fsize,
            "cpu_seconds": self.cpu_seconds,
            "address_space": self.address_space,
            "namespaces": self.namespaces,
            "filesystem": self.filesystem,
            "stores": None if self.stores is None else list(self.stores),
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Hardening:
        """Rebuild from :meth:`to_data`. Raises ValueError (KeyError) on anything else."""
        fields = {k: data[k] for k in ("nofile", "fsize", "cpu_seconds", "address_space", "namespaces", "filesystem")}
        stores = data["stores"]
        return cls(**fields, stores=None if stores is None else tuple(stores))


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


_LANDLOCK_CREATE_RULESET: Final = 444  # the same number on every architecture (a syscall added after the split)
_LANDLOCK_ADD_RULE: Final = 445
_LANDLOCK_RESTRICT_SELF: Final = 446
_LANDLOCK_CREATE_RULESET_VERSION: Final = 1
_LANDLOCK_RULE_PATH_BENEATH: Final = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 14, 1 << 15
#: Filesystem rights each Landlock ABI version knows (v1: 13 rights; v2 adds REFER, v3 TRUNCATE, v5 IOCTL_DEV).
_FS_RIGHTS: Final = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_RIGHTS: Final = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_NET_RIGHTS: Final = (1 << 2) - 1  # v4: BIND_TCP, CONNECT_TCP
_SCOPES: Final = (1 << 2) - 1  # v6: ABSTRACT_UNIX_SOCKET, SIGNAL
#: System directories a worker reads (shared libraries loaded late, CPU and cgroup facts for thread counts).
_SYSTEM_READ: Final = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib", "/sys/devices/system/cpu")
_SYSTEM_FILES: Final = ("/etc/ld.so.cache", "/dev/urandom", "/dev/zero")


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers; 0 when it has none (or it is disabled)."""
    version = _libc.syscall(ctypes.c_long(_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, int(version))


def _within(path: str, directory: str) -> bool:
    """True if ``path`` is ``directory`` or beneath it (both already resolved)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def check_stores(stores: tuple[str, ...], home: str | None = None) -> None:
    """Refuse block store grants that would open the kuro home to a worker: a directory holding the home
    (its module cache key, ledger, refs), or one inside the home but outside its ``blocks/``.

    ``home``: the kuro home to keep closed (default: the one ``$KURO_HOME`` or ``~/.kuro`` names).
    Raises ValueError.
    """
    kuro_home = os.path.realpath(home if home is not None else resolve_home())
    blocks = os.path.realpath(os.path.join(kuro_home, "blocks"))
    for store in stores:
        where = os.path.realpath(store)
        if _within(kuro_home, where) or (_within(where, kuro_home) and not _within(where, blocks)):
            raise ValueError(
                f"block store directory {store!r} would let a worker read the kuro home {kuro_home!r} "
                "(its module cache key, ledger and refs): grant the home's blocks/ or a directory outside it"
            )


def closed_homes() -> tuple[str, ...]:
    """The directories no worker may read in full, resolved in the host (a worker has neither its environment
    nor its user name): the kuro home (``$KURO_HOME`` or ``~/.kuro``) and the user's home directory."""
    return (os.path.realpath(resolve_home()), os.path.realpath(os.path.expanduser("~")))


def readable_paths(stores: tuple[str, ...], namespaced: bool, closed: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``(directories, files)`` a confined worker may read: the Python installation and the paths it imports
    from (never the working directory), kuro's own packages, system libraries, its own ``/proc`` entry, and
    ``stores`` (checked by :func:`check_stores` against the kuro home, ``closed[0]``). Only those that exist.

    An import path that holds a ``closed`` directory (:func:`closed_homes`: ``PYTHONPATH=~``, say) is not
    granted whole: only the directories of the packages already imported from it are. Raises ValueError
    (a store grant :func:`check_stores` refuses).
    """
    import kuro_fs
    import kuro_wasm

    check_stores(stores, closed[0] if closed else None)
    cwd = os.path.realpath(os.getcwd())
    imports: list[str] = []
    for entry in (p for p in sys.path if p and os.path.isabs(p)):
        where = os.path.realpath(entry)
        if where == cwd:
            continue
        if any(_within(c, where) for c in closed):
            imports += _imported_from(where)
        else:
            imports.append(where)
    dirs = [sys.prefix, sys.base_prefix, sys.exec_prefix, *_SYSTEM_READ, *stores, "/proc/self", *imports]
    dirs += [os.path.dirname(kuro_fs.__file__), os.path.dirname(kuro_wasm.__file__)]
    if namespaced:
        dirs.append("/proc")  # listing it shows only the worker's own pid namespace
    found = sorted({os.path.realpath(d) for d in dirs if os.path.isdir(d)})
    files = sorted({os.path.realpath(f) for f in _SYSTEM_FILES if os.path.isfile(f) or os.path.exists(f)})
    return found, files


def _imported_from(entry: str) -> list[str]:
    """The top-level package directories of the modules already imported from import path ``entry`` (a
    single-file module imported from it needs no more reading)."""
    found: set[str] = set()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not _within(os.path.realpath(file), entry):
            continue
        first = os.path.relpath(os.path.realpath(file), entry).split(os.sep)[0]
        top = os.path.join(entry, first)
        if os.path.isdir(top):
            found.add(top)
    return sorted(found)


def confine_filesystem(
    stores: tuple[str, ...], namespaced: bool, closed: tuple[str, ...]
) -> tuple[list[str], list[str]]:
    """Landlock the calling thread (and every thread and child it makes after): read only
    :func:`readable_paths`, write nothing but ``/dev/null``; on ABI 6+ also scope signals and abstract
    sockets to its own domain. ``(measures in force, store directories granted)``.

    Needs ``no_new_privs`` first. Raises OSError: the kernel has no Landlock, or a rule is refused.
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.EOPNOTSUPP, "this kernel offers no Landlock (needed to confine a worker's filesystem)")
    handled = _FS_RIGHTS.get(abi, _FS_RIGHTS[5])
    attr = _RulesetAttr(handled, _NET_RIGHTS if abi >= 4 else 0, _SCOPES if abi >= 6 else 0)
    ruleset = _libc.syscall(
        ctypes.c_long(_LANDLOCK_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0
    )
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    dirs, files = readable_paths(stores, namespaced, closed)
    granted: list[str] = []
    try:
        rules = [(d, _FS_READ_FILE | _FS_READ_DIR) for d in dirs] + [(f, _FS_READ_FILE) for f in files]
        rules.append((os.devnull, _FS_READ_FILE | _FS_WRITE_FILE))
        for path, allowed in rules:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                beneath = _PathBeneath(allowed & handled & (~0 if os.path.isdir(path) else _FILE_RIGHTS), fd)
                result = _libc.syscall(
                    ctypes.c_long(_LANDLOCK_ADD_RULE), ruleset, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(beneath), 0
                )
                if result != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
        granted = [d for d in dirs if any(d == os.path.realpath(s) for s in stores)]
        if _libc.syscall(ctypes.c_long(_LANDLOCK_RESTRICT_SELF), ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    sys.dont_write_bytecode = True  # nothing could be written anyway: do not even try
    sys.path[:] = [
        p for p in sys.path if p and os.path.isabs(p) and os.path.realpath(p) != os.path.realpath(os.getcwd())
    ]
    return (["landlock", "signal-scope"] if abi >= 6 else ["landlock"]), granted


def memories_that_fit(address_space: int) -> int:
    """How many linear memories at wasmtime's full reservation an ``RLIMIT_AS`` of ``address_space`` holds."""
    return max(0, (address_space - _HEADROOM) // MEMORY_RESERVATION)


def explain_address_space(error: str, max_memories: int) -> str:
    """``error`` (a run's ``host-error`` text) with the reason spelled out when it is this process's
    ``RLIMIT_AS`` that refused a reservation (``ENOMEM``): how many memories the limit holds, what the run
    allowed, and that in-process has no such limit. Any other error comes back as it was."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or "Cannot allocate memory" not in error:
        return error
    fit = memories_that_fit(soft)
    return (
        f"{error}: the worker's address space limit (RLIMIT_AS, {soft / (1 << 30):.1f} GiB) has room for "
        f"{fit} linear memor{'y' if fit == 1 else 'ies'} at wasmtime's reservation of "
        f"{MEMORY_RESERVATION / (1 << 30):.2f} GiB each, and this run allowed max_memories={max_memories}; "
        "in-process runs have no such limit "
        "(a pool made with a larger Hardening(address_space=...) has room for more)"
    )


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


def _read_file(path: str) -> None:
    with open(path, "rb") as f:
        f.read(1)


def _write_file(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)


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
    if what.startswith("read:"):
        return _errno_of(lambda: _read_file(what.partition(":")[2]))
    if what.startswith("write:"):
        return _errno_of(lambda: _write_file(what.partition(":")[2]))
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
        try:
            visible: list[int] | None = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        except PermissionError:
            visible = None  # confined outside a pid namespace: /proc cannot even be listed
        return {
            "status": fields,
            "pid": os.getpid(),
            "interfaces": interfaces,
            "core": resource.getrlimit(resource.RLIMIT_CORE)[1],
            "visible-pids": visible,
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
    if what == "compiles":  # how many guests this worker compiled itself (in memory: it has no cache on disk)
        from kuro_wasm.host.cache import cache_for

        return {"compiles": cache_for(False).stats.compiles}
    if what == "abort":
        os.abort()
    return {"unknown": what}
