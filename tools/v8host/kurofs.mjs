// kuro.fs for the V8 host: blocks by CID, dag-cbor directories, UnixFS files — synchronously.
//
// The one decision: a guest's fs import is a synchronous call out of wasm, so every kuro.fs operation here
// is synchronous: blocks live in a Map (filled from a CAR before the run), directories are the kuro.fs
// dag-cbor block of kuro_fs/fsdir.py, encoded and decoded with @ipld/dag-cbor (canonical: the same bytes,
// hence the same root CIDs, as kuro_fs.dagcbor), files are UnixFS DAGs (raw leaves, 262144-byte chunks,
// balanced, 174 links) built with @ipld/dag-pb and ipfs-unixfs. The JS importer (ipfs-unixfs-importer)
// is asynchronous and cannot run inside an import call, so writeFile builds the same DAG itself;
// selfTest() compares it with the importer at the boundary sizes.
//
// Supported: the flat directory format (one dag-cbor block per directory, at most 256 entries,
//   {"entries": {name: {"cid": Link, "size": int}}, "type": "kuro.fs/dir", "version": 1}).
// Not supported: HAMT-sharded kuro.fs directories (kuro_fs/hamt.py, more than 256 entries). Reading one is
// "block-missing"; an edit that would take a directory past 256 entries throws, ending the run as a host
// error — a case that needs either cannot be expressed here and is marked so.
//
// Every operation returns {value} or {reason} with kuro_fs's denial reasons, in kuro_fs's check order
// (bad-path first, then the op's own), so a guest sees the same error codes on both hosts.

import { createHash } from 'node:crypto'
import * as dagCbor from '@ipld/dag-cbor'
import * as dagPB from '@ipld/dag-pb'
import { UnixFS } from 'ipfs-unixfs'
import { CID } from 'multiformats/cid'
import * as Digest from 'multiformats/hashes/digest'

export const RAW = 0x55
export const DAG_PB = 0x70
export const DAG_CBOR = 0x71
const CHUNK = 262144
const WIDTH = 174
const MAX_PATH_BYTES = 4096
const MAX_NAME_BYTES = 255
const DIR_TYPE = 'kuro.fs/dir'
const MAX_FLAT_ENTRIES = 256
const CONTROL = /[\x00-\x1f\x7f-\x9f]/
// Python's str.isspace() characters: a path made only of these is a bad path (kuro_fs.paths.clean_path).
const PY_SPACE = new Set([0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001,
  0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000])
const utf8 = new TextEncoder()

export function sha256 (bytes) { return new Uint8Array(createHash('sha256').update(bytes).digest()) }
export function cidFor (bytes, codec) { return CID.createV1(codec, Digest.create(0x12, sha256(bytes))).toString() }
export function codecOf (cid) { return CID.parse(cid).code }

class Refusal extends Error { constructor (reason) { super(reason); this.reason = reason } }

export class BlockStore {
  constructor () { this.blocks = new Map() }
  put (bytes, codec = RAW) {
    const cid = cidFor(bytes, codec)
    if (!this.blocks.has(cid)) this.blocks.set(cid, bytes)
    return cid
  }

  // The block, re-hashed against its CID: bytes that do not hash to it are as good as absent.
  get (cid) {
    const bytes = this.blocks.get(cid)
    if (bytes === undefined) return null
    const parsed = CID.parse(cid)
    const digest = sha256(bytes)
    if (parsed.multihash.code !== 0x12 || !Buffer.from(parsed.multihash.digest).equals(Buffer.from(digest))) return null
    return bytes
  }
}

// ---- paths (kuro_fs/paths.py): the segments, or null for a bad path

const blank = text => [...text].every(ch => PY_SPACE.has(ch.codePointAt(0)))

export function cleanPath (path) {
  if (typeof path !== 'string' || blank(path) || CONTROL.test(path)) return null
  if (utf8.encode(path).length > MAX_PATH_BYTES) return null
  const parts = path.split(/\/+/).filter(seg => seg !== '' && seg !== '.')
  for (const seg of parts) if (seg === '..' || blank(seg) || utf8.encode(seg).length > MAX_NAME_BYTES) return null
  return parts
}

// A path ending in '/' or '/.' (or '.') can only name a directory (kuro_fs.paths.names_a_directory).
export function namesADirectory (path) { return /(?:^|\/)\.?$/.test(path) }

// The looser rule for names already stored in a directory block (kuro_fs.paths.stored_name_ok).
function storedNameOk (name) {
  return typeof name === 'string' && name !== '.' && name !== '..' && !blank(name) && !name.includes('/') &&
    !name.includes('\0') && utf8.encode(name).length <= MAX_NAME_BYTES
}

export function joinPath (parts) { return parts.length ? parts.join('/') : '.' }

function cmpCodePoints (a, b) {
  const x = [...a].map(c => c.codePointAt(0)); const y = [...b].map(c => c.codePointAt(0))
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i]
  return x.length - y.length
}

// ---- directories

