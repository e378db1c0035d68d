// kuro.fs for the V8 host: blocks by CID, dag-cbor directories, UnixFS files — synchronously.
//
// The one decision: a guest's fs import is a synchronous call out of wasm, so every kuro.fs operation here
// is synchronous: blocks live in a Map (filled from a CAR before the run), directories are the kuro.fs
// dag-cbor blocks of kuro_fs/fsdir.py, encoded and decoded with @ipld/dag-cbor (canonical: the same bytes,
// hence the same root CIDs, as kuro_fs.dagcbor), files are UnixFS DAGs (raw leaves, 262144-byte chunks,
// balanced, 174 links) built with @ipld/dag-pb and ipfs-unixfs. The JS importer (ipfs-unixfs-importer)
// is asynchronous and cannot run inside an import call, so writeFile builds the same DAG itself;
// selfTest() compares it with the importer at the boundary sizes.
//
// Directories are kuro_fs/fsdir.py's, both layouts, with its rules for when each is used: a directory of at
// most Layout.maxFlat (256) entries is one flat block
//   {"entries": {name: {"cid": Link, "size": int}}, "type": "kuro.fs/dir", "version": 1},
// a larger one an IPLD HashMap (./hamt.mjs: sha2-256, bitWidth 8, buckets of 3) whose root is held inline
//   {"shard": {"bucketSize": 3, "hamt": [map, data], "hashAlg": 18}, "type": "kuro.fs/dir", "version": 1}.
// An edit re-lays a directory out as kuro_fs.fsdir.WorkDir.set does: flat → sharded past maxFlat entries,
// sharded → flat at maxFlat or fewer, a HashMap of other parameters (or a large flat block of an older root)
// rebuilt in the layout on its first edit; untouched HashMap nodes keep their blocks. Blocks are checked as
// strictly as kuro_fs reads them (canonical bytes, every key in the slot its hash leads to, bucket sizes,
// depth); one that fails, or is absent, is "block-missing". tests/parity/test_v8_hamt_parity.py replays
// random edits here and in kuro_fs.Fs (through tools/v8_fs_ops.mjs) and requires the same roots.

// Every operation returns {value} or {reason} with kuro_fs's denial reasons, in kuro_fs's check order
// (bad-path first, then the op's own), so a guest sees the same error codes on both hosts.

import { createHash } from 'node:crypto'
import * as dagCbor from '@ipld/dag-cbor'
import * as dagPB from '@ipld/dag-pb'
import { UnixFS } from 'ipfs-unixfs'
import { CID } from 'multiformats/cid'
import * as Digest from 'multiformats/hashes/digest'
import { HASH_ALG, Hamt, Malformed, Node, Shape, encodeNode, nodeFromData, parseCid, rootData } from './hamt.mjs'
export { Malformed }

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

// A denial with kuro_fs's reason; Malformed (./hamt.mjs) is a block that is no directory or node (block-missing).
export class Refusal extends Error { constructor (reason) { super(reason); this.reason = reason } }

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

// ---- directories (kuro_fs/fsdir.py): flat up to layout.maxFlat entries, an IPLD HashMap past it

// When a directory is sharded and the HashMap shape it then takes (kuro_fs.fsdir.DirLayout): part of the
// format, like a file's chunk size. The host uses the default; tests use small ones to cross it cheaply.
export class Layout {
  constructor (maxFlat = MAX_FLAT_ENTRIES, shape = new Shape()) {
    if (!Number.isInteger(maxFlat) || maxFlat < 0) throw new Error(`maxFlat must be an int >= 0, got ${maxFlat}`)
    this.maxFlat = maxFlat
    this.shape = shape
  }
}
export const DEFAULT_LAYOUT = new Layout()

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
const plainMap = v => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array) && !CID.asCID(v)
const keysOf = v => Object.keys(v).sort().join(',')

// The multihashes kuro_fs reads (kuro_fs.cid.HASHES: code -> digest length, null = identity up to 128 bytes).
const READ_HASHES = new Map([[0x00, null], [0x12, 32], [0x13, 64], [0x1e, 32]])

