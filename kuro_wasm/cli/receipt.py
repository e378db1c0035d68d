"""``kuro receipt show`` and ``kuro ledger list``: reading back what runs left in the home.

## The one decision
A receipt is found by what a person has in hand: its CID (every receipt and denial
the CLI produces is stored as a dag-cbor block, in its persisted form — output as
CIDs and redacted previews, :mod:`kuro_wasm.ledger.record`) or the ``--op-id`` it
ran under. Output is shown as kept: the bytes when the run asked to keep them
(``--keep-output``: the full receipt in the private output store), else the
redacted preview, labelled as such. Guest
output is rendered through :func:`kuro_wasm.model.ansi.lines` and re-coloured with only
the SGR escapes :func:`kuro_wasm.model.summary.coloured` builds: a receipt cannot move the
reader's cursor or retitle the window. Colour is used when stdout is a terminal
(``--color auto``), or when asked.

An operation id is any printable text, so it may be spelled as a CID: ``REF`` is a
receipt CID when a stored receipt block has that CID, else an operation id (a REF that
is both shows the receipt and says, on stderr, how to see the operation's:
``--op-id REF``); ``--op-id ID`` is always the operation, never parsed as a CID.
A stored receipt's CID needs no ledger: a ledger that cannot be read then costs only the
note. A CID that names a block which is not a receipt (a guest's bytes, an fs directory),
and no operation, is bad input, said in one line; an unknown CID or operation is ``not-found``.

## Effects
Block store, ledger (read only: one row lookup, :mod:`kuro_wasm.ledger.lookup`; ``kuro ledger list`` opens
the ledger), stdout, an HTML file when asked.

## Not done here
Running guests (:mod:`kuro_wasm.cli.run`); no pager, no filtering of the ledger.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kuro_fs.home import ledger_path
from kuro_wasm.cli.context import Context, NotFound, UsageError, looks_like_cid, output_store

__all__ = ["ledger_list", "receipt_show"]


def receipt_show(args: argparse.Namespace, ctx: Context) -> int:
    """``kuro receipt show CID|OP_ID`` or ``kuro receipt show --op-id ID``."""
    from kuro_wasm.model.receipt import to_json
    from kuro_wasm.model.summary import denial_text, is_denial, receipt_text

    value, cid = _find_receipt(ctx, args.ref, args.op_id)
    if args.json:
        ctx.say(to_json(value))
        return 0
    ctx.say(denial_text(value, None, cid) if is_denial(value) else receipt_text(value, cid))
    colour = args.color == "always" or (args.color == "auto" and _isatty(ctx.out))
    for name in ("stdout", "stderr"):
        data = _output(value, name)
        if data:
            preview = f"kuro/{name}" not in value
            cut = preview and value.get(f"kuro/{name}-preview-truncated?") is True
            label = " (redacted preview" + (", cut" if cut else "") + ")" if preview else ""
            ctx.say(f"── {name}{label} ──")
            ctx.out.write(_terminal_text(data, colour))
            ctx.out.flush()
    if args.html:
        _write_html(value, Path(args.html))
        ctx.note(f"wrote {args.html}")
    return 0


def _find_receipt(ctx: Context, ref: str | None, op_id: str | None) -> tuple[Mapping[str, Any], str | None]:
    """The receipt ``REF`` or ``--op-id`` names (see the module docstring for the order), and its block's CID."""
    from kuro_fs.cid import parse
    from kuro_fs.errors import InvalidCID
    from kuro_wasm.errors import KuroError

    if (ref is None) == (op_id is None):
        raise UsageError("give a receipt CID or operation id, or --op-id ID (one of them)")
    if op_id is not None:
        return _operation(ctx, op_id, _ledger_of(ctx, op_id))
    assert ref is not None
    try:
        parsed = parse(ref)
    except InvalidCID:
        ledger = _ledger_of(ctx, ref)
        if ledger is not None or not looks_like_cid(ref):
            return _operation(ctx, ref, ledger)
        raise  # no such operation, and a damaged attempt at a CID: said as such
    block = _receipt_block(ctx, ref, parsed.codec)
    if isinstance(block, UsageError) or block is None:
        ledger = _ledger_of(ctx, ref)  # an op id may be spelled as a CID: never confused with one
        if ledger is not None:
            return _operation(ctx, ref, ledger)
        raise block or NotFound(f"no receipt or operation {ref} in {ctx.home}")
    try:  # the receipt needs no ledger: one that cannot be read (damaged, locked) costs only this note
        ledger = _ledger_of(ctx, ref)
    except KuroError as exc:
        ctx.note(f"whether {ref} is also an operation id is not known: {exc} [{exc.reference}]")
        return block, ref
    if ledger is not None:
        ctx.note(f"{ref} is also an operation id: `kuro receipt show --op-id {ref}` shows that operation's receipt")
    return block, ref


