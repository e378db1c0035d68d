#!/usr/bin/env node
// Fixture CARs for the trustless-gateway conformance tests (tests/gateway/), built with the
// JavaScript IPFS stack (ipfs-unixfs-importer, @ipld/dag-pb, @ipld/dag-cbor, @ipld/car), shaped
// after the fixtures of github.com/ipfs/gateway-conformance (trustless_gateway_car/*.car), plus a
// manifest of the CIDs each test expects, computed here (the Python side never computes its own
// expectations).
//
// usage: node tools/gateway_fixtures.mjs OUT_DIR
// Deterministic: the same packages write the same bytes; tests/gateway/test_fixtures_parity.py
// rebuilds into a temp dir and compares.
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { importer } from 'ipfs-unixfs-importer'
import { fixedSize } from 'ipfs-unixfs-importer/chunker'
import { balanced } from 'ipfs-unixfs-importer/layout'
import { MemoryBlockstore } from 'blockstore-core/memory'
import { CarWriter } from '@ipld/car/writer'
import * as dagPB from '@ipld/dag-pb'
import * as dagCBOR from '@ipld/dag-cbor'
import { UnixFS } from 'ipfs-unixfs'
import { CID } from 'multiformats/cid'
import { sha256, sha512 } from 'multiformats/hashes/sha2'

const out = process.argv[2]
if (!out) { console.error('usage: gateway_fixtures.mjs OUT_DIR'); process.exit(2) }
mkdirSync(out, { recursive: true })

const enc = new TextEncoder()
const ASCII = enc.encode('hello application/vnd.ipld.car\n')
const HELLO = enc.encode('hello world\n')
// 1026 bytes: four 256-byte chunks and a 2-byte one (the conformance multiblock.txt shape).
const MULTI = Uint8Array.from({ length: 1026 }, (_, i) => (i * 7 + 3 + (i >> 8) * 45) & 0xff)

async function bytesOf (store, cid) {
  const parts = []
  let n = 0
  for await (const p of store.get(cid)) { parts.push(p); n += p.length }
  const buf = new Uint8Array(n)
  let o = 0
  for (const p of parts) { buf.set(p, o); o += p.length }
  return buf
}

async function importTree (store, entries, opts) {
  let root
  const byPath = {}
  for await (const e of importer(entries, store, {
    wrapWithDirectory: true,
    reduceSingleLeafToSelf: true,
    layout: balanced({ maxChildrenPerNode: 174 }),
    ...opts
  })) {
    byPath[e.path] = e.cid
    root = e.cid
  }
  byPath[''] = root
  return byPath
}

function linksOf (cid, bytes) {
  if (cid.code === dagPB.code) return dagPB.decode(bytes).Links.map(l => l.Hash)
  if (cid.code === dagCBOR.code) {
    const found = []
    const visit = v => {
      const c = CID.asCID(v)
      if (c) { found.push(c); return }
      if (Array.isArray(v)) v.forEach(visit)
      else if (v && typeof v === 'object' && !(v instanceof Uint8Array)) Object.values(v).forEach(visit)
    }
    visit(dagCBOR.decode(bytes))
    return found
  }
  return []
}

// Depth-first pre-order, each distinct block once: the order of the fixture CAR and of dups=n.
async function dagOrder (store, root, { dups = false, skip = new Set() } = {}) {
  const order = []
  const seen = new Set()
  const visit = async cid => {
    if (!dups && seen.has(cid.toString())) return
    seen.add(cid.toString())
    if (skip.has(cid.toString())) return
    order.push(cid)
    for (const l of linksOf(cid, await bytesOf(store, cid))) await visit(l)
  }
  await visit(root)
  return order
}

async function writeCar (name, store, root, omit = new Set()) {
  const { writer, out: stream } = CarWriter.create([root])
  const chunks = []
  const done = (async () => { for await (const c of stream) chunks.push(c) })()
  for (const cid of await dagOrder(store, root)) {
    if (omit.has(cid.toString())) continue
    await writer.put({ cid, bytes: await bytesOf(store, cid) })
  }
  await writer.close()
  await done
  writeFileSync(join(out, name), Buffer.concat(chunks))
}

