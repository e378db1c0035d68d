#!/usr/bin/env node
// Reference dag-pb decoder from the JavaScript IPFS stack (@ipld/dag-pb), for kuro_fs parity tests.
//
// Reads one JSON request on stdin:  {"cases": [{"hex": "<block bytes>"}, ...]}
// and writes one JSON line on stdout: {"results": [...]}, one per case, either
//   {"ok": true, "links": [{"hash": "<cid>", "name": <string|null>, "tsize": <number|null>}],
//    "data": "<hex>"|null, "reencoded": "<hex of encode(decode(block))>"|null}
// ("reencoded" is null when encode refuses what decode read, e.g. links not sorted by Name)
// or {"ok": false, "error": "<message>"} when decode refuses the block.
import { readFileSync } from 'node:fs'
import * as dagPB from '@ipld/dag-pb'

const hex = (bytes) => Buffer.from(bytes).toString('hex')

const request = JSON.parse(readFileSync(0, 'utf8'))
const results = request.cases.map(({ hex: h }) => {
  let node
  try {
    node = dagPB.decode(Uint8Array.from(Buffer.from(h, 'hex')))
  } catch (err) {
    return { ok: false, error: String(err.message) }
  }
  let reencoded = null
  try {
    reencoded = hex(dagPB.encode(node))
  } catch {}
  return {
    ok: true,
    links: node.Links.map((l) => ({
      hash: l.Hash.toString(),
      name: l.Name === undefined ? null : l.Name,
      tsize: l.Tsize === undefined ? null : l.Tsize
    })),
    data: node.Data === undefined ? null : hex(node.Data),
    reencoded
  }
})
process.stdout.write(JSON.stringify({ results }) + '\n')
