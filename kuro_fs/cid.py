"""Content identifiers: CIDv1, sha2-256, base32 — the names every block is stored under.

## The one decision
kuro accepts exactly one CID profile: version 1, multihash sha2-256 with a
32-byte digest, codec raw (0x55), dag-pb (0x70) or dag-cbor (0x71), and the
string form multibase base32 lower-case without padding (``b…``). That is what
the JavaScript IPFS stack mints for CIDv1 by default, so our names for the same
bytes are theirs, byte for byte. Anything else — CIDv0 (``Qm…``), other
multibases, other hashes, truncated digests — is refused with
:class:`~kuro_fs.errors.InvalidCID` instead of being half-understood.

Minting uses ``hashlib`` and a table-driven base32 of the fixed 36-byte binary
form (three times ``base64.b32encode``'s speed: it runs once per block stored,
so a million-block import spent seconds in it); the canonical string form is
parsed by ``int(…, 32)`` over a translated alphabet. Anything else goes through
the ``multiformats`` package and then checks the profile. Both fast paths are
checked against ``base64`` in ``tests/fs/test_cid.py``.
An independent mint that shares no code with this module lives in
``tools/cid_mint.py`` and a parity test keeps the two honest.

## Pure
No I/O. Values in, values out.

## Not done here
No identity hashes, no CIDv0 output, no other multibases.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from dataclasses import dataclass
from typing import Final

from multiformats import CID as _MfCID

from kuro_fs.errors import InvalidCID

__all__ = [
    "CODECS",
    "ParsedCID",
    "cid_bytes",
    "cid_for",
    "cid_from_bytes",
    "cid_from_digest",
    "format_binary",
    "parse",
    "parse_cid",
    "raw_cid",
    "verify",
]

#: The codec table: name → multicodec code. The only codecs kuro names blocks with.
CODECS: Final[dict[str, int]] = {"raw": 0x55, "dag-pb": 0x70, "dag-cbor": 0x71}
_CODEC_NAMES: Final[dict[int, str]] = {code: name for name, code in CODECS.items()}
_SHA2_256: Final = 0x12
_DIGEST_LEN: Final = 32
# Every varint in this profile fits in one byte, so the binary prefix is 4 fixed bytes.
_PREFIX: Final[dict[str, bytes]] = {name: bytes([1, code, _SHA2_256, _DIGEST_LEN]) for name, code in CODECS.items()}


@dataclass(frozen=True, slots=True)
class ParsedCID:
    """A CID that passed :func:`parse`: codec name, raw 32-byte digest, binary form.

    >>> c = parse_cid("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
    >>> (c.version, c.codec, c.hash, len(c.digest))
    (1, 'raw', 'sha2-256', 32)
    """

    codec: str
    digest: bytes
    version: int = 1
    hash: str = "sha2-256"

    @property
    def bytes(self) -> bytes:
        """The binary CID (36 bytes): ``01 codec 12 20 ‖ digest``."""
        return _PREFIX[self.codec] + self.digest

    def __str__(self) -> str:
        return _encode(self.bytes)

    def to_data(self) -> str:
        """The CID's string form; CIDs cross module boundaries as strings."""
        return str(self)


_PREFIX_CODEC: Final[dict[bytes, str]] = {prefix: name for name, prefix in _PREFIX.items()}
_CANONICAL_LEN: Final = 59  # "b" + base32 of 36 bytes, unpadded
_CANONICAL: Final = re.compile(r"b[a-z2-7]{58}")


_B32: Final = "abcdefghijklmnopqrstuvwxyz234567"
_PAIRS: Final = tuple(a + b for a in _B32 for b in _B32)  # every 10-bit value as two base32 characters
_TO_B32HEX: Final = str.maketrans(_B32, "0123456789abcdefghijklmnopqrstuv")  # int(…, 32)'s digits


def _encode(binary: bytes) -> str:
    if len(binary) != 36:  # every CID of this profile is 36 bytes; anything else takes the library path
        return "b" + base64.b32encode(binary).decode("ascii").rstrip("=").lower()
    # 36 bytes = 288 bits = 57.6 characters: three integers of 120, 120 and 48 (+2 zero) bits, 10 at a time.
    t = _PAIRS
    a = int.from_bytes(binary[:15], "big")
    b = int.from_bytes(binary[15:30], "big")
    c = int.from_bytes(binary[30:], "big") << 2
    m = 1023
    return "".join(
        (
            "b", t[a >> 110], t[a >> 100 & m], t[a >> 90 & m], t[a >> 80 & m], t[a >> 70 & m], t[a >> 60 & m],
            t[a >> 50 & m], t[a >> 40 & m], t[a >> 30 & m], t[a >> 20 & m], t[a >> 10 & m], t[a & m],
            t[b >> 110], t[b >> 100 & m], t[b >> 90 & m], t[b >> 80 & m], t[b >> 70 & m], t[b >> 60 & m],
            t[b >> 50 & m], t[b >> 40 & m], t[b >> 30 & m], t[b >> 20 & m], t[b >> 10 & m], t[b & m],
            t[c >> 40], t[c >> 30 & m], t[c >> 20 & m], t[c >> 10 & m], t[c & m],
        )
    )  # fmt: skip


def format_binary(binary: bytes) -> str:
    """The ``b…`` base32 string of a binary CID, unchecked: for bytes whose profile the caller checks later.

    >>> format_binary(bytes.fromhex("01551220") + bytes(32))
    'bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'
    """
    return _encode(binary)


def _decode_canonical(cid: str) -> bytes | None:
    """The 36 bytes of a ``b`` + 58-character base32 string, or None if its 2 spare bits are not zero."""
    n = int(cid[1:].translate(_TO_B32HEX), 32)
    return None if n & 3 else (n >> 2).to_bytes(36, "big")


def cid_from_digest(digest: bytes, codec: str = "raw") -> str:
    """The CID string for an already computed sha2-256 ``digest`` under ``codec``.

    Raises InvalidCID: if the codec is unknown or the digest is not 32 bytes.
    """
    if codec not in _PREFIX:
        raise InvalidCID(f"unsupported codec {codec!r}; expected one of {sorted(CODECS)}")
    if len(digest) != _DIGEST_LEN:
        raise InvalidCID(f"sha2-256 digest must be 32 bytes, got {len(digest)}")
    return _encode(_PREFIX[codec] + digest)


def cid_for(data: bytes, codec: str = "raw") -> str:
    """The CIDv1 (sha2-256, base32) of ``data`` as a block of ``codec``.

    ``data`` is hashed as is: for dag-pb and dag-cbor it must already be the
    encoded block.

    >>> cid_for(b"hello")
    'bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq'

    Raises InvalidCID: if ``codec`` is not raw, dag-pb or dag-cbor.
    Raises TypeError: if ``data`` is not bytes-like.
    """
    if codec not in _PREFIX:
        raise InvalidCID(f"unsupported codec {codec!r}; expected one of {sorted(CODECS)}")
    return _encode(_PREFIX[codec] + hashlib.sha256(data).digest())


def raw_cid(data: bytes) -> str:
    """The raw-codec CID of ``data`` (``bafkrei…``).

    >>> raw_cid(b"")
    'bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku'
    """
    return _encode(_PREFIX["raw"] + hashlib.sha256(data).digest())


def _check_header(version: int, codec_code: int, hash_code: int, shown: str) -> None:
    if version != 1:
        raise InvalidCID(f"CIDv{version} is not accepted, CIDv1 is required: {shown}")
    if codec_code not in _CODEC_NAMES:
        raise InvalidCID(f"unsupported codec 0x{codec_code:x} in {shown}; expected raw, dag-pb or dag-cbor")
    if hash_code != _SHA2_256:
        raise InvalidCID(f"unsupported multihash 0x{hash_code:x} in {shown}; expected sha2-256")


def _check_profile(codec_code: int, hash_code: int, digest: bytes, version: int, shown: str) -> ParsedCID:
    _check_header(version, codec_code, hash_code, shown)
    if len(digest) != _DIGEST_LEN:
        raise InvalidCID(f"truncated digest in {shown}: {len(digest)} bytes, sha2-256 needs 32")
    return ParsedCID(codec=_CODEC_NAMES[codec_code], digest=bytes(digest))


def parse(cid: object) -> ParsedCID:
    """Parse a CID string into a :class:`ParsedCID`, enforcing kuro's profile.

    Valid strings are memoised (parsing sits on every block read); invalid ones
    raise every time.

    Raises InvalidCID: if ``cid`` is not a string, is not multibase base32
    (``b…``), is CIDv0, names a codec other than raw/dag-pb/dag-cbor, a hash
    other than sha2-256, or has a truncated digest.

    >>> parse("Qmfoo")
    Traceback (most recent call last):
    ...
    kuro_fs.errors.InvalidCID: CIDv0 ('Qm…') is not accepted, CIDv1 is required: 'Qmfoo'
    """
    if not isinstance(cid, str):
        raise InvalidCID(f"a CID must be a string, got {type(cid).__name__}")
    return _parse_str(cid)


@functools.lru_cache(maxsize=65536)
def _parse_str(cid: str) -> ParsedCID:
    if len(cid) == _CANONICAL_LEN and _CANONICAL.fullmatch(cid):
        # Fast path (additive, issue 4 perf): the exact canonical profile form, decoded without
        # multiformats (~0.5 ms per call there); anything else takes the checked path below.
        binary = _decode_canonical(cid)
        codec = None if binary is None else _PREFIX_CODEC.get(binary[:4])
        if codec is not None and binary is not None:
            return ParsedCID(codec=codec, digest=binary[4:])
    shown = repr(cid if len(cid) <= 80 else cid[:77] + "...")
    if cid == "":
        raise InvalidCID("a CID must not be empty")
    if cid.startswith("Qm"):
        raise InvalidCID(f"CIDv0 ('Qm…') is not accepted, CIDv1 is required: {shown}")
    if cid[0] != "b":
        raise InvalidCID(f"unsupported multibase prefix {cid[0]!r} in {shown}; expected base32 lower-case 'b'")
    body = cid[1:]
    if body == "" or body != body.lower():
        raise InvalidCID(f"not lower-case base32 in {shown}")
    # Every read of the multiformats object stays inside the try: its attributes are lazy, and
    # touching the digest of, say, a keccak multihash raises ImportError (pycryptodome missing).
    try:
        parsed = _MfCID.decode(cid)
        binary = bytes(parsed)
        version, codec_code, hash_code = int(parsed.version), int(parsed.codec.code), int(parsed.hashfun.code)
    except Exception as exc:  # multiformats raises several unrelated types
        raise InvalidCID(f"malformed CID {shown}: {exc}") from exc
    if _encode(binary) != cid:
        raise InvalidCID(f"non-canonical CID string {shown}")
    _check_header(version, codec_code, hash_code, shown)
    try:
        digest = bytes(parsed.raw_digest)
    except Exception as exc:
        raise InvalidCID(f"malformed sha2-256 digest in {shown}: {exc}") from exc
    return _check_profile(codec_code, hash_code, digest, version, shown)


#: The name the public API uses (``kuro_fs.parse_cid``).
parse_cid = parse


def cid_from_bytes(binary: bytes) -> str:
    """The string form of a binary CID, checked against kuro's profile.

    Raises InvalidCID: if ``binary`` is not bytes-like, or not a 36-byte CIDv1
    sha2-256 of a known codec.
    """
    if not isinstance(binary, (bytes, bytearray, memoryview)):
        raise InvalidCID(f"a binary CID must be bytes, got {type(binary).__name__}")
    binary = bytes(binary)
    shown = binary[:8].hex() + ("…" if len(binary) > 8 else "")
    if len(binary) < 4:
        raise InvalidCID(f"binary CID too short ({len(binary)} bytes): {shown}")
    if binary[0] == 0x12 and binary[1] == 0x20:
        raise InvalidCID(f"binary CIDv0 is not accepted: {shown}")
    version, codec, hash_code, length = binary[0], binary[1], binary[2], binary[3]
    if length != _DIGEST_LEN or len(binary) - 4 != _DIGEST_LEN:
        raise InvalidCID(f"truncated or overlong digest in binary CID {shown}")
    return str(_check_profile(codec, hash_code, binary[4:], version, shown))


def cid_bytes(cid: str) -> bytes:
    """The binary form (36 bytes) of a CID string. Raises InvalidCID."""
    return parse(cid).bytes


def verify(cid: str, data: bytes) -> bool:
    """True if ``data`` hashes to ``cid`` under the CID's own codec.

    Raises InvalidCID: if ``cid`` itself is malformed (a bad name is not a mismatch).
    Raises TypeError: if ``data`` is not bytes-like.
    """
    parsed = parse(cid)
    return hashlib.sha256(data).digest() == parsed.digest