const s = c => c.toString()
const manifest = {}

// ---- subdir-with-two-single-block-files (CIDv0 everywhere, as go-ipfs wrote it)
{
  const store = new MemoryBlockstore()
  const p = await importTree(store, [
    { path: 'subdir/ascii.txt', content: ASCII },
    { path: 'subdir/hello.txt', content: HELLO }
  ], { cidVersion: 0, rawLeaves: false, chunker: fixedSize({ chunkSize: 262144 }) })
  await writeCar('subdir-with-two-single-block-files.car', store, p[''])
  manifest['subdir-with-two-single-block-files'] = {
    root: s(p['']), subdir: s(p.subdir), 'subdir/ascii.txt': s(p['subdir/ascii.txt']), 'subdir/hello.txt': s(p['subdir/hello.txt'])
  }
}

// ---- subdir-with-mixed-block-files (CIDv0 nodes, raw leaves in 256-byte chunks)
{
  const store = new MemoryBlockstore()
  const p = await importTree(store, [
    { path: 'subdir/ascii.txt', content: ASCII },
    { path: 'subdir/multiblock.txt', content: MULTI }
  ], { cidVersion: 0, rawLeaves: true, chunker: fixedSize({ chunkSize: 256 }) })
  await writeCar('subdir-with-mixed-block-files.car', store, p[''])
  const multi = p['subdir/multiblock.txt']
  manifest['subdir-with-mixed-block-files'] = {
    root: s(p['']),
    subdir: s(p.subdir),
    'subdir/ascii.txt': s(p['subdir/ascii.txt']),
    'subdir/multiblock.txt': s(multi),
    multiblock_descendants: (await dagOrder(store, multi)).slice(1).map(s),
    subdir_descendants: (await dagOrder(store, p.subdir)).slice(1).map(s),
    multiblock_bytes: Buffer.from(MULTI).toString('hex')
  }
}

// ---- a HAMT-sharded directory of multi-block files (CIDv1; sharding forced by a tiny threshold)
{
  const store = new MemoryBlockstore()
  const files = []
  for (let i = 1; i <= 60; i++) files.push({ path: `${i}.txt`, content: enc.encode(`file ${i} `.repeat(8)) })
  const p = await importTree(store, files, {
    cidVersion: 1, rawLeaves: true, chunker: fixedSize({ chunkSize: 32 }), shardSplitThresholdBytes: 1
  })
  await writeCar('hamt-with-multi-block-files.car', store, p[''])
  const root = p['']
  // Shard blocks (not entries) in depth-first order, and the shards on the way to each entry,
  // found by searching the links (no hashing: an independent check of kuro's murmur3 lookup).
  const shards = []
  const wayTo = {}
  const visit = async (cid, trail) => {
    const node = dagPB.decode(await bytesOf(store, cid))
    for (const l of node.Links) {
      if (l.Name.length === 2) {
        shards.push(s(l.Hash))
        await visit(l.Hash, [...trail, s(l.Hash)])
      } else {
        wayTo[l.Name.slice(2)] = trail
      }
    }
  }
  await visit(root, [])
  const meta = UnixFS.unmarshal(dagPB.decode(await bytesOf(store, root)).Data)
  manifest['hamt-with-multi-block-files'] = {
    root: s(root),
    root_type: meta.type,
    shards_in_hamt: shards,
    names: {}
  }
  for (const name of Object.keys(wayTo).sort()) {
    manifest['hamt-with-multi-block-files'].names[name] = {
      cid: s(p[name]),
      shards_on_the_way: wayTo[name],
      descendants: (await dagOrder(store, p[name])).slice(1).map(s)
    }
  }
}