// Is cid (a CID object) one kuro_fs reads (kuro_fs.cid's reading profile)? kuro_fs's dag-cbor decoder refuses
// a block holding any other link; @ipld/dag-cbor takes every CID, so a directory's links are checked here.
export function readable (cid) {
  if (cid.version === 0) return true // a CIDv0 is dag-pb sha2-256 by construction
  if (cid.version !== 1 || ![RAW, DAG_PB, DAG_CBOR].includes(cid.code) || !READ_HASHES.has(cid.multihash.code)) return false
  const size = READ_HASHES.get(cid.multihash.code)
  return size === null ? cid.multihash.digest.length <= 128 : cid.multihash.digest.length === size
}

// A directory entry from its decoded {cid, size} map (kuro_fs.fsdir._entry_from).
function entryFrom (item) {
  if (!plainMap(item) || keysOf(item) !== 'cid,size') throw new Malformed('an entry has keys cid, size')
  const cid = CID.asCID(item.cid)
  if (!cid || !readable(cid) || !Number.isInteger(item.size) || item.size < 0) throw new Malformed('an entry cid is a link and its size a non-negative int')
  if (cid.code === DAG_CBOR && item.size !== 0) throw new Malformed('a directory has size 0')
  return { cid: cid.toString(), size: item.size }
}

// How a kuro.fs HashMap's keys (UTF-8 names) and values (entry maps) are checked and encoded (ENTRY_VALUES).
const ENTRY_VALUES = {
  encode: entry => ({ cid: parseCid(entry.cid), size: entry.size }),
  decode: entryFrom,
  keyOk: key => { try { return storedNameOk(strictUtf8.decode(key)) } catch { return false } },
  equal: (a, b) => a.cid === b.cid && a.size === b.size
}

// The flat dag-cbor block of a directory holding entries (a Map name -> {cid, size}), of any number.
export function encodeDir (entries) {
  const body = Object.fromEntries([...entries].map(([name, e]) => [name, ENTRY_VALUES.encode(e)]))
  return dagCbor.encode({ entries: body, type: DIR_TYPE, version: 1 })
}

const encodeSharded = (root, shape) => dagCbor.encode({ shard: rootData(root, shape, ENTRY_VALUES), type: DIR_TYPE, version: 1 })
const sameBytes = (a, b) => Buffer.from(a).equals(Buffer.from(b))
const noChildren = () => { throw new Error('checking a node reads no child') }

// The decoded directory block: {flat: Map} or {root: Node, shape} (kuro_fs.fsdir.decode_dir_block, as strict).
function decodeDirBlock (bytes) {
  let value
  try { value = dagCbor.decode(bytes) } catch (err) { throw new Malformed(`not dag-cbor: ${err.message}`) }
  if (!plainMap(value) || value.type !== DIR_TYPE || value.version !== 1) throw new Malformed('not a kuro.fs directory v1')
  if (keysOf(value) === 'entries,type,version' && plainMap(value.entries)) {
    const flat = new Map()
    for (const [name, item] of Object.entries(value.entries)) {
      if (!storedNameOk(name)) throw new Malformed('a bad entry name')
      flat.set(name, entryFrom(item))
    }
    if (!sameBytes(dagCbor.encode(value), bytes)) throw new Malformed('a directory not in canonical form')
    return { flat }
  }
  if (keysOf(value) !== 'shard,type,version') throw new Malformed('expected keys entries (or shard), type, version')
  const shard = value.shard
  if (!plainMap(shard) || keysOf(shard) !== 'bucketSize,hamt,hashAlg') throw new Malformed('a shard is a HashMapRoot')
  if (shard.hashAlg !== HASH_ALG) throw new Malformed('a shard hashes its keys with sha2-256')
  const root = nodeFromData(shard.hamt, ENTRY_VALUES)
  const shape = new Shape(root.width, shard.bucketSize)
  new Hamt(shape, ENTRY_VALUES, noChildren).check(root, 0, [])
  if (!sameBytes(encodeSharded(root, shape), bytes)) throw new Malformed('a shard that does not re-encode to its own bytes')
  return { root, shape }
}

// The directories of one store under one layout: blocks decoded once (hash-verified, cached by CID).
class Tree {
  constructor (store, layout) {
    this.store = store
    this.layout = layout
    this.hamts = new Map()
    store.decoded ??= new Map()
  }

  _cached (cid, decode) {
    const cache = this.store.decoded
    let value = cache.get(cid)
    if (value === undefined) {
      value = decode(block(this.store, cid))
      if (cache.size >= 65536) cache.clear()
      cache.set(cid, value)
    }
    return value
  }

