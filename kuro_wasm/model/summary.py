"""How the CLI shows a receipt or a denial to a person: a short summary, JSON, coloured output.

## The one decision
A receipt is shown in one fixed order, the answer first: outcome and exit code,
then what ran, what it read and wrote, and what was refused. Every key the
summary does not show is still in ``--json`` (:func:`kuro_wasm.model.receipt.to_json`),
so nothing is lost between the two views. Guest
output is re-coloured for a terminal from :func:`kuro_wasm.model.ansi.lines` spans,
never echoed raw, and every other string shown (a refused call's path, a trap's
message, a stored receipt's values) has the characters a terminal acts on shown
as escapes (``\\x1b``): a receipt cannot move the reader's cursor, retitle the
window or forge a line.

## Pure
Values in, strings out. Whether colour is wanted is the caller's decision.

## Not done here
No paging, no width detection, no localisation.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final

from kuro_wasm.model.ansi import BIDI_CONTROLS

__all__ = [
    "DENIAL_EXIT",
    "coloured",
    "denial_text",
    "is_denial",
    "is_status_answer",
    "receipt_text",
    "sgr",
    "size",
    "visible",
]

#: Characters a terminal acts on, each shown as its escape (``\\x1b``, ``\\u202e``): every C0 control (a
#: newline inside a value would forge a line), DEL, the C1 controls and the bidirectional controls.
_SHOWN: Final[Mapping[int, str]] = {
    **{c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)]},
    **{c: f"\\u{c:04x}" for c in BIDI_CONTROLS},
}


def _visible(line: str) -> str:
    r"""``line`` with every character a terminal would act on shown as its escape, never acted on.

    The summary's values come from the guest (the path of a refused call, function names in a trap's
    backtrace) and from receipts read back, which may say anything.

    >>> _visible("a\x1b]0;title\x07\nb")
    'a\\x1b]0;title\\x07\\x0ab'
    """
    return line.translate(_SHOWN)


def visible(text: str) -> str:
    r"""``text`` (a value printed as part of a line: an op id, a name) with every character a terminal
    would act on shown as its escape, as the summaries show them.

    >>> visible("op\u202eko enod")
    'op\\u202eko enod'
    """
    return _visible(text)


#: The exit status of ``kuro run`` when the run was denied before anything loaded
#: (``EX_NOPERM`` from sysexits.h): distinct from every guest outcome code.
DENIAL_EXIT: Final = 77


_HINTS: Final[Mapping[str, str]] = {
    "argv-not-a-process": (
        "kuro runs WebAssembly guest exports by CID, not programs: there is no process to start. "
        "Add a guest with `kuro guest add FILE.wat`, then `kuro run CID EXPORT [ARGS...]`."
    ),
    "missing-capabilities": "--grant replaces the mode's default grant: include guest/invoke to run anything.",
    "unsupported-mode": "terminal-host has no shell behind a wasm guest; pick another --mode.",
    "guest-spec-required": "a command is a guest CID, an export name and numeric args.",
}


def size(n: object) -> str:
    """A byte count for people: ``"512 B"``, ``"1.5 KiB"``.

    >>> size(1536)
    '1.5 KiB'
    """
    if not isinstance(n, int):
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def is_denial(value: Mapping[str, Any]) -> bool:
    """True for a denial value (``kuro/allowed?`` False, or ``kuro/type`` ``kuro/denial``)."""
    return value.get("kuro/allowed?") is False or value.get("kuro/type") == "kuro/denial"


def _short(cid: object) -> str:
    return cid if isinstance(cid, str) else "?"


def _arg_text(args: object) -> str:
    if not isinstance(args, Sequence) or isinstance(args, (str, bytes)):
        return ""
    return ", ".join(str(a) for a in args)


def _denial_line(item: object) -> str:
    if not isinstance(item, Mapping):
        return f"  refused {item!r}"
    fields = {str(k).split("/")[-1]: v for k, v in item.items()}
    what = fields.get("import") or fields.get("op") or "call"
    path = fields.get("path")
    missing = fields.get("missing") or fields.get("capability") or fields.get("reason")
    if isinstance(missing, (list, tuple)):
        missing = ", ".join(str(m) for m in missing)
    where = f" {path}" if path not in (None, "") else ""
    why = f" (missing {missing})" if missing else ""
    return f"  refused {what}{where}{why}"


def _fault_line(item: object) -> str:
    if not isinstance(item, Mapping):
        return f"  store fault {item!r}"
    cid, fault, count = item.get("kuro/cid"), item.get("kuro/fault", "?"), item.get("kuro/count")
    block = f" {cid}" if isinstance(cid, str) else ""
    times = f" ×{count}" if isinstance(count, int) and count > 1 else ""
    return f"  store fault{block} ({fault}){times}: the guest saw an I/O error"


def is_status_answer(value: Mapping[str, Any]) -> bool:
    """Whether ``value`` is a ledger answer that holds no receipt (``running``, ``unknown``, ``not-found``).

    >>> is_status_answer({"kuro/status": "unknown", "kuro/op-id": "op-1"})
    True
    >>> is_status_answer({"kuro/status": "done", "kuro/outcome": "ok"})
    False
    """
    return value.get("kuro/status") not in (None, "done") and "kuro/outcome" not in value


def receipt_text(receipt: Mapping[str, Any], cid: str | None = None) -> str:
    """The human summary of a receipt (several lines, no trailing newline)."""
    r = receipt
    status = r.get("kuro/status")
    if is_status_answer(r):  # a ledger answer for a run without a receipt
        head = f"status {status}"
        reason = r.get("kuro/unknown-reason") or r.get("kuro/reason")
        if reason:
            head += f" ({reason})"
        text = _visible(f"operation {r.get('kuro/op-id', '?')}  {head}")
        hint = r.get("kuro/hint")  # `unknown is not success: …`
        return text + (f"\n  {_visible(hint)}" if isinstance(hint, str) else "")
    head = f"{r.get('kuro/outcome', '?')} · exit code {r.get('kuro/exit-code', '?')}"
    if isinstance(r.get("kuro/duration-ms"), (int, float)):
        head += f" · {r['kuro/duration-ms']} ms"
    if r.get("kuro/replayed") is True:
        head += " · replayed"
    own = r.get("kuro/receipt-cid")  # a ledger answer names its own stored block
    name = cid or (own if isinstance(own, str) and own else "(not stored as a block)")
    lines = [f"receipt {name}  {head}"]
    if "kuro/guest" in r:
        lines.append(
            f"  ran {_short(r.get('kuro/guest'))} {r.get('kuro/export', '?')}({_arg_text(r.get('kuro/args'))})"
            f" · mode {r.get('kuro/mode', '?')} · isolation {r.get('kuro/isolation', '?')}"
        )
    out = f"  output stdout {size(r.get('kuro/stdout-bytes', 0))}, stderr {size(r.get('kuro/stderr-bytes', 0))}"
    if r.get("kuro/truncated?") is True:
        out += f" · truncated, {size(r.get('kuro/dropped-bytes', 0))} dropped"
    lines.append(out)
    reads = r.get("kuro/reads")
    if isinstance(reads, Sequence) and not isinstance(reads, (str, bytes)) and reads:
        lines.append(f"  read {', '.join(str(c) for c in reads)}")
    if isinstance(r.get("kuro/fs-root-after"), str):
        lines.append(f"  wrote fs root {r['kuro/fs-root-after']}")
    denials = r.get("kuro/denials")
    if isinstance(denials, Sequence) and not isinstance(denials, (str, bytes)):
        lines.extend(_denial_line(d) for d in denials)
    faults = r.get("kuro/store-faults")
    if isinstance(faults, Sequence) and not isinstance(faults, (str, bytes)):
        lines.extend(_fault_line(f) for f in faults)
    grant = r.get("kuro/fs-grant")
    if isinstance(grant, Sequence) and not isinstance(grant, (str, bytes)):
        lines.append(f"  fs grant {', '.join(str(c) for c in grant) or '(none)'}")
    for key in ("kuro/trap", "kuro/error"):
        if r.get(key) not in (None, "", {}):
            lines.append(f"  {key.split('/')[1]}: {_one_line(r[key])}")
    if r.get("kuro/persistence") not in (None, "saved"):
        lines.append(f"  persistence: {r['kuro/persistence']}")
    return "\n".join(_visible(line) for line in lines)


def denial_text(denial: Mapping[str, Any], argv: Sequence[str] | None = None, cid: str | None = None) -> str:
    """The explanation of a denial: the reason, what was missing, and what to do instead."""
    reason = str(denial.get("kuro/reason", "denied"))
    first = f"denied: {reason}"
    if argv:
        first += f": `{shlex.join(argv)}` looks like a shell command"
    missing = denial.get("kuro/missing")
    if isinstance(missing, Sequence) and not isinstance(missing, (str, bytes)) and missing:
        first += f" (missing {', '.join(str(m) for m in missing)})"
    lines = [first]
    if reason in _HINTS:
        lines.append(f"  {_HINTS[reason]}")
    lines.append(f"  session {denial.get('kuro/session-id', '?')} · mode {denial.get('kuro/mode', '?')}")
    if cid:
        lines.append(f"  receipt {cid}")
    return "\n".join(_visible(line) for line in lines)


def _one_line(value: object) -> str:
    if isinstance(value, Mapping):
        return " · ".join(f"{str(k).split('/')[-1]}={' '.join(str(v).split())}" for k, v in value.items())
    return " ".join(str(value).split())


# ---- re-colouring guest output for a terminal

_NAMED: Final = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")
_FLAG_CODES: Final = (
    ("bold", "1"),
    ("dim", "2"),
    ("italic", "3"),
    ("underline", "4"),
    ("inverse", "7"),
    ("strike", "9"),
)


def _colour_codes(colour: object, background: bool) -> list[str]:
    base = 40 if background else 30
    if isinstance(colour, str):
        bright = colour.startswith("bright-")
        name = colour.removeprefix("bright-")
        if name in _NAMED:
            return [str(base + (60 if bright else 0) + _NAMED.index(name))]
    elif isinstance(colour, Mapping):
        index, rgb = colour.get("index"), colour.get("rgb")
        if isinstance(index, int) and 0 <= index <= 255:
            return [str(base + 8), "5", str(index)]
        if isinstance(rgb, Sequence) and len(rgb) == 3 and all(isinstance(v, int) and 0 <= v <= 255 for v in rgb):
            return [str(base + 8), "2", *(str(v) for v in rgb)]
    return []


def sgr(style: Mapping[str, Any]) -> str:
    """The SGR escape that sets exactly ``style`` (from :func:`kuro_wasm.model.ansi.lines`), after a reset.

    >>> sgr({"bold": True, "fg": "green"})
    '\\x1b[0;1;32m'
    >>> sgr({})
    '\\x1b[0m'
    """
    codes = ["0"] + [code for key, code in _FLAG_CODES if style.get(key) is True]
    codes += _colour_codes(style.get("fg"), False) + _colour_codes(style.get("bg"), True)
    return "\x1b[" + ";".join(codes) + "m"


def coloured(lines: Sequence[Sequence[Mapping[str, Any]]]) -> str:
    """Styled lines as terminal text: only SGR escapes we build, each line ending in a reset and newline.

    >>> coloured([[{"text": "ok", "style": {"fg": "green"}}], []])
    '\\x1b[0;32mok\\x1b[0m\\n\\n'
    """
    out: list[str] = []
    for line in lines:
        for span in line:
            text = str(span.get("text", ""))
            style = span.get("style") or {}
            out.append(sgr(style) + text if style else text)
        out.append("\x1b[0m\n" if any(span.get("style") for span in line) else "\n")
    return "".join(out)
