"""kuro_wasm: the terminal model (pure) and the wasmtime host for kuro guest runs."""
