"""WASI preview 1 as data: the functions, errno numbers, rights, flags, struct layouts — and what a guest may call.

## The one decision
Everything a WASI preview 1 (``wasi_snapshot_preview1``) program can ask of this host is one literal
table, :data:`FUNCTIONS`: the 46 functions of the preview-1 witx, each with its exact core-wasm
signature and the kuro capabilities its *effect* needs. The guest kind
(:mod:`kuro_wasm.host.kinds.wasi_p1`) binds exactly this table; a module importing a name that is not
in it, or a listed name with another signature, is refused at load (:func:`check_import`), so a
guest's possible effects can be read off this page. A refused capability answers
:data:`DENIED_ERRNO` — ``EACCES`` (2, wasi-libc: "Permission denied"), what a POSIX program expects
when it may not do something and handles as such (``ls -R`` skips the directory, ``cp`` names the
file). Not ``ENOTCAPABLE``: wasi-libc's ``read``/``write`` turn that into ``EBADF`` (its POSIX
reading of "this descriptor lacks the right"), so a refused stdin read would say "Bad file
descriptor". ``ENOTCAPABLE`` remains the answer for a descriptor without the right a call needs
(:data:`PATH_RIGHTS`, :func:`open_needs`, :func:`open_rights`: the program's own rights, checked
before the grant and not a refusal of it).

Numbers, bit positions and struct layouts are those of the witx files of WASI preview 1
(``wasi_snapshot_preview1.witx``, ``typenames.witx``); names are lower-case as in the witx.

## Pure
Values only (the deterministic random stream uses ``hashlib``).

## Not done here
The calls themselves (:mod:`kuro_wasm.host.wasi_calls`), the descriptor table
(:mod:`kuro_wasm.host.wasi_state`). ``wasi_unstable`` (preview 0) is not provided.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from kuro_wasm.model.wasm_shape import FuncSig

__all__ = [
    "ALL_RIGHTS",
    "DENIED_ERRNO",
    "DETERMINISTIC_MONOTONIC_START_NS",
    "DETERMINISTIC_REALTIME_START_NS",
    "DETERMINISTIC_TICK_NS",
    "DIRECTORY_RIGHTS",
    "FILE_RIGHTS",
    "FUNCTIONS",
    "MODULE",
    "PATH_RIGHTS",
    "STDIN_RIGHTS",
    "STDOUT_RIGHTS",
    "WRITE_RIGHTS",
    "Errno",
    "Filetype",
    "FuncSpec",
    "Rights",
    "SeededBytes",
    "check_arg_strings",
    "check_env",
    "check_import",
    "environ_strings",
    "errno_for",
    "open_needs",
    "open_rights",
]

MODULE: Final = "wasi_snapshot_preview1"


class Errno(IntEnum):
    """The witx ``errno`` enum (u16)."""

    SUCCESS = 0
    TOOBIG = 1  # "2big"
    ACCES = 2
    ADDRINUSE = 3
    ADDRNOTAVAIL = 4
    AFNOSUPPORT = 5
    AGAIN = 6
    ALREADY = 7
    BADF = 8
    BADMSG = 9
    BUSY = 10
    CANCELED = 11
    CHILD = 12
    CONNABORTED = 13
    CONNREFUSED = 14
    CONNRESET = 15
    DEADLK = 16
    DESTADDRREQ = 17
    DOM = 18
    DQUOT = 19
    EXIST = 20
    FAULT = 21
    FBIG = 22
    HOSTUNREACH = 23
    IDRM = 24
    ILSEQ = 25
    INPROGRESS = 26
    INTR = 27
    INVAL = 28
    IO = 29
    ISCONN = 30
    ISDIR = 31
    LOOP = 32
    MFILE = 33
    MLINK = 34
    MSGSIZE = 35
    MULTIHOP = 36
    NAMETOOLONG = 37
    NETDOWN = 38
    NETRESET = 39
    NETUNREACH = 40
    NFILE = 41
    NOBUFS = 42
    NODEV = 43
    NOENT = 44
    NOEXEC = 45
    NOLCK = 46
    NOLINK = 47
    NOMEM = 48
    NOMSG = 49
    NOPROTOOPT = 50
    NOSPC = 51
    NOSYS = 52
    NOTCONN = 53
    NOTDIR = 54
    NOTEMPTY = 55
    NOTRECOVERABLE = 56
    NOTSOCK = 57
    NOTSUP = 58
    NOTTY = 59
    NXIO = 60
    OVERFLOW = 61
    OWNERDEAD = 62
    PERM = 63
    PIPE = 64
    PROTO = 65
    PROTONOSUPPORT = 66
    PROTOTYPE = 67
    RANGE = 68
    ROFS = 69
    SPIPE = 70
    SRCH = 71
    STALE = 72
    TIMEDOUT = 73
    TXTBSY = 74
    XDEV = 75
    NOTCAPABLE = 76


#: What a capability refusal answers (see the module docstring for why not ``ENOTCAPABLE``).
DENIED_ERRNO: Final = Errno.ACCES


def errno_for(name: str) -> Errno:
    """The errno called ``name`` in the witx (``"noent"``, ``"notcapable"`` …; the overlay's ``Errno`` values).

    >>> int(errno_for("noent")), int(errno_for("notcapable"))
    (44, 76)
    """
    return Errno[name.upper()]


class Filetype(IntEnum):
    """The witx ``filetype`` enum (u8)."""

    UNKNOWN = 0
    BLOCK_DEVICE = 1
    CHARACTER_DEVICE = 2
    DIRECTORY = 3
    REGULAR_FILE = 4
    SOCKET_DGRAM = 5
    SOCKET_STREAM = 6
    SYMBOLIC_LINK = 7


class Rights:
    """The witx ``rights`` flags (u64), one bit each."""

    FD_DATASYNC: Final = 1 << 0
    FD_READ: Final = 1 << 1
    FD_SEEK: Final = 1 << 2
    FD_FDSTAT_SET_FLAGS: Final = 1 << 3
    FD_SYNC: Final = 1 << 4
    FD_TELL: Final = 1 << 5
    FD_WRITE: Final = 1 << 6
    FD_ADVISE: Final = 1 << 7
    FD_ALLOCATE: Final = 1 << 8
    PATH_CREATE_DIRECTORY: Final = 1 << 9
    PATH_CREATE_FILE: Final = 1 << 10
    PATH_LINK_SOURCE: Final = 1 << 11
    PATH_LINK_TARGET: Final = 1 << 12
    PATH_OPEN: Final = 1 << 13
    FD_READDIR: Final = 1 << 14
    PATH_READLINK: Final = 1 << 15
    PATH_RENAME_SOURCE: Final = 1 << 16
    PATH_RENAME_TARGET: Final = 1 << 17
    PATH_FILESTAT_GET: Final = 1 << 18
    PATH_FILESTAT_SET_SIZE: Final = 1 << 19
    PATH_FILESTAT_SET_TIMES: Final = 1 << 20
    FD_FILESTAT_GET: Final = 1 << 21
    FD_FILESTAT_SET_SIZE: Final = 1 << 22
    FD_FILESTAT_SET_TIMES: Final = 1 << 23
    PATH_SYMLINK: Final = 1 << 24
    PATH_REMOVE_DIRECTORY: Final = 1 << 25
    PATH_UNLINK_FILE: Final = 1 << 26
    POLL_FD_READWRITE: Final = 1 << 27
    SOCK_SHUTDOWN: Final = 1 << 28
    SOCK_ACCEPT: Final = 1 << 29


ALL_RIGHTS: Final = (1 << 30) - 1
#: Rights that mean "this descriptor may change the file's bytes" (an open for writing asks for one of them).
WRITE_RIGHTS: Final = Rights.FD_WRITE | Rights.FD_DATASYNC | Rights.FD_ALLOCATE | Rights.FD_FILESTAT_SET_SIZE
#: Everything a regular file's descriptor can do.
FILE_RIGHTS: Final = (
    Rights.FD_DATASYNC
    | Rights.FD_READ
    | Rights.FD_SEEK
    | Rights.FD_FDSTAT_SET_FLAGS
    | Rights.FD_SYNC
    | Rights.FD_TELL
    | Rights.FD_WRITE
    | Rights.FD_ADVISE
    | Rights.FD_ALLOCATE
    | Rights.FD_FILESTAT_GET
    | Rights.FD_FILESTAT_SET_SIZE
    | Rights.FD_FILESTAT_SET_TIMES
    | Rights.POLL_FD_READWRITE
)
#: Everything a directory's descriptor can do (its files inherit :data:`FILE_RIGHTS`).
#: ``PATH_FILESTAT_SET_SIZE`` is the right to ``path_open`` with ``trunc`` (the witx: no call sets a size
#: by path), so a program can drop it to keep a directory's files from being truncated.
DIRECTORY_RIGHTS: Final = (
    Rights.FD_FDSTAT_SET_FLAGS
    | Rights.FD_SYNC
    | Rights.FD_ADVISE
    | Rights.PATH_CREATE_DIRECTORY
    | Rights.PATH_CREATE_FILE
    | Rights.PATH_LINK_SOURCE
    | Rights.PATH_LINK_TARGET
    | Rights.PATH_OPEN
    | Rights.FD_READDIR
    | Rights.PATH_READLINK
    | Rights.PATH_RENAME_SOURCE
    | Rights.PATH_RENAME_TARGET
    | Rights.PATH_FILESTAT_GET
    | Rights.PATH_FILESTAT_SET_SIZE
    | Rights.PATH_FILESTAT_SET_TIMES
    | Rights.FD_FILESTAT_GET
    | Rights.FD_FILESTAT_SET_TIMES
    | Rights.PATH_SYMLINK
    | Rights.PATH_REMOVE_DIRECTORY
    | Rights.PATH_UNLINK_FILE
    | Rights.POLL_FD_READWRITE
)
#: stdio's rights, base and inheriting alike, as wasmtime's WASI (50.0.1) shows them in ``fd_fdstat_get``.
STDIN_RIGHTS: Final = Rights.FD_READ
STDOUT_RIGHTS: Final = Rights.FD_WRITE

#: The right each call that names a path needs on the directory descriptor it names it under (witx
#: ``rights``). ``path_rename`` and ``path_link`` also need ``*_TARGET`` on the new path's directory;
#: ``path_open`` more, by its flags (:func:`open_needs`).
PATH_RIGHTS: Final[Mapping[str, int]] = {
    "path_create_directory": Rights.PATH_CREATE_DIRECTORY,
    "path_filestat_get": Rights.PATH_FILESTAT_GET,
    "path_filestat_set_times": Rights.PATH_FILESTAT_SET_TIMES,
    "path_link": Rights.PATH_LINK_SOURCE,
    "path_open": Rights.PATH_OPEN,
    "path_readlink": Rights.PATH_READLINK,
    "path_remove_directory": Rights.PATH_REMOVE_DIRECTORY,
    "path_rename": Rights.PATH_RENAME_SOURCE,
    "path_symlink": Rights.PATH_SYMLINK,
    "path_unlink_file": Rights.PATH_UNLINK_FILE,
}


def open_needs(oflags: int) -> int:
    """The rights ``path_open`` with ``oflags`` needs on its directory: ``PATH_OPEN``, and
    ``PATH_CREATE_FILE`` with ``creat``, ``PATH_FILESTAT_SET_SIZE`` with ``trunc`` (the witx's words).

    >>> open_needs(0) == Rights.PATH_OPEN
    True
    >>> needs = open_needs(OFLAG_CREAT | OFLAG_TRUNC)
    >>> needs == Rights.PATH_OPEN | Rights.PATH_CREATE_FILE | Rights.PATH_FILESTAT_SET_SIZE
    True
    """
    needs = Rights.PATH_OPEN
    if oflags & OFLAG_CREAT:
        needs |= Rights.PATH_CREATE_FILE
    if oflags & OFLAG_TRUNC:
        needs |= Rights.PATH_FILESTAT_SET_SIZE
    return needs


def open_rights(base: int, inheriting: int, directory: bool, passed_on: int) -> tuple[int, int] | None:
    """The new descriptor's ``(base, inheriting)`` rights for a ``path_open`` that asked for ``base`` and
    ``inheriting`` under a directory whose inheriting rights are ``passed_on``; None (``ENOTCAPABLE``)
    if it asked for a right that applies to what it opened and that the directory does not pass on.

    The witx lets an implementation return fewer rights than asked "if and only if those rights do
    not apply to the type of file being opened": those are dropped (a file's descriptor has no
    inheriting rights; a directory's no ``fd_read``), so wasi-libc's ``open``, which asks for every
    right its directory passes on, opens files and directories alike.

    >>> open_rights(Rights.FD_READ | Rights.PATH_OPEN, 0, False, FILE_RIGHTS) == (Rights.FD_READ, 0)
    True
    >>> open_rights(Rights.FD_WRITE, 0, False, Rights.FD_READ) is None
    True
    """
    base %= 2**64
    inheriting %= 2**64
    if directory:
        base, inheriting = base & DIRECTORY_RIGHTS, inheriting & (DIRECTORY_RIGHTS | FILE_RIGHTS)
    else:
        base, inheriting = base & FILE_RIGHTS, 0
    if (base | inheriting) & ~passed_on:
        return None
    return base, inheriting


# fdflags (u16), oflags (u16), lookupflags (u32), fstflags (u16), whence (u8), clockid (u32)
FDFLAG_APPEND: Final = 1
FDFLAG_DSYNC: Final = 2
FDFLAG_NONBLOCK: Final = 4
FDFLAG_RSYNC: Final = 8
FDFLAG_SYNC: Final = 16
OFLAG_CREAT: Final = 1
OFLAG_DIRECTORY: Final = 2
OFLAG_EXCL: Final = 4
OFLAG_TRUNC: Final = 8
FSTFLAG_ATIM: Final = 1
FSTFLAG_ATIM_NOW: Final = 2
FSTFLAG_MTIM: Final = 4
FSTFLAG_MTIM_NOW: Final = 8
WHENCE_SET: Final = 0
WHENCE_CUR: Final = 1
WHENCE_END: Final = 2
CLOCK_REALTIME: Final = 0
CLOCK_MONOTONIC: Final = 1
CLOCK_PROCESS_CPUTIME: Final = 2
CLOCK_THREAD_CPUTIME: Final = 3
EVENTTYPE_CLOCK: Final = 0
EVENTTYPE_FD_READ: Final = 1
EVENTTYPE_FD_WRITE: Final = 2
SUBCLOCK_ABSTIME: Final = 1
EVENTRW_HANGUP: Final = 1
PREOPENTYPE_DIR: Final = 0

# Struct layouts (little-endian, witx alignment).
FDSTAT: Final = struct.Struct("<BxHxxxxQQ")  # filetype u8, flags u16, rights_base u64, rights_inheriting u64
FILESTAT: Final = struct.Struct("<QQBxxxxxxxQQQQQ")  # dev, ino, filetype, nlink, size, atim, mtim, ctim
DIRENT: Final = struct.Struct("<QQIBxxx")  # d_next, d_ino, d_namlen, d_type (24 bytes, name follows)
PRESTAT: Final = struct.Struct("<BxxxI")  # tag u8, dir name length u32
IOVEC: Final = struct.Struct("<II")  # buf, buf_len
SUBSCRIPTION: Final = struct.Struct("<QB7xQQQH6x")  # userdata, tag, u (clock: id u32 as Q, timeout, precision, flags)
EVENT: Final = struct.Struct("<QHBxxxxxQH6x")  # userdata, error u16, type u8, nbytes u64, flags u16
U32: Final = struct.Struct("<I")
U64: Final = struct.Struct("<Q")


@dataclass(frozen=True, slots=True)
class FuncSpec:
    """One preview-1 function: core-wasm signature, the capabilities its effect needs, what it does here."""

    name: str
    params: tuple[str, ...]
    results: tuple[str, ...]
    needs: str
    meaning: str


def _f(name: str, params: str, needs: str, meaning: str, *, result: bool = True) -> FuncSpec:
    return FuncSpec(name, tuple(params.split()), ("i32",) if result else (), needs, meaning)


#: Every function of ``wasi_snapshot_preview1``, in witx order: signature, the capabilities its effect needs
#: ("—": none) and what it does here. docs/wasi.md has one row per entry, with these words (a test checks).
FUNCTIONS: Final[Mapping[str, FuncSpec]] = {
    f.name: f
    for f in (
        _f("args_get", "i32 i32", "—", "argv (argv[0] the spec's `argv0`, default the guest's CID)"),
        _f("args_sizes_get", "i32 i32", "—", "argc and the argv buffer size"),
        _f("environ_get", "i32 i32", "—", "the spec's `env`, sorted by name; nothing from the host"),
        _f("environ_sizes_get", "i32 i32", "—", "the number of variables and their buffer size"),
        _f("clock_res_get", "i32 i32", "—", "1 ns for realtime and monotonic; CPU-time clocks `ENOTSUP`"),
        _f(
            "clock_time_get",
            "i32 i64 i32",
            "—",
            "the host's clock (counted in `kuro/nondeterminism`), or the virtual one",
        ),
        _f("fd_advise", "i32 i64 i64 i32", "—", "accepted on a file and ignored; stdio `EBADF`, as wasmtime"),
        _f("fd_allocate", "i32 i64 i64", "`fs/write`", "grows the file to offset+len if shorter"),
        _f("fd_close", "i32", "—", "closes; a commit point"),
        _f("fd_datasync", "i32", "—", "a commit point"),
        _f(
            "fd_fdstat_get",
            "i32 i32",
            "—",
            "filetype, flags, rights (stdio: unknown filetype, not a tty; `fd_read` or `fd_write` only, as wasmtime)",
        ),
        _f(
            "fd_fdstat_set_flags",
            "i32 i32",
            "—",
            "`append`, `nonblock`, `dsync`, `rsync`, `sync` on a file; stdio `EBADF`, as wasmtime",
        ),
        _f(
            "fd_fdstat_set_rights",
            "i32 i64 i64",
            "—",
            "`ENOTSUP` (`EBADF` on stdio): rights are set at `path_open`, as on wasmtime",
        ),
        _f("fd_filestat_get", "i32 i32", "—", "device, inode, type, size; times 0 unless set this run"),
        _f(
            "fd_filestat_set_size",
            "i32 i64",
            "`fs/write`",
            "truncates or extends with zeros; not opened for writing `EINVAL`",
        ),
        _f(
            "fd_filestat_set_times",
            "i32 i64 i64 i32",
            "`fs/write`",
            "kept for the run only (bad flag pairs `EINVAL`); stdio `EBADF`",
        ),
        _f(
            "fd_pread",
            "i32 i32 i32 i64 i32",
            "`fs/read`",
            "reads at an offset; the cursor stays; stdin `ESPIPE`, stdout/stderr `EBADF`",
        ),
        _f("fd_prestat_get", "i32 i32", "—", "fd 3 is the directory `/`"),
        _f("fd_prestat_dir_name", "i32 i32 i32", "—", "`/`"),
        _f(
            "fd_pwrite",
            "i32 i32 i32 i64 i32",
            "`fs/write`",
            "writes at an offset (at the end with `append`); stdout/stderr `ESPIPE`, stdin `EBADF`",
        ),
        _f("fd_read", "i32 i32 i32 i32", "`fs/read`, or `stdin/read` for fd 0", "reads at the cursor; stdin blocks"),
        _f(
            "fd_readdir",
            "i32 i32 i32 i64 i32",
            "`fs/ls`",
            "`.`, `..`, then entries sorted by name; a file or stdio `EBADF`",
        ),
        _f("fd_renumber", "i32 i32", "—", "moves a descriptor onto another open one (closing it: a commit point)"),
        _f("fd_seek", "i32 i64 i32 i32", "—", "a file's cursor; stdio `ESPIPE`, a directory `EBADF`"),
        _f("fd_sync", "i32", "—", "a commit point"),
        _f("fd_tell", "i32 i32", "—", "a file's cursor"),
        _f("fd_write", "i32 i32 i32 i32", "`fs/write` for files", "fds 1/2: one stream chunk"),
        _f("path_create_directory", "i32 i32 i32", "`fs/write`", "mkdir"),
        _f("path_filestat_get", "i32 i32 i32 i32 i32", "`fs/ls`", "stat of a path"),
        _f("path_filestat_set_times", "i32 i32 i32 i32 i64 i64 i32", "`fs/write`", "kept for the run only"),
        _f("path_link", "i32 i32 i32 i32 i32 i32 i32", "—", "`ENOTSUP` (no hard links)"),
        _f(
            "path_open",
            "i32 i32 i32 i32 i32 i64 i64 i32 i32",
            "by what it opens (see *Capabilities*)",
            "open, create, truncate, exclusive; the lowest free descriptor number; a directory opened with"
            " `fd_write` is `EISDIR`; `directory` with `creat`, `excl` or `trunc` is `EINVAL` (as Linux and wasmtime)",
        ),
        _f("path_readlink", "i32 i32 i32 i32 i32 i32", "`fs/ls`", "`EINVAL` for an existing entry (never a link)"),
        _f("path_remove_directory", "i32 i32 i32", "`fs/rm`", "rmdir of an empty directory"),
        _f("path_rename", "i32 i32 i32 i32 i32 i32", "`fs/write` and `fs/rm`", "POSIX rename"),
        _f("path_symlink", "i32 i32 i32 i32 i32", "—", "`ENOTSUP` (no symlinks)"),
        _f("path_unlink_file", "i32 i32 i32", "`fs/rm`", "unlink; open descriptors keep the file"),
        _f(
            "poll_oneoff",
            "i32 i32 i32 i32",
            "`stdin/read` for fd 0",
            "clock and fd events; sleeps end on kill and the deadline; an fd it cannot wait on fails it (`EBADF`)",
        ),
        _f("proc_exit", "i32", "—", "ends the run with that code (0 `ok`, else `exit`); a commit point", result=False),
        _f("proc_raise", "i32", "—", "`ENOTSUP`"),
        _f("sched_yield", "", "—", "returns at once"),
        _f("random_get", "i32 i32", "—", "the host's entropy (counted), or the seeded stream"),
        _f("sock_accept", "i32 i32 i32", "—", "`ENOTSOCK` (no sockets)"),
        _f("sock_recv", "i32 i32 i32 i32 i32 i32", "—", "`ENOTSOCK`"),
        _f("sock_send", "i32 i32 i32 i32 i32", "—", "`ENOTSOCK`"),
        _f("sock_shutdown", "i32 i32", "—", "`ENOTSOCK`"),
    )
}


def check_import(name: str, params: tuple[str, ...], results: tuple[str, ...], kind: str) -> str | None:
    """None if ``wasi_snapshot_preview1.name`` with this signature is in :data:`FUNCTIONS`, else why not.

    >>> check_import("fd_write", ("i32",) * 4, ("i32",), "func") is None
    True
    >>> check_import("fd_frobnicate", (), ("i32",), "func")
    'import wasi_snapshot_preview1.fd_frobnicate: not a WASI preview 1 function'
    """
    where = f"import {MODULE}.{name}"
    spec = FUNCTIONS.get(name)
    if spec is None:
        return f"{where}: not a WASI preview 1 function"
    if kind != "func":
        return f"{where}: expected a function, the module imports a {kind}"
    if (params, results) != (spec.params, spec.results):
        got, want = FuncSig(params, results).text(), FuncSig(spec.params, spec.results).text()
        return f"{where}: signature {got} does not match WASI preview 1's {want}"
    return None


# ---- argv and environment


def check_arg_strings(args: list[object] | tuple[object, ...]) -> str | None:
    """None if every arg can be a C argv string (a str without NUL), else why not (a load-error text).

    >>> check_arg_strings(["in.txt", "-n"]) is None
    True
    >>> check_arg_strings(["a", 5])
    'arg 1 is an int; a WASI command takes its args as strings (argv), e.g. "5"'
    """
    for index, arg in enumerate(args):
        if not isinstance(arg, str):
            example = f', e.g. "{arg}"' if isinstance(arg, int | float) and not isinstance(arg, bool) else ""
            return f"arg {index} is {_a(type(arg).__name__)}; a WASI command takes its args as strings (argv){example}"
        if "\x00" in arg:
            return f"arg {index} contains a NUL character, which a C argv string cannot hold"
    return None


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def check_env(env: Mapping[str, str]) -> str | None:
    """None if ``env`` can be a C environment, else why not.

    >>> check_env({"LANG": "C"}) is None, check_env({"A=B": "x"})
    (True, "env name 'A=B' contains '='")
    """
    for name, value in env.items():
        if name == "" or "=" in name or "\x00" in name:
            return f"env name {name!r} " + ("is empty" if name == "" else "contains '='" if "=" in name else "has NUL")
        if "\x00" in value:
            return f"env value of {name!r} contains a NUL character"
    return None


def environ_strings(env: Mapping[str, str]) -> list[bytes]:
    """``NAME=value`` UTF-8 strings, sorted by name's bytes (a stable order: the receipt must not depend on it).

    >>> environ_strings({"b": "2", "a": "1"})
    [b'a=1', b'b=2']
    """
    return [f"{k}={v}".encode() for k, v in sorted(env.items(), key=lambda kv: kv[0].encode())]


# ---- the deterministic clock and random stream

#: A run with ``deterministic=True`` reads realtime from 2024-01-01T00:00:00Z …
DETERMINISTIC_REALTIME_START_NS: Final = 1_704_067_200 * 10**9
#: … monotonic from 1 s …
DETERMINISTIC_MONOTONIC_START_NS: Final = 10**9
#: … and every reading advances both by 1 µs (so elapsed times are positive); a sleep advances them by its length.
DETERMINISTIC_TICK_NS: Final = 1_000


class SeededBytes:
    """The random stream of a deterministic run: SHA-256 in counter mode over the seed.

    Block ``i`` is ``sha256(b"kuro-wasi-random" || seed as 8 bytes || i as 8 bytes)``; the stream is
    the blocks in order, so the same seed gives the same bytes whatever the read sizes.

    >>> a, b = SeededBytes(7), SeededBytes(7)
    >>> a.take(5) + a.take(40) == b.take(45)
    True
    """

    __slots__ = ("_buf", "_counter", "_seed")

    def __init__(self, seed: int) -> None:
        self._seed = (seed % 2**64).to_bytes(8, "little")
        self._counter = 0
        self._buf = b""

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes of the stream."""
        parts = [self._buf]
        have = len(self._buf)
        while have < n:
            block = hashlib.sha256(b"kuro-wasi-random" + self._seed + self._counter.to_bytes(8, "little")).digest()
            self._counter += 1
            parts.append(block)
            have += len(block)
        joined = b"".join(parts)
        self._buf = joined[n:]
        return joined[:n]
