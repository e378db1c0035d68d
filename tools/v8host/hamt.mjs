// The IPLD HashMap (HAMT over dag-cbor) of a sharded kuro.fs directory, for the V8 host — synchronously.
//
// The one decision: this is a line-by-line port of kuro_fs/hamt.py (sha2-256 keys, the CHAMP rules:
// buckets sorted by key, an overflowing bucket becomes a child node, a non-root node left with at most
// bucketSize entries and no children collapses back into a bucket; persistent edits; every node checked
// where it is used), not a use of the `iamap` package: a guest's fs import is a synchronous call out of
// wasm and iamap is asynchronous throughout, and the V8 host must mint the very blocks kuro_fs mints,
// including on input kuro_fs accepts but would not write itself. tests/parity/test_v8_hamt_parity.py
// replays random directory edits here and in kuro_fs and requires the same root CIDs (kuro_fs.hamt is in
// turn checked against iamap by tests/parity/test_hamt_parity.py).
//
// A node is {slots, elems, width, placed}: the used slot numbers in ascending order and their elements —
// a CID string (a stored child), a Node (a child not stored yet) or a bucket (an array of [key bytes,
// value] pairs) —, the bit width its stored map showed (0 for a node built here), and the (depth, path)
// positions it was checked at. Values are kuro.fs entries {cid, size}, checked and encoded by the
// `values` object the caller passes ({encode, decode, keyOk, equal}).

import { createHash } from 'node:crypto'
import * as dagCbor from '@ipld/dag-cbor'
import { CID } from 'multiformats/cid'

export const HASH_ALG = 0x12
export const BIT_WIDTH = 8
export const BUCKET_SIZE = 3
const HASH_BITS = 256

// A block or node that is not a well-formed HashMap node where it is used (kuro_fs's DagCborError).
export class Malformed extends Error {}

export class Shape {
  constructor (bitWidth = BIT_WIDTH, bucketSize = BUCKET_SIZE) {
    if (!Number.isInteger(bitWidth) || bitWidth < 3 || bitWidth > 8) throw new Malformed(`bit_width must be an int in 3..8, got ${bitWidth}`)
    if (!Number.isInteger(bucketSize) || bucketSize < 1 || bucketSize > 64) throw new Malformed(`bucket_size must be an int in 1..64, got ${bucketSize}`)
    this.bitWidth = bitWidth
    this.bucketSize = bucketSize
  }

  get mapBytes () { return (1 << this.bitWidth) / 8 }
  get maxDepth () { return Math.floor(HASH_BITS / this.bitWidth) }
  equals (other) { return this.bitWidth === other.bitWidth && this.bucketSize === other.bucketSize }
}

export class Node {
  constructor (slots, elems, width = 0) {
    this.slots = slots
    this.elems = elems
    this.width = width
    this.placed = new Set()
  }

  get pending () { return this.elems.some(e => e instanceof Node) }
}

export const emptyNode = () => new Node([], [])
const isBucket = elem => Array.isArray(elem)

// CID strings parsed once: a node is re-encoded after every edit below it, with all of its links.
const parsed = new Map()
export function parseCid (cid) {
  let found = parsed.get(cid)
  if (found === undefined) {
    if (parsed.size >= 65536) parsed.clear()
    found = CID.parse(cid)
    parsed.set(cid, found)
  }
  return found
}

export function keyHash (key) { return createHash('sha256').update(key).digest() }

export function compareBytes (a, b) { return Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) }
const sameBytes = (a, b) => compareBytes(a, b) === 0
const sortPairs = pairs => pairs.sort((x, y) => compareBytes(x[0], y[0]))

// The w bits of the hash at depth (most significant first), as kuro_fs.hamt.Hamt._index.
function indexAt (h, depth, w) {
  let v = 0
  for (let bit = depth * w; bit < (depth + 1) * w; bit++) v = (v << 1) | ((h[bit >> 3] >> (7 - (bit & 7))) & 1)
  return v
}

// The position of slot in node.slots, and whether it is used.
function find (node, slot) {
  let lo = 0; let hi = node.slots.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (node.slots[mid] < slot) lo = mid + 1; else hi = mid
  }
  return { pos: lo, used: node.slots[lo] === slot }
}

const spliced = (list, pos, remove, ...add) => { const out = list.slice(); out.splice(pos, remove, ...add); return out }
const withElem = (node, pos, elem) => new Node(node.slots, spliced(node.elems, pos, 1, elem))
const withoutElem = (node, pos) => new Node(spliced(node.slots, pos, 1), spliced(node.elems, pos, 1))

// ---- canonical bytes

function mapOf (node, shape) {
  const bytes = new Uint8Array(shape.mapBytes)
  for (const slot of node.slots) bytes[slot >> 3] |= 1 << (slot & 7)
  return bytes
}

