"""dag-pb: one byte form per node value (Name and Tsize may be absent, as the spec allows), nothing else decodes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs import dagpb
from kuro_fs.cid import cid_bytes, cid_for, raw_cid
from kuro_fs.dagpb import PBLink, PBNode, decode, decode_uvarint, encode, encode_uvarint
from kuro_fs.errors import DagPbError

EMPTY = raw_cid(b"")
EMPTY_BIN = cid_bytes(EMPTY)


# ---- bad input first


@pytest.mark.parametrize(
    "hexbytes, rule",
    [
        ("0a", "truncated varint"),
        ("0a05", "runs past the end"),
        ("0a0208010a020801", "unexpected field"),  # two Data fields
        ("0a020801" + "12" + "2a", "unexpected field"),  # a link after Data
        ("1a00", "unexpected field"),  # unknown field 3
        ("12020000", "does not start with Hash"),
        ("12 2a 0a 24".replace(" ", "") + EMPTY_BIN.hex() + "12001200", "unexpected or repeated"),  # two Names
        ("12 28 0a 24".replace(" ", "") + EMPTY_BIN.hex() + "0a00", "unexpected or repeated"),  # Hash again
        ("12 04 12 00 0a 00".replace(" ", ""), "does not start with Hash"),  # Name before Hash
        ("12 2a 0a 24".replace(" ", "") + EMPTY_BIN.hex() + "18001200", "unexpected or repeated"),  # Tsize before Name
        ("12 2a 0a 24".replace(" ", "") + EMPTY_BIN.hex() + "12001880", "truncated varint"),
        ("12 2b 0a 24".replace(" ", "") + EMPTY_BIN.hex() + "12001880" + "00", "non-minimal"),
        ("12 0a 0a 04 01 55 12 20 12 00 18 00".replace(" ", ""), "truncated or overlong digest"),
    ],
)
def test_malformed_nodes_are_refused_naming_the_rule(hexbytes: str, rule: str) -> None:
    with pytest.raises(DagPbError, match=rule):
        decode(bytes.fromhex(hexbytes))


def test_a_link_without_a_hash_cannot_be_encoded() -> None:
    with pytest.raises(DagPbError, match="no Hash"):
        encode(PBNode((PBLink(b"", "", 0),)))


@pytest.mark.parametrize("value", [-1, 1 << 64])
def test_uvarints_outside_64_bits_are_refused(value: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        encode_uvarint(value)


@pytest.mark.parametrize(
    "hexbytes, rule",
    [("", "truncated"), ("80", "truncated"), ("8000", "non-minimal"), ("ff" * 10 + "01", "longer than 10")],
)
def test_bad_uvarints_are_refused(hexbytes: str, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        decode_uvarint(bytes.fromhex(hexbytes))


def test_a_uvarint_above_64_bits_is_refused() -> None:
    with pytest.raises(ValueError, match="above 2"):
        decode_uvarint(bytes.fromhex("ffffffffffffffffff7f"))


# ---- the canonical form


def test_an_empty_name_and_a_zero_tsize_are_written_explicitly() -> None:
    block = encode(PBNode((PBLink(EMPTY_BIN, "", 0),), b"\x08\x02"))
    assert block == bytes.fromhex("122a0a24") + EMPTY_BIN + bytes.fromhex("12001800") + bytes.fromhex("0a020802")


def test_links_come_before_data_and_keep_their_order() -> None:
    a, b = PBLink.to(raw_cid(b"a"), "z", 1), PBLink.to(raw_cid(b"b"), "a", 1)
    block = encode(PBNode((a, b), b"\x08\x01"))
    assert block[0] == 0x12 and block[-4:] == bytes.fromhex("0a020801")
    assert [link.name for link in decode(block).links] == ["z", "a"]


@pytest.mark.parametrize(
    "tail, name, tsize",
    [("", None, None), ("1800", None, 0), ("1805", None, 5), ("1200", "", None), ("120161", "a", None)],
)
def test_a_link_may_leave_out_name_or_tsize_and_re_encodes_to_the_same_bytes(
    tail: str, name: str | None, tsize: int | None
) -> None:
    # The spec's PBLink has optional Name and Tsize; @ipld/dag-pb and go-codec-dagpb read such links.
    body = "0a24" + EMPTY_BIN.hex() + tail
    block = bytes.fromhex("12" + f"{len(body) // 2:02x}" + body + "0a020801")
    link = decode(block).links[0]
    assert (link.cid, link.has_name, link.has_tsize) == (EMPTY, name is not None, tsize is not None)
    assert (link.name, link.tsize) == (name or "", tsize or 0)
    assert encode(decode(block)) == block


def test_what_kuro_writes_keeps_both_fields_and_a_contradictory_link_is_refused() -> None:
    assert encode(PBNode((PBLink.to(EMPTY),))).hex().endswith("12001800")
    with pytest.raises(DagPbError, match="no Name field"):
        encode(PBNode((PBLink(EMPTY_BIN, "x", 0, has_name=False),)))
    with pytest.raises(DagPbError, match="no Tsize field"):
        encode(PBNode((PBLink(EMPTY_BIN, "", 3, has_tsize=False),)))


def test_a_node_without_data_omits_the_field() -> None:
    assert encode(PBNode()) == b""
    assert decode(b"") == PBNode((), None)


def test_a_link_gives_its_cid_back_as_a_string() -> None:
    assert PBLink.to(EMPTY, "x", 0).cid == EMPTY


_names = st.text(max_size=12)
_links = st.builds(
    PBLink,
    st.sampled_from([raw_cid(b"a"), raw_cid(b"b"), EMPTY]).map(cid_bytes),
    _names,
    st.integers(0, (1 << 64) - 1),
) | st.builds(
    lambda h, tsize: PBLink(h, "", tsize or 0, has_name=False, has_tsize=tsize is not None),
    st.sampled_from([raw_cid(b"a"), EMPTY]).map(cid_bytes),
    st.none() | st.integers(0, 1 << 40),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_links, max_size=6).map(tuple), st.none() | st.binary(max_size=40))
def test_decode_inverts_encode_and_re_encodes_byte_for_byte(links: tuple[PBLink, ...], data: bytes | None) -> None:
    node = PBNode(links, data)
    block = encode(node)
    assert decode(block) == node
    assert encode(decode(block)) == block


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_decoding_arbitrary_bytes_either_round_trips_or_raises_dagpberror(blob: bytes) -> None:
    try:
        node = decode(blob)
    except DagPbError:
        return
    assert encode(node) == blob


@settings(max_examples=100, deadline=None)
@given(st.integers(0, (1 << 64) - 1))
def test_uvarints_round_trip_minimally(value: int) -> None:
    raw = encode_uvarint(value)
    assert decode_uvarint(raw) == (value, len(raw))
    assert raw[-1] != 0 or value == 0


# ---- the File-node link fast path says what the general decoder says


def _general_only(blob: bytes, monkeypatch: pytest.MonkeyPatch) -> PBNode | str:
    with monkeypatch.context() as patch:
        patch.setattr(dagpb, "_minted_file_link", lambda buf, pos: None)
        try:
            return decode(blob)
        except DagPbError as exc:
            return str(exc)


def _either(blob: bytes) -> PBNode | str:
    try:
        return decode(blob)
    except DagPbError as exc:
        return str(exc)


_file_links = st.builds(
    PBLink, st.sampled_from([raw_cid(b"a"), EMPTY, cid_for(b"\xa0", "dag-pb")]).map(cid_bytes), st.just(""),
    st.integers(0, (1 << 64) - 1),
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(_file_links, min_size=1, max_size=4), st.data())
def test_file_node_links_decode_the_same_with_and_without_the_fast_path(
    links: list[PBLink], data: st.DataObject
) -> None:
    block = bytearray(encode(PBNode(tuple(links), b"\x08\x02")))
    for _ in range(data.draw(st.integers(0, 2))):  # damage some bytes: both paths must refuse alike
        block[data.draw(st.integers(0, len(block) - 1))] = data.draw(st.integers(0, 255))
    with pytest.MonkeyPatch.context() as patch:
        assert _either(bytes(block)) == _general_only(bytes(block), patch)
