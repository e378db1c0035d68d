"""Fuzzing the overlay: a hostile path or number is an Errno value (never an exception), and a refusal changes nothing.

Wrong *types* (a path that is not a str, a payload that is not bytes) are the caller's bug, not the
guest's: they raise TypeError before anything happens.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_fs.overlay import DirEntry, Errno, Handle, Overlay, Stat

_segments = st.sampled_from(["a", "d", "f", "..", ".", "", "\x00", "\\", "é", "\ud800", " ", "x" * 300])
hostile_paths = st.one_of(
    st.lists(_segments, max_size=6).map("/".join),
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec=None), max_size=20),
    st.builds(lambda n: "a/" * n, st.integers(0, 3000)),
)
numbers = st.one_of(st.integers(-(2**70), 2**70), st.booleans(), st.integers(0, 100))


def overlay() -> Overlay:
    fs = Fs.empty(MemoryBlockStore()).write("d/f", b"content").fs
    return Overlay(fs, max_file_size=1 << 20)


@settings(max_examples=300, deadline=None)
@given(path=hostile_paths, other=hostile_paths, flags=st.tuples(*[st.booleans()] * 4))
def test_a_hostile_path_gives_a_value_or_an_errno(path: str, other: str, flags: tuple[bool, ...]) -> None:
    ov = overlay()
    create, exclusive, truncate, directory = flags
    opened = ov.open(path, create=create, exclusive=exclusive, truncate=truncate, directory=directory)
    assert isinstance(opened, (Handle, Errno))
    for result in (ov.stat_path(path), ov.mkdir(path), ov.rmdir(path), ov.unlink(path), ov.rename(path, other)):
        assert result is None or isinstance(result, (Stat, Errno))


@settings(max_examples=200, deadline=None)
@given(path=hostile_paths, op=st.sampled_from(["open", "mkdir", "rmdir", "unlink", "rename"]))
def test_a_refused_change_leaves_nothing_pending(path: str, op: str) -> None:
    ov = overlay()
    result: Any = {
        "open": lambda: ov.open(path, create=True, exclusive=True),
        "mkdir": lambda: ov.mkdir(path),
        "rmdir": lambda: ov.rmdir(path),
        "unlink": lambda: ov.unlink(path),
        "rename": lambda: ov.rename(path, "d/f"),
    }[op]()
    if isinstance(result, Errno):
        assert not ov.pending
        assert ov.commit().ops == 0


@settings(max_examples=300, deadline=None)
@given(offset=numbers, length=numbers, data=st.binary(max_size=20))
def test_hostile_numbers_give_bytes_a_count_or_an_errno(offset: Any, length: Any, data: bytes) -> None:
    ov = overlay()
    h = ov.open("d/f")
    assert isinstance(h, Handle)
    read = ov.read(h, offset, length)
    assert isinstance(read, bytes) or read is Errno.INVAL
    wrote = ov.write(h, offset, data)
    assert wrote == len(data) or wrote in (Errno.INVAL, Errno.FBIG)
    sized = ov.set_size(h, length)
    assert sized is None or sized in (Errno.INVAL, Errno.FBIG)
    listing = ov.readdir(ov.root)
    assert isinstance(listing, list) and all(isinstance(e, DirEntry) for e in listing)


@pytest.mark.parametrize("path", [None, b"d/f", 3, ["d"], object()])
def test_a_path_that_is_not_a_str_is_a_type_error(path: Any) -> None:
    ov = overlay()
    for call in (ov.open, ov.stat_path, ov.mkdir, ov.rmdir, ov.unlink):
        with pytest.raises(TypeError):
            call(path)
    assert not ov.pending


@pytest.mark.parametrize("data", ["text", 5, None, [1, 2]])
def test_a_payload_that_is_not_bytes_is_a_type_error(data: Any) -> None:
    ov = overlay()
    h = ov.open("d/f")
    assert isinstance(h, Handle)
    with pytest.raises(TypeError):
        ov.write(h, 0, data)
    released = memoryview(b"abc")
    released.release()
    with pytest.raises(ValueError, match="released"):
        ov.write(h, 0, released)
    assert not ov.pending