// ---- a UnixFS directory holding a dag-cbor document that links to a file
{
  const store = new MemoryBlockstore()
  const f = await importTree(store, [{ path: 'single', content: MULTI.slice(0, 600) }],
    { cidVersion: 1, rawLeaves: true, chunker: fixedSize({ chunkSize: 256 }) })
  const single = f.single
  const docBytes = dagCBOR.encode({ files: { single }, name: 'document', tags: ['a', 'b'] })
  const doc = CID.createV1(dagCBOR.code, await sha256.digest(docBytes))
  await store.put(doc, docBytes)
  const dirBytes = dagPB.encode(dagPB.prepare({
    Data: new UnixFS({ type: 'directory' }).marshal(),
    Links: [{ Name: 'document', Hash: doc, Tsize: docBytes.length }]
  }))
  const dir = CID.createV1(dagPB.code, await sha256.digest(dirBytes))
  await store.put(dir, dirBytes)
  await writeCar('dir-with-dag-cbor-with-links.car', store, dir)
  manifest['dir-with-dag-cbor-with-links'] = {
    root: s(dir), document: s(doc), 'document/files/single': s(single),
    single_descendants: (await dagOrder(store, single)).slice(1).map(s)
  }
}

// ---- a directory with duplicate files (dups=y sends them again)
{
  const store = new MemoryBlockstore()
  const p = await importTree(store, [
    { path: 'ascii-copy.txt', content: ASCII },
    { path: 'ascii.txt', content: ASCII },
    { path: 'hello.txt', content: HELLO },
    { path: 'multiblock.txt', content: MULTI }
  ], { cidVersion: 1, rawLeaves: true, chunker: fixedSize({ chunkSize: 256 }) })
  await writeCar('dir-with-duplicate-files.car', store, p[''])
  manifest['dir-with-duplicate-files'] = {
    root: s(p['']),
    'ascii.txt': s(p['ascii.txt']),
    'ascii-copy.txt': s(p['ascii-copy.txt']),
    'hello.txt': s(p['hello.txt']),
    'multiblock.txt': s(p['multiblock.txt']),
    order_dups_y: (await dagOrder(store, p[''], { dups: true })).map(s),
    order_dups_n: (await dagOrder(store, p[''])).map(s)
  }
}

// ---- a 3 KiB file of three 1 KiB CIDv0 leaves, the middle one missing from the CAR
{
  const store = new MemoryBlockstore()
  const content = Uint8Array.from({ length: 3072 }, (_, i) => (i * 13 + 1 + (i >> 10) * 77) & 0xff)
  const p = await importTree(store, [{ path: 'f', content }],
    { cidVersion: 0, rawLeaves: false, chunker: fixedSize({ chunkSize: 1024 }) })
  const file = p.f
  const leaves = (await dagOrder(store, file)).slice(1)
  await writeCar('file-3k-and-3-blocks-missing-block.car', store, file, new Set([s(leaves[1])]))
  manifest['file-3k-and-3-blocks-missing-block'] = { root: s(file), leaves: leaves.map(s), missing: s(leaves[1]) }
}

// ---- a multi-block file hashed with sha2-512 (real IPFS data kuro reads but never mints).
// The importer hashes with sha2-256 only, so the file node is built here from its parts.
{
  const store = new MemoryBlockstore()
  const content = MULTI.slice(0, 700)
  const leaves = []
  for (let at = 0; at < content.length; at += 256) {
    const bytes = content.slice(at, at + 256)
    const cid = CID.createV1(0x55, await sha512.digest(bytes))
    await store.put(cid, bytes)
    leaves.push({ cid, size: bytes.length })
  }
  const data = new UnixFS({ type: 'file', blockSizes: leaves.map(l => BigInt(l.size)) })
  const rootBytes = dagPB.encode(dagPB.prepare({
    Data: data.marshal(),
    Links: leaves.map(l => ({ Name: '', Hash: l.cid, Tsize: l.size }))
  }))
  const root = CID.createV1(dagPB.code, await sha512.digest(rootBytes))
  await store.put(root, rootBytes)
  await writeCar('sha2-512-file.car', store, root)
  manifest['sha2-512-file'] = {
    root: s(root), descendants: leaves.map(l => s(l.cid)), bytes: Buffer.from(content).toString('hex')
  }
}

writeFileSync(join(out, 'manifest.json'), JSON.stringify(manifest, null, 1) + '\n')
console.log(JSON.stringify({ fixtures: Object.keys(manifest) }))
