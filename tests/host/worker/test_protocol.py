"""The frame protocol: plain data in, plain data out, and anything else refused before it is believed."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_wasm.host.worker.protocol import (
    _DECODER,
    _ENCODER,
    MAX_JSON_BYTES,
    MESSAGES,
    RECEIPT_BASE_BYTES,
    RESULT_JSON_PER_BYTE,
    ProtocolError,
    _dumps,
    _loads,
    decode,
    decode_receipt,
    done_receipt,
    encode,
    encode_fields,
    encode_receipt,
    frame,
    read_frame,
    receipt_limit,
)
from kuro_wasm.model.limits import Limits

_SAMPLES: dict[str, Any] = {"int": 7, "num": 1.5, "str": "x", "bool": True, "data": {"a": [1, "b"]}, "str?": None}
HOST = frozenset({"host"})
WORKER = frozenset({"worker"})


def _frame(kind: str, fields: dict[str, Any], payload: bytes = b"") -> bytes:
    return encode(kind, fields, payload) + (payload if len(payload) > 65536 else b"")


def _raw(body: bytes, payload: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(body) + len(payload), len(body)) + body + payload


@pytest.mark.parametrize("kind", sorted(MESSAGES))
def test_every_message_round_trips_as_plain_data(kind: str) -> None:
    spec = MESSAGES[kind]
    fields = {name: _SAMPLES[t] for name, t in spec.fields.items()}
    payload = b"\x00\xffbytes" if spec.payload else b""
    got = read_frame(io.BytesIO(_frame(kind, fields, payload)), frozenset({spec.sender}), lambda _m: 1 << 20)
    assert got == ({"t": kind, **fields}, payload)


def test_a_large_payload_rides_after_the_json_part() -> None:
    payload = bytes(range(256)) * 1024
    got = read_frame(io.BytesIO(_frame("chunk", {"id": 1, "stream": "stdout"}, payload)), WORKER, lambda _m: 1 << 20)
    assert got is not None and got[1] == payload


@given(split=st.integers(0, len(MESSAGES["run"].fields)), stdin=st.binary(max_size=70_000))
@settings(max_examples=25, deadline=None)
def test_fields_encoded_ahead_make_the_same_message_as_fields_encoded_at_once(split: int, stdin: bytes) -> None:
    fields = {name: _SAMPLES[t] for name, t in MESSAGES["run"].fields.items()}
    names = sorted(fields)
    now, ahead = {k: fields[k] for k in names[:split]}, {k: fields[k] for k in names[split:]}
    first, rest = frame("run", now, stdin, encode_fields("run", ahead))
    assert read_frame(io.BytesIO(first + rest), HOST, lambda _m: 1 << 20) == ({"t": "run", **fields}, stdin)
    assert (len(rest) > 0) == (len(stdin) > 65536)  # a large payload is written after the frame, not copied into it


def test_fields_encoded_ahead_are_plain_data_within_a_frames_limit() -> None:
    with pytest.raises(ProtocolError, match="not plain data"):
        encode_fields("run", {"deadline": float("inf")})
    with pytest.raises(ProtocolError, match="over the"):
        encode_fields("run", {"session": "x" * MAX_JSON_BYTES})
    with pytest.raises(ProtocolError, match="over the"):  # each part within the limit, the two together over it
        frame(
            "run",
            {"command": "x" * (MAX_JSON_BYTES // 2)},
            b"",
            encode_fields("run", {"fs": "y" * (MAX_JSON_BYTES // 2)}),
        )


def test_a_clean_end_between_frames_is_none() -> None:
    assert read_frame(io.BytesIO(b""), WORKER, lambda _m: 0) is None


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"t": "nope"}', "unexpected message type"),
        (b'{"t": "run", "id": 1}', "fields missing"),
        (b'{"t": "kill", "id": 1, "extra": 2}', "unexpected"),
        (b'{"t": "kill", "id": "1"}', "must be int"),
        (b'{"t": "kill", "id": true}', "must be int"),
        (b'{"t": "kill", "id": NaN}', "not JSON"),
        (b'{"t": "done", "id": 1, "receipt": 0, "stream": {}, "cpu": 1e999}', "finite"),
        (b"[1, 2]", "JSON object"),
        (b"\xff\xfe", "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    ],
)
def test_a_malformed_message_is_refused(body: bytes, why: str) -> None:
    senders = HOST | WORKER
    with pytest.raises(ProtocolError, match=why):
        decode(body, senders)


def test_a_message_from_the_wrong_side_is_refused() -> None:
    with pytest.raises(ProtocolError, match="unexpected message type"):
        decode(json.dumps({"t": "kill", "id": 1}).encode(), WORKER)  # kill is the host's to send


def test_a_hostile_length_is_refused_before_anything_is_allocated() -> None:
    head = struct.pack(">II", 0xFFFFFFFF, MAX_JSON_BYTES + 1)
    with pytest.raises(ProtocolError, match="limits"):
        read_frame(io.BytesIO(head), WORKER, lambda _m: 0)


def test_a_payload_over_its_limit_is_refused_before_it_is_read() -> None:
    body = json.dumps({"t": "put", "id": 1, "cid": "x"}).encode()
    stream = io.BytesIO(struct.pack(">II", 4 + len(body) + 10**9, len(body)) + body)
    with pytest.raises(ProtocolError, match="over its limit"):
        read_frame(stream, WORKER, lambda _m: 1 << 20)
    assert stream.tell() == 8 + len(body)  # not one payload byte was read


def test_a_payload_on_a_message_that_has_none_is_refused() -> None:
    body = json.dumps({"t": "kill", "id": 1}).encode()
    with pytest.raises(ProtocolError, match="no payload"):
        read_frame(io.BytesIO(_raw(body, b"xx")), HOST, lambda _m: 1 << 20)


@pytest.mark.parametrize("cut", [3, 9, 20])
def test_a_frame_cut_short_is_refused(cut: int) -> None:
    frame = _frame("chunk", {"id": 1, "stream": "stdout"}, b"abcdef")
    with pytest.raises(ProtocolError, match="ended inside"):
        read_frame(io.BytesIO(frame[: len(frame) - cut]), WORKER, lambda _m: 1 << 20)


def test_the_sender_cannot_encode_what_json_cannot_carry() -> None:
    with pytest.raises(ProtocolError):
        encode("probe", {"what": float("nan")})
    with pytest.raises(ProtocolError):
        encode("nope", {})
    with pytest.raises(ProtocolError, match="no payload"):
        encode("kill", {"id": 1}, b"x")


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_from_a_worker_are_a_frame_an_end_or_a_protocol_error(data: bytes) -> None:
    try:
        read_frame(io.BytesIO(data), WORKER, lambda _m: 1 << 16)
    except ProtocolError:
        pass


@settings(max_examples=60, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_any_json_value_is_a_message_or_a_protocol_error(value: Any) -> None:
    try:
        decode(json.dumps(value).encode(), HOST | WORKER)
    except ProtocolError:
        pass


# ---- a run's receipt: the done frame's payload, bounded by the run's own limits


def test_a_receipt_rides_as_the_done_payload_with_its_result_as_dag_json_text_not_escaped_again() -> None:
    receipt = {"kuro/outcome": "ok", "kuro/reads": ["bafkqaaa"], "kuro/result": '[{"/":{"bytes":""}}]'}
    size, payload = encode_receipt(receipt, 1 << 20)
    assert payload[size:] == b'[{"/":{"bytes":""}}]'
    frame = _frame("done", {"id": 1, "receipt": size, "stream": {}, "cpu": 0.5}, payload)
    got = read_frame(io.BytesIO(frame), WORKER, lambda _m: 1 << 20)
    assert got is not None and decode_receipt(got[0]["receipt"], got[1]) == receipt
    assert decode_receipt(*encode_receipt({"kuro/outcome": "ok"}, 100)) == {"kuro/outcome": "ok"}


def test_the_receipt_limit_is_the_runs_value_bound_times_a_factor_plus_a_base_and_fits_one_frame() -> None:
    assert receipt_limit(Limits()) == RECEIPT_BASE_BYTES + RESULT_JSON_PER_BYTE * Limits().value_bound()
    assert receipt_limit(Limits(max_value_bytes=1000)) == RECEIPT_BASE_BYTES + RESULT_JSON_PER_BYTE * 1000
    assert receipt_limit(Limits(max_value_bytes=1 << 40)) <= (1 << 32) - 1 - 4 - MAX_JSON_BYTES


@pytest.mark.parametrize(
    "receipt",
    [
        {"kuro/reads": ["bafkqaaa" * 20] * 1000},  # over the limit
        {"kuro/result": "x" * 20_000},
        {"kuro/fuel-consumed": float("nan")},  # not plain data
    ],
)
def test_a_receipt_that_cannot_cross_becomes_a_host_error_receipt_saying_why(receipt: dict[str, Any]) -> None:
    counts = {"kuro/stdout-bytes": 12, "kuro/stderr-bytes": 3}
    size, payload = done_receipt({"kuro/outcome": "ok", "kuro/exit-code": 0, **counts, **receipt}, 10_000)
    got = decode_receipt(size, payload)
    assert (got["kuro/outcome"], got["kuro/exit-code"]) == ("host-error", 70)
    assert got["kuro/error"].startswith("host error: the worker could not send the run's receipt: done: ")
    assert {k: got[k] for k in counts} == counts and "kuro/reads" not in got and "kuro/result" not in got


@pytest.mark.parametrize(
    ("size", "payload"),
    [(5, b"{}"), (-1, b"{}"), (3, b'{}\xff"x"'), (2, b'[]"x"'), (0, b""), (17, b'{"kuro/result":1}"x"')],
)
def test_a_done_payload_that_is_not_a_receipt_is_a_protocol_error(size: int, payload: bytes) -> None:
    with pytest.raises(ProtocolError, match="done"):
        decode_receipt(size, payload)


_PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _outcome(call: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", call(value)
    except (TypeError, ValueError, RecursionError) as exc:
        return "raised", type(exc).__name__


@settings(max_examples=300, deadline=None)
@given(_PLAIN | st.dictionaries(st.integers() | st.floats(allow_nan=False), st.integers(), max_size=2))
def test_the_direct_c_encoder_writes_what_the_json_encoder_writes_or_refuses_alike(value: Any) -> None:
    assert _outcome(_dumps, value) == _outcome(lambda v: _ENCODER.encode(v).encode("ascii"), value)


@settings(max_examples=300, deadline=None)
@given(_PLAIN.map(json.dumps) | st.text(alphabet=' \t\n[]{}",:0123456789.eE+-truefalsnNaIiy\\u') | st.text())
def test_the_direct_scanner_reads_what_the_json_decoder_reads_or_refuses_alike(text: str) -> None:
    got, expected = _outcome(_loads, text), _outcome(_DECODER.decode, text)
    assert got == expected or (got[0] == expected[0] == "ok" and json.dumps(got[1]) == json.dumps(expected[1]))


def test_a_key_json_can_spell_is_sent_as_a_string_and_any_other_is_not_plain_data() -> None:
    assert _dumps({2: 0, 1.5: 0, True: 0, None: 0}) == b'{"2":0,"1.5":0,"true":0,"null":0}'
    with pytest.raises(ProtocolError, match="not plain data: keys must be str"):
        encode_fields("run", {"command": {(1,): 0}})
    with pytest.raises(ProtocolError, match="not plain data"):
        encode_fields("run", {"command": {float("nan"): 0}})


def test_a_cycle_is_refused_as_not_plain_data() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ProtocolError, match="not plain data"):
        encode_fields("run", {"command": cycle})
