"""dag-pb (codec 0x70): the protobuf node every UnixFS file tree and directory is made of.

## The one decision
A dag-pb node has one byte form for a given :class:`PBNode` value, and
``encode(decode(block)) == block`` for every block :func:`decode` accepts, so a node
never has two names. The form is the one the JavaScript IPFS stack writes: every
``Links`` entry first (tag ``0x12``, in list order), then ``Data`` (tag ``0x0a``)
if present; inside a link ``Hash`` (``0x0a``), ``Name`` (``0x12``) and ``Tsize``
(``0x18``), in that order. All lengths and integers are minimal unsigned LEB128
varints. Blocks kuro writes carry every link's Name (``12 00`` when empty) and
Tsize (``18 00`` when 0): a single omitted empty name changes every CID above it.
The dag-pb spec, ``@ipld/dag-pb`` and go-codec-dagpb make Name and Tsize
optional, though, and other writers leave them out, so :func:`decode` accepts a
link without either and says so on the value (:attr:`PBLink.has_name`,
:attr:`PBLink.has_tsize`, which :func:`encode` honours): such a foreign block reads,
exports and re-encodes to its own bytes. Anything else (other field order,
unknown or repeated fields, non-minimal varints, a missing or invalid Hash, a
link after Data) is a :class:`~kuro_fs.errors.DagPbError`.

Links hold the binary CID (any profile :mod:`kuro_fs.cid` reads, so CIDv0 links of real IPFS
data too); :attr:`PBLink.cid` gives the string form. The unsigned varints are :mod:`kuro_fs.varint`'s
(re-exported here, where CAR and UnixFS have always imported them).

## Pure
No I/O.

## Not done here
No link sorting: the caller decides link order (files keep chunk order,
directories sort by name — see :mod:`kuro_fs.unixfs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kuro_fs.cid import MINTED_PREFIXES, check_binary, cid_bytes, cid_from_bytes
from kuro_fs.errors import DagPbError, InvalidCID
from kuro_fs.varint import decode_uvarint, encode_uvarint

__all__ = ["PBLink", "PBNode", "decode", "decode_uvarint", "encode", "encode_uvarint"]

_TAG_LINK: Final = 0x12  # PBNode field 2, length-delimited
_TAG_DATA: Final = 0x0A  # PBNode field 1, length-delimited
_TAG_HASH: Final = 0x0A  # PBLink field 1
_TAG_NAME: Final = 0x12  # PBLink field 2
_TAG_TSIZE: Final = 0x18  # PBLink field 3, varint


# ---- values


@dataclass(frozen=True, slots=True)
class PBLink:
    """One dag-pb link: binary CID ``hash``, UTF-8 ``name`` ("" for file chunks), cumulative ``tsize``.

    ``has_name`` / ``has_tsize`` False: the block leaves that field out (a foreign block's choice, which
    the spec allows; ``name`` is then "" and ``tsize`` 0). Blocks kuro writes always have both.
    """

    hash: bytes
    name: str = ""
    tsize: int = 0
    has_name: bool = True
    has_tsize: bool = True

    @classmethod
    def to(cls, cid: str, name: str = "", tsize: int = 0) -> PBLink:
        """A link to the block named by the CID string ``cid``. Raises InvalidCID."""
        return cls(cid_bytes(cid), name, tsize)

    @property
    def cid(self) -> str:
        """The string form of :attr:`hash`."""
        return cid_from_bytes(self.hash)


@dataclass(frozen=True, slots=True)
class PBNode:
    """A dag-pb node: ``links`` in the order they are written, then optional ``data``."""

    links: tuple[PBLink, ...] = ()
    data: bytes | None = None


# ---- encode


def _encode_link(link: PBLink) -> bytes:
    name = link.name.encode("utf-8")
    parts = [bytes((_TAG_HASH,)), encode_uvarint(len(link.hash)), link.hash]
    if link.has_name:
        parts += (bytes((_TAG_NAME,)), encode_uvarint(len(name)), name)
    elif name:
        raise ValueError(f"it has the name {link.name!r} but says it has no Name field")
    if link.has_tsize:
        parts += (bytes((_TAG_TSIZE,)), encode_uvarint(link.tsize))
    elif link.tsize:
        raise ValueError(f"it has the Tsize {link.tsize} but says it has no Tsize field")
    body = b"".join(parts)
    return bytes((_TAG_LINK,)) + encode_uvarint(len(body)) + body


def encode(node: PBNode) -> bytes:
    """The canonical bytes of ``node``: links first (in order), then Data.

    >>> encode(PBNode((), b"\\x08\\x01")).hex()
    '0a020801'

    Raises DagPbError: if a link has an empty hash or a negative Tsize, a name is not encodable, or a
    link says it has no Name (Tsize) field but has a name (a Tsize).
    """
    parts: list[bytes] = []
    for i, link in enumerate(node.links):
        if not link.hash:
            raise DagPbError(f"link {i} has no Hash")
        try:
            parts.append(_encode_link(link))
        except (ValueError, UnicodeEncodeError) as exc:
            raise DagPbError(f"link {i} cannot be encoded: {exc}") from exc
    if node.data is not None:
        parts.append(bytes((_TAG_DATA,)) + encode_uvarint(len(node.data)) + bytes(node.data))
    return b"".join(parts)


# ---- decode


def _field(buf: bytes, pos: int, what: str) -> tuple[bytes, int]:
    length, pos = decode_uvarint(buf, pos)
    end = pos + length
    if end > len(buf):
        raise ValueError(f"{what} runs past the end ({length} bytes at offset {pos}, {len(buf) - pos} left)")
    return buf[pos:end], end


def _decode_link(body: bytes, where: int) -> PBLink:
    pos = 0
    if not body or body[0] != _TAG_HASH:
        raise ValueError(f"link at offset {where} does not start with Hash (tag 0x0a)")
    raw_hash, pos = _field(body, 1, "link Hash")
    try:
        check_binary(raw_hash)
    except InvalidCID as exc:
        raise ValueError(f"link at offset {where}: {exc}") from exc
    name = ""
    tsize = 0
    seen_name = seen_tsize = False
    while pos < len(body):
        tag = body[pos]
        if tag == _TAG_NAME and not seen_name and not seen_tsize:
            raw_name, pos = _field(body, pos + 1, "link Name")
            name = raw_name.decode("utf-8")
            seen_name = True
        elif tag == _TAG_TSIZE and not seen_tsize:
            tsize, pos = decode_uvarint(body, pos + 1)
            seen_tsize = True
        else:
            raise ValueError(f"unexpected or repeated field tag 0x{tag:02x} in link at offset {where}")
    return PBLink(bytes(raw_hash), name, tsize, seen_name, seen_tsize)


def _minted_file_link(buf: bytes, pos: int) -> tuple[PBLink, int] | None:
    # The link every kuro File node is made of, read without the general walk: a one-byte length, then
    # ``0a 24`` + a 36-byte minting-profile CID + ``12 00`` (empty Name) + ``18`` + a minimal Tsize varint
    # ending exactly at the link's end. Anything else (None) goes the general way, which also words
    # every error.
    end = pos + 2 + buf[pos + 1] if pos + 1 < len(buf) else 0
    if not (
        pos + 44 <= end <= len(buf)
        and buf[pos + 1] < 0x80
        and buf[pos + 2] == _TAG_HASH
        and buf[pos + 3] == 36
        and buf[pos + 4 : pos + 8] in MINTED_PREFIXES
        and buf[pos + 40 : pos + 43] == b"\x12\x00\x18"
    ):
        return None
    try:
        tsize, after = decode_uvarint(buf, pos + 43)
    except ValueError:
        return None
    return (PBLink(buf[pos + 4 : pos + 40], "", tsize), end) if after == end else None


def decode(data: bytes) -> PBNode:
    """Parse canonical dag-pb bytes into a :class:`PBNode`.

    A link may leave out Name or Tsize (the spec's optional fields; see :class:`PBLink`).
    Raises DagPbError: on truncation, unknown, repeated or out-of-order fields, non-minimal
    varints, or a link without a valid CID.
    """
    buf = bytes(data)
    pos = 0
    links: list[PBLink] = []
    payload: bytes | None = None
    try:
        while pos < len(buf):
            tag = buf[pos]
            if tag == _TAG_LINK and payload is None:
                fast = _minted_file_link(buf, pos)
                if fast is not None:
                    links.append(fast[0])
                    pos = fast[1]
                    continue
                body, nxt = _field(buf, pos + 1, "link")
                links.append(_decode_link(body, pos))
                pos = nxt
            elif tag == _TAG_DATA and payload is None:
                payload, pos = _field(buf, pos + 1, "Data")
            else:
                raise ValueError(f"unexpected field tag 0x{tag:02x} at offset {pos} (links first, then one Data)")
    except (ValueError, UnicodeDecodeError) as exc:
        raise DagPbError(f"malformed dag-pb ({len(buf)} bytes, starts {buf[:8].hex()}): {exc}") from exc
    return PBNode(tuple(links), payload)
