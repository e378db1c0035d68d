"""Which WASI preview 1 arguments are no value of their witx type — and so trap the guest, not answer an errno.

## The one decision
A call whose flags argument has a bit its witx ``flags`` type does not name (or does not fit its
width), whose enum argument is past the enum's last case, or whose pointer is not aligned to what it
points at, **traps**: it does nothing and answers nothing. That is what wasmtime's built-in WASI does
(50.0.1: the call fails before it looks at a descriptor — ``Invalid flag value Fdflags``, ``Invalid
enum value Clockid``, ``Pointer not aligned to 8``), and for pointers it is the witx rule ("If a
misaligned pointer is passed to a function, the function shall trap", ``legacy/tools/witx-docs.md``).
No errno would be honest: ``EINVAL`` says the *value* was refused, but the guest did not pass a value
of the type at all. The check runs before anything else of the call, as wasmtime checks flags and
enums; alignment is checked there too — wasmtime checks it only when it reaches the pointer, so a
misaligned result pointer of a call on a closed descriptor is ``EBADF`` there and a trap here, as the
witx rule says. A pointer outside memory stays ``EFAULT`` (:mod:`kuro_wasm.host.wasi_guest`).

Each rule is one parameter of one function: a mask of the bits it may not have (a flags type's
unnamed bits, a pointer's low bits) or the number of cases of its enum. Parameters arrive as the
signed core-wasm values; a negative one has its high bits set, which every mask forbids.

## Pure
Values only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["RULES", "Rule", "broken"]

_ALL_RIGHTS: Final = (1 << 30) - 1
_LOOKUPFLAGS: Final = 0x1  # symlink_follow
_OFLAGS: Final = 0xF  # creat, directory, excl, trunc
_FDFLAGS: Final = 0x1F  # append, dsync, nonblock, rsync, sync
_FSTFLAGS: Final = 0xF  # atim, atim_now, mtim, mtim_now
_RIFLAGS: Final = 0x3  # recv_peek, recv_waitall
_SDFLAGS: Final = 0x3  # rd, wr


@dataclass(frozen=True, slots=True)
class Rule:
    """Parameter ``index`` of a call holds a ``what``: it may not have any bit of ``forbidden`` set, and, for an
    enum (``cases`` > 0), must be below ``cases``."""

    index: int
    what: str
    forbidden: int = 0
    cases: int = 0

    def why(self, name: str, value: int) -> str | None:
        """None if ``value`` is a value of this parameter's type, else the trap's message.

        >>> Rule(1, "fdflags", ~0x1F).why("fd_fdstat_set_flags", 0x20)
        'wasi: fd_fdstat_set_flags: fdflags 0x20 has a bit the type does not name (the guest traps, as on wasmtime)'
        >>> Rule(0, "clockid", cases=4).why("clock_res_get", 3) is None
        True
        """
        if self.cases:
            if 0 <= value < self.cases:
                return None
            cases = f"it has {self.cases} cases"
            return f"wasi: {name}: {value} is no {self.what} ({cases}; the guest traps, as on wasmtime)"
        if not value & self.forbidden:
            return None
        shown = f"{self.what} {value % 2**64:#x}"
        if self.what.startswith("pointer"):
            return f"wasi: {name}: {shown} is misaligned (witx: the function shall trap)"
        return f"wasi: {name}: {shown} has a bit the type does not name (the guest traps, as on wasmtime)"


def _flags(index: int, what: str, named: int) -> Rule:
    return Rule(index, what, ~named)


def _ptr(index: int, align: int, to: str) -> Rule:
    return Rule(index, f"pointer to {to} (aligned to {align})", align - 1)


def _enum(index: int, what: str, cases: int) -> Rule:
    return Rule(index, what, cases=cases)


_SIZE: Final = (4, "size")
_IOVECS: Final = (4, "iovecs")
_TIMESTAMP: Final = (8, "timestamp")

#: By function: the parameters whose value the witx type constrains beyond its core-wasm type.
RULES: Final[Mapping[str, tuple[Rule, ...]]] = {
    "args_get": (_ptr(0, 4, "pointers"),),
    "args_sizes_get": (_ptr(0, *_SIZE), _ptr(1, *_SIZE)),
    "environ_get": (_ptr(0, 4, "pointers"),),
    "environ_sizes_get": (_ptr(0, *_SIZE), _ptr(1, *_SIZE)),
    "clock_res_get": (_enum(0, "clockid", 4), _ptr(1, *_TIMESTAMP)),
    "clock_time_get": (_enum(0, "clockid", 4), _ptr(2, *_TIMESTAMP)),
    "fd_advise": (_enum(3, "advice", 6),),
    "fd_fdstat_get": (_ptr(1, 8, "fdstat"),),
    "fd_fdstat_set_flags": (_flags(1, "fdflags", _FDFLAGS),),
    "fd_fdstat_set_rights": (_flags(1, "rights", _ALL_RIGHTS), _flags(2, "rights", _ALL_RIGHTS)),
    "fd_filestat_get": (_ptr(1, 8, "filestat"),),
    "fd_filestat_set_times": (_flags(3, "fstflags", _FSTFLAGS),),
    "fd_pread": (_ptr(1, *_IOVECS), _ptr(4, *_SIZE)),
    "fd_prestat_get": (_ptr(1, 4, "prestat"),),
    "fd_pwrite": (_ptr(1, *_IOVECS), _ptr(4, *_SIZE)),
    "fd_read": (_ptr(1, *_IOVECS), _ptr(3, *_SIZE)),
    "fd_readdir": (_ptr(4, *_SIZE),),
    "fd_seek": (_enum(2, "whence", 3), _ptr(3, 8, "filesize")),
    "fd_tell": (_ptr(1, 8, "filesize"),),
    "fd_write": (_ptr(1, *_IOVECS), _ptr(3, *_SIZE)),
    "path_filestat_get": (_flags(1, "lookupflags", _LOOKUPFLAGS), _ptr(4, 8, "filestat")),
    "path_filestat_set_times": (_flags(1, "lookupflags", _LOOKUPFLAGS), _flags(6, "fstflags", _FSTFLAGS)),
    "path_link": (_flags(1, "lookupflags", _LOOKUPFLAGS),),
    "path_open": (
        _flags(1, "lookupflags", _LOOKUPFLAGS),
        _flags(4, "oflags", _OFLAGS),
        _flags(5, "rights", _ALL_RIGHTS),
        _flags(6, "rights", _ALL_RIGHTS),
        _flags(7, "fdflags", _FDFLAGS),
        _ptr(8, 4, "fd"),
    ),
    "path_readlink": (_ptr(5, *_SIZE),),
    "poll_oneoff": (_ptr(0, 8, "subscriptions"), _ptr(1, 8, "events"), _ptr(3, *_SIZE)),
    "proc_raise": (_enum(0, "signal", 31),),
    "sock_accept": (_flags(1, "fdflags", _FDFLAGS), _ptr(2, 4, "fd")),
    "sock_recv": (_ptr(1, *_IOVECS), _flags(3, "riflags", _RIFLAGS), _ptr(4, *_SIZE), _ptr(5, 2, "roflags")),
    "sock_send": (_ptr(1, *_IOVECS), _flags(3, "siflags", 0xFFFF), _ptr(4, *_SIZE)),  # a plain u16, no flags
    "sock_shutdown": (_flags(1, "sdflags", _SDFLAGS),),
}


def broken(name: str, params: tuple[int, ...]) -> str | None:
    """None if every argument of call ``name`` is a value of its witx type, else why the guest traps.

    >>> broken("fd_fdstat_get", (1, 8)) is None, broken("fd_fdstat_get", (1, 1))
    (True, 'wasi: fd_fdstat_get: pointer to fdstat (aligned to 8) 0x1 is misaligned (witx: the function shall trap)')
    """
    for rule in RULES.get(name, ()):
        why = rule.why(name, params[rule.index])
        if why is not None:
            return why
    return None
