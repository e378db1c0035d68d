"""One ``bytes`` object filled in place: how a whole-file read returns ``bytes`` without a second copy.

## The one decision
A read of n bytes returns an immutable ``bytes`` — the type every caller of
``Fs.read`` expects — holding the file **once**. Joining the pieces
(``b"".join``) keeps every piece alive until the join (2× the file at the peak:
2.1 GB for a 1 GiB file), and filling a ``bytearray`` and converting it copies
it. CPython's own readers (``os.read``, ``FileIO.readall``) allocate an
uninitialised ``bytes`` of the final size and read into it before anyone else
sees it; :func:`fill_bytes` does the same through the C API
(``PyBytes_FromStringAndSize(NULL, n)``), hands the filler a writable view of
it, and returns the object only if the filler reports every byte written — so
uninitialised memory never escapes. The object's hash is not cached before it is
filled (CPython computes it lazily), and no one else holds a reference until it
is returned.

This is hand-written on purpose (no library returns a bytes filled in place);
``tests/fs/test_fileread.py`` checks it against ``bytes(bytearray)`` and that a
short fill never returns the object.

## Effects
Memory only. Uses :mod:`ctypes` on CPython; elsewhere (or below
:data:`IN_PLACE_MIN` bytes, where a copy costs nothing) it fills a ``bytearray``
and copies it once.

## Not done here
No bound on ``n``: the caller decides how much it may allocate.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Final

__all__ = ["IN_PLACE_MIN", "fill_bytes"]

#: Below this many bytes the filler gets a bytearray that is copied once (cheaper than the C calls).
IN_PLACE_MIN: Final = 1 << 16


def _c_api() -> tuple[Callable[[None, int], bytes], Callable[[bytes], int]] | None:
    if sys.implementation.name != "cpython":
        return None
    try:
        new = ctypes.pythonapi.PyBytes_FromStringAndSize
        address = ctypes.pythonapi.PyBytes_AsString
    except AttributeError:
        return None
    new.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    new.restype = ctypes.py_object
    address.argtypes = (ctypes.py_object,)
    address.restype = ctypes.c_void_p
    return new, address


_API: Final = _c_api()


def fill_bytes(n: int, fill: Callable[[memoryview], int]) -> bytes:
    """A new ``bytes`` of length ``n`` whose content ``fill`` writes into the view it is given.

    ``fill`` must write all ``n`` bytes and return ``n``, and must not keep the
    view. If it raises, its exception propagates and the object is dropped.

    >>> fill_bytes(3, lambda view: view.__setitem__(slice(None), b"abc") or 3)
    b'abc'

    Raises ValueError: ``n`` is negative, or ``fill`` returned another count. Raises MemoryError: ``n``
    is more than any buffer can hold (above ``sys.maxsize``) or than memory can give.
    """
    if n < 0:
        raise ValueError(f"a length is a non-negative int, got {n}")
    if n > sys.maxsize:  # (the C API's size is signed: a larger n would wrap negative)
        raise MemoryError(f"no buffer holds {n} bytes")
    if _API is None or n < IN_PLACE_MIN:
        buffer = bytearray(n)
        with memoryview(buffer) as view:
            done = fill(view)
        _check(done, n)
        return bytes(buffer)
    new, address = _API
    data = new(None, n)  # uninitialised; nobody but this frame holds it until it is returned
    with memoryview((ctypes.c_char * n).from_address(address(data))).cast("B") as view:
        done = fill(view)
    _check(done, n)
    return data


def _check(done: int, n: int) -> None:
    if done != n:
        raise ValueError(f"the filler wrote {done!r} of {n} bytes")
