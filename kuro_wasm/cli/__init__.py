"""kuro_wasm.cli: the ``kuro`` command — one module per command group, all sharing
:mod:`kuro_wasm.cli.context` (which imports none of them), assembled by :mod:`kuro_wasm.cli.main`.
"""

from kuro_wasm.cli.main import main

__all__ = ["main"]
