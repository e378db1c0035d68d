#!/usr/bin/env python3
"""An independent CID mint: CIDv1, sha2-256, base32 — sharing no code with kuro_fs.

## The one decision
This file imports nothing from ``kuro_fs`` or ``multiformats`` (and not the
``base64`` module either): only ``hashlib`` plus a hand-written unsigned varint
and a hand-written RFC 4648 base32 encoder (bits drained MSB-first, the last
partial group left-shifted with zero fill, lower case, no padding). A second
implementation that shares nothing with the first is what makes the parity test
in ``tests/parity/test_mint_parity.py`` a check rather than a tautology.

Usage::

    python tools/cid_mint.py FILE...            # raw codec: 'CID  FILE' per line
    python tools/cid_mint.py --codec dag-cbor F  # F is an already-encoded block
    python tools/cid_mint.py -                   # read standard input

## Effects
Reads the named files (streamed in 1 MiB chunks) or stdin; writes stdout/stderr.
Exit 0 when every input was minted, 2 when any could not be read or on a usage
error (one line on stderr per unreadable input; the readable ones still print).

## Not done here
No parsing of CIDs, no CIDv0, no other hashes or bases, no dag-pb/dag-cbor
encoding: bytes given with ``--codec`` are hashed as they are.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Sequence
from typing import BinaryIO

__all__ = ["CODECS", "base32_lower", "main", "mint", "mint_digest", "mint_stream", "varint"]

#: multicodec codes for the block codecs this mint names.
CODECS = {"raw": 0x55, "dag-pb": 0x70, "dag-cbor": 0x71}
_SHA2_256 = 0x12
_CID_V1 = 1
_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
_CHUNK = 1 << 20


def varint(n: int) -> bytes:
    """Unsigned LEB128: 7 bits per byte, least significant group first, high bit = more.

    >>> varint(0x55).hex(), varint(300).hex()
    ('55', 'ac02')
    """
    if n < 0:
        raise ValueError("varint: negative value")
    out = bytearray()
    while True:
        group = n & 0x7F
        n >>= 7
        if n:
            out.append(group | 0x80)
        else:
            out.append(group)
            return bytes(out)


def base32_lower(data: bytes) -> str:
    """RFC 4648 base32, lower case, no padding.

    >>> [base32_lower(s) for s in (b"", b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar")]
    ['', 'my', 'mzxq', 'mzxw6', 'mzxw6yq', 'mzxw6ytb', 'mzxw6ytboi']
    """
    chars: list[str] = []
    acc = 0
    bits = 0
    for byte in data:
        acc = (acc << 8) | byte
        bits += 8
        while bits >= 5:
            bits -= 5
            chars.append(_ALPHABET[(acc >> bits) & 31])
        acc &= (1 << bits) - 1
    if bits:
        chars.append(_ALPHABET[(acc << (5 - bits)) & 31])
    return "".join(chars)


def mint_digest(digest: bytes, codec: str = "raw") -> str:
    """Frame an already computed sha2-256 ``digest`` as a CIDv1 string of ``codec``."""
    if codec not in CODECS:
        raise ValueError(f"unknown codec {codec!r}; expected one of {sorted(CODECS)}")
    if len(digest) != 32:
        raise ValueError(f"sha2-256 digest must be 32 bytes, got {len(digest)}")
    binary = varint(_CID_V1) + varint(CODECS[codec]) + varint(_SHA2_256) + varint(len(digest)) + digest
    return "b" + base32_lower(binary)


def mint(data: bytes, codec: str = "raw") -> str:
    """The CIDv1 (sha2-256, base32) of ``data`` as a block of ``codec``.

    >>> mint(b"hello")
    'bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq'
    """
    return mint_digest(hashlib.sha256(data).digest(), codec)


def mint_stream(stream: BinaryIO, codec: str = "raw") -> str:
    """The CID of everything left in a binary ``stream``, read in 1 MiB chunks."""
    h = hashlib.sha256()
    while chunk := stream.read(_CHUNK):
        h.update(chunk)
    return mint_digest(h.digest(), codec)


def _mint_arg(name: str, codec: str) -> str:
    if name == "-":
        return mint_stream(sys.stdin.buffer, codec)
    with open(name, "rb") as f:
        return mint_stream(f, codec)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 ok, 2 unreadable input or usage error)."""
    parser = argparse.ArgumentParser(
        prog="cid_mint.py", description="Print the CIDv1 (sha2-256, base32) of each FILE as 'CID  FILE'."
    )
    parser.add_argument("--codec", choices=sorted(CODECS), default="raw", help="block codec (default: raw)")
    parser.add_argument("files", nargs="+", metavar="FILE", help="file to hash; '-' reads standard input")
    args = parser.parse_args(argv)
    status = 0
    for name in args.files:
        try:
            cid = _mint_arg(name, args.codec)
        except OSError as exc:
            print(f"cid_mint: cannot read {name}: {exc.strerror or exc}", file=sys.stderr)
            status = 2
            continue
        print(f"{cid}  {name}")
    return status


if __name__ == "__main__":
    sys.exit(main())
