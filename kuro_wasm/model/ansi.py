"""Reading real terminal output: ANSI text → lines of styled spans (and HTML).

## The one decision
Keep what a reader of a log would see and nothing that could act on their
terminal. :func:`lines` understands SGR styling (bold, dim, italic, underline,
inverse, strike; 8, bright, 256 and truecolor fg/bg; every reset), ``\\r``
(return to column 0, overwrite in place), ``\\b``, tabs (8 columns), ``CSI K``
erase modes 0/1/2 (what really collapses a progress bar) and OSC 8 hyperlinks
(URI and delimiters dropped, the linked words kept). Everything else — cursor
addressing, scroll regions, alternate screen, private modes, window-title OSC,
DCS/APC/PM/SOS strings, unknown CSI, other C0/C1 controls — is **discarded,
never printed**, so no ESC byte ever reaches span text, for any input, and
nothing here raises. Bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE …),
which reorder what the reader sees without being seen, become the visible text
``\u202e``: kept as evidence, never acting.

Malformed and truncated escapes: a CSI interrupted by a byte that cannot belong
to it is dropped up to that byte, and the byte is kept as text (the text after
a broken escape is not eaten). An escape cut off by the **end of the input** is
dropped, and nothing is remembered: every call is self-contained, so the next
call starts clean. An unterminated OSC/DCS string runs to the end of its input.
A caller reading output in pieces uses :func:`split_tail` to hold back an
unfinished escape and prepend it to the next piece.

## Pure
``str`` in (or UTF-8 ``bytes``, decoded with replacement), data out.

## Not done here
Not a screen emulator: no cursor movement between lines, no wide-character
columns (one code point is one column), no scrollback.
"""

from __future__ import annotations

import html
from itertools import groupby
from typing import Any, Final

__all__ = ["BIDI_CONTROLS", "NAMED_COLOURS", "TAB_WIDTH", "lines", "plain", "split_tail", "to_html"]

TAB_WIDTH: Final = 8
NAMED_COLOURS: Final = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")
_MAX_PENDING: Final = 4096
#: The bidirectional controls (embeddings, overrides, isolates, marks): they reorder what a reader sees
#: ("Trojan Source", CVE-2021-42574), so they are shown as the visible text ``\u202e``, never passed through.
BIDI_CONTROLS: Final = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
# C0 controls other than \b \t \n \r, DEL and C1 controls: never printed; bidi controls: shown escaped.
_DROP: Final[dict[int, str | None]] = {
    **{c: None for c in [*range(0x00, 0x08), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0)]},
    **{c: f"\\u{c:04x}" for c in BIDI_CONTROLS},
}
_FLAGS: Final = {1: "bold", 2: "dim", 3: "italic", 4: "underline", 7: "inverse", 9: "strike"}
_CLEARS: Final = {22: ("bold", "dim"), 23: ("italic",), 24: ("underline",), 27: ("inverse",), 29: ("strike",)}
_BLANK: Final[dict[str, Any]] = {}
_NO_CELL: Final = 1 << 62  # a floor above every column: no cell is left

Style = dict[str, Any]
Span = dict[str, Any]
Line = list[Span]

# ---- escape scanning


def _escape_end(text: str, i: int) -> tuple[int, str, str] | None:
    """For the escape at ``text[i]``: (resume index, kind, body), or None if the input ends inside it.

    kind is ``"csi"`` (body = params + intermediates + final) or ``"skip"``.
    """
    n = len(text)
    if i + 1 >= n:
        return None
    c = text[i + 1]
    if c == "[":
        k = i + 2
        while k < n and "\x20" <= text[k] <= "\x3f":
            k += 1
        if k >= n:
            return None
        if "\x40" <= text[k] <= "\x7e":
            return k + 1, "csi", text[i + 2 : k + 1]
        return k, "skip", ""  # broken CSI: drop it, keep the byte that broke it
    if c in "]PX^_":
        # The first terminator: BEL (OSC only) or ST. Each search stops at the next ESC, so a string
        # escape costs what it spans (searching the whole rest of the input for each terminator in
        # turn made many OSCs quadratic).
        k = i + 2
        while True:
            esc = text.find("\x1b", k)
            if c == "]":
                bel = text.find("\x07", k, n if esc < 0 else esc)
                if bel >= 0:
                    return bel + 1, "skip", ""
            if esc < 0 or esc + 1 >= n:
                return None
            if text[esc + 1] == "\\":
                return esc + 2, "skip", ""
            k = esc + 1
    k = i + 1
    while k < n and "\x20" <= text[k] <= "\x2f":
        k += 1
    return (k + 1, "skip", "") if k < n else None


