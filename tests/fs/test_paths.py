"""Paths: what names a place under the root, and what is refused as bad-path."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.paths import MAX_NAME_BYTES, MAX_PATH_BYTES, clean_path, join_path


@pytest.mark.parametrize(
    "path",
    [
        None,
        b"a.txt",
        7,
        ["a"],
        "",
        "   ",
        "\t\n",
        "..",
        "../etc/passwd",
        "a/../b",
        "/../etc",
        "a/..",
        "a\x00b",
        "\x00",
        "bad\udcffname",
        "n" * (MAX_NAME_BYTES + 1),
        "a/" * (MAX_PATH_BYTES // 2 + 1),
    ],
)
def test_hostile_or_malformed_paths_are_bad_paths(path: object) -> None:
    assert clean_path(path) is None


@pytest.mark.parametrize(
    "path, parts",
    [
        (".", ()),
        ("/", ()),
        ("./", ()),
        ("//./", ()),
        ("a.txt", ("a.txt",)),
        ("/etc/passwd", ("etc", "passwd")),
        ("docs//notes/./a.txt", ("docs", "notes", "a.txt")),
        ("a/", ("a",)),
        ("...", ("...",)),
        (" a ", (" a ",)),
        ("é/こんにちは", ("é", "こんにちは")),
        ("n" * MAX_NAME_BYTES, ("n" * MAX_NAME_BYTES,)),
    ],
)
def test_good_paths_name_segments_under_the_root(path: str, parts: tuple[str, ...]) -> None:
    assert clean_path(path) == parts


def test_a_leading_slash_is_re_rooted_not_refused() -> None:
    assert clean_path("/a/b") == clean_path("a/b")


def test_the_name_limit_counts_utf8_bytes_not_characters() -> None:
    assert clean_path("é" * 127) is not None  # 254 bytes
    assert clean_path("é" * 128) is None  # 256 bytes


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_a_clean_path_never_holds_an_escape_or_an_empty_segment(path: str) -> None:
    parts = clean_path(path)
    if parts is None:
        return
    for seg in parts:
        assert seg not in ("", ".", "..") and "/" not in seg and "\x00" not in seg
    assert clean_path(join_path(parts)) == parts
