"""The output stream: one cap across both streams, exact-prefix rule, finish → receipt."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_strategies import EMPTY_CID, GUEST_CID, caps, write_lists

from kuro_fs.cid import raw_cid
from kuro_wasm.errors import ModelError, StreamClosed
from kuro_wasm.model import stream
from kuro_wasm.model.receipt import KEYS, namespace
from kuro_wasm.model.sessions import Session, guest, session
from kuro_wasm.model.stream import Stream, append, chunks, finish, kept_bytes, mark_exited, new, total_bytes


def _feed(s: Stream, writes: list[tuple[str, bytes]]) -> Stream:
    for name, data in writes:
        s, _ = append(s, name, data)
    return s


# ---- bad input first


@pytest.mark.parametrize("name", ["stdlog", "STDOUT", "", None, 1])
def test_a_chunk_must_name_stdout_or_stderr(name: Any) -> None:
    with pytest.raises(ModelError, match="stdout or stderr"):
        append(new(), name, b"x")


def test_the_stream_name_is_checked_before_the_state() -> None:
    with pytest.raises(ModelError):
        append(mark_exited(new()), "stdlog", b"x")


@pytest.mark.parametrize("data", ["text", None, 5, [104]])
def test_chunk_data_must_be_bytes(data: Any) -> None:
    with pytest.raises(ModelError):
        append(new(), "stdout", data)


@pytest.mark.parametrize("cap", [-1, True, 1.5, "10", None])
def test_the_cap_must_be_a_non_negative_int(cap: Any) -> None:
    with pytest.raises(ModelError):
        new(cap)


def test_appending_to_or_finishing_an_exited_stream_is_an_error(sess: Session, spec: dict[str, Any]) -> None:
    done = mark_exited(append(new(), "stdout", b"a")[0])
    with pytest.raises(StreamClosed) as info:
        append(done, "stdout", b"b")
    assert info.value.state == "exited"
    with pytest.raises(StreamClosed):
        finish(done, sess, spec, {"exit-code": 0})


def test_finish_needs_a_session_and_command_from_somewhere(sess: Session, spec: dict[str, Any]) -> None:
    with pytest.raises(ModelError):
        finish(new(), None, None, {"exit-code": 0})
    assert finish(new(session=sess, command=spec), None, None, {"exit-code": 0})["kuro/session-id"] == "s1"
    with pytest.raises(ModelError):
        finish(new(), {"exit-code": 0})


def test_finish_of_a_stream_and_a_result_uses_the_streams_own_session_and_command(
    sess: Session, spec: dict[str, Any]
) -> None:
    s, _ = append(new(session=sess, command=spec), "stdout", b"hi\n")
    r = finish(s, {"exit-code": 0})
    assert r == finish(s, sess, spec, {"exit-code": 0})
    assert (r["kuro/session-id"], r["kuro/command"], r["kuro/stdout"]) == ("s1", spec, b"hi\n")


@pytest.mark.parametrize("extra", [(), (None, {"exit-code": 0})], ids=["no-result", "three-args"])
def test_finish_with_another_number_of_arguments_is_a_type_error(extra: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError, match="finish takes"):
        finish(new(), *extra)  # type: ignore[call-overload]


# ---- keeping and dropping


def test_seq_follows_acceptance_order_and_bytes_are_kept_per_stream() -> None:
    s = new()
    s, a = append(s, "stdout", b"a")
    s, b = append(s, "stderr", b"b")
    s, c = append(s, "stdout", b"c")
    assert [x.seq for x in chunks(s)] == [0, 1, 2] and [a, b, c] == list(chunks(s))
    assert (kept_bytes(s, "stdout"), kept_bytes(s, "stderr")) == (b"ac", b"b")


def test_bytes_are_counted_not_characters() -> None:
    s, _ = append(new(), "stdout", "あいう".encode())
    assert s.stdout_bytes == 9


def test_a_chunk_that_does_not_fit_is_dropped_whole_and_reported_as_none() -> None:
    s, kept = append(new(4), "stdout", b"abcd")
    s, dropped = append(s, "stdout", b"efghij")
    assert kept is not None and dropped is None
    assert (s.stdout_bytes, s.dropped_bytes, s.truncated, kept_bytes(s, "stdout")) == (4, 6, True, b"abcd")


def test_the_cap_counts_both_streams_together() -> None:
    s = _feed(new(4), [("stdout", b"ab"), ("stderr", b"cd"), ("stdout", b"e")])
    assert (s.truncated, s.dropped_bytes, total_bytes(s)) == (True, 1, 4)


def test_truncation_is_sticky_so_a_later_chunk_that_fits_is_dropped_too() -> None:
    s = _feed(new(4), [("stdout", b"ab"), ("stdout", b"cdef")])
    assert s.dropped_bytes == 4
    s, chunk = append(s, "stderr", b"gh")
    assert chunk is None and s.dropped_bytes == 6 and kept_bytes(s, "stderr") == b""


def test_seq_advances_for_dropped_chunks() -> None:
    s = _feed(new(1), [("stdout", b"a"), ("stdout", b"bb")])
    s, c = append(s, "stdout", b"")
    assert s.seq == 3 and c is None


def test_an_empty_chunk_is_kept_while_not_truncated() -> None:
    s, c = append(new(0), "stdout", b"")
    assert c is not None and c.data == b"" and not s.truncated


def test_total_bytes_excludes_dropped_bytes() -> None:
    s = _feed(new(4), [("stdout", b"ab"), ("stderr", b"cd"), ("stdout", "あ".encode())])
    assert (total_bytes(s), s.dropped_bytes) == (4, 3)


def test_a_stream_value_is_immutable_and_old_values_stay_valid() -> None:
    base, _ = append(new(), "stdout", b"a")
    left, _ = append(base, "stdout", b"L")
    right, _ = append(base, "stdout", b"R")
    assert [kept_bytes(x, "stdout") for x in (base, left, right)] == [b"a", b"aL", b"aR"]
    with pytest.raises(AttributeError):
        base.seq = 9  # type: ignore[misc]


def test_written_bytes_are_copied_so_a_guest_buffer_can_be_reused() -> None:
    buf = bytearray(b"abc")
    s, _ = append(new(), "stdout", memoryview(buf))
    buf[:] = b"xyz"
    assert kept_bytes(s, "stdout") == b"abc"


def test_a_hundred_thousand_small_chunks_stay_a_usable_value() -> None:
    s = new()
    for i in range(100_000):
        s, _ = append(s, "stdout" if i % 2 else "stderr", b"x")
    assert (len(kept_bytes(s, "stdout")), len(chunks(s)), s.seq) == (50_000, 100_000, 100_000)
    assert s == s and "seq=100000" in repr(s)


def test_mark_exited_is_idempotent_and_finish_leaves_the_state_alone(sess: Session, spec: dict[str, Any]) -> None:
    s = new()
    finish(s, sess, spec, {"exit-code": 0})
    assert s.running
    done = mark_exited(s)
    assert (done.state, mark_exited(done).state) == ("exited", "exited")


# ---- finish


def test_finish_gives_a_receipt_with_the_kept_output_and_no_truncation_keys(
    sess: Session, spec: dict[str, Any]
) -> None:
    s, _ = append(new(), "stdout", b"hi\n")
    r = finish(s, sess, spec, {"exit-code": 0, "duration-ms": 12, "truncated?": True, "dropped-bytes": 5})
    assert (r["kuro/stdout"], r["kuro/stdout-bytes"], r["kuro/exit-code"], r["kuro/duration-ms"]) == (
        b"hi\n", 3, 0, 12)  # fmt: skip
    assert (r["kuro/stdout-cid"], r["kuro/stderr-cid"]) == (raw_cid(b"hi\n"), raw_cid(b""))
    assert "kuro/truncated?" not in r and "kuro/dropped-bytes" not in r
    assert "kuro/kuro/truncated?" not in r


def test_a_truncated_stream_says_so_in_its_receipt(sess: Session, spec: dict[str, Any]) -> None:
    s, _ = append(new(2), "stdout", b"abcdef")
    r = finish(s, sess, spec, {"exit-code": 125, "outcome": "output-capped"})
    assert (r["kuro/truncated?"], r["kuro/dropped-bytes"], r["kuro/stdout"], r["kuro/outcome"]) == (
        True, 6, b"", "output-capped")  # fmt: skip


def test_the_streams_measurements_win_over_the_hosts(sess: Session, spec: dict[str, Any]) -> None:
    s = _feed(new(3), [("stdout", b"abc"), ("stdout", b"d")])
    r = finish(s, sess, spec, {"exit-code": 125, "outcome": "output-capped", "stdout": b"lie", "kuro/stdout-bytes": 99,
                               "stdout-cid": raw_cid(b"lie"), "truncated?": False, "kuro/dropped-bytes": 0,
                               "started-at": 7})  # fmt: skip
    assert (r["kuro/stdout"], r["kuro/stdout-bytes"], r["kuro/stdout-cid"]) == (b"abc", 3, raw_cid(b"abc"))
    assert (r["kuro/truncated?"], r["kuro/dropped-bytes"], r["kuro/started-at"]) == (True, 1, 7)


# ---- properties


@settings(max_examples=200, deadline=None)
@given(write_lists, caps)
def test_kept_output_is_an_exact_prefix_within_the_cap_and_counters_add_up(
    writes: list[tuple[str, bytes]], cap: int
) -> None:
    s = _feed(new(cap), writes)
    emitted = [(name, data) for name, data in writes]
    kept = [(c.stream, c.data) for c in chunks(s)]
    assert kept == emitted[: len(kept)]
    for name in stream.STREAMS:
        mine = b"".join(d for n, d in emitted if n == name)
        assert mine.startswith(kept_bytes(s, name))
    assert total_bytes(s) <= cap
    assert total_bytes(s) + s.dropped_bytes == sum(len(d) for _, d in writes)
    assert s.seq == len(writes)
    assert s.truncated == (s.dropped_bytes > 0)


@settings(max_examples=100, deadline=None)
@given(write_lists, caps)
def test_a_finished_streams_receipt_is_closed_and_truncation_keys_appear_only_when_truncated(
    writes: list[tuple[str, bytes]], cap: int
) -> None:
    s = _feed(new(cap), writes)
    r = finish(s, session("s1", EMPTY_CID), guest(GUEST_CID, "run"), {"exit-code": 0})
    assert {k[5:] for k in r} <= set(KEYS)
    assert ("kuro/truncated?" in r) == ("kuro/dropped-bytes" in r) == s.truncated
    assert r["kuro/stdout"] + r["kuro/stderr"] == kept_bytes(s, "stdout") + kept_bytes(s, "stderr")


@settings(max_examples=150, deadline=None)
@given(write_lists, caps, st.integers(0, 6))
def test_a_write_measured_first_leaves_the_stream_a_plain_append_leaves(
    writes: list[tuple[str, bytes]], cap: int, chunk_bound: int
) -> None:
    """Writer.admit(n) then append (only if admitted) is append: the same kept chunks, drops and bound named,
    though a dropped write's bytes were never handed over."""
    measured = stream.Writer(max_output_bytes=cap, max_chunks=chunk_bound)
    for name, data in writes:
        if measured.admit(len(data)):
            assert measured.append(name, data)
    plain = new(cap, max_chunks=chunk_bound)
    for name, data in writes:
        plain, _ = append(plain, name, data)
    assert measured.value() == plain