def _int(field: str) -> int | None:
    """A decimal parameter, or None if it is not one or is absurdly long.

    Long digit runs are refused before ``int()``: Python raises ValueError past
    4300 digits, and no SGR code or colour needs more than a few.
    """
    digits = field.lstrip("0")
    if not field.isdecimal() or len(digits) > 12:
        return None
    return int(digits or "0")


def _fields(params: str) -> list[Any]:
    out: list[Any] = []
    for field in params.split(";") if params else ["0"]:
        if ":" in field:
            out.append([_int(x) for x in field.split(":")])
        else:
            out.append(0 if field == "" else _int(field))
    return out


def _colour(sel: Any, rest: list[Any]) -> tuple[Any, int]:
    """An extended colour from the params after 38/48: (colour or None, params consumed)."""
    if sel == 5:
        if rest and isinstance(rest[0], int):
            return ({"index": rest[0]} if 0 <= rest[0] <= 255 else None), 2
        return None, 1
    if sel == 2:
        if len(rest) >= 3 and all(isinstance(v, int) for v in rest[:3]):
            rgb = list(rest[:3])
            return ({"rgb": rgb} if all(0 <= v <= 255 for v in rgb) else None), 4
        return None, 1
    return None, 1 if sel is not None else 0


def _sgr(style: Style, params: str) -> Style:
    style = dict(style)
    fields = _fields(params)
    i = 0
    while i < len(fields):
        code = fields[i]
        i += 1
        if isinstance(code, list):  # colon sub-parameters: 38:5:n, 38:2:[cs:]r:g:b, 4:3 …
            head, sub = code[0], code[1:]
            if head in (38, 48, 58) and sub:
                rest = sub[1:] if not (sub[0] == 2 and len(sub) >= 5) else sub[2:]
                colour, _ = _colour(sub[0], rest)
                if colour is not None and head != 58:
                    style["fg" if head == 38 else "bg"] = colour
            elif head == 4:
                style.pop("underline", None) if sub[:1] == [0] else style.update(underline=True)
            continue
        if code is None:
            continue
        if code == 0:
            style = {}
        elif code in _FLAGS:
            style[_FLAGS[code]] = True
        elif code in _CLEARS:
            for key in _CLEARS[code]:
                style.pop(key, None)
        elif 30 <= code <= 37 or 90 <= code <= 97:
            style["fg"] = ("bright-" if code >= 90 else "") + NAMED_COLOURS[code % 10]
        elif 40 <= code <= 47 or 100 <= code <= 107:
            style["bg"] = ("bright-" if code >= 100 else "") + NAMED_COLOURS[code % 10]
        elif code in (39, 49):
            style.pop("fg" if code == 39 else "bg", None)
        elif code in (38, 48, 58):
            colour, used = _colour(fields[i] if i < len(fields) else None, fields[i + 1 :])
            i += used
            if colour is not None and code != 58:
                style["fg" if code == 38 else "bg"] = colour
    return style


def _scan(text: str) -> list[tuple[str, Any, Style]]:
    """Entries ("t", text, style) and ("e", erase mode, {}); controls \\r \\b \\t \\n stay in text."""
    entries: list[tuple[str, Any, Style]] = []
    buf: list[str] = []
    style: Style = {}

    def flush() -> None:
        if buf:
            entries.append(("t", "".join(buf), style))
            buf.clear()

    i, n = 0, len(text)
    while i < n:
        j = text.find("\x1b", i)
        if j < 0:
            buf.append(text[i:].translate(_DROP))
            break
        if j > i:
            buf.append(text[i:j].translate(_DROP))
        end = _escape_end(text, j)
        if end is None:
            break
        i, kind, body = end
        if kind != "csi" or body[:1] in ("<", "=", ">", "?"):
            continue  # private and unknown sequences are dropped without splitting the span
        params, final = body[:-1], body[-1]
        if final == "m" and (params == "" or params.replace(";", "").replace(":", "").isdecimal()):
            flush()
            style = _sgr(style, params)
        elif final == "K" and (params == "" or params.isdecimal()):
            flush()
            entries.append(("e", _int(params or "0"), _BLANK))
    flush()
    return entries


