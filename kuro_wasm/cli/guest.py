"""``kuro guest add``: put guest modules into the home's block store and print their CIDs.

## The one decision
A guest file is bad input (exit 2, one line naming the file) unless it is valid
WAT or a valid wasm module: WAT is compiled on the way in
(:func:`kuro_wasm.host.loader.add_guest`), so what is stored at least compiles.
A WAT error keeps its ``FILE:LINE:COL``.

## Effects
Reads the named files; writes blocks to the home's store.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kuro_wasm.cli.context import Context, SourcedError, UsageError, wat_error

__all__ = ["guest_add"]


def guest_add(args: argparse.Namespace, ctx: Context) -> int:
    """Add each file in ``args.files``; print ``CID  FILE`` per line."""
    from kuro_wasm.errors import LoadError
    from kuro_wasm.host.api import add_guest

    for name in args.files:
        data = Path(name).read_bytes()
        try:
            cid = add_guest(ctx.store, data)
        except Exception as exc:
            if wat_error(exc) is not None:
                raise SourcedError(exc, name) from exc
            if isinstance(exc, LoadError):  # the file is bad input: name it (several may be given)
                raise _BadGuest(f"{name}: {exc}") from exc
            raise
        ctx.say(f"{cid}  {name}")
    return 0


class _BadGuest(UsageError):
    """A guest file that is neither valid WAT nor a valid wasm module (exit 2)."""

    reference = "load-error"
