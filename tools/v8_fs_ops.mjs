#!/usr/bin/env node
// kuro.fs op sequences through the V8 host's kurofs.mjs, for differential tests against kuro_fs
// (tests/parity/test_v8_hamt_parity.py runs the same sequences through kuro_fs.fs.Fs).
//
// Reads one JSON request on stdin:
//   {"cases": [{"layout": [maxFlat, bitWidth, bucketSize], "root": "<cid>", "blocks": {"<cid>": "<hex>"},
//               "ops": [["write", "<path>", "<utf-8 text>"], ["rm", "<path>"], ["ls", "<path>"], ["read", "<path>"],
//                       ["layout", maxFlat, bitWidth, bucketSize]]}]}
// "root" and "blocks" (optional) start from that root over those blocks (hostile ones included) instead of
// an empty directory. Each op starts from the root the previous successful write or rm left ("layout" switches the directory
// layout later edits use, over the same blocks). Writes one JSON line on stdout:
//   {"results": [{"answers": [...]}]}, one answer per op: {"root": cid} for a write or rm,
//   {"value": text} for ls ("name\n", a directory "name/\n", sorted) and read, {"reason": denial} when refused,
//   {"layout": true} for a layout switch.
import { readFileSync } from 'node:fs'
import { BlockStore, Fs, Layout } from './v8host/kurofs.mjs'
import { Shape } from './v8host/hamt.mjs'

const layoutOf = ([maxFlat, bitWidth, bucketSize]) => new Layout(maxFlat, new Shape(bitWidth, bucketSize))
const text = new TextDecoder()

const request = JSON.parse(readFileSync(0, 'utf8'))
const results = []
for (const c of request.cases) {
  const store = new BlockStore()
  for (const [cid, hex] of Object.entries(c.blocks ?? {})) store.blocks.set(cid, Buffer.from(hex, 'hex'))
  let fs = c.root ? new Fs(store, c.root, layoutOf(c.layout)) : Fs.empty(store, layoutOf(c.layout))
  const answers = []
  for (const op of c.ops) {
    if (op[0] === 'layout') {
      fs = new Fs(store, fs.root, layoutOf(op.slice(1)))
      answers.push({ layout: true })
      continue
    }
    const got = op[0] === 'write'
      ? fs.write(op[1], new TextEncoder().encode(op[2]))
      : op[0] === 'rm' ? fs.rm(op[1]) : op[0] === 'ls' ? fs.ls(op[1]) : fs.readInto(op[1], 2 ** 31)
    if (got.reason) answers.push({ reason: got.reason })
    else if (got.fs) { fs = got.fs; answers.push({ root: fs.root }) } else answers.push({ value: typeof got.value === 'string' ? got.value : text.decode(got.value.data) })
  }
  results.push({ answers })
}
process.stdout.write(JSON.stringify({ results }) + '\n')