# ---- line assembly


def _group(cells: list[tuple[str, Style]]) -> Line:
    line: Line = []
    for style, run in groupby(cells, key=lambda cell: cell[1]):
        text = "".join(ch for ch, _ in run)
        if text:
            line.append({"text": text, "style": dict(style)})
    return line


def _forget(cells: dict[int, tuple[str, Style]], lo: int, hi: int) -> None:
    """Remove the cells at ``lo..hi-1`` (they become blanks), walking whichever is fewer: the range or the cells."""
    if hi - lo <= len(cells):
        for i in range(lo, hi):
            cells.pop(i, None)
    else:
        for i in [i for i in cells if lo <= i < hi]:
            del cells[i]


def _render(items: list[tuple[str, Any, Style]], tab: int) -> Line:
    if all(kind == "t" and not any(c in text for c in "\r\b\t") for kind, text, _ in items):
        return _group([(text, style) for _, text, style in items if text])
    # The line is ``length`` columns; ``cells`` holds the written ones, any other column is a blank
    # (padding, or erased). Every column below ``floor`` is known to be a blank. So an erase costs
    # what it really removes, never the line's width: a list of cells, blanked or padded out column
    # by column, made an erase after a long line cost that line again (quadratic: 77 s for 280 KB).
    cells: dict[int, tuple[str, Style]] = {}
    length = floor = col = 0
    for kind, value, style in items:
        if kind == "e":
            if value == 0:  # erase to the end of the line
                if col < length:
                    _forget(cells, col, length)
                    length = col
            elif value == 1:  # blank from the start through the cursor (the line is not extended)
                upto = min(col + 1, length)
                if upto > floor:
                    _forget(cells, floor, upto)
                    floor = upto
            elif value == 2:  # erase the whole line
                cells, length, floor = {}, 0, _NO_CELL
            continue
        for ch in value:
            if ch == "\r":
                col = 0
                continue
            if ch == "\b":
                col = max(0, col - 1)
                continue
            for c in " " * (tab - col % tab) if ch == "\t" else ch:
                cells[col] = (c, style)
                if col < floor:
                    floor = col
                col += 1
                if col > length:
                    length = col
    blank = (" ", _BLANK)
    return _group([cells.get(i, blank) for i in range(length)])