def _receipt_block(ctx: Context, ref: str, codec: str) -> Mapping[str, Any] | UsageError | None:
    """The receipt stored under CID ``ref``; None if no block has it; the error to raise if it is not a receipt."""
    from kuro_fs.dagcbor import decode

    data = ctx.store.get(ref)
    if data is None:
        data = output_store(ctx).get(ref)  # a receipt kept with --keep-output
    if data is None:
        return None
    not_a_receipt = UsageError(f"{ref} is a {codec} block in the store, but not a receipt")
    if codec != "dag-cbor":
        return not_a_receipt
    try:
        value = decode(data)
    except ValueError:
        return not_a_receipt
    if not isinstance(value, Mapping) or not str(value.get("kuro/type", "")).startswith("kuro/"):
        return not_a_receipt
    return value


def _ledger_of(ctx: Context, op_id: str) -> dict[str, Any] | None:
    """The ledger's answer for ``op_id``, or None if it has none: one read-only row lookup, which writes nothing
    (:func:`kuro_wasm.ledger.lookup.lookup`: no crash sweep, no journal drain)."""
    from kuro_wasm.ledger.lookup import lookup

    path = ledger_path(ctx.home)
    return lookup(path, op_id) if path.exists() else None


def _operation(ctx: Context, op_id: str, found: dict[str, Any] | None) -> tuple[Mapping[str, Any], str | None]:
    """The receipt of operation ``op_id`` (the ledger's answer ``found``, None: it has none: raises NotFound)."""
    from kuro_fs.dagcbor import decode

    if found is None:
        if not ledger_path(ctx.home).exists():
            raise NotFound(f"no operation {op_id!r} (the ledger in {ctx.home} is empty), and no receipt by that name")
        raise NotFound(f"no operation {op_id!r} in the ledger")
    full = found.get("kuro/receipt-cid")
    kept = output_store(ctx).get(full) if isinstance(full, str) and found.get("kuro/output-kept") is True else None
    if kept is not None:
        # The host's whole receipt (with its output bytes, kept on request), plus the ledger's facts.
        whole = dict(decode(kept))
        for key in ("kuro/op-id", "kuro/status", "kuro/persistence", "kuro/replayed"):
            if key in found:
                whole[key] = found[key]
        return whole, full
    return found, full if isinstance(full, str) else None  # the persisted receipt's block, in the store


def _terminal_text(data: bytes, colour: bool) -> str:
    from kuro_wasm.model import ansi  # html entities load only when output is rendered
    from kuro_wasm.model.summary import coloured

    styled = ansi.lines(data)
    if styled and not styled[-1]:
        styled = styled[:-1]  # the output's own final newline
    if colour:
        return coloured(styled)
    return "".join("".join(str(span["text"]) for span in line) + "\n" for line in styled)


def _output(value: Mapping[str, Any], name: str) -> bytes:
    """The output a receipt shows: its bytes when kept, else its redacted preview (a persisted receipt)."""
    data = value.get(f"kuro/{name}")
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    shown = value.get(f"kuro/{name}-preview")
    return shown.encode("utf-8") if isinstance(shown, str) else b""


def _write_html(value: Mapping[str, Any], path: Path) -> None:
    from kuro_wasm.model import ansi  # html entities load only when output is rendered

    text = _output(value, "stdout").decode("utf-8", "replace")
    path.write_text(ansi.to_html(ansi.lines(text)), encoding="utf-8")


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def ledger_list(args: argparse.Namespace, ctx: Context) -> int:
    """``kuro ledger list [--limit N] [--after CURSOR] [--json]``: a page of operations, oldest first.

    When more rows follow, the command to see them is the last line on stderr.
    """
    import shlex

    from kuro_wasm.errors import ModelError
    from kuro_wasm.ledger.ledger import MAX_PAGE, Ledger
    from kuro_wasm.model.receipt import to_json
    from kuro_wasm.model.summary import visible

    if not ledger_path(ctx.home).exists():
        ctx.note(f"no operations yet ({ledger_path(ctx.home)} does not exist)")
        return 0
    with Ledger(home=ctx.home, store=ctx.store) as ledger:
        try:  # one row more than the page says whether more follow (no ledger holds more than MAX_PAGE)
            rows = ledger.operations(limit=min(args.limit + 1, MAX_PAGE), after=args.after)
        except ModelError as exc:
            raise UsageError(str(exc)) from None
    more = len(rows) > args.limit
    rows = rows[: args.limit]
    for row in rows:
        if args.json:
            ctx.say(to_json(row))
        else:
            # an op id may hold bidirectional controls (printable, so allowed): shown, never acted on
            fields = [visible(str(row.get(f"kuro/{k}", "-"))) for k in ("op-id", "status", "exit-code", "outcome")]
            ctx.say("  ".join(fields))
    if not rows and not args.json:
        ctx.note("no operations yet" if args.after is None else "no more operations")
    if more:  # a command a shell runs as printed: an op id (in the cursor) may hold any printable character
        after = shlex.quote(f"--after={rows[-1]['kuro/cursor']}")
        ctx.note(f"more: kuro ledger list {after}" + (" --json" if args.json else ""))
    return 0