// The dag-cbor data model value of node ([map, data]); every child must be stored.
export function nodeData (node, shape, values) {
  const data = node.elems.map(elem => {
    if (elem instanceof Node) throw new Error('a node with children not yet stored has no encoding: flush it first')
    if (typeof elem === 'string') return parseCid(elem)
    return elem.map(([key, value]) => [key, values.encode(value)])
  })
  return [mapOf(node, shape), data]
}

export const encodeNode = (node, shape, values) => dagCbor.encode(nodeData(node, shape, values))

// The spec's HashMapRoot whose hamt is node, as a data model value.
export const rootData = (node, shape, values) => ({ hamt: nodeData(node, shape, values), hashAlg: HASH_ALG, bucketSize: shape.bucketSize })

// The Node a decoded [map, data] item describes (kuro_fs.hamt.node_from_data: what the node alone shows).
export function nodeFromData (item, values) {
  if (!Array.isArray(item) || item.length !== 2) throw new Malformed('a HAMT node is [map, data]')
  const [bits, data] = item
  if (!(bits instanceof Uint8Array) || ![1, 2, 4, 8, 16, 32].includes(bits.length) || !Array.isArray(data)) {
    throw new Malformed("a HAMT node's map is 1–32 bytes (a power of two) and its data a list")
  }
  const slots = []
  for (let i = 0; i < bits.length * 8; i++) if (bits[i >> 3] & (1 << (i & 7))) slots.push(i)
  if (slots.length !== data.length) throw new Malformed(`a HAMT node's map sets ${slots.length} bits for ${data.length} elements`)
  const elems = data.map(element => {
    const link = CID.asCID(element)
    if (link) {
      if (link.version !== 1 || link.code !== 0x71 || link.multihash.code !== 0x12 || link.multihash.digest.length !== 32) {
        throw new Malformed(`a HAMT child link must name a dag-cbor node, got ${link}`)
      }
      return link.toString()
    }
    if (!Array.isArray(element) || !element.length) throw new Malformed('a HAMT element is a link or a non-empty bucket')
    const pairs = []
    for (const pair of element) {
      if (!Array.isArray(pair) || pair.length !== 2 || !(pair[0] instanceof Uint8Array)) throw new Malformed('a HAMT bucket entry is [key bytes, value]')
      if (pairs.length && compareBytes(pairs[pairs.length - 1][0], pair[0]) >= 0) throw new Malformed("a HAMT bucket's keys must be unique and sorted")
      if (!values.keyOk(pair[0])) throw new Malformed('a HAMT key that is not allowed here')
      pairs.push([pair[0], values.decode(pair[1])])
    }
    return pairs
  })
  return new Node(slots, elems, Math.log2(bits.length * 8))
}

// ---- the map

// Operations on one HashMap: shape, values, and load(cid, depth, path) -> its node (checked by the caller
// through check()). Every method is pure over nodes: nothing is stored.
export class Hamt {
  constructor (shape, values, load) {
    this.shape = shape
    this.values = values
    this.load = load
    this.w = shape.bitWidth
  }

  // Refuse node at depth under the slot path unless every key there hashes to its slot (kuro_fs.hamt.Hamt.check).
  check (node, depth, path) {
    const where = path.join('.')
    if (node.placed.has(where)) return
    const w = this.w
    if (node.width !== 0 && node.width !== w) throw new Malformed(`a HAMT node of bitWidth ${node.width} in a map of bitWidth ${w}`)
    if (depth >= this.shape.maxDepth) throw new Malformed(`a HAMT node at depth ${depth}, deeper than the hash allows`)
    if (depth && !node.elems.length) throw new Malformed('an empty HAMT node below the root')
    node.elems.forEach((elem, i) => {
      if (!isBucket(elem)) return
      if (elem.length > this.shape.bucketSize) throw new Malformed(`a HAMT bucket of ${elem.length} entries (bucketSize ${this.shape.bucketSize})`)
      for (const [key] of elem) {
        const h = keyHash(key)
        for (let d = 0; d <= depth; d++) {
          if (indexAt(h, d, w) !== (d < depth ? path[d] : node.slots[i])) throw new Malformed('a HAMT key in a slot its hash does not lead to')
        }
      }
    })
    node.placed.add(where)
  }

  _child (elem, depth, path) { return elem instanceof Node ? elem : this.load(elem, depth, path) }

  // The value stored under key, or undefined.
  get (root, key) {
    const h = keyHash(key)
    let node = root; const path = []
    for (let depth = 0; ; depth++) {
      const slot = indexAt(h, depth, this.w)
      const { pos, used } = find(node, slot)
      if (!used) return undefined
      const elem = node.elems[pos]
      if (isBucket(elem)) return elem.find(([k]) => sameBytes(k, key))?.[1]
      path.push(slot)
      node = this._child(elem, depth + 1, path.slice())
    }
  }

