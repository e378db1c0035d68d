"""kuro_fs.gateway.request: what a request asks for, decided before any block is read (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.gateway.request import (
    CarParams,
    EntityBytes,
    Refused,
    Want,
    byte_range,
    content_disposition,
    etag,
    etag_matches,
    negotiate,
)

CAR = "application/vnd.ipld.car"
RAW = "application/vnd.ipld.raw"


@pytest.mark.parametrize(
    ("query", "accept", "status"),
    [
        ({}, None, 400),
        ({}, "", 400),
        ({}, "*/*", 400),
        ({}, "text/html, image/*", 406),
        ({"format": "json"}, None, 400),
        ({}, f"{CAR}; version=2", 406),
        ({}, f"{CAR}; order=random", 406),
        ({}, f"{CAR}; dups=maybe", 406),
        ({}, f"{RAW}; q=0", 406),
        ({}, f"{RAW}; q=0, {CAR}; q=0", 406),
        ({}, f"{RAW}; q=0, {CAR}; q=0, */*; q=0", 406),
        ({}, "*/*; q=0", 406),
        ({}, f"{RAW}; q=0, */*", 406),
        ({"format": "car", "car-version": "2"}, None, 400),
        ({"format": "car", "car-order": "bfs"}, None, 400),
        ({"format": "car", "dag-scope": "ALL"}, None, 400),
        ({"format": "car", "entity-bytes": "a:b"}, None, 400),
        ({"format": "car", "entity-bytes": "1:"}, None, 400),
        ({"format": "car", "entity-bytes": "99999999999999999999:*"}, None, 400),
        ({"format": "car", "entity-bytes": "0:*", "dag-scope": "block"}, None, 400),
    ],
)
def test_a_request_outside_the_protocol_is_refused_with_its_status(
    query: dict[str, str], accept: str | None, status: int
) -> None:
    got = negotiate(query, accept)
    assert isinstance(got, Refused) and got.status == status and got.message


def test_format_wins_over_accept() -> None:
    assert negotiate({"format": "raw"}, CAR) == Want("raw")
    assert negotiate({"format": "car"}, RAW) == Want("car", CarParams())


def test_accept_ranges_are_tried_by_falling_q_and_unservable_variants_are_skipped() -> None:
    assert negotiate({}, f"{CAR}; q=0.5, {RAW}") == Want("raw")
    assert negotiate({}, f"{CAR}; order=foo, {CAR}; order=dfs; dups=y; q=0.5") == Want("car", CarParams(dups=True))
    assert negotiate({}, f"{RAW}; q=0, {CAR}") == Want("car", CarParams())


def test_car_parameters_from_the_query_override_accept_and_order_unk_is_answered_dfs() -> None:
    want = negotiate({"car-dups": "y"}, f"{CAR}; dups=n; order=unk")
    assert want == Want("car", CarParams(dups=True))
    assert want.car is not None and want.car.content_type == f"{CAR}; version=1; order=dfs; dups=y"


def test_entity_bytes_implies_entity_scope() -> None:
    assert negotiate({"format": "car", "entity-bytes": "-5:*"}, None) == Want(
        "car", CarParams("entity", EntityBytes(-5, None))
    )


@pytest.mark.parametrize(
    ("start", "stop", "size", "span"),
    [
        (0, None, 1026, (0, 1026)),
        (512, 1023, 1026, (512, 1024)),
        (512, -256, 1026, (512, 771)),
        (-5, None, 1026, (1021, 1026)),
        (-9999, None, 1026, (0, 1026)),
        (-9999, -3, 1026, (0, 1024)),
        (0, 0, 1026, (0, 1)),
        (2000, None, 1026, None),
        (0, None, 0, None),
        (10, -2000, 1026, None),
    ],
)
def test_entity_bytes_resolve_against_the_entity_size(
    start: int, stop: int | None, size: int, span: tuple[int, int] | None
) -> None:
    assert EntityBytes(start, stop).resolve(size) == span


def test_the_etag_is_a_function_of_the_whole_request() -> None:
    wants = [Want("raw"), Want("car", CarParams()), Want("car", CarParams("entity")), Want("car", CarParams(dups=True))]
    tags = {etag("bafkqaaa", p, w) for w in wants for p in ("", "a/b")}
    assert len(tags) == 8
    assert etag_matches('W/"x", "bafkqaaa.raw"', etag("bafkqaaa", "", Want("raw")))
    assert etag_matches("*", '"anything"') and not etag_matches(None, '"x"') and not etag_matches('"y"', '"x"')


def test_a_download_name_is_quoted_safely() -> None:
    assert content_disposition(None, "c.car") == 'attachment; filename="c.car"'
    assert content_disposition("ok.bin", "c.bin") == 'attachment; filename="ok.bin"'
    assert "\r" not in content_disposition("a\r\nX-Evil: 1", "c.bin")


@given(
    st.dictionaries(
        st.sampled_from(["format", "dag-scope", "entity-bytes", "car-dups", "car-order", "car-version"]),
        st.text(max_size=30),
    ),
    st.none() | st.text(max_size=120),
)
@settings(max_examples=400, deadline=None)
def test_negotiation_never_raises_and_always_decides(query: dict[str, str], accept: str | None) -> None:
    got = negotiate(query, accept)
    assert isinstance(got, (Want, Refused))
    if isinstance(got, Refused):
        assert got.status in (400, 406) and got.message
    elif got.kind == "car":
        assert got.car is not None and got.car.scope in ("block", "entity", "all")


@given(st.none() | st.text(max_size=40), st.integers(0, 10_000))
@settings(max_examples=300, deadline=None)
def test_a_byte_range_is_whole_unsatisfiable_or_inside_the_body(header: str | None, size: int) -> None:
    got = byte_range(header, size)
    if isinstance(got, tuple):
        lo, hi = got
        assert 0 <= lo < hi <= size


@given(st.integers(-(10**6), 10**6), st.none() | st.integers(-(10**6), 10**6), st.integers(0, 10**6))
@settings(max_examples=300, deadline=None)
def test_an_entity_range_is_empty_or_inside_the_entity(start: int, stop: int | None, size: int) -> None:
    got = EntityBytes(start, stop).resolve(size)
    if got is not None:
        assert 0 <= got[0] < got[1] <= size