def test_every_kept_chunk_counts_against_the_chunk_bound_even_an_empty_one() -> None:
    s = new(0, max_chunks=3)
    for _ in range(3):
        s, c = append(s, "stdout", b"")
        assert c is not None
    s, c = append(s, "stdout", b"")
    assert c is None and s.truncated and s.capped_by == "chunks" and s.kept_chunks == 3
    s, c = append(s, "stderr", b"x")  # sticky, and the first bound hit stays the one named
    assert c is None and s.capped_by == "chunks" and s.dropped_bytes == 1


def test_the_receipt_says_which_bound_stopped_the_guest() -> None:
    sess = session("s", raw_cid(b"root"))
    spec = guest(raw_cid(b"g"), "run")
    by_chunks, _ = append(append(new(10, max_chunks=1), "stdout", b"a")[0], "stdout", b"b")
    by_bytes, _ = append(new(1), "stdout", b"ab")
    assert finish(by_chunks, sess, spec, {"exit-code": 125})["kuro/capped-by"] == "chunks"
    assert finish(by_bytes, sess, spec, {"exit-code": 125})["kuro/capped-by"] == "bytes"
    assert "kuro/capped-by" not in finish(new(10), sess, spec, {"exit-code": 0})


@settings(max_examples=150, deadline=None)
@given(write_lists, caps, st.integers(0, 6), st.data())
def test_a_writer_continuing_a_stream_and_asked_at_every_step_is_append(
    writes: list[tuple[str, bytes]], cap: int, chunk_bound: int, data: st.DataObject
) -> None:
    """A Writer keeps its chunks in lists and builds the cons list only when asked, extending the last one it
    built; asked after any write (or at an older state, as another thread may be), and continuing a stream
    of its own, it is the value and the receipt :func:`append` and :func:`finish_trusted` give."""
    split = data.draw(st.integers(0, len(writes)))
    plain = new(cap, max_chunks=chunk_bound)
    for name, chunk in writes[:split]:
        plain, _ = append(plain, name, chunk)
    if not plain.running:
        return
    writer = stream.Writer(plain) if data.draw(st.booleans()) else None
    states = [plain]
    for name, chunk in writes[split:]:
        plain, kept = append(plain, name, chunk)
        states.append(plain)
        if writer is not None:
            assert writer.append(name, chunk) is (kept is not None)
            if data.draw(st.booleans()):
                assert writer.value() == plain
    if writer is None:
        writer = stream.Writer(max_output_bytes=cap, max_chunks=chunk_bound)
        for name, chunk in writes:
            writer.append(name, chunk)
        states = [plain]
    assert writer.value() == plain
    older = data.draw(st.sampled_from(states))
    assert chunks(Stream(_rev=writer._rev(writer._count(older.kept_chunks)))) == chunks(older)
    sess, spec = session("s1", EMPTY_CID), guest(GUEST_CID, "run")
    host = namespace({"exit-code": 0})
    assert writer.receipt_namespaced(sess, spec, host) == stream.finish_trusted(plain, sess, spec, {"exit-code": 0})


