"""dag-pb decoding against @ipld/dag-pb (tools/dagpb_ref.mjs): the same blocks accepted, the same links read,
the same bytes re-encoded (where JS encodes them: it wants links sorted by Name) — Name and Tsize absent
included; the one documented difference is a Data field
before the Links, which the JS decoder reads (and re-encodes to other bytes) and kuro refuses."""

from __future__ import annotations

import random

import pytest
from noderef import run_node, why_skip

from kuro_fs.cid import cid_bytes, raw_cid
from kuro_fs.dagpb import decode, encode, encode_uvarint
from kuro_fs.errors import DagPbError

pytestmark = pytest.mark.skipif(why_skip("@ipld/dag-pb") is not None, reason=str(why_skip("@ipld/dag-pb")))

HASHES = [cid_bytes(raw_cid(bytes([i]))) for i in range(3)]


def _link(h: bytes, name: str | None, tsize: int | None) -> bytes:
    body = b"\x0a" + encode_uvarint(len(h)) + h
    if name is not None:
        body += b"\x12" + encode_uvarint(len(name.encode())) + name.encode()
    if tsize is not None:
        body += b"\x18" + encode_uvarint(tsize)
    return b"\x12" + encode_uvarint(len(body)) + body


def _random_blocks(n: int) -> list[bytes]:
    rng = random.Random(27)
    blocks = []
    for _ in range(n):
        links = b"".join(
            _link(
                rng.choice(HASHES),
                rng.choice([None, "", "a", "é/x"]),
                rng.choice([None, 0, 5, 1 << 40]),
            )
            for _ in range(rng.randrange(4))
        )
        data = rng.choice([b"", b"\x0a\x02\x08\x01", b"\x0a\x00"])
        blocks.append(links + data)
    return blocks


EMPTY_LINK_BODY = b"\x0a\x24" + HASHES[0]
REFUSED_BY_BOTH = [
    b"\x12\x2a" + EMPTY_LINK_BODY + b"\x18\x00\x12\x00",  # Tsize before Name
    b"\x12\x2a" + EMPTY_LINK_BODY + b"\x12\x00\x12\x00",  # Name twice
    b"\x12\x04\x12\x00\x0a\x00",  # Name before Hash
    b"\x12\x02\x12\x00",  # no Hash
    b"\x1a\x00",  # unknown PBNode field
    b"\x0a\x00\x0a\x00",  # Data twice
    b"\x0a\x00" + _link(HASHES[0], "", 0) + b"\x0a\x00",  # Data between Links
]
DATA_FIRST = b"\x0a\x02\x08\x01" + _link(HASHES[0], None, None)


def test_dag_pb_decoding_matches_ipld_dag_pb_including_absent_name_and_tsize() -> None:
    blocks = [*_random_blocks(300), *REFUSED_BY_BOTH, DATA_FIRST]
    results = run_node("dagpb_ref.mjs", [{"hex": b.hex()} for b in blocks])
    for block, js in zip(blocks, results, strict=True):
        try:
            node = decode(block)
        except DagPbError:
            assert not js["ok"] or block == DATA_FIRST, block.hex()
            continue
        assert js["ok"], block.hex()
        ours = [
            {
                "hash": link.cid,
                "name": link.name if link.has_name else None,
                "tsize": link.tsize if link.has_tsize else None,
            }
            for link in node.links
        ]
        assert ours == js["links"], block.hex()
        assert (node.data.hex() if node.data is not None else None) == js["data"]
        assert encode(node) == block  # (JS encodes only links sorted by Name; decoding does not ask that)
        assert js["reencoded"] in (None, block.hex())
