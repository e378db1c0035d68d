#!/usr/bin/env node
// A second kuro guest host, in V8: runs fixture cases with the kuro ABI v1 and kuro-browser-v0 imports
// written in JavaScript, over the same blocks as the wasmtime host, and prints what two hosts must agree on.
//
//   node tools/kuro_v8_host.mjs < request.json     # run cases
//   node tools/kuro_v8_host.mjs --self-test        # its UnixFS writer against ipfs-unixfs-importer
//
// Request (one JSON document on stdin), as tests/parity/test_v8_parity.py writes it:
//   {"cases": [{"name": "...", "car": "/abs/blocks.car",   // every block the case needs (CARv1)
//               "guest": "<cid>", "export": "run", "args": [{"int": "40"}, {"float": 1.5}],
//               "fs_root": "<kuro.fs root cid>", "grant": ["guest/invoke", ...],   // this host's names
//               "stdin": "<base64>" | null, "fs_read_path": "greeting.txt" | null,
//               "env": {"NAME": "value"} | null, "argv0": "name" | null,   // the spec's (a load error here)
//               "limits": {"timeout_ms": 50, "max_output_bytes": 4096}}]}
// Response (one JSON document on stdout): {"results": [{"name": "...", "view": {...}, "error": "..." | null}]}
// where view has the keys of kuro_wasm.model.fixture.parity_view (or {"denial", "missing"}).
// Blocks read from the CAR are re-hashed against their CIDs before use.
import { readFileSync } from 'node:fs'
import { CarReader } from '@ipld/car'
import { BlockStore, selfTest } from './v8host/kurofs.mjs'
import { runCase } from './v8host/host.mjs'

async function loadCar (path) {
  const reader = await CarReader.fromBytes(readFileSync(path))
  const store = new BlockStore()
  for await (const { cid, bytes } of reader.blocks()) store.blocks.set(cid.toString(), bytes)
  return store
}

async function main () {
  if (process.argv.includes('--self-test')) {
    const report = await selfTest()
    process.stdout.write(JSON.stringify(report) + '\n')
    process.exit(report.ok ? 0 : 1)
  }
  const request = JSON.parse(readFileSync(0, 'utf-8'))
  const results = []
  for (const c of request.cases) {
    const store = await loadCar(c.car)
    const outcome = runCase(c, store)
    results.push({ name: c.name, view: outcome.view ?? outcome, error: outcome.error ?? null })
  }
  process.stdout.write(JSON.stringify({ results }) + '\n')
}

main().catch(err => { process.stderr.write(`kuro_v8_host: ${err.stack}\n`); process.exit(2) })
