"""Unsigned LEB128 varints: the integers inside CIDs, multihashes, dag-pb and CAR framing.

## The one decision
Only the minimal form is read: a varint with a trailing ``0x00`` continuation byte, longer than
10 bytes or above 2^64−1 is refused with ``ValueError``, because the same number written two ways
would give the same block two names (multiformats' unsigned-varint rules). Callers translate the
``ValueError`` into their own error (:class:`~kuro_fs.errors.InvalidCID`, ``DagPbError``, ``CarError``).

## Pure
No I/O.

## Not done here
No signed or zig-zag varints (no IPLD format kuro reads uses them).
"""

from __future__ import annotations

from typing import Final

__all__ = ["decode_uvarint", "encode_uvarint"]

_MAX_VARINT_BYTES: Final = 10  # 64-bit values


def encode_uvarint(value: int) -> bytes:
    """The minimal unsigned LEB128 varint of ``value`` (0 ≤ value < 2^64).

    >>> encode_uvarint(0).hex(), encode_uvarint(300).hex(), encode_uvarint(262144).hex()
    ('00', 'ac02', '808010')

    Raises ValueError: if ``value`` is negative or does not fit in 64 bits.
    """
    if value < 0 or value >= 1 << 64:
        raise ValueError(f"uvarint out of range: {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(buf: bytes | memoryview, pos: int = 0) -> tuple[int, int]:
    """Read one minimal uvarint at ``pos``; return ``(value, next_pos)``.

    >>> decode_uvarint(bytes.fromhex("ac02"))
    (300, 2)

    Raises ValueError: if the varint is truncated, longer than 10 bytes, above
    2^64−1, or not minimal (a trailing ``0x00`` continuation byte).
    """
    value = 0
    shift = 0
    start = pos
    end = len(buf)
    while True:
        if pos >= end:
            raise ValueError(f"truncated varint at offset {start}")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if byte == 0 and pos - start > 1:
                raise ValueError(f"non-minimal varint at offset {start}")
            break
        shift += 7
        if pos - start >= _MAX_VARINT_BYTES:
            raise ValueError(f"varint longer than {_MAX_VARINT_BYTES} bytes at offset {start}")
    if value >= 1 << 64:
        raise ValueError(f"varint above 2^64-1 at offset {start}")
    return value, pos