export function encodeDir (entries) {
  if (entries.size > MAX_FLAT_ENTRIES) throw new Error(`a directory of ${entries.size} entries is a HAMT shard in kuro.fs; this host writes flat directories only`)
  const body = Object.fromEntries([...entries].map(([name, e]) => [name, { cid: CID.parse(e.cid), size: e.size }]))
  return dagCbor.encode({ entries: body, type: DIR_TYPE, version: 1 })
}

function decodeDir (bytes) {
  const value = dagCbor.decode(bytes)
  const keys = value && typeof value === 'object' ? Object.keys(value).sort() : []
  if (keys.join(',') !== 'entries,type,version' || value.type !== DIR_TYPE || value.version !== 1) {
    throw new Refusal('block-missing')
  }
  const out = new Map()
  for (const [name, item] of Object.entries(value.entries)) {
    const itemKeys = item && typeof item === 'object' ? Object.keys(item).sort().join(',') : ''
    if (!storedNameOk(name) || itemKeys !== 'cid,size') throw new Refusal('block-missing')
    const cid = CID.asCID(item.cid)
    if (!cid || !Number.isInteger(item.size) || item.size < 0) throw new Refusal('block-missing')
    out.set(name, { cid: cid.toString(), size: item.size })
  }
  return out
}

const isDir = entry => codecOf(entry.cid) === DAG_CBOR

// ---- UnixFS files

export function writeFile (store, data) {
  let level = []
  for (let off = 0; off < data.length || (off === 0 && level.length === 0); off += CHUNK) {
    const chunk = data.subarray(off, off + CHUNK)
    level.push({ cid: store.put(chunk, RAW), size: chunk.length, tsize: chunk.length })
  }
  while (level.length > 1) {
    const next = []
    for (let i = 0; i < level.length; i += WIDTH) {
      const group = level.slice(i, i + WIDTH)
      const unixfs = new UnixFS({ type: 'file', blockSizes: group.map(g => BigInt(g.size)) })
      const links = group.map(g => ({ Hash: CID.parse(g.cid), Name: '', Tsize: g.tsize }))
      const bytes = dagPB.encode(dagPB.prepare({ Data: unixfs.marshal(), Links: links }))
      const size = group.reduce((n, g) => n + g.size, 0)
      next.push({ cid: store.put(bytes, DAG_PB), size, tsize: group.reduce((n, g) => n + g.tsize, bytes.length) })
    }
    level = next
  }
  return { cid: level[0].cid, size: level[0].size }
}

function block (store, cid) {
  const bytes = store.get(cid)
  if (bytes === null) throw new Refusal('block-missing')
  return bytes
}

function fileNode (store, cid) {
  const codec = codecOf(cid)
  if (codec === RAW) return { raw: block(store, cid) }
  if (codec !== DAG_PB) throw new Refusal('not-a-file')
  let node, unixfs
  try {
    node = dagPB.decode(block(store, cid))
    unixfs = UnixFS.unmarshal(node.Data)
  } catch (err) {
    if (err instanceof Refusal) throw err
    throw new Refusal('block-missing')
  }
  if (unixfs.type !== 'file' && unixfs.type !== 'raw') throw new Refusal('not-a-file')
  return { node, unixfs }
}

function fileSize (store, cid) {
  const n = fileNode(store, cid)
  return n.raw ? n.raw.length : Number(n.unixfs.fileSize())
}

// Bytes [lo, hi) of the file DAG at cid.
function fileBytes (store, cid, lo, hi) {
  const out = []
  const walk = (c, start) => { // start: the file offset at which this node begins
    const n = fileNode(store, c)
    if (n.raw) { out.push(n.raw.subarray(Math.max(0, lo - start), Math.max(0, hi - start))); return start + n.raw.length }
    let at = start
    if (n.unixfs.data && n.unixfs.data.length) {
      out.push(n.unixfs.data.subarray(Math.max(0, lo - at), Math.max(0, hi - at)))
      at += n.unixfs.data.length
    }
    n.node.Links.forEach((link, i) => {
      const size = Number(n.unixfs.blockSizes[i])
      if (at + size > lo && at < hi) walk(link.Hash.toString(), at)
      at += size
    })
    return at
  }
  walk(cid, 0)
  return Buffer.concat(out)
}

// The whole file at cid (a raw block or a UnixFS file DAG); throws if a block is missing or malformed.
export function readFile (store, cid) {
  return fileBytes(store, cid, 0, fileSize(store, cid))
}

// ---- the filesystem value: new Fs(store, root); ops return {value, fs?} or {reason}

export class Fs {
  constructor (store, root) { this.store = store; this.root = root }

  static empty (store) { return new Fs(store, store.put(encodeDir(new Map()), DAG_CBOR)) }

  _load (cid) {
    try { return decodeDir(block(this.store, cid)) } catch (err) {
      throw err instanceof Refusal ? err : new Refusal('block-missing')
    }
  }

  // The chain of directories from the root down to parts (null past a missing one); a file on the way: blocked.
  _chain (parts, blocked) {
    const chain = [this._load(this.root)]
    for (const name of parts) {
      const entry = chain[chain.length - 1]?.get(name)
      if (entry === undefined) { chain.push(null); continue }
      if (!isDir(entry)) throw new Refusal(blocked)
      chain.push(chain[chain.length - 1] === null ? null : this._load(entry.cid))
    }
    return chain
  }

