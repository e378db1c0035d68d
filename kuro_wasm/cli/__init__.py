"""kuro_wasm.cli: the ``kuro`` command — one module per command group, all sharing
:mod:`kuro_wasm.cli.context` (which imports none of them), assembled by :mod:`kuro_wasm.cli.kuro`
and started by :mod:`kuro_wasm.cli.launch` (the executable's entry point).

``main`` is resolved on first use, so importing this package loads nothing else.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the executable imports this package before its signal guard
if TYPE_CHECKING:
    from typing import Any

    from kuro_wasm.cli.kuro import main


def __getattr__(name: str) -> Any:
    if name == "main":
        from kuro_wasm.cli.kuro import main

        return main
    raise AttributeError(f"module 'kuro_wasm.cli' has no attribute {name!r}")


__all__ = ["main"]
