"""kuro_fs.cid: one minting profile (v1, sha2-256, raw/dag-pb/dag-cbor, base32 lower), a wider reading one.

Vectors live in tests/vectors/cids.json (issue 2, kuro-contract §7, ipld-rules §1/§5/§6).
Bad input first.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multiformats import multicodec

from kuro_fs.cid import (
    CODECS,
    HASHES,
    ParsedCID,
    _decode_canonical,
    canonical,
    cid_bytes,
    cid_for,
    cid_from_bytes,
    cid_from_digest,
    codec_is,
    decode_binary,
    format_binary,
    matches,
    parse,
    parse_cid,
    raw_cid,
    verify,
)
from kuro_fs.errors import InvalidCID
from kuro_fs.varint import encode_uvarint

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parent.parent / "vectors" / "cids.json").read_text(encoding="utf-8")
)
EMPTY = VECTORS["raw_utf8"][0]["cid"]


def _ids(cases: list[dict[str, Any]], key: str) -> list[str]:
    return [str(case[key])[:50] for case in cases]


# ---- bad input


@pytest.mark.parametrize("case", VECTORS["invalid_strings"], ids=_ids(VECTORS["invalid_strings"], "why"))
def test_a_malformed_or_unsupported_cid_string_is_refused_with_invalid_cid(case: dict[str, str]) -> None:
    with pytest.raises(InvalidCID) as info:
        parse(case["cid"])
    assert case["says"].lower() in str(info.value).lower()


@pytest.mark.parametrize("case", VECTORS["invalid_strings"], ids=_ids(VECTORS["invalid_strings"], "why"))
def test_every_function_taking_a_cid_string_refuses_the_same_bad_input(case: dict[str, str]) -> None:
    for call in (parse_cid, cid_bytes, lambda c: verify(c, b"")):
        with pytest.raises(InvalidCID):
            call(case["cid"])


@pytest.mark.parametrize("value", [*VECTORS["non_strings"], b"bafkrei", bytearray(b"b")], ids=repr)
def test_a_cid_that_is_not_a_string_is_refused_not_crashed_on(value: object) -> None:
    with pytest.raises(InvalidCID, match="must be a string"):
        parse(value)


@pytest.mark.parametrize("value", ["bafkrei", None, 36, [1, 0x55, 0x12, 0x20]], ids=repr)
def test_a_binary_cid_that_is_not_bytes_is_refused_not_crashed_on(value: object) -> None:
    with pytest.raises(InvalidCID, match="must be bytes"):
        cid_from_bytes(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", VECTORS["invalid_binary_hex"], ids=_ids(VECTORS["invalid_binary_hex"], "why"))
def test_a_malformed_binary_cid_is_refused_with_invalid_cid(case: dict[str, str]) -> None:
    with pytest.raises(InvalidCID):
        cid_from_bytes(bytes.fromhex(case["hex"]))


def test_invalid_cid_is_a_value_error_so_existing_handlers_catch_it() -> None:
    with pytest.raises(ValueError):
        parse("Qmfoo")
    assert InvalidCID.reference == "invalid-cid"


@pytest.mark.parametrize("codec", ["dag-json", "DAG-CBOR", "Raw", "", "0x55", "sha2-256"])
def test_minting_under_an_unknown_codec_is_refused(codec: str) -> None:
    with pytest.raises(InvalidCID, match="unsupported codec"):
        cid_for(b"x", codec)
    with pytest.raises(InvalidCID):
        cid_from_digest(bytes(32), codec)


@pytest.mark.parametrize("length", [0, 1, 31, 33, 64])
def test_framing_a_digest_of_the_wrong_length_is_refused(length: int) -> None:
    with pytest.raises(InvalidCID, match="32 bytes"):
        cid_from_digest(bytes(length))


def test_minting_text_instead_of_bytes_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        raw_cid("hello")  # type: ignore[arg-type]


@given(
    st.text(max_size=80)
    | st.text(max_size=70).map(lambda t: "b" + t)
    | st.text("abcdefghijklmnopqrstuvwxyz234567", min_size=50, max_size=70).map(lambda t: "b" + t)
)
@settings(max_examples=300, deadline=None)
def test_parse_never_raises_anything_but_invalid_cid(text: str) -> None:
    try:
        parsed = parse(text)
    except InvalidCID:
        return
    assert str(parsed) == text


@given(st.binary(max_size=48))
@settings(max_examples=200, deadline=None)
def test_parsing_arbitrary_base32_bodies_never_raises_anything_but_invalid_cid(body: bytes) -> None:
    text = "b" + _b32(body)
    try:
        parsed = parse(text)
    except InvalidCID:
        return
    assert parsed.bytes == body


@given(st.binary(max_size=48))
@settings(max_examples=200, deadline=None)
def test_cid_from_bytes_never_raises_anything_but_invalid_cid(binary: bytes) -> None:
    try:
        text = cid_from_bytes(binary)
    except InvalidCID:
        return
    assert cid_bytes(text) == binary


def _b32(data: bytes) -> str:
    return base64.b32encode(data).decode().rstrip("=").lower()


# Every multihash code the parsing library knows (some of which it can only read with optional
# packages installed), plus arbitrary codes: the parser must refuse them all the same way.
_MULTIHASH_CODES = sorted(c.code for c in multicodec.table(tag="multihash"))


@given(
    st.just(1) | st.integers(0, 3),
    st.sampled_from(sorted(CODECS.values())) | st.integers(0, 2**16),
    st.sampled_from(_MULTIHASH_CODES) | st.integers(0, 2**16),
    st.integers(0, 80),
    st.binary(min_size=0, max_size=80),
)
@settings(max_examples=200, deadline=None)
def test_parsing_any_well_framed_cid_never_raises_anything_but_invalid_cid(
    version: int, codec: int, hash_code: int, length: int, digest: bytes
) -> None:
    binary = (
        encode_uvarint(version) + encode_uvarint(codec) + encode_uvarint(hash_code) + encode_uvarint(length) + digest
    )
    text = "b" + _b32(binary)
    try:
        parsed = parse(text)
    except InvalidCID:
        return
    assert version == 1 and length == len(digest)
    assert (parsed.hash, len(parsed.digest)) in {("sha2-256", 32), ("sha2-512", 64), ("blake3", 32)} or (
        parsed.hash == "identity" and len(parsed.digest) <= 128
    )
    assert HASHES[parsed.hash][0] == hash_code
    assert parsed.bytes == binary


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_every_one_character_change_to_a_cid_header_is_refused_with_invalid_cid_or_parses_canonically(
    codec: str,
) -> None:
    # The first 12 characters carry version, codec, hash code and length; a one-character change
    # there once reached a lazy multiformats attribute that raised ImportError, not InvalidCID.
    good = cid_for(b"x", codec)
    for i in range(1, 12):
        for ch in "abcdefghijklmnopqrstuvwxyz234567":
            text = good[:i] + ch + good[i + 1 :]
            try:
                parsed = parse(text)
            except InvalidCID:
                continue
            assert str(parsed) == text


# ---- vectors


@pytest.mark.parametrize("case", VECTORS["raw_utf8"], ids=_ids(VECTORS["raw_utf8"], "text"))
def test_the_raw_cid_of_utf8_text_matches_the_published_vector(case: dict[str, str]) -> None:
    data = case["text"].encode("utf-8")
    assert raw_cid(data) == case["cid"]
    assert cid_for(data, "raw") == case["cid"]
    assert cid_for(data) == case["cid"]


@pytest.mark.parametrize("case", VECTORS["blocks_hex"], ids=_ids(VECTORS["blocks_hex"], "source"))
def test_the_cid_of_an_encoded_block_matches_the_published_vector(case: dict[str, str]) -> None:
    assert cid_for(bytes.fromhex(case["hex"]), case["codec"]) == case["cid"]


def test_the_issue_vectors_hold_exactly() -> None:
    assert raw_cid(b"") == "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    assert raw_cid(b"hello") == "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq"
    assert (
        cid_for(bytes.fromhex("a16568656c6c6f65776f726c64"), "dag-cbor")
        == "bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae"
    )


@pytest.mark.parametrize(("codec", "prefix"), [("raw", "bafkrei"), ("dag-pb", "bafybei"), ("dag-cbor", "bafyrei")])
def test_each_codec_fixes_the_first_characters_and_length(codec: str, prefix: str) -> None:
    cid = cid_for(b"anything", codec)
    assert cid.startswith(prefix)
    assert len(cid) == 59
    assert parse(cid).codec == codec


@pytest.mark.parametrize("case", VECTORS["raw_utf8"], ids=_ids(VECTORS["raw_utf8"], "text"))
def test_a_parsed_vector_exposes_codec_digest_and_binary_form(case: dict[str, str]) -> None:
    data = case["text"].encode("utf-8")
    parsed = parse(case["cid"])
    assert isinstance(parsed, ParsedCID)
    assert (parsed.version, parsed.codec, parsed.hash) == (1, "raw", "sha2-256")
    assert parsed.digest == hashlib.sha256(data).digest()
    assert parsed.bytes == bytes([1, 0x55, 0x12, 32]) + parsed.digest
    assert cid_bytes(case["cid"]) == parsed.bytes
    assert cid_from_bytes(parsed.bytes) == case["cid"]
    assert cid_from_digest(parsed.digest, "raw") == case["cid"]
    assert str(parsed) == parsed.to_data() == case["cid"]


def test_the_codec_table_is_the_three_block_codecs() -> None:
    assert CODECS == {"raw": 0x55, "dag-pb": 0x70, "dag-cbor": 0x71}


# ---- verify


def test_verify_accepts_the_bytes_a_cid_was_minted_from() -> None:
    assert verify(EMPTY, b"") is True
    assert verify(raw_cid(b"hello"), b"hello") is True


def test_verify_refuses_other_bytes() -> None:
    assert verify(EMPTY, b"\x00") is False
    assert verify(raw_cid(b"hello"), b"hellp") is False


# ---- the reading profile (issue 17): CIDs kuro reads but never mints


@pytest.mark.parametrize("case", VECTORS["readable"], ids=_ids(VECTORS["readable"], "why"))
def test_a_cid_of_real_ipfs_data_is_read_with_its_version_codec_and_hash(case: dict[str, Any]) -> None:
    parsed = parse(case["cid"])
    assert (parsed.version, parsed.codec, parsed.hash) == (case["version"], case["codec"], case["hash"])
    assert str(parsed) == case["cid"]
    assert cid_from_bytes(parsed.bytes) == case["cid"]
    assert decode_binary(parsed.bytes + b"tail") == (parsed, len(parsed.bytes))
    assert parsed.key == case.get("key", case["cid"])


@pytest.mark.parametrize("case", VECTORS["readable"], ids=_ids(VECTORS["readable"], "why"))
def test_verify_dispatches_on_the_cids_own_hash(case: dict[str, Any]) -> None:
    block = bytes.fromhex(case["block_hex"])
    assert verify(case["cid"], block) is True
    assert verify(case["cid"], block + b"!") is False


def test_a_cidv0_and_its_cidv1_name_the_same_block() -> None:
    v0 = parse("QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn")
    v1 = parse(cid_for(bytes.fromhex("0a020801"), "dag-pb"))
    assert v0.key == v1.key == str(v1)
    assert v0.digest == v1.digest and v0.bytes == b"\x12\x20" + v0.digest


def test_only_sha2_256_names_are_mintable() -> None:
    assert [parse(c["cid"]).mintable for c in VECTORS["readable"]] == [False, False, False, False, True]
    assert parse(EMPTY).mintable


@given(st.binary(max_size=300))
@settings(max_examples=100, deadline=None)
def test_matches_agrees_with_hashlib_and_blake3_for_every_hash(data: bytes) -> None:
    import blake3

    digests = {
        "sha2-256": hashlib.sha256(data).digest(),
        "sha2-512": hashlib.sha512(data).digest(),
        "blake3": blake3.blake3(data).digest(),
    }
    for name, digest in digests.items():
        assert matches(ParsedCID("raw", digest, hash=name), data)
        assert not matches(ParsedCID("raw", digest, hash=name), data + b"x")
    if len(data) <= 128:
        assert matches(ParsedCID("raw", data, hash="identity"), data)


def test_verify_of_a_bad_name_raises_rather_than_answering_false() -> None:
    with pytest.raises(InvalidCID):
        verify("Qmfoo", b"")


@given(st.binary(max_size=512), st.integers(min_value=0, max_value=511), st.integers(min_value=1, max_value=255))
@settings(max_examples=100, deadline=None)
def test_flipping_any_byte_breaks_verification(data: bytes, where: int, flip: int) -> None:
    cid = raw_cid(data)
    assert verify(cid, data)
    if data:
        i = where % len(data)
        tampered = data[:i] + bytes([data[i] ^ flip]) + data[i + 1 :]
        assert not verify(cid, tampered)
    assert not verify(cid, data + b"\x00")


# ---- round-trips


@given(st.binary(max_size=2048), st.sampled_from(sorted(CODECS)))
@settings(max_examples=200, deadline=None)
def test_parse_then_str_is_the_identity_on_minted_cids(data: bytes, codec: str) -> None:
    cid = cid_for(data, codec)
    parsed = parse(cid)
    assert str(parsed) == cid
    assert parse(str(parsed)) == parsed
    assert parsed.codec == codec
    assert verify(cid, data)


@given(st.binary(min_size=32, max_size=32), st.sampled_from(sorted(CODECS)))
@settings(max_examples=100, deadline=None)
def test_binary_and_string_forms_round_trip(digest: bytes, codec: str) -> None:
    cid = cid_from_digest(digest, codec)
    assert cid_from_bytes(cid_bytes(cid)) == cid
    assert parse(cid).digest == digest


# ---- the fast base32 paths agree with the library


@given(st.binary(min_size=36, max_size=36))
def test_the_table_driven_base32_is_base64s(binary: bytes) -> None:
    text = format_binary(binary)
    assert text == "b" + base64.b32encode(binary).decode("ascii").rstrip("=").lower()
    assert _decode_canonical(text) == binary


@given(st.binary(max_size=40).filter(lambda b: len(b) != 36))
def test_other_lengths_take_the_library_path(binary: bytes) -> None:
    assert format_binary(binary) == "b" + base64.b32encode(binary).decode("ascii").rstrip("=").lower()


def test_a_canonical_looking_string_with_nonzero_spare_bits_is_refused() -> None:
    good = raw_cid(b"hello")
    spare = "abcdefghijklmnopqrstuvwxyz234567".index(good[-1])
    bad = good[:-1] + "abcdefghijklmnopqrstuvwxyz234567"[spare | 1]
    with pytest.raises(InvalidCID):
        parse_cid(bad)


@given(st.binary(min_size=32, max_size=32), st.sampled_from(sorted(CODECS)), st.binary(max_size=8))
def test_the_binary_fast_path_reads_what_the_string_parser_reads(digest: bytes, codec: str, tail: bytes) -> None:
    # decode_binary takes the 36-byte minting profile without varints (every section of a CAR kuro
    # wrote); the string parse of the same CID is the reference.
    cid = cid_from_digest(digest, codec)
    assert decode_binary(cid_bytes(cid) + tail) == (parse(cid), 36)


def test_a_binary_cid_cut_short_of_its_digest_is_refused_not_read_fast() -> None:
    with pytest.raises(InvalidCID, match="truncated"):
        decode_binary(cid_bytes(raw_cid(b"hello"))[:35])


# ---- CIDs written in other multibases (canonical)

_BASES = ("base58btc", "base36", "base36upper", "base16", "base16upper", "base32upper", "base64url", "base32hex")


@given(st.binary(min_size=32, max_size=32), st.sampled_from(sorted(CODECS)), st.sampled_from(_BASES))
def test_a_cid_in_any_multibase_is_read_as_the_library_reads_it_and_named_canonically(
    digest: bytes, codec: str, base: str
) -> None:
    from multiformats import CID

    cid = cid_from_digest(digest, codec)
    written = CID.decode(cid).encode(base)
    assert canonical(written) == cid == str(CID.decode(written).encode("base32"))
    assert canonical(cid) == cid


def test_a_cidv0_in_any_form_is_named_qm() -> None:
    from multiformats import multibase

    v0 = "QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn"
    multihash = parse(v0).multihash
    assert canonical(v0) == v0
    assert {canonical(multibase.encode(multihash, base)) for base in ("base32", "base58btc", "base16")} == {v0}


@pytest.mark.parametrize("text", ["", "xyz", "k!!", "B", "f00", "zQm", "bafyfoo", "Qmfoo", "z" + "1" * 600])
def test_a_string_that_is_no_cid_in_any_multibase_is_refused(text: str) -> None:
    with pytest.raises(InvalidCID):
        canonical(text)


@given(st.text(max_size=80))
@settings(max_examples=300)
def test_canonical_never_raises_anything_but_invalid_cid(text: str) -> None:
    try:
        got = canonical(text)
    except InvalidCID:
        return
    assert parse(got) is not None


def test_codec_is_tells_minted_names_by_prefix_and_any_other_by_parsing() -> None:
    raw, pb, cbor = cid_for(b"x"), cid_for(b"\x0a\x02\x08\x01", "dag-pb"), cid_for(b"\xa0", "dag-cbor")
    assert [codec_is(c, "raw") for c in (raw, pb, cbor)] == [True, False, False]
    assert [codec_is(c, "dag-pb") for c in (raw, pb, cbor)] == [False, True, False]
    assert [codec_is(c, "dag-cbor") for c in (raw, pb, cbor)] == [False, False, True]
    for case in VECTORS["readable"]:  # CIDv0, sha2-512, blake3, identity: by what they are
        parsed = parse(case["cid"])
        assert codec_is(case["cid"], parsed.codec) and not codec_is(case["cid"], "dag-json")
