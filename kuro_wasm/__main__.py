"""``python -m kuro_wasm``: the ``kuro`` command line (see :mod:`kuro_wasm.cli.launch`)."""

from kuro_wasm.cli.launch import main

if __name__ == "__main__":
    main()
