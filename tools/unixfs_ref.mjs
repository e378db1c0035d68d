#!/usr/bin/env node
// Reference UnixFS importer + CARv1 writer from the JavaScript IPFS stack, for kuro_fs parity tests.
//
// Reads one JSON request on stdin:
//   {"cases": [
//     {"kind": "file", "path": "/abs/file", "chunk": 262144, "width": 174, "car": "/abs/out.car"},
//     {"kind": "dir",  "path": "/abs/dir",  "chunk": 262144, "width": 174, "car": "/abs/out.car"}
//   ]}
// and writes one JSON line on stdout: {"results": [{"cid": "...", "blocks": n}, ...]}.
// "car" is optional; when given, the DAG is written there as CARv1, depth-first pre-order
// from the root, each distinct block once (the `ipfs dag export` shape kuro_fs.car writes).
// Import options are kubo's CIDv1 defaults with explicit chunk size and width:
// raw leaves, balanced layout, single-leaf files reduced to their leaf.
import { readFileSync, readdirSync, statSync, createWriteStream } from 'node:fs'
import { join } from 'node:path'
import { once } from 'node:events'
import { importer } from 'ipfs-unixfs-importer'
import { fixedSize } from 'ipfs-unixfs-importer/chunker'
import { balanced } from 'ipfs-unixfs-importer/layout'
import { MemoryBlockstore } from 'blockstore-core/memory'
import { CarWriter } from '@ipld/car/writer'
import * as dagPB from '@ipld/dag-pb'

const RAW = 0x55
const DAG_PB = 0x70

async function getBytes (store, cid) {
  const parts = []
  let n = 0
  for await (const part of store.get(cid)) { parts.push(part); n += part.length }
  const out = new Uint8Array(n)
  let off = 0
  for (const p of parts) { out.set(p, off); off += p.length }
  return out
}

function * walkDir (root, rel) {
  const names = readdirSync(join(root, rel)).sort()
  if (names.length === 0 && rel !== '') yield { path: rel }
  for (const name of names) {
    const sub = rel === '' ? name : `${rel}/${name}`
    if (statSync(join(root, sub)).isDirectory()) {
      yield * walkDir(root, sub)
    } else {
      yield { path: sub, content: readFileSync(join(root, sub)) }
    }
  }
}

async function importCase (store, c) {
  const opts = {
    cidVersion: 1,
    rawLeaves: true,
    reduceSingleLeafToSelf: true,
    chunker: fixedSize({ chunkSize: c.chunk }),
    layout: balanced({ maxChildrenPerNode: c.width })
  }
  let source
  if (c.kind === 'file') {
    source = [{ content: readFileSync(c.path) }]
  } else {
    source = [{ path: 'root' }, ...[...walkDir(c.path, '')].map(e => ({ ...e, path: `root/${e.path}` }))]
  }
  let root
  for await (const entry of importer(source, store, opts)) {
    if (c.kind === 'file' || entry.path === 'root') root = entry.cid
  }
  return root
}

async function writeCar (store, root, path) {
  const { writer, out } = CarWriter.create([root])
  const file = createWriteStream(path)
  const pump = (async () => {
    for await (const chunk of out) {
      if (!file.write(chunk)) await once(file, 'drain')
    }
    file.end()
    await once(file, 'finish')
  })()
  const seen = new Set()
  let blocks = 0
  const stack = [root]
  while (stack.length > 0) {
    const cid = stack.pop()
    const key = cid.toString()
    if (seen.has(key)) continue
    seen.add(key)
    const bytes = await getBytes(store, cid)
    await writer.put({ cid, bytes })
    blocks++
    if (cid.code === DAG_PB) {
      const node = dagPB.decode(bytes)
      for (let i = node.Links.length - 1; i >= 0; i--) stack.push(node.Links[i].Hash)
    } else if (cid.code !== RAW) {
      throw new Error(`unexpected codec 0x${cid.code.toString(16)} in ${key}`)
    }
  }
  await writer.close()
  await pump
  return blocks
}

const request = JSON.parse(readFileSync(0, 'utf8'))
const results = []
for (const c of request.cases) {
  const store = new MemoryBlockstore()
  const root = await importCase(store, c)
  const result = { cid: root.toString() }
  if (c.car) result.blocks = await writeCar(store, root, c.car)
  results.push(result)
}
process.stdout.write(JSON.stringify({ results }) + '\n')