class _Watched(list):  # type: ignore[type-arg]
    """A list that runs ``check`` just before and just after each append (a reader between two steps)."""

    def __init__(self, check: Any) -> None:
        super().__init__()
        self.check = check

    def append(self, item: Any) -> None:
        self.check()
        super().append(item)
        self.check()


@settings(max_examples=150, deadline=None)
@given(write_lists, caps, st.integers(0, 6), st.booleans())
def test_a_reader_between_any_two_steps_of_a_write_sees_a_state_append_gives(
    writes: list[tuple[str, bytes]], cap: int, chunk_bound: int, continued: bool
) -> None:
    """An append publishes only its chunk (bytes list first, then the names list) and a drop one tuple; the
    counters are derived. A reader on another thread may read at any moment of a write: whatever it reads —
    here at every step of every append — is one of the states :func:`append` passes through, never a mix."""
    plain = new(cap, max_chunks=chunk_bound)
    if continued and writes:  # a writer continuing a stream of its own
        plain, _ = append(plain, *writes[0])
        writes = writes[1:]
    states = [plain]
    for name, chunk in writes:
        states.append(append(states[-1], name, chunk)[0])
    writer = stream.Writer(plain) if continued else stream.Writer(max_output_bytes=cap, max_chunks=chunk_bound)
    seen: list[Stream] = []

    def check() -> None:
        now = writer.value()
        assert now == states[now.seq - plain.seq]
        seen.append(now)

    writer._datas, writer._names = _Watched(check), _Watched(check)
    for name, chunk in writes:
        writer.append(name, chunk)
        check()
    assert writer.value() == states[-1]
    assert all(now.running for now in seen)