  remember (cid, decoded) {
    if (!this.store.decoded.has(cid)) this.store.decoded.set(cid, decoded)
    return cid
  }

  load (cid) {
    const value = this._cached(cid, decodeDirBlock)
    if (!value.flat && !value.shape) throw new Malformed('a HashMap node where a directory was expected')
    return new Dir(this, value.flat ?? null, value.root ?? null, value.shape ?? this.layout.shape)
  }

  empty () { return new Dir(this, new Map(), null, this.layout.shape) }

  hamt (shape) {
    const key = `${shape.bitWidth}/${shape.bucketSize}`
    let hamt = this.hamts.get(key)
    if (hamt === undefined) {
      const load = (cid, depth, path) => {
        const node = this._cached(cid, bytes => {
          let node
          try { node = nodeFromData(dagCbor.decode(bytes), ENTRY_VALUES) } catch (err) {
            throw err instanceof Malformed ? err : new Malformed(`not dag-cbor: ${err.message}`)
          }
          if (node.width !== shape.bitWidth || !sameBytes(encodeNode(node, shape, ENTRY_VALUES), bytes)) {
            throw new Malformed('a HashMap node of another width, or not in canonical form')
          }
          return node
        })
        if (!(node instanceof Node)) throw new Malformed('a directory where a HashMap node was expected')
        hamt.check(node, depth, path)
        return node
      }
      hamt = new Hamt(shape, ENTRY_VALUES, load)
      this.hamts.set(key, hamt)
    }
    return hamt
  }
}

// One directory, persistent: a flat Map, or a HashMap root node of some shape (kuro_fs.fsdir.WorkDir).
class Dir {
  constructor (tree, flat, root, shape) {
    this.tree = tree
    this.flat = flat
    this.root = root
    this.shape = shape
  }

  get hamt () { return this.tree.hamt(this.shape) }

  get (name) { return this.flat ? this.flat.get(name) : this.hamt.get(this.root, utf8.encode(name)) }

  // Every [name, entry], in no particular order.
  items () {
    if (this.flat) return [...this.flat]
    return [...this.hamt.items(this.root)].map(([key, entry]) => [strictUtf8.decode(key), entry])
  }

  isEmpty () { return this.flat ? this.flat.size === 0 : this.hamt.countUpto(this.root, 1) === 0 }

  // This directory with name bound to entry (removed, for null); the layout follows the entry count.
  with (name, entry) {
    const layout = this.tree.layout
    let dir = this
    if (dir.root && !dir.shape.equals(layout.shape)) dir = dir._relayout(dir.items()) // a map of other parameters
    if (dir.flat) {
      const flat = new Map(dir.flat)
      if (entry === null) flat.delete(name); else flat.set(name, entry)
      return flat.size > layout.maxFlat ? dir._relayout([...flat]) : new Dir(this.tree, flat, null, layout.shape)
    }
    const key = utf8.encode(name)
    const root = entry === null ? dir.hamt.delete(dir.root, key) : dir.hamt.set(dir.root, key, entry)
    const out = new Dir(this.tree, null, root, dir.shape)
    if (out._mayBeSmall() && out.hamt.countUpto(root, layout.maxFlat + 1) <= layout.maxFlat) return out._relayout(out.items())
    return out
  }

  // The canonical layout for items under the tree's layout: flat up to maxFlat, else sharded.
  _relayout (items) {
    const layout = this.tree.layout
    if (items.length <= layout.maxFlat) return new Dir(this.tree, new Map(items), null, layout.shape)
    const root = this.tree.hamt(layout.shape).build(items.map(([name, entry]) => [utf8.encode(name), entry]))
    return new Dir(this.tree, null, root, layout.shape)
  }

  // A lower bound on the count from the root alone: every child holds more than bucketSize entries.
  _mayBeSmall () {
    let bound = 0
    for (const elem of this.root.elems) {
      bound += Array.isArray(elem) ? elem.length : this.shape.bucketSize + 1
      if (bound > this.tree.layout.maxFlat) return false
    }
    return true
  }

