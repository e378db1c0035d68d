"""Paths: what names a place under the root, and what is refused as bad-path."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.paths import (
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    clean_path,
    escape_name,
    join_path,
    names_a_directory,
    stored_name_ok,
)


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
        "evil\nfake/",
        "a/\x1b]0;title\x07",
        "a\rb",
        "\x7f",
        "x\x80y",
        "x\x9by",
        "a/ /b",
        "a/\t/b",
        "a/\u3000",
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
        ("x\xa0y", ("x\xa0y",)),  # NO-BREAK SPACE is not a control character
        ("a/./", ("a",)),
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


@pytest.mark.parametrize("code", [*range(0x01, 0x20), 0x7F, *range(0x80, 0xA0)])
def test_every_c0_del_and_c1_control_character_is_refused_in_a_segment(code: int) -> None:
    assert clean_path(f"dir/na{chr(code)}me") is None


@pytest.mark.parametrize(
    "path, wants_dir",
    [
        ("greeting.txt/", True),
        ("a/.", True),
        ("a//", True),
        (".", True),
        ("/", True),
        ("a", False),
        ("a.", False),
        ("a/b", False),
        ("..a/", True),
    ],
)
def test_a_trailing_slash_says_the_path_names_a_directory(path: str, wants_dir: bool) -> None:
    assert names_a_directory(path) is wants_dir


def test_a_stored_name_may_hold_a_control_character_but_nothing_that_breaks_a_path() -> None:
    assert stored_name_ok("old\nname") and stored_name_ok("\x1b[2J") and stored_name_ok("é")
    for bad in ["", " ", "a/b", ".", "..", "a\x00", "bad\udcff", "n" * (MAX_NAME_BYTES + 1), 3, None]:
        assert not stored_name_ok(bad)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=12), st.text(max_size=12))
def test_an_escaped_name_has_no_control_character_and_no_two_names_print_alike(a: str, b: str) -> None:
    shown = escape_name(a)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in BIDI for c in shown)
    if a != b:
        assert shown != escape_name(b)
    if clean_path(a) == (a,) and "\\" not in a and not set(a) & BIDI:
        assert shown == a  # a name a path may hold prints as itself


BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def test_a_name_with_a_bidi_override_prints_escaped_in_order() -> None:
    # "Trojan Source": U+202E would show "txt.exe" as "exe.txt"; printed, the override is visible text.
    assert escape_name("\u202etxt.exe") == "\\u202etxt.exe"
    assert escape_name("a\u2066b\u2069") == "a\\u2066b\\u2069"
    assert escape_name("\\u202e") == "\\\\u202e"  # the literal text stays distinguishable
