// The shape of a wasm module — imports and exports with their signatures — read from its bytes.
//
// The one decision: as in kuro_wasm/model/wasm_shape.py, the shape that decides a guest's kind is read
// from the binary, not asked of the engine (the JS API gives import/export kinds but no signatures).
// Only the sections that decide a kind are read (type, import, function, memory, export); others are
// skipped by their size. Types this reader does not know (GC proposal types) raise ShapeError, which the
// host turns into a load-error, as the Python host does for a shape it cannot read.

export class ShapeError extends Error {}

const NUMERIC = { 0x7f: 'i32', 0x7e: 'i64', 0x7d: 'f32', 0x7c: 'f64', 0x7b: 'v128', 0x70: 'funcref', 0x6f: 'externref' }
const KINDS = { 0: 'func', 1: 'table', 2: 'memory', 3: 'global', 4: 'tag' }

class Reader {
  constructor (bytes, pos = 0, end = bytes.length) { this.b = bytes; this.pos = pos; this.end = end }
  byte () {
    if (this.pos >= this.end) throw new ShapeError('unexpected end of module')
    return this.b[this.pos++]
  }

  uleb () {
    let result = 0n; let shift = 0n
    for (;;) {
      const byte = this.byte()
      result |= BigInt(byte & 0x7f) << shift
      if ((byte & 0x80) === 0) return Number(result)
      shift += 7n
      if (shift > 35n) throw new ShapeError('varint too long')
    }
  }

  name () {
    const n = this.uleb()
    if (this.pos + n > this.end) throw new ShapeError('name past the end')
    const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(this.b.subarray(this.pos, this.pos + n))
    this.pos += n
    return text
  }

  valtype () {
    const t = this.byte()
    if (t in NUMERIC) return NUMERIC[t]
    throw new ShapeError(`value type 0x${t.toString(16)} is not read by this host`)
  }

  limits () {
    const flags = this.byte()
    this.uleb()
    if (flags & 1) this.uleb()
  }
}

// { component, imports: [{module, name, kind, sig}], exports: [{name, kind, sig}] }; sig = {params, results}
export function readShape (bytes) {
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) {
    throw new ShapeError('not a wasm binary')
  }
  if (bytes[6] !== 0 || bytes[7] !== 0) return { component: true, imports: [], exports: [] }
  const types = []; const imports = []; const funcs = []; const exports = []
  const r = new Reader(bytes, 8)
  while (r.pos < r.end) {
    const id = r.byte()
    const size = r.uleb()
    const s = new Reader(bytes, r.pos, r.pos + size)
    r.pos += size
    if (id === 1) {
      for (let n = s.uleb(); n > 0; n--) {
        if (s.byte() !== 0x60) throw new ShapeError('a type that is not a plain function type')
        const params = []; const results = []
        for (let k = s.uleb(); k > 0; k--) params.push(s.valtype())
        for (let k = s.uleb(); k > 0; k--) results.push(s.valtype())
        types.push({ params, results })
      }
    } else if (id === 2) {
      for (let n = s.uleb(); n > 0; n--) {
        const module = s.name(); const name = s.name(); const kind = KINDS[s.byte()]
        let sig = null
        if (kind === 'func') {
          sig = types[s.uleb()]
          funcs.push(sig)
        } else if (kind === 'table') { s.valtype(); s.limits() } else if (kind === 'memory') s.limits()
        else if (kind === 'global') { s.valtype(); s.byte() } else if (kind === 'tag') { s.byte(); s.uleb() } else throw new ShapeError('unknown import kind')
        imports.push({ module, name, kind, sig })
      }
    } else if (id === 3) {
      for (let n = s.uleb(); n > 0; n--) funcs.push(types[s.uleb()])
    } else if (id === 7) {
      for (let n = s.uleb(); n > 0; n--) {
        const name = s.name(); const kind = KINDS[s.byte()]; const index = s.uleb()
        exports.push({ name, kind, sig: kind === 'func' ? funcs[index] ?? null : null })
      }
    }
  }
  return { component: false, imports, exports }
}

export function exportOf (shape, name) {
  return shape.exports.find(e => e.name === name) ?? null
}
