"""Reading real output: SGR, \\r, \\b, tabs, erase-in-line, OSC 8; everything else dropped."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_strategies import ansi_text

from kuro_wasm.model.ansi import BIDI_CONTROLS, NAMED_COLOURS, lines, plain, split_tail, to_html

E = "\x1b"


def texts(s: str, tab: int = 8) -> list[list[str]]:
    return [[span["text"] for span in line] for line in lines(s, tab)]


def styles(s: str) -> list[dict[str, Any]]:
    return [span["style"] for span in lines(s)[0]]


# ---- broken input first


@pytest.mark.parametrize(
    ("raw", "shown"),
    [("a" + E + "[31", "a"), ("a" + E, "a"), ("x" + E + "[38;5m", "x"), ("x" + E + "[38;2;1m", "x"),
     ("before" + E + "]8;;http://x", "before"), (E + "[", ""), (E + "]", ""), (E + "(", "")],
)  # fmt: skip
def test_broken_and_truncated_escapes_never_raise_and_never_print(raw: str, shown: str) -> None:
    assert plain(raw) == shown


@pytest.mark.parametrize(
    "seq",
    [E + "[" + "1" * 5000 + "m", E + "[" + "9" * 5000 + "K", E + "[38;5;" + "2" * 5000 + "m",
     E + "[48;2;" + "3" * 5000 + ";0;0m", E + "[38:5:" + "4" * 5000 + "m"],
    ids=["sgr", "erase", "256", "truecolor", "colon"],
)  # fmt: skip
def test_absurdly_long_numeric_parameters_never_raise_and_set_nothing(seq: str) -> None:
    # int() refuses more than 4300 digits with ValueError; the reader must not.
    assert lines("a" + seq + "b") == [[{"text": "ab", "style": {}}]]


def test_leading_zeros_do_not_make_a_parameter_too_long() -> None:
    assert styles(E + "[" + "0" * 5000 + "1mx") == [{"bold": True}]


def test_a_broken_csi_does_not_eat_the_text_after_it() -> None:
    assert plain("a" + E + "[31\nnext line") == "a\nnext line"
    assert plain(E + "[12" + E + "[32mgreen") == "green"


def test_a_truncated_escape_is_not_remembered_by_the_next_call() -> None:
    assert plain("out" + E + "[3") == "out"
    assert plain("next") == "next"


class _Counted(str):
    """A str whose ``find`` adds up the characters each search walks (the work, counted, not timed)."""

    walked = 0

    def find(self, sub: Any, start: Any = None, end: Any = None) -> int:
        at = super().find(sub, start, end)
        lo = 0 if start is None else start
        hi = len(self) if end is None else min(end, len(self))
        _Counted.walked += (at + len(sub) if at >= 0 else hi) - lo
        return at


@pytest.mark.parametrize("one", ["\x1b]0;title\x07", "\x1b]0;title\x1b\\", "\x1bPq#0\x1b\\", "\x1b]8;;u\x07x"])
@pytest.mark.parametrize("read", [plain, split_tail], ids=["plain", "split_tail"])
def test_many_string_escapes_are_read_in_linear_work(one: str, read: Any) -> None:
    # A guest printing a title OSC (BEL-terminated) 80k times (~1 MiB, the default cap) made
    # `kuro receipt show` search the whole rest of its output for the other terminator at every
    # OSC: quadratic (34 s for 560 KB). Every search now stops at the first ESC.
    text = _Counted(one * 20_000)
    _Counted.walked = 0
    read(text)
    assert _Counted.walked <= 4 * len(text)


def _render_by_list(items: list[tuple[str, Any, dict[str, Any]]], tab: int) -> list[tuple[str, Any]]:
    """The line rules over a plain list of cells, one cell at a time (the reference :func:`lines` must equal)."""
    blank: tuple[str, Any] = (" ", {})
    cells: list[tuple[str, Any]] = []
    col = 0
    for kind, value, style in items:
        if kind == "e":
            if value == 0:
                del cells[col:]
            elif value == 1:
                cells[: col + 1] = [blank] * min(col + 1, len(cells))
            elif value == 2:
                cells = []
            continue
        for ch in value:
            if ch in "\r\b":
                col = 0 if ch == "\r" else max(0, col - 1)
                continue
            for c in " " * (tab - col % tab) if ch == "\t" else ch:
                cells.extend([blank] * (col - len(cells)))
                cells[col : col + 1] = [(c, style)]
                col += 1
    return cells


_STYLES = [{}, {"bold": True}, {"fg": "red"}]
_line_items: st.SearchStrategy[list[tuple[str, Any, dict[str, Any]]]] = st.lists(
    st.one_of(
        st.tuples(st.just("t"), st.text(alphabet="ab \r\b\t", max_size=12), st.sampled_from(_STYLES)),
        st.tuples(st.just("e"), st.sampled_from([0, 1, 2, 3, None]), st.just({})),
    ),
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(_line_items, st.sampled_from([1, 2, 8]))
def test_a_line_is_rendered_as_the_cell_by_cell_rules_say(items: Any, tab: int) -> None:
    from kuro_wasm.model.ansi import _group, _render

    assert _render(items, tab) == _group(_render_by_list(items, tab))


@pytest.mark.parametrize(
    "make",
    [
        lambda k: "a" * 10 * k + "\x1b[1K" * k,  # blank-to-cursor again and again at the end of a long line
        lambda k: "a" * 10 * k + "\x1b[2Kx" * k,  # erase the line, write one column further: padding
        lambda k: "a" * 10 * k + "\rx\x1b[1K" * k,
        lambda k: "a" * 10 * k + "\b\x1b[K" * k,
    ],
)
def test_erasing_within_a_long_line_is_linear_work(make: Any) -> None:
    # Each erase cost the line's width (77 s for 280 KB of the first shape). The work is counted as the
    # renderer's steps (trace line events), not timed; the old renderer spent it in C slice assignments,
    # which no such count sees, so this bounds the new one: it cannot show the old one slow.
    import sys

    from kuro_wasm.model import ansi

    text = make(3000)
    steps = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal steps
        if frame.f_code.co_filename == ansi.__file__:
            steps += 1
            return tracer
        return None

    sys.settrace(tracer)
    try:
        plain(text)
    finally:
        sys.settrace(None)
    assert steps <= 40 * len(text)


def test_split_tail_holds_back_an_unfinished_escape_for_the_next_piece() -> None:
    assert split_tail("ok" + E + "[3") == ("ok", E + "[3")
    assert split_tail("ok" + E + "]8;;http://x") == ("ok", E + "]8;;http://x")
    assert split_tail("ok" + E) == ("ok", E)
    assert split_tail("ok" + E + "[31m") == ("ok" + E + "[31m", "")
    _, pending = split_tail("a" + E + "[3")
    assert lines(pending + "1mred")[0] == [{"text": "red", "style": {"fg": "red"}}]
    assert split_tail("x" + E + "]" + "y" * 5000) == ("x" + E + "]" + "y" * 5000, "")


def test_bytes_input_is_read_as_utf8_with_replacement() -> None:
    assert plain(b"\xe3\x81\x82" + b"\x1b[1m!" + b"\xff") == "あ!\ufffd"


# ---- what is discarded


@pytest.mark.parametrize(
    "seq",
    [E + "[1;1H", E + "]0;title" + E + "\\", E + "]0;title\x07", E + "(B", E + "[?25l", E + "[?1049h",
     E + "[?1049l", E + "[2;5r", E + "[3J", E + "7", E + "P1$r" + E + "\\", E + "[>4;1m", E + "[5A"],
)  # fmt: skip
def test_cursor_screen_title_and_private_sequences_are_discarded(seq: str) -> None:
    assert plain("a" + seq + "b") == "ab"


def test_sgr_after_a_discarded_sequence_still_applies() -> None:
    assert lines(E + "[?25l" + E + "[2;5r" + E + "[32mgo")[0] == [{"text": "go", "style": {"fg": "green"}}]


def test_a_discarded_sequence_does_not_split_a_span() -> None:
    assert lines(E + "[1mab" + E + "[Hcd")[0] == [{"text": "abcd", "style": {"bold": True}}]


@pytest.mark.parametrize("terminator", [E + "\\", "\x07"])
def test_osc8_hyperlinks_keep_the_words_and_their_style(terminator: str) -> None:
    s = f"{E}[4m{E}]8;;https://example.test{terminator}click{E}]8;;{terminator}here{E}[0m"
    assert lines(s)[0] == [{"text": "clickhere", "style": {"underline": True}}]


def test_other_control_characters_are_never_printed() -> None:
    assert plain("a\x07b\x00c\x7fd\x9be\x0cf") == "abcdef"


# ---- SGR


def test_named_and_bright_colours_for_fg_and_bg() -> None:
    for i, name in enumerate(NAMED_COLOURS):
        assert styles(f"{E}[{30 + i}mx") == [{"fg": name}]
        assert styles(f"{E}[{40 + i}mx") == [{"bg": name}]
        assert styles(f"{E}[{90 + i}mx") == [{"fg": f"bright-{name}"}]
        assert styles(f"{E}[{100 + i}mx") == [{"bg": f"bright-{name}"}]


def test_combined_sgr_parameters() -> None:
    assert styles(E + "[91;44;1mx") == [{"fg": "bright-red", "bg": "blue", "bold": True}]


def test_256_colour_and_truecolor() -> None:
    assert styles(E + "[38;5;214mx") == [{"fg": {"index": 214}}]
    assert styles(E + "[48;2;10;20;30mx") == [{"bg": {"rgb": [10, 20, 30]}}]
    assert styles(E + "[38;5;214;48;2;10;20;30mx") == [{"fg": {"index": 214}, "bg": {"rgb": [10, 20, 30]}}]
    assert styles(E + "[38:2::1:2:3mx") == [{"fg": {"rgb": [1, 2, 3]}}]
    assert styles(E + "[48:5:7mx") == [{"bg": {"index": 7}}]


def test_an_incomplete_extended_colour_sets_nothing_and_the_rest_still_applies() -> None:
    assert styles(E + "[38;5mx") == [{}]
    assert "fg" not in styles(E + "[38;2;1;2m" + "x")[0]  # only the 2 is consumed; 1;2 then read as bold, dim
    assert styles(E + "[38;5;999;1mx") == [{"bold": True}]


@pytest.mark.parametrize(("code", "key"), [(1, "bold"), (2, "dim"), (3, "italic"), (4, "underline"), (7, "inverse"),
                                           (9, "strike")])  # fmt: skip
def test_attributes_set_their_own_key(code: int, key: str) -> None:
    assert styles(f"{E}[{code}mx") == [{key: True}]


@pytest.mark.parametrize(
    ("reset", "cleared"),
    [
        (22, {"bold", "dim"}),
        (23, {"italic"}),
        (24, {"underline"}),
        (27, {"inverse"}),
        (29, {"strike"}),
        (39, {"fg"}),
        (49, {"bg"}),
    ],
)
def test_each_reset_clears_only_its_own_family(reset: int, cleared: set[str]) -> None:
    everything = {"bold": True, "dim": True, "italic": True, "underline": True, "inverse": True, "strike": True,
                  "fg": "red", "bg": "blue"}  # fmt: skip
    style = styles(f"{E}[1;2;3;4;7;9;31;44m{E}[{reset}mx")[0]
    assert style == {k: v for k, v in everything.items() if k not in cleared}


@pytest.mark.parametrize("reset", ["0", "", "00"])
def test_a_full_reset_clears_everything(reset: str) -> None:
    assert lines(f"{E}[1;31ma{E}[{reset}mb")[0] == [{"text": "a", "style": {"bold": True, "fg": "red"}},
                                                    {"text": "b", "style": {}}]  # fmt: skip


def test_repeating_the_same_style_gives_one_span() -> None:
    assert lines(f"{E}[31ma{E}[31mb{E}[31mc")[0] == [{"text": "abc", "style": {"fg": "red"}}]


def test_styles_are_independent_values() -> None:
    line = lines(f"{E}[31ma\nb")
    line[0][0]["style"]["fg"] = "blue"
    assert line[1][0]["style"] == {"fg": "red"}


# ---- lines and controls


@pytest.mark.parametrize(
    ("raw", "shown"),
    [("abcde\rabX", "abXde"), ("progress\rdone", "doneress"), ("progress\rdone" + E + "[K", "done"),
     ("abcde\rab" + E + "[1K", "   de"), ("abcde\rabc" + E + "[0K", "abc"), ("abcde\r\r" + E + "[2Kab", "ab"),
     ("ab\bc", "ac"), ("\b\bx", "x"), ("a\tb", "a       b"), ("abcdefgh\tx", "abcdefgh        x"),
     ("a" + E + "[5K" + "b", "ab"), ("a" + E + "[2Kb", " b")],
)  # fmt: skip
def test_carriage_return_backspace_tab_and_erase_in_line(raw: str, shown: str) -> None:
    assert plain(raw) == shown


def test_tab_width_is_an_option() -> None:
    assert plain("a\tb", tab_width=2) == "a b"


def test_a_download_bar_collapses_to_its_last_state() -> None:
    bar = "".join(f"\r{E}[K{pct:3d}% [{'#' * (pct // 10):<10}]" for pct in range(0, 100, 7))
    assert texts(bar + f"\r{E}[K100% complete\n") == [["100% complete"], []]


def test_lines_split_on_newlines_and_styles_persist_across_them() -> None:
    assert lines(f"{E}[32ma\nb{E}[0m\nc") == [[{"text": "a", "style": {"fg": "green"}}],
                                              [{"text": "b", "style": {"fg": "green"}}],
                                              [{"text": "c", "style": {}}]]  # fmt: skip
    assert lines("") == [[]]
    assert texts("hello\r\n") == [["hello"], []]
    assert texts("a\n") == [["a"], []]


def test_git_style_output() -> None:
    out = f"On branch main\n{E}[32mM{E}[m src/kuro.py\n"
    ls = lines(out)
    assert len(ls) == 3 and plain(out).splitlines()[1] == "M src/kuro.py"
    assert ls[1] == [{"text": "M", "style": {"fg": "green"}}, {"text": " src/kuro.py", "style": {}}]


# ---- HTML


def test_html_escapes_text_and_styles_spans() -> None:
    html = to_html(lines(f"{E}[1;31m<script>{E}[0m & {E}[38;5;196;48;2;0;0;255mx{E}[7my"))
    assert "<script>" not in html and "&lt;script&gt;" in html and "&amp;" in html
    assert 'style="color:#cd3131;font-weight:bold"' in html
    assert "color:#ff0000;background-color:#0000ff" in html
    assert "color:#0000ff;background-color:#ff0000" in html  # inverse swaps


def test_html_ignores_style_values_it_does_not_know() -> None:
    html = to_html([[{"text": "x", "style": {"fg": "red;background:url(evil)", "bg": {"rgb": [1, 2, "3"]}}}]])
    assert html == '<pre class="kuro-ansi">x</pre>'


# ---- properties


@settings(max_examples=300, deadline=None)
@given(ansi_text)
def test_no_input_raises_or_leaks_an_escape_or_control_byte(text: str) -> None:
    ls = lines(text)
    for line in ls:
        for span in line:
            assert span["text"] != ""
            assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in span["text"])
    assert "\x1b" not in plain(text)
    assert "\x1b" not in to_html(ls)


@settings(max_examples=100, deadline=None)
@given(ansi_text, ansi_text)
def test_split_tail_then_prepend_reads_like_the_whole(first: str, second: str) -> None:
    complete, pending = split_tail(first)
    assert complete + pending == first
    if pending:
        assert plain(complete + pending + second) == plain(complete + (pending + second))


def test_bidi_controls_become_visible_text_never_pass_through() -> None:
    for code in BIDI_CONTROLS:
        shown = plain(f"a{chr(code)}b")
        assert shown == f"a\\u{code:04x}b" and chr(code) not in shown
    assert plain("\x1b[1m\u202eevil\x1b[0m") == "\\u202eevil"
