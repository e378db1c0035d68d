#!/usr/bin/env node
// Reference IPLD HashMap (iamap, by the spec's author) for kuro_fs.hamt differential tests.
//
// Reads one JSON request on stdin:
//   {"cases": [{"bitWidth": 8, "bucketSize": 3,
//               "ops": [["set", "<key hex>", "<value CID>", <size>], ["delete", "<key hex>"], ["check"], ...]}]}
// and writes one JSON line on stdout: {"results": [{"roots": ["<CID of the HashMapRoot block>", ...]}, ...]},
// one root per "check" op. Blocks are dag-cbor with sha2-256 CIDv1; keys are hashed with sha2-256 (0x12);
// a value is the kuro.fs entry map {"cid": <link>, "size": <int>}.
import { readFileSync } from 'node:fs'
import * as iamap from 'iamap'
import * as dagCbor from '@ipld/dag-cbor'
import { CID } from 'multiformats/cid'
import { sha256 } from 'multiformats/hashes/sha2'

iamap.registerHasher(0x12, 32, async (bytes) => (await sha256.digest(bytes)).digest)

function memoryStore () {
  const blocks = new Map()
  return {
    async save (obj) {
      const bytes = dagCbor.encode(obj)
      const cid = CID.create(1, dagCbor.code, await sha256.digest(bytes))
      blocks.set(cid.toString(), bytes)
      return cid
    },
    async load (cid) {
      return dagCbor.decode(blocks.get(cid.toString()))
    },
    isLink (obj) {
      return CID.asCID(obj) != null
    },
    isEqual (a, b) {
      return a.equals(b)
    }
  }
}

const request = JSON.parse(readFileSync(0, 'utf8'))
const results = []
for (const c of request.cases) {
  let map = await iamap.create(memoryStore(), { hashAlg: 0x12, bitWidth: c.bitWidth, bucketSize: c.bucketSize })
  const roots = []
  for (const op of c.ops) {
    if (op[0] === 'set') {
      map = await map.set(Buffer.from(op[1], 'hex'), { cid: CID.parse(op[2]), size: op[3] })
    } else if (op[0] === 'delete') {
      map = await map.delete(Buffer.from(op[1], 'hex'))
    } else {
      roots.push(map.id.toString())
    }
  }
  results.push({ roots })
}
process.stdout.write(JSON.stringify({ results }) + '\n')
