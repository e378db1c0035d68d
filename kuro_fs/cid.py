"""Content identifiers: kuro mints one CID profile and reads every CID the IPFS stack reads.

## The one decision
Two profiles, one for each direction:

* **Minting** (``cid_for``, ``raw_cid``, ``cid_from_digest``, every store's ``put``): version 1,
  sha2-256, codec raw (0x55), dag-pb (0x70) or dag-cbor (0x71), base32 lower-case without padding
  (``b…``). That is what the JavaScript IPFS stack mints for CIDv1 by default, so our names for the
  same bytes are theirs, byte for byte.
* **Reading** (``parse``, ``cid_from_bytes``, ``verify``, ``decode_binary``): also CIDv0 (``Qm…``,
  base58btc, dag-pb sha2-256) and the multihashes real IPFS data uses — ``identity`` (the bytes are
  the digest, at most :data:`MAX_IDENTITY_DIGEST` bytes, as boxo caps it), ``sha2-256``,
  ``sha2-512`` and ``blake3`` (32-byte digest), each with its full-length digest. Anything else —
  other hashes, truncated digests, other codecs, multibases other than base32 lower-case for CIDv1 —
  is refused with :class:`~kuro_fs.errors.InvalidCID` naming the rule, instead of being half-understood.

Hash dispatch lives here, in :func:`matches`, the one function every store, CAR reader and the
gateway call to decide whether bytes are the block a CID names. A CIDv0 and the CIDv1 dag-pb of the
same digest name the same block: :attr:`ParsedCID.key` is the CIDv1 base32 form both map to, the name
a store files the block under.

Minting uses ``hashlib`` and a table-driven base32 of the fixed 36-byte binary form (three times
``base64.b32encode``'s speed: it runs once per block stored, so a million-block import spent seconds
in it); the canonical 59-character string form is parsed by ``int(…, 32)`` over a translated
alphabet. Any other string decodes base32 / base58btc and reads the varints itself, so no multihash
library is asked about a digest it cannot compute. Both fast paths are checked against ``base64`` in
``tests/fs/test_cid.py``. An independent mint that shares no code with this module lives in
``tools/cid_mint.py``.

## Pure
No I/O. Values in, values out.

Names that come from outside (a gateway URL, a ``GatewayBlockStore`` caller) may be written in any
multibase the IPFS stack reads — base58btc ``z…``, base36 ``k…``, base16 ``f…``, base32 upper-case
``B…`` …: :func:`canonical` turns them into the one string the rest of kuro uses (``b…`` lower-case
for CIDv1, ``Qm…`` for CIDv0), so that one block never has two names in a store. ``parse`` itself
stays strict: inside kuro a CID is always written canonically.

## Not done here
No CIDv0 or non-sha2-256 *minting*; ``parse`` reads no multibase but base32 lower-case for CIDv1
(:func:`canonical` translates first); no codecs beyond the three (dag-json, libp2p-key … are refused).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from dataclasses import dataclass
from typing import Final

from kuro_fs.errors import InvalidCID
from kuro_fs.varint import decode_uvarint, encode_uvarint

__all__ = [
    "CODECS",
    "HASHES",
    "MAX_IDENTITY_DIGEST",
    "MINTED_PREFIXES",
    "ParsedCID",
    "canonical",
    "check_binary",
    "cid_bytes",
    "cid_for",
    "cid_from_bytes",
    "cid_from_digest",
    "decode_binary",
    "matches",
    "format_binary",
    "parse",
    "parse_cid",
    "raw_cid",
    "verify",
]

#: The codec table: name → multicodec code. The only codecs kuro names blocks with.
CODECS: Final[dict[str, int]] = {"raw": 0x55, "dag-pb": 0x70, "dag-cbor": 0x71}
#: The multihash table: name → (multicodec code, digest length; None = any up to the identity cap).
HASHES: Final[dict[str, tuple[int, int | None]]] = {
    "identity": (0x00, None),
    "sha2-256": (0x12, 32),
    "sha2-512": (0x13, 64),
    "blake3": (0x1E, 32),
}
#: The largest identity "digest" (inline data) accepted, as boxo's gateway caps it.
MAX_IDENTITY_DIGEST: Final = 128

_CODEC_NAMES: Final[dict[int, str]] = {code: name for name, code in CODECS.items()}
_HASH_NAMES: Final[dict[int, str]] = {code: name for name, (code, _) in HASHES.items()}
_SHA2_256: Final = 0x12
_DIGEST_LEN: Final = 32
# Every varint in the minting profile fits in one byte, so its binary prefix is 4 fixed bytes.
_PREFIX: Final[dict[str, bytes]] = {name: bytes([1, code, _SHA2_256, _DIGEST_LEN]) for name, code in CODECS.items()}
_PREFIX_CODEC: Final[dict[bytes, str]] = {prefix: name for name, prefix in _PREFIX.items()}
#: The 4-byte binary prefixes of the minting profile (CIDv1, sha2-256, raw / dag-pb / dag-cbor): a 36-byte
#: binary CID starting with one of them is valid as it stands.
MINTED_PREFIXES: Final = frozenset(_PREFIX_CODEC)
_CANONICAL_LEN: Final = 59  # "b" + base32 of 36 bytes, unpadded
_CANONICAL: Final = re.compile(r"b[a-z2-7]{58}")
_V0: Final = re.compile(r"Qm[1-9A-HJ-NP-Za-km-z]{44}")


_B32: Final = "abcdefghijklmnopqrstuvwxyz234567"
_PAIRS: Final = tuple(a + b for a in _B32 for b in _B32)  # every 10-bit value as two base32 characters
_TO_B32HEX: Final = str.maketrans(_B32, "0123456789abcdefghijklmnopqrstuv")  # int(…, 32)'s digits


def _encode(binary: bytes) -> str:
    if len(binary) != 36:  # the minting profile is 36 bytes; anything else (sha2-512, identity…) via base64
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


@dataclass(frozen=True, slots=True)
class ParsedCID:
    """A CID that passed :func:`parse`: codec name, digest, version, hash name.

    >>> c = parse_cid("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
    >>> (c.version, c.codec, c.hash, len(c.digest))
    (1, 'raw', 'sha2-256', 32)
    >>> v0 = parse_cid("QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH")
    >>> (v0.version, v0.codec, v0.key[:7])
    (0, 'dag-pb', 'bafybei')
    """

    codec: str
    digest: bytes
    version: int = 1
    hash: str = "sha2-256"

    @property
    def multihash(self) -> bytes:
        """The multihash: ``hash code ‖ digest length ‖ digest``."""
        return encode_uvarint(HASHES[self.hash][0]) + encode_uvarint(len(self.digest)) + self.digest

    @property
    def bytes(self) -> bytes:
        """The binary CID: the bare multihash for CIDv0, else ``01 codec multihash``."""
        if self.version == 0:
            return self.multihash
        if self.hash == "sha2-256":
            return _PREFIX[self.codec] + self.digest
        return b"\x01" + encode_uvarint(CODECS[self.codec]) + self.multihash

    @property
    def key(self) -> str:
        """The CIDv1 base32 string of this block: what a CIDv0 and its CIDv1 share, the name stores use."""
        if self.version == 0:
            return _encode(_PREFIX["dag-pb"] + self.digest)
        return _encode(self.bytes)

    @property
    def mintable(self) -> bool:
        """True if kuro's own ``put`` would mint this block's name (sha2-256, not identity)."""
        return self.hash == "sha2-256"

    def __str__(self) -> str:
        if self.version == 0:
            from multiformats import multibase  # off the fast path: the package costs ~30 ms to import

            return str(multibase.encode(self.multihash, "base58btc"))[1:]
        return _encode(self.bytes)

    def to_data(self) -> str:
        """The CID's string form; CIDs cross module boundaries as strings."""
        return str(self)


# ---- minting (CIDv1 sha2-256 only)


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


#: The binary forms of the CIDs minted most recently, by string (at most :data:`_MINTED_KEPT`): a directory
#: built from files just imported names each of them again, and parsing a new string back costs more than
#: minting it did. Exact by construction (the string is made from the binary), so it needs no check.
_MINTED: Final[dict[str, bytes]] = {}
_MINTED_KEPT: Final = 1 << 14


def _mint(binary: bytes) -> str:
    cid = _encode(binary)
    if len(_MINTED) >= _MINTED_KEPT:
        _MINTED.clear()  # dropped all at once: a bound, not a recency order
    _MINTED[cid] = binary
    return cid


def cid_from_digest(digest: bytes, codec: str = "raw") -> str:
    """The CID string for an already computed sha2-256 ``digest`` under ``codec``.

    Raises InvalidCID: if the codec is unknown or the digest is not 32 bytes.
    """
    if codec not in _PREFIX:
        raise InvalidCID(f"unsupported codec {codec!r}; expected one of {sorted(CODECS)}")
    if len(digest) != _DIGEST_LEN:
        raise InvalidCID(f"sha2-256 digest must be 32 bytes, got {len(digest)}")
    return _mint(_PREFIX[codec] + digest)


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
    return _mint(_PREFIX[codec] + hashlib.sha256(data).digest())


def raw_cid(data: bytes) -> str:
    """The raw-codec CID of ``data`` (``bafkrei…``).

    >>> raw_cid(b"")
    'bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku'
    """
    return _mint(_PREFIX["raw"] + hashlib.sha256(data).digest())


# ---- reading (every profile the IPFS stack reads)


def _uvarint(buf: bytes, pos: int, shown: str, what: str) -> tuple[int, int]:
    try:
        return decode_uvarint(buf, pos)
    except ValueError as exc:
        raise InvalidCID(f"bad {what} varint in {shown}: {exc}") from exc


def _profile(version: int, codec_code: int, hash_code: int, digest: bytes, shown: str) -> ParsedCID:
    if codec_code not in _CODEC_NAMES:
        raise InvalidCID(f"unsupported codec 0x{codec_code:x} in {shown}; expected raw, dag-pb or dag-cbor")
    name = _HASH_NAMES.get(hash_code)
    if name is None:
        raise InvalidCID(
            f"unsupported multihash 0x{hash_code:x} in {shown}; expected one of {', '.join(sorted(HASHES))}"
        )
    size = HASHES[name][1]
    if size is None:
        if len(digest) > MAX_IDENTITY_DIGEST:
            raise InvalidCID(f"identity digest of {len(digest)} bytes in {shown} exceeds {MAX_IDENTITY_DIGEST}")
    elif len(digest) != size:
        raise InvalidCID(f"truncated or overlong digest in {shown}: {len(digest)} bytes, {name} needs {size}")
    return ParsedCID(codec=_CODEC_NAMES[codec_code], digest=bytes(digest), version=version, hash=name)


def decode_binary(buf: bytes, pos: int = 0) -> tuple[ParsedCID, int]:
    """The binary CID at ``buf[pos:]`` and the offset just past it (a CAR section starts with one).

    Raises InvalidCID: a truncated or non-minimal varint, a version other than 0/1, or a codec,
    hash or digest length outside the reading profile.
    """
    minted = _PREFIX_CODEC.get(bytes(buf[pos : pos + 4]))
    if minted is not None and len(buf) >= pos + 36:  # the minting profile (every CAR kuro writes): 4 fixed bytes + 32
        return ParsedCID(minted, bytes(buf[pos + 4 : pos + 36])), pos + 36
    shown = bytes(buf[pos : pos + 8]).hex() + "…"
    if buf[pos : pos + 2] == b"\x12\x20":  # a bare sha2-256 multihash: CIDv0
        end = pos + 34
        if end > len(buf):
            raise InvalidCID(f"truncated digest in binary CIDv0 {shown}")
        return ParsedCID("dag-pb", bytes(buf[pos + 2 : end]), version=0), end
    version, at = _uvarint(buf, pos, shown, "version")
    if version == 0:
        raise InvalidCID(f"CIDv0 must be a bare sha2-256 multihash, not a version-0 header: {shown}")
    if version != 1:
        raise InvalidCID(f"CIDv{version} is not a CID version kuro reads (0 or 1): {shown}")
    codec, at = _uvarint(buf, at, shown, "codec")
    hash_code, at = _uvarint(buf, at, shown, "multihash code")
    length, at = _uvarint(buf, at, shown, "digest length")
    if at + length > len(buf):
        raise InvalidCID(f"truncated or overlong digest in {shown}: length says {length}, {len(buf) - at} bytes follow")
    return _profile(1, codec, hash_code, bytes(buf[at : at + length]), shown), at + length


def parse(cid: object) -> ParsedCID:
    """Parse a CID string into a :class:`ParsedCID`, enforcing the reading profile.

    Valid strings are memoised (parsing sits on every block read); invalid ones
    raise every time.

    Raises InvalidCID: if ``cid`` is not a string, is CIDv1 in a multibase other than base32
    lower-case (``b…``), is a malformed CIDv0, names a codec other than raw/dag-pb/dag-cbor, a hash
    outside :data:`HASHES`, or has a truncated digest.

    >>> parse("Qmfoo")
    Traceback (most recent call last):
    ...
    kuro_fs.errors.InvalidCID: malformed CIDv0 'Qmfoo': a CIDv0 is 'Qm' and 44 base58btc characters
    """
    if not isinstance(cid, str):
        raise InvalidCID(f"a CID must be a string, got {type(cid).__name__}")
    return _parse_str(cid)


@functools.lru_cache(maxsize=65536)
def _parse_str(cid: str) -> ParsedCID:
    if len(cid) == _CANONICAL_LEN and _CANONICAL.fullmatch(cid):
        # Fast path: the exact minting profile, decoded without varint parsing (or base64's padding).
        binary = _decode_canonical(cid)
        codec = None if binary is None else _PREFIX_CODEC.get(binary[:4])
        if codec is not None and binary is not None:
            return ParsedCID(codec=codec, digest=binary[4:])
    shown = repr(cid if len(cid) <= 80 else cid[:77] + "...")
    if cid == "":
        raise InvalidCID("a CID must not be empty")
    if cid.startswith("Qm"):
        if not _V0.fullmatch(cid):
            raise InvalidCID(f"malformed CIDv0 {shown}: a CIDv0 is 'Qm' and 44 base58btc characters")
        from multiformats import multibase  # off the fast path: the package costs ~30 ms to import

        multihash = bytes(multibase.decode("z" + cid))
        if multihash[:2] != b"\x12\x20" or len(multihash) != 34:
            raise InvalidCID(f"malformed CIDv0 {shown}: not a sha2-256 multihash")
        return ParsedCID("dag-pb", multihash[2:], version=0)
    if cid[0] != "b":
        raise InvalidCID(f"unsupported multibase prefix {cid[0]!r} in {shown}; expected base32 lower-case 'b'")
    body = cid[1:]
    if body == "" or body != body.lower():
        raise InvalidCID(f"not lower-case base32 in {shown}")
    if not re.fullmatch(r"[a-z2-7]+", body) or len(body) % 8 in (1, 3, 6):
        raise InvalidCID(f"malformed base32 in {shown}")
    binary = base64.b32decode(body.upper() + "=" * (-len(body) % 8))
    if _encode(binary) != cid:
        raise InvalidCID(f"non-canonical CID string {shown}")
    if binary[:2] == b"\x12\x20":
        raise InvalidCID(f"CIDv0 bytes under a multibase prefix in {shown}; a CIDv0 is written 'Qm…'")
    parsed, end = decode_binary(binary)
    if end != len(binary):
        raise InvalidCID(f"trailing bytes after the digest in {shown}")
    return parsed


#: The name the public API uses (``kuro_fs.parse_cid``).
parse_cid = parse


def cid_from_bytes(binary: bytes) -> str:
    """The string form of a binary CID, checked against the reading profile.

    Raises InvalidCID: if ``binary`` is not bytes-like, or is not exactly one CID kuro reads.
    """
    if not isinstance(binary, (bytes, bytearray, memoryview)):
        raise InvalidCID(f"a binary CID must be bytes, got {type(binary).__name__}")
    binary = bytes(binary)
    if len(binary) < 4:
        raise InvalidCID(f"binary CID too short ({len(binary)} bytes): {binary.hex()}")
    if len(binary) == 36 and binary[:4] in _PREFIX_CODEC:
        return _encode(binary)
    parsed, end = decode_binary(binary)
    if end != len(binary):
        raise InvalidCID(f"truncated or overlong digest in binary CID {binary[:8].hex()}…")
    return str(parsed)


def check_binary(binary: bytes) -> None:
    """Raise as :func:`cid_from_bytes` would, without making the string: for decoders that only validate.

    A 36-byte CID of the minting profile (every link kuro writes) is checked by its 4-byte prefix.

    >>> check_binary(bytes.fromhex("01551220") + bytes(32))
    >>> check_binary(b"\\x01\\x55")
    Traceback (most recent call last):
    ...
    kuro_fs.errors.InvalidCID: binary CID too short (2 bytes): 0155
    """
    if len(binary) == 36 and binary[:4] in _PREFIX_CODEC:
        return
    cid_from_bytes(binary)


def canonical(text: object) -> str:
    """The canonical string of a CID written in any multibase: ``b…`` (CIDv1) or ``Qm…`` (CIDv0).

    What go-cid's ``Decode`` and JS ``CID.parse`` read — CIDv0 ``Qm…``, a CIDv1 (or the bare
    CIDv0 multihash) under any multibase prefix — within kuro's reading profile (:func:`parse`).

    >>> canonical("zb2rhmy65F3REf8SZp7De11gxtECBGgUKaLdiDj7MCGCHxbDW")
    'bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku'
    >>> canonical("BAFKREIHDWDCEFGH4DQKJV67UZCMW7OJEE6XEDZDETOJUZJEVTENXQUVYKU")
    'bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku'

    Raises InvalidCID: not a string, an unknown multibase prefix, characters outside its alphabet,
    or bytes that are not one CID :func:`parse` reads.
    """
    if not isinstance(text, str):
        raise InvalidCID(f"a CID must be a string, got {type(text).__name__}")
    first: InvalidCID | None = None
    if text[:1] == "b" or text[:2] == "Qm":
        try:
            parse(text)  # the canonical forms: checked, returned as they are
            return text
        except InvalidCID as exc:  # a CIDv0's bytes under ``b`` are still a CID go-cid reads
            if text[:2] == "Qm":
                raise
            first = exc
    shown = repr(text if len(text) <= 80 else text[:77] + "...")
    if not text or len(text) > 512:
        raise InvalidCID(f"not a CID: {shown}")
    from multiformats import multibase  # off the fast path: the package costs ~30 ms to import

    try:
        binary = bytes(multibase.decode(text))
    except (ValueError, KeyError) as exc:  # the library's errors subclass these (bases: binascii.Error)
        raise first or InvalidCID(f"not a CID in any multibase: {shown} ({exc})") from None
    try:
        return cid_from_bytes(binary)
    except InvalidCID as exc:
        raise first or InvalidCID(f"{shown} does not decode to a CID kuro reads: {exc}") from None


def cid_bytes(cid: str) -> bytes:
    """The binary form of a CID string. Raises InvalidCID."""
    if type(cid) is str:
        minted = _MINTED.get(cid)
        if minted is not None:
            return minted
    return parse(cid).bytes


#: The codec of each prefix kuro mints (CIDv1, base32, sha2-256): told without parsing.
_MINTED_CODECS: Final[dict[str, str]] = {"bafkrei": "raw", "bafybei": "dag-pb", "bafyrei": "dag-cbor"}


def codec_is(cid: str, codec: str) -> bool:
    """True if ``cid`` (a valid CID string) names a block of ``codec``.

    kuro's own names are told by their prefix (the hot path, no parse); any other name — a
    CIDv0, another hash such as sha2-512 or blake3, another base — by parsing it, so data
    from elsewhere is read by what it is.

    >>> codec_is("bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae", "dag-cbor")
    True

    Raises InvalidCID: a name without a minted prefix that is not a CID.
    """
    minted = _MINTED_CODECS.get(cid[:7])
    return minted == codec if minted is not None else parse(cid).codec == codec


def matches(parsed: ParsedCID, data: bytes | bytearray | memoryview) -> bool:
    """True if ``data`` is the block ``parsed`` names: its digest under the CID's own hash.

    The one hash dispatch of kuro_fs; stores, CAR readers, the loader and the gateway call it.
    Raises TypeError: if ``data`` is not bytes-like.
    """
    name = parsed.hash
    if name == "sha2-256":
        return hashlib.sha256(data).digest() == parsed.digest
    if name == "identity":
        return bytes(data) == parsed.digest
    if name == "sha2-512":
        return hashlib.sha512(data).digest() == parsed.digest
    import blake3  # only blake3 names need it

    return bool(blake3.blake3(bytes(data)).digest(len(parsed.digest)) == parsed.digest)


def verify(cid: str, data: bytes) -> bool:
    """True if ``data`` hashes to ``cid`` under the CID's own hash function.

    Raises InvalidCID: if ``cid`` itself is malformed (a bad name is not a mismatch).
    Raises TypeError: if ``data`` is not bytes-like.
    """
    return matches(parse(cid), data)
