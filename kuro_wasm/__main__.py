"""``python -m kuro_wasm``: the ``kuro`` command line (see :mod:`kuro_wasm.cli.main`)."""

from __future__ import annotations

import sys

from kuro_wasm.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