  // Store this directory (its HashMap nodes first); its CID.
  store () {
    const { layout, store } = this.tree
    let dir = this
    if (dir.flat && dir.flat.size > layout.maxFlat) dir = dir._relayout([...dir.flat]) // a large flat block of an older root
    else if (dir.root && !dir.shape.equals(layout.shape)) dir = dir._relayout(dir.items())
    // What is stored is cached as its decoding (as kuro_fs's commit does): the next op reads it without decoding.
    if (dir.flat) return this.tree.remember(store.put(encodeDir(dir.flat), DAG_CBOR), { flat: dir.flat })
    const { root, blocks } = dir.hamt.flush(dir.root, bytes => store.put(bytes, DAG_CBOR))
    for (const [cid, , node] of blocks) this.tree.remember(cid, node)
    return this.tree.remember(store.put(encodeSharded(root, dir.shape), DAG_CBOR), { root, shape: dir.shape })
  }
}

// kuro_fs.fsdir.Entry.kind: a directory is a dag-cbor sha2-256 CIDv1 (another dag-cbor link is no directory kuro writes).
const isDir = entry => entry.cid.startsWith('bafyrei')

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
  constructor (store, root, layout = DEFAULT_LAYOUT) { this.store = store; this.root = root; this.layout = layout; this.tree = new Tree(store, layout) }

  static empty (store, layout = DEFAULT_LAYOUT) { return new Fs(store, store.put(encodeDir(new Map()), DAG_CBOR), layout) }

  // The directory cid: get(name), items(), isEmpty() (each may throw Refusal or Malformed as blocks are read).
  dir (cid) { return this.tree.load(cid) }

  _load (cid) { return this.tree.load(cid) }

  // The chain of directories from the root down to parts (null past a missing one); a file on the way: blocked.
  _chain (parts, blocked) {
    const chain = [this._load(this.root)]
    for (const name of parts) {
      const entry = chain[chain.length - 1]?.get(name)
      if (entry === undefined) { chain.push(null); continue }
      if (!isDir(entry)) throw new Refusal(blocked)
      chain.push(this._load(entry.cid))
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
    const chain = this._chain(parts.slice(0, -1), 'path-blocked').map(d => d ?? this.tree.empty())
    let dir = chain[chain.length - 1].with(parts[parts.length - 1], entry)
    let cid
    for (let depth = chain.length - 1; depth >= 0; depth--) {
      cid = dir.store()
      if (depth > 0) dir = chain[depth - 1].with(parts[depth - 1], { cid, size: 0 })
    }
    return new Fs(this.store, cid, this.layout)
  }

  _op (path, body) {
    const parts = cleanPath(path)
    try {
      if (parts === null) throw new Refusal('bad-path')
      return body(parts, namesADirectory(path))
    } catch (err) {
      if (err instanceof Refusal) return { reason: err.reason }
      if (err instanceof Malformed) return { reason: 'block-missing' } // a block that is no directory or node
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

  // The directory's entries sorted by name (code points): [{name, kind, size, cid}] (kuro_fs.fs.Fs.ls).
  entries (path) {
    return this._op(path, parts => {
      const entry = this._entry(parts)
      if (!isDir(entry)) throw new Refusal('not-a-directory')
      const items = this._load(entry.cid).items().sort(([a], [b]) => cmpCodePoints(a, b))
      return { value: items.map(([name, e]) => ({ name, kind: isDir(e) ? 'dir' : 'file', size: e.size, cid: e.cid })) }
    })
  }

  // The listing text of the ABI's fs_ls: "name\n", a directory "name/\n" (kuro_wasm/host/fsgate.py _ls). A name
  // holding a control character (an older tree's) is left out: no path reaches it, and its newline would forge a line.
  ls (path) {
    const got = this.entries(path)
    if (got.reason) return got
    return { value: got.value.filter(e => !CONTROL.test(e.name)).map(e => e.kind === 'dir' ? `${e.name}/\n` : `${e.name}\n`).join('') }
  }

  // {kind, size, cid} of the entry at path (the root is a dir; kuro_fs.fs.Fs.stat).
  stat (path) {
    return this._op(path, (parts, wantsDir) => {
      const entry = this._entry(parts, wantsDir)
      return { value: { kind: isDir(entry) ? 'dir' : 'file', size: entry.size, cid: entry.cid } }
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
      if (isDir(entry) && !this._load(entry.cid).isEmpty()) throw new Refusal('directory-not-empty')
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