def lines(text: str | bytes, tab_width: int = TAB_WIDTH) -> list[Line]:
    """The lines of ``text``, each a list of ``{"text", "style"}`` spans (no empty texts).

    A style is a dict of ``bold dim italic underline inverse strike`` (True) and
    ``fg``/``bg`` (a name like ``"green"``/``"bright-red"``, ``{"index": n}`` or
    ``{"rgb": [r, g, b]}``). Styles carry across newlines; ``"a\\n"`` is two
    lines and ``""`` is ``[[]]``. Never raises on any string.

    >>> [[s["text"] for s in line] for line in lines("progress\\rdone\\x1b[K\\n\\x1b[32mok\\x1b[0m")]
    [['done'], ['ok']]
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "replace")
    tab = tab_width if isinstance(tab_width, int) and tab_width > 0 else TAB_WIDTH
    out: list[Line] = []
    current: list[tuple[str, Any, Style]] = []
    for kind, value, style in _scan(text):
        if kind == "e":
            current.append((kind, value, style))
            continue
        parts = value.split("\n")
        current.append((kind, parts[0], style))
        for part in parts[1:]:
            out.append(_render(current, tab))
            current = [(kind, part, style)]
    out.append(_render(current, tab))
    return out


def plain(text: str | bytes, tab_width: int = TAB_WIDTH) -> str:
    r"""What a reader sees: :func:`lines` without styles, joined by ``\n``.

    >>> plain("\x1b]8;;https://x.test\x1b\\link\x1b]8;;\x1b\\ \x1b[1mbold\x1b[0m\tx")
    'link bold       x'
    >>> plain("if admin \u202e} {")
    'if admin \\u202e} {'
    """
    return "\n".join("".join(span["text"] for span in line) for line in lines(text, tab_width))


def split_tail(text: str) -> tuple[str, str]:
    """``(complete, pending)``: hold back an escape the end of ``text`` cuts off.

    Feed ``pending + next_piece`` to the next call. A pending tail longer than
    4096 characters (an unterminated OSC, say) is not held back but dropped as usual.

    >>> split_tail("ok\\x1b[3")
    ('ok', '\\x1b[3')
    """
    i = text.find("\x1b")
    while i >= 0:
        end = _escape_end(text, i)
        if end is None:
            return (text[:i], text[i:]) if len(text) - i <= _MAX_PENDING else (text, "")
        i = text.find("\x1b", end[0])
    return text, ""


# ---- HTML

_PALETTE: Final = {
    "black": "#000000", "red": "#cd3131", "green": "#0dbc79", "yellow": "#e5e510",
    "blue": "#2472c8", "magenta": "#bc3fbc", "cyan": "#11a8cd", "white": "#e5e5e5",
    "bright-black": "#666666", "bright-red": "#f14c4c", "bright-green": "#23d18b", "bright-yellow": "#f5f543",
    "bright-blue": "#3b8eea", "bright-magenta": "#d670d6", "bright-cyan": "#29b8db", "bright-white": "#ffffff",
}  # fmt: skip
_CUBE: Final = (0, 95, 135, 175, 215, 255)


def _css_colour(colour: Any) -> str | None:
    if isinstance(colour, str):
        return _PALETTE.get(colour)
    if isinstance(colour, dict) and isinstance(colour.get("index"), int) and 0 <= colour["index"] <= 255:
        n = colour["index"]
        if n < 16:
            return _PALETTE[("bright-" if n >= 8 else "") + NAMED_COLOURS[n % 8]]
        if n >= 232:
            grey = 8 + 10 * (n - 232)
            return f"#{grey:02x}{grey:02x}{grey:02x}"
        n -= 16
        return f"#{_CUBE[n // 36]:02x}{_CUBE[n // 6 % 6]:02x}{_CUBE[n % 6]:02x}"
    if isinstance(colour, dict) and isinstance(colour.get("rgb"), (list, tuple)) and len(colour["rgb"]) == 3:
        rgb = colour["rgb"]
        if all(isinstance(v, int) and 0 <= v <= 255 for v in rgb):
            return "#{:02x}{:02x}{:02x}".format(*rgb)
    return None


def _css(style: Style) -> str:
    fg, bg = _css_colour(style.get("fg")), _css_colour(style.get("bg"))
    if style.get("inverse"):
        fg, bg = bg or "Canvas", fg or "CanvasText"
    rules = [f"color:{fg}"] if fg else []
    rules += [f"background-color:{bg}"] if bg else []
    rules += ["font-weight:bold"] if style.get("bold") else []
    rules += ["opacity:0.7"] if style.get("dim") else []
    rules += ["font-style:italic"] if style.get("italic") else []
    decorations = [name for key, name in (("underline", "underline"), ("strike", "line-through")) if style.get(key)]
    rules += [f"text-decoration:{' '.join(decorations)}"] if decorations else []
    return ";".join(rules)


def to_html(ls: list[Line]) -> str:
    """``ls`` (from :func:`lines`) as one escaped ``<pre class="kuro-ansi">`` block.

    Only known style values become CSS; text is HTML-escaped.

    >>> to_html(lines("\\x1b[1;31m<b>\\x1b[0m ok"))
    '<pre class="kuro-ansi"><span style="color:#cd3131;font-weight:bold">&lt;b&gt;</span> ok</pre>'
    """
    rows = []
    for line in ls:
        row = []
        for span in line:
            text = html.escape(str(span.get("text", "")))
            css = _css(span.get("style") or {})
            row.append(f'<span style="{css}">{text}</span>' if css else text)
        rows.append("".join(row))
    return '<pre class="kuro-ansi">' + "\n".join(rows) + "</pre>"