  // Every [key, value] (each node checked on the way).
  * items (root) {
    const stack = [[root, []]]
    while (stack.length) {
      const [node, path] = stack.pop()
      for (let i = 0; i < node.elems.length; i++) {
        const elem = node.elems[i]
        if (isBucket(elem)) yield * elem
        else {
          const where = [...path, node.slots[i]]
          stack.push([this._child(elem, where.length, where), where])
        }
      }
    }
  }

  countUpto (root, limit) {
    let n = 0
    for (const _ of this.items(root)) if (++n >= limit) break // eslint-disable-line no-unused-vars
    return n
  }

  set (root, key, value) { return this._set(root, key, keyHash(key), value, 0, []) }

  _set (node, key, h, value, depth, path) {
    if (depth >= this.shape.maxDepth) throw new Error('HAMT keys collide in every bit of their hash')
    const slot = indexAt(h, depth, this.w)
    const { pos, used } = find(node, slot)
    if (!used) return new Node(spliced(node.slots, pos, 0, slot), spliced(node.elems, pos, 0, [[key, value]]))
    const elem = node.elems[pos]
    const where = [...path, slot]
    if (isBucket(elem)) {
      const j = elem.findIndex(([k]) => sameBytes(k, key))
      if (j >= 0) return this.values.equal(elem[j][1], value) ? node : withElem(node, pos, spliced(elem, j, 1, [key, value]))
      if (elem.length < this.shape.bucketSize) return withElem(node, pos, sortPairs([...elem, [key, value]]))
      let child = emptyNode()
      for (const [k, v] of [...elem, [key, value]]) child = this._set(child, k, keyHash(k), v, depth + 1, where)
      return withElem(node, pos, child)
    }
    const below = this._child(elem, depth + 1, where)
    const changed = this._set(below, key, h, value, depth + 1, where)
    return changed === below ? node : withElem(node, pos, changed)
  }

  delete (root, key) { return this._delete(root, key, keyHash(key), 0, []) }

  _delete (node, key, h, depth, path) {
    const slot = indexAt(h, depth, this.w)
    const { pos, used } = find(node, slot)
    if (!used) return node
    const elem = node.elems[pos]
    if (isBucket(elem)) {
      const rest = elem.filter(([k]) => !sameBytes(k, key))
      if (rest.length === elem.length) return node
      return rest.length ? withElem(node, pos, rest) : withoutElem(node, pos)
    }
    const where = [...path, slot]
    const below = this._child(elem, depth + 1, where)
    const changed = this._delete(below, key, h, depth + 1, where)
    if (changed === below) return node
    const pairs = this._collapsible(changed)
    if (pairs === null) return withElem(node, pos, changed)
    if (!pairs.length) return withoutElem(node, pos)
    return withElem(node, pos, sortPairs(pairs))
  }

  // A node with no children and at most bucketSize entries goes back into its parent as a bucket.
  _collapsible (node) {
    const out = []
    for (const elem of node.elems) {
      if (!isBucket(elem)) return null
      out.push(...elem)
      if (out.length > this.shape.bucketSize) return null
    }
    return out
  }

  // A new map holding pairs (keys unique), laid out in one pass as inserting them one by one would.
  build (pairs) {
    const hashed = pairs.map(([key, value]) => [keyHash(key), key, value])
    hashed.sort((a, b) => compareBytes(a[0], b[0]) || compareBytes(a[1], b[1]))
    for (let i = 1; i < hashed.length; i++) if (sameBytes(hashed[i - 1][1], hashed[i][1])) throw new Error('duplicate key')
    return this._build(hashed, 0)
  }

  _build (hashed, depth) {
    if (depth >= this.shape.maxDepth) throw new Error('HAMT keys collide in every bit of their hash')
    const slots = []; const elems = []
    for (let i = 0; i < hashed.length;) {
      const slot = indexAt(hashed[i][0], depth, this.w)
      let j = i
      while (j < hashed.length && indexAt(hashed[j][0], depth, this.w) === slot) j++
      const group = hashed.slice(i, j) // sorted by hash, so each slot's keys are contiguous
      slots.push(slot)
      elems.push(group.length <= this.shape.bucketSize ? sortPairs(group.map(([, k, v]) => [k, v])) : this._build(group, depth + 1))
      i = j
    }
    return new Node(slots, elems)
  }

  // root with every child not yet stored encoded: {root, blocks: [[cid, bytes, node]] deepest first}.
  flush (root, cidOf) {
    const blocks = []
    return { root: this._flush(root, [], blocks, cidOf), blocks }
  }

  _flush (node, path, out, cidOf) {
    if (!node.pending) return node
    const elems = node.elems.map((elem, i) => {
      if (!(elem instanceof Node)) return elem
      const where = [...path, node.slots[i]]
      const child = this._flush(elem, where, out, cidOf)
      const bytes = encodeNode(child, this.shape, this.values)
      const cid = cidOf(bytes)
      child.placed.add(where.join('.'))
      out.push([cid, bytes, child])
      return cid
    })
    return new Node(node.slots, elems)
  }
}
