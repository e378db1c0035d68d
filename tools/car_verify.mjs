#!/usr/bin/env node
// Parse and verify CAR files with @ipld/car (the JavaScript IPFS stack), for the gateway tests:
// every CAR the kuro gateway streams must parse here and every block must hash to its CID.
//
// usage: node tools/car_verify.mjs FILE...
// prints one JSON line: [{"file", "version", "roots": [...], "blocks": [cid...], "error": null | "..."}]
import { createReadStream } from 'node:fs'
import { CarBlockIterator } from '@ipld/car/iterator'
import { sha256, sha512 } from 'multiformats/hashes/sha2'
import { identity } from 'multiformats/hashes/identity'


const HASHERS = { [sha256.code]: sha256, [sha512.code]: sha512, [identity.code]: identity }

async function verify (file) {
  const result = { file, version: null, roots: [], blocks: [], error: null }
  try {
    const reader = await CarBlockIterator.fromIterable(createReadStream(file))
    result.version = reader.version
    result.roots = (await reader.getRoots()).map(String)
    for await (const { cid, bytes } of reader) {
      const hasher = HASHERS[cid.multihash.code]
      if (!hasher) throw new Error(`no hasher for multihash 0x${cid.multihash.code.toString(16)} (${cid})`)
      const digest = await hasher.digest(bytes)
      if (Buffer.compare(Buffer.from(digest.bytes), Buffer.from(cid.multihash.bytes)) !== 0) throw new Error(`block ${cid} does not hash to its CID`)
      result.blocks.push(String(cid))
    }
  } catch (err) {
    result.error = String(err && err.message ? err.message : err)
  }
  return result
}

const out = []
for (const file of process.argv.slice(2)) out.push(await verify(file))
console.log(JSON.stringify(out))