  // The entry at parts (kuro_fs.fs._existing): not-found, or not-a-directory for a file named with a trailing '/'.
  _entry (parts, wantsDir = false) {
    let entry = { cid: this.root, size: 0 }
    if (parts.length) {
      const parent = this._chain(parts.slice(0, -1), 'not-a-directory').pop()
      entry = parent?.get(parts[parts.length - 1])
    }
    if (entry === undefined) throw new Refusal('not-found')
    if (wantsDir && !isDir(entry)) throw new Refusal('not-a-directory')
    return entry
  }

  // Put (or delete, for null) the entry at parts, creating missing parents; the new Fs.
  _set (parts, entry) {
    const chain = this._chain(parts.slice(0, -1), 'path-blocked').map(d => new Map(d ?? []))
    if (entry === null) chain[chain.length - 1].delete(parts[parts.length - 1])
    else chain[chain.length - 1].set(parts[parts.length - 1], entry)
    let cid
    for (let depth = chain.length - 1; depth >= 0; depth--) {
      cid = this.store.put(encodeDir(chain[depth]), DAG_CBOR)
      if (depth > 0) chain[depth - 1].set(parts[depth - 1], { cid, size: 0 })
    }
    return new Fs(this.store, cid)
  }

  _op (path, body) {
    const parts = cleanPath(path)
    try {
      if (parts === null) throw new Refusal('bad-path')
      return body(parts, namesADirectory(path))
    } catch (err) {
      if (err instanceof Refusal) return { reason: err.reason }
      throw err
    }
  }

  _file (parts, wantsDir) {
    const entry = this._entry(parts, wantsDir)
    if (isDir(entry)) throw new Refusal('not-a-file')
    if (fileSize(this.store, entry.cid) !== entry.size) throw new Refusal('block-missing')
    return entry
  }

  // Up to cap bytes from the start, the file's size and CID (the host's fs_read).
  readInto (path, cap) {
    return this._op(path, (parts, wantsDir) => {
      const entry = this._file(parts, wantsDir)
      return { value: { data: fileBytes(this.store, entry.cid, 0, Math.min(entry.size, cap)), size: entry.size, cid: entry.cid } }
    })
  }

  readAt (path, offset, cap) {
    return this._op(path, (parts, wantsDir) => {
      const entry = this._file(parts, wantsDir)
      const lo = Math.min(offset, entry.size)
      return { value: { data: fileBytes(this.store, entry.cid, lo, Math.min(entry.size, lo + cap)), cid: entry.cid } }
    })
  }

  ls (path) {
    return this._op(path, parts => {
      const entry = this._entry(parts)
      if (!isDir(entry)) throw new Refusal('not-a-directory')
      const listing = parts.length ? this._load(entry.cid) : this._load(this.root)
      const names = [...listing.keys()].sort(cmpCodePoints)
      return { value: names.map(n => isDir(listing.get(n)) ? `${n}/\n` : `${n}\n`).join('') }
    })
  }

  write (path, data) {
    return this._op(path, (parts, wantsDir) => {
      if (!parts.length) throw new Refusal('is-a-directory')
      const parent = this._chain(parts.slice(0, -1), 'path-blocked').pop()
      const old = parent?.get(parts[parts.length - 1])
      if (old !== undefined && isDir(old)) throw new Refusal('is-a-directory')
      if (wantsDir) throw new Refusal('not-a-directory')
      const file = writeFile(this.store, data)
      return { value: 0, fs: this._set(parts, { cid: file.cid, size: file.size }) }
    })
  }

  rm (path) {
    return this._op(path, (parts, wantsDir) => {
      if (!parts.length) throw new Refusal('not-found')
      const entry = this._entry(parts, wantsDir)
      if (isDir(entry) && this._load(entry.cid).size > 0) throw new Refusal('directory-not-empty')
      return { value: 0, fs: this._set(parts, null) }
    })
  }
}

// The sync writer against the JS IPFS importer, at the sizes where the layout changes. {ok, mismatches}
export async function selfTest () {
  const { importer } = await import('ipfs-unixfs-importer')
  const { fixedSize } = await import('ipfs-unixfs-importer/chunker')
  const { balanced } = await import('ipfs-unixfs-importer/layout')
  const { MemoryBlockstore } = await import('blockstore-core/memory')
  const sizes = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7, WIDTH * CHUNK + 1]
  const mismatches = []
  for (const size of sizes) {
    const data = new Uint8Array(size).map((_, i) => (i * 2654435761) >>> 24)
    const ours = writeFile(new BlockStore(), data).cid
    const opts = { cidVersion: 1, rawLeaves: true, reduceSingleLeafToSelf: true, chunker: fixedSize({ chunkSize: CHUNK }), layout: balanced({ maxChildrenPerNode: WIDTH }) }
    let theirs
    for await (const entry of importer([{ content: data }], new MemoryBlockstore(), opts)) theirs = entry.cid.toString()
    if (ours !== theirs) mismatches.push({ size, ours, theirs })
  }
  return { ok: mismatches.length === 0, sizes, mismatches }
}
