"""The kuro guest ABI, version 1, as data: imports, error codes, bounds checks.

## The one decision
What a guest may ask of the host is one literal table, :data:`IMPORTS`: seven
functions in the import module ``"kuro"``, each with an exact wasm signature and
the one capability it needs. The loader refuses any module that imports
anything else (another module, another name, or a known name with another
signature), so a guest's possible effects can be read off this table. Errors
are negative ``i32`` values (:class:`ErrorCode`), never exceptions: a refused
or failed call returns to the guest, which keeps running.

Pointers are ``u32`` offsets into the guest's exported ``memory``; a
``(ptr, len)`` pair is accepted only if the whole range lies inside the memory
as it is *now* (:func:`checked_range`). A pair that does not is ``FAULT``
(-5): the host never reads or writes outside the guest's memory.

## Pure
No wasmtime, no I/O. :mod:`kuro_wasm.host.kinds.kuro_v1` binds this table to wasmtime,
:mod:`kuro_wasm.host.loader` checks modules against it, ``docs/abi.md`` and the
tests iterate over it.

## Not done here
No clocks, no randomness, no network in this ABI (a program that needs them is a
WASI command: :mod:`kuro_wasm.model.wasi`). No string arguments to exports (numbers only).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final

__all__ = [
    "ABI_VERSION",
    "ARG_KINDS",
    "FD_STDERR",
    "FD_STDOUT",
    "I32_MAX",
    "IMPORTS",
    "IMPORTS_BY_NAME",
    "IMPORT_MODULE",
    "REASON_CODES",
    "ErrorCode",
    "ImportSpec",
    "check_args",
    "check_import",
    "checked_range",
    "clamp_i32",
    "error_for_reason",
    "number_of_word",
    "numbers_from_words",
]

ABI_VERSION: Final = 1
IMPORT_MODULE: Final = "kuro"
FD_STDOUT: Final = 1
FD_STDERR: Final = 2
I32_MAX: Final = 2**31 - 1
_U32: Final = 2**32


class ErrorCode(IntEnum):
    """The negative ``i32`` results an import may return instead of its value."""

    DENIED = -1  #: capability not granted; the call is recorded in ``kuro/denials``
    NOT_FOUND = -2  #: no such file or directory
    WRONG_TYPE = -3  #: not a file / is a directory / not a directory / path blocked by a file
    BAD_PATH = -4  #: traversal, not UTF-8, empty, a control character, a whitespace-only segment
    FAULT = -5  #: a pointer/length outside the guest's memory (or a negative file offset)
    NOT_EMPTY = -6  #: directory not empty
    IO = -7  #: a block missing or corrupt
    BAD_FD = -8  #: ``write`` to an fd other than 1 or 2
    TOO_LARGE = -9  #: more than the fs budget lets one call materialise (kuro.fs ``over-budget``)


@dataclass(frozen=True, slots=True)
class ImportSpec:
    """One import of the ABI: its name, wasm signature, capability and meaning."""

    name: str
    params: tuple[str, ...]
    results: tuple[str, ...]
    capability: str | None
    meaning: str


#: The whole ABI v1 import table. Order is documentation order.
IMPORTS: Final[tuple[ImportSpec, ...]] = (
    ImportSpec(
        "write",
        ("i32", "i32", "i32"),
        ("i32",),
        None,
        "write(fd, ptr, len): fd 1 stdout, 2 stderr; returns len; the bytes become one stream chunk now",
    ),
    ImportSpec(
        "read",
        ("i32", "i32"),
        ("i32",),
        "stdin/read",
        "read(ptr, cap): stdin; blocks until bytes arrive; returns bytes copied, 0 at end of input",
    ),
    ImportSpec(
        "fs_read",
        ("i32", "i32", "i32", "i32"),
        ("i32",),
        "fs/read",
        "fs_read(path_ptr, path_len, buf_ptr, buf_cap): copies min(size, cap) bytes; returns the full size",
    ),
    ImportSpec(
        "fs_read_at",
        ("i32", "i32", "i64", "i32", "i32"),
        ("i32",),
        "fs/read",
        "fs_read_at(path_ptr, path_len, offset, buf_ptr, buf_cap): copies from offset; returns bytes copied",
    ),
    ImportSpec(
        "fs_write",
        ("i32", "i32", "i32", "i32"),
        ("i32",),
        "fs/write",
        "fs_write(path_ptr, path_len, data_ptr, data_len): replaces or creates the file; returns 0",
    ),
    ImportSpec(
        "fs_ls",
        ("i32", "i32", "i32", "i32"),
        ("i32",),
        "fs/ls",
        "fs_ls(path_ptr, path_len, buf_ptr, buf_cap): 'name\\n' sorted, dirs 'name/\\n'; returns full length",
    ),
    ImportSpec(
        "fs_rm",
        ("i32", "i32"),
        ("i32",),
        "fs/rm",
        "fs_rm(path_ptr, path_len): removes a file or an empty directory; returns 0",
    ),
)

IMPORTS_BY_NAME: Final[dict[str, ImportSpec]] = {spec.name: spec for spec in IMPORTS}

#: kuro.fs denial reason → the error code a guest sees. Every reason kuro.fs can give is here.
REASON_CODES: Final[dict[str, ErrorCode]] = {
    "missing-capability": ErrorCode.DENIED,
    "not-found": ErrorCode.NOT_FOUND,
    "not-a-file": ErrorCode.WRONG_TYPE,
    "is-a-directory": ErrorCode.WRONG_TYPE,
    "not-a-directory": ErrorCode.WRONG_TYPE,
    "path-blocked": ErrorCode.WRONG_TYPE,
    "bad-path": ErrorCode.BAD_PATH,
    "directory-not-empty": ErrorCode.NOT_EMPTY,
    "block-missing": ErrorCode.IO,
    "bad-range": ErrorCode.FAULT,  # a negative file offset: the guest asked for a range that cannot exist
    "bytes-required": ErrorCode.IO,  # cannot come from a guest (the host always passes bytes)
    "over-budget": ErrorCode.TOO_LARGE,  # a read longer than the Fs budget's bytes (a host may set it low)
}

#: The wasm value kinds an export parameter may have, and the Python scalars each accepts.
ARG_KINDS: Final[tuple[str, ...]] = ("i32", "i64", "f32", "f64")
_INT_RANGES: Final[dict[str, tuple[int, int]]] = {"i32": (-(2**31), 2**32 - 1), "i64": (-(2**63), 2**64 - 1)}


def error_for_reason(reason: object) -> ErrorCode:
    """The error code for a kuro.fs denial ``reason``; an unknown reason is ``IO``.

    Unknown reasons map to ``IO`` rather than raising: a reason added to kuro.fs
    later must not turn into a host crash inside an import.

    >>> int(error_for_reason("not-found")), int(error_for_reason("something-new"))
    (-2, -7)
    """
    if isinstance(reason, str):
        return REASON_CODES.get(reason, ErrorCode.IO)
    return ErrorCode.IO


def checked_range(memory_size: int, ptr: int, length: int) -> tuple[int, int] | None:
    """``(start, end)`` if ``[ptr, ptr+length)`` lies inside a memory of ``memory_size`` bytes, else None.

    ``ptr`` and ``length`` arrive as signed ``i32`` values; both are read as
    ``u32`` (a negative length is a huge one, hence a fault, never a short
    read). A zero-length range at ``ptr == memory_size`` is in bounds.

    >>> checked_range(65536, 0, 10)
    (0, 10)
    >>> checked_range(65536, 65530, 10) is None, checked_range(65536, -1, 1) is None
    (True, True)
    >>> checked_range(65536, 65536, 0)
    (65536, 65536)
    """
    start = ptr % _U32
    end = start + length % _U32
    if end > memory_size or memory_size < 0:
        return None
    return start, end


def clamp_i32(value: int) -> int:
    """``value`` capped at ``I32_MAX``: sizes beyond 2 GiB are reported as 2**31-1 ("at least this much").

    >>> clamp_i32(5), clamp_i32(2**40)
    (5, 2147483647)
    """
    return value if value <= I32_MAX else I32_MAX


def check_import(module: str, name: str, params: tuple[str, ...], results: tuple[str, ...], kind: str) -> str | None:
    """None if the import ``module.name`` of ``kind`` with this signature is in the ABI, else why not.

    ``kind`` is the extern kind (``func``, ``memory``, ``table``, ``global``, …).
    The returned message names the offending import, for the load-error receipt.

    >>> check_import("kuro", "write", ("i32", "i32", "i32"), ("i32",), "func") is None
    True
    >>> check_import("wasi_snapshot_preview1", "fd_write", ("i32",) * 4, ("i32",), "func")
    "import wasi_snapshot_preview1.fd_write: module 'wasi_snapshot_preview1' is not provided (only 'kuro')"
    """
    where = f"import {module}.{name}"
    if module != IMPORT_MODULE:
        return f"{where}: module {module!r} is not provided (only {IMPORT_MODULE!r})"
    spec = IMPORTS_BY_NAME.get(name)
    if spec is None:
        return f"{where}: not in the kuro ABI v{ABI_VERSION} (known: {', '.join(sorted(IMPORTS_BY_NAME))})"
    if kind != "func":
        return f"{where}: expected a function, the module imports a {kind}"
    if params != spec.params or results != spec.results:
        want = f"({' '.join(spec.params)}) -> ({' '.join(spec.results)})"
        got = f"({' '.join(params)}) -> ({' '.join(results)})"
        return f"{where}: signature {got} does not match the ABI's {want}"
    return None


def check_args(params: tuple[str, ...], args: tuple[object, ...] | list[object]) -> str | None:
    """None if ``args`` fit an export taking ``params``, else why not.

    Integers go to ``i32``/``i64`` parameters (within the signed-or-unsigned
    range of the width); ints and floats go to ``f32``/``f64``. Booleans are
    refused: ``True`` is not a number a guest asked for.

    >>> check_args(("i32", "i32"), [40, 2]) is None
    True
    >>> check_args(("i32",), [1, 2])
    'the export takes 1 argument(s), 2 given'
    >>> check_args(("i32",), [2**32])
    'argument 0: 4294967296 does not fit i32'
    """
    if len(params) != len(args):
        return f"the export takes {len(params)} argument(s), {len(args)} given"
    for index, (kind, arg) in enumerate(zip(params, args, strict=True)):
        if kind not in ARG_KINDS:
            return f"argument {index}: parameter type {kind} is not supported (only {', '.join(ARG_KINDS)})"
        if isinstance(arg, bool) or not isinstance(arg, int | float):
            return f"argument {index}: {arg!r} is not a number"
        if kind in _INT_RANGES:
            if not isinstance(arg, int):
                return f"argument {index}: {arg!r} is not an integer, the parameter is {kind}"
            low, high = _INT_RANGES[kind]
            if not low <= arg <= high:
                return f"argument {index}: {arg} does not fit {kind}"
    return None


def number_of_word(text: str) -> int | float | None:
    """The number a command-line word spells (an int, ``0x…`` hex, or a float), or None.

    >>> number_of_word("42"), number_of_word("-0x10"), number_of_word("2.5"), number_of_word("cat")
    (42, -16, 2.5, None)
    """
    try:
        return int(text, 0) if text.lower().startswith(("0x", "-0x")) else int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def numbers_from_words(words: list[str] | tuple[str, ...]) -> list[int | float] | str:
    """A core export's args from command-line words (each a number), or why not.

    >>> numbers_from_words(["1", "2.5"]), numbers_from_words(["1", "cat"])
    ([1, 2.5], "argument 1 'cat' is not a number (this export's args are ints or floats)")
    """
    out: list[int | float] = []
    for index, word in enumerate(words):
        number = number_of_word(word)
        if number is None:
            return f"argument {index} {word!r} is not a number (this export's args are ints or floats)"
        out.append(number)
    return out
