// One guest run in V8: the kuro ABI v1 and kuro-browser-v0 guest kinds as JS imports, ending in the
// receipt fields two hosts must agree on (kuro_wasm.model.fixture.parity_view).
//
// The one decision: this host decides everything a guest can observe exactly as kuro_wasm does — which kind
// runs a module (kuro_wasm/host/kinds), the entry and argument rules (kuro_wasm.host.kind.core_entry), every
// import's answer, refusal record and error code (kuro_v1.py, browser_v0.py, fsgate.py, context.py), the
// output cap (kuro_wasm.model.stream), the outcome and exit code (kuro_wasm.model.outcome) — so that any
// difference the parity test finds is a bug in one of the two hosts, not a difference of design.
//
// Engine-specific, and said so: the deadline is node:vm's timeout (V8 terminates the running wasm);
// there is no fuel and no cap on a module's own memory in the JS API (cases needing them are marked
// unsupported on v8); trap kinds are read from V8's RuntimeError messages (two kinds where one message stands for
// both, see trapKind); load-error texts differ.

import vm from 'node:vm'
import { Fs, BlockStore, cleanPath, joinPath, cidFor, codecOf, readFile, RAW, DAG_PB, DAG_CBOR } from './kurofs.mjs'
import { readShape, exportOf, ShapeError } from './shape.mjs'

const ERR = { DENIED: -1, NOT_FOUND: -2, WRONG_TYPE: -3, BAD_PATH: -4, FAULT: -5, NOT_EMPTY: -6, IO: -7, BAD_FD: -8 }
const REASON_CODES = {
  'missing-capability': ERR.DENIED,
  'not-found': ERR.NOT_FOUND,
  'not-a-file': ERR.WRONG_TYPE,
  'is-a-directory': ERR.WRONG_TYPE,
  'not-a-directory': ERR.WRONG_TYPE,
  'path-blocked': ERR.WRONG_TYPE,
  'bad-path': ERR.BAD_PATH,
  'directory-not-empty': ERR.NOT_EMPTY,
  'block-missing': ERR.IO,
  'bad-range': ERR.FAULT,
  'over-budget': -9
}
const codeFor = reason => REASON_CODES[reason] ?? ERR.IO
const I32 = ['i32']
const ABI_V1 = {
  write: { params: ['i32', 'i32', 'i32'], cap: null },
  read: { params: ['i32', 'i32'], cap: 'stdin/read' },
  fs_read: { params: ['i32', 'i32', 'i32', 'i32'], cap: 'fs/read' },
  fs_read_at: { params: ['i32', 'i32', 'i64', 'i32', 'i32'], cap: 'fs/read' },
  fs_write: { params: ['i32', 'i32', 'i32', 'i32'], cap: 'fs/write' },
  fs_ls: { params: ['i32', 'i32', 'i32', 'i32'], cap: 'fs/ls' },
  fs_rm: { params: ['i32', 'i32'], cap: 'fs/rm' }
}
const NUMBER_TYPES = new Set(['i32', 'i64', 'f32', 'f64'])
// the request's name of each optional guest-spec key (kuro_wasm.model.sessions.GUEST_OPTIONAL_KEYS) → the spec's
const OPTIONAL_KEYS = { fs_read_path: 'kuro/fs-read-path', env: 'kuro/env', argv0: 'kuro/argv0' }
const INT_RANGES = { i32: [-(2n ** 31n), 2n ** 32n - 1n], i64: [-(2n ** 63n), 2n ** 64n - 1n] }
const TEXT_OFFSET = 2048
const MAX_DENIAL_ENTRIES = 256
const MAX_PATH_BYTES = 4096
const SCRATCH_MAX_BYTES = 64 * 2 ** 20
const I32_MAX = 2 ** 31 - 1
const sameSig = (sig, params, results) => sig !== null && sig.params.join() === params.join() && sig.results.join() === results.join()
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

class Stop extends Error { constructor (reason) { super(`stopped (${reason})`); this.reason = reason } }
class Fault extends Error {}
class LoadError extends Error {}

// ---- the guest kinds (kuro_wasm/host/kinds): which one runs a module, decided from its shape

function isRun (shape, exact) {
  const run = exportOf(shape, 'run')
  if (!run || run.kind !== 'func' || !run.sig) return false
  if (exact) return sameSig(run.sig, ['i32', 'i32'], I32)
  return run.sig.results.join() === 'i32' && run.sig.params.every(t => t === 'i32')
}

function claimBrowser (shape) {
  if (shape.component) return ''
  for (const imp of shape.imports) {
    if (!(imp.module === 'kuro' && imp.name === 'fs_read' && imp.kind === 'func' && sameSig(imp.sig, ['i32', 'i32'], I32))) return ''
  }
  const memory = exportOf(shape, 'memory')
  const hasMemory = memory !== null && memory.kind === 'memory'
  if (!shape.imports.length) return hasMemory && isRun(shape, true) ? null : ''
  if (!hasMemory) return 'kuro-browser-v0 guest must export its memory'
  if (!isRun(shape, false)) return 'kuro-browser-v0 guest must export run(i32 ...) -> i32'
  return null
}

function claimV1 (shape) {
  if (shape.component) return 'the guest is a component'
  for (const imp of shape.imports) {
    const spec = ABI_V1[imp.name]
    if (imp.module !== 'kuro' || !spec || imp.kind !== 'func' || !sameSig(imp.sig, spec.params, I32)) {
      return `import ${imp.module}.${imp.name} is not in the kuro ABI v1`
    }
  }
  return null
}

function classify (shape) {
  const modules = new Set(shape.imports.map(i => i.module))
  if ([...modules].some(m => m !== 'kuro')) return { error: 'imports a module no kind of this host provides' }
  let first = ''
  for (const [name, claim] of [['kuro-browser-v0', claimBrowser], ['kuro-abi-v1', claimV1]]) {
    const reason = claim(shape)
    if (reason === null) return { kind: name }
    first = first || reason
  }
  return { error: first || 'no guest kind claims the module' }
}

// kuro_wasm.host.kind.core_entry + kuro_wasm.model.abi.check_args; args arrive as {int: "digits"} | {float: x}
function entry (shape, exportName, args) {
  const found = exportOf(shape, exportName)
  if (!found || found.kind !== 'func' || !found.sig) throw new LoadError(`no function export ${exportName}`)
  const sig = found.sig
  if (sig.results.length > 1 || sig.results.some(r => r !== 'i32')) throw new LoadError('an exit code is one i32 or nothing')
  if (sig.params.some(p => !NUMBER_TYPES.has(p))) throw new LoadError('a parameter that is not a number')
  if (sig.params.length !== args.length) throw new LoadError(`the export takes ${sig.params.length} argument(s)`)
  const values = sig.params.map((kind, i) => {
    const arg = args[i]
    if (kind in INT_RANGES) {
      if (arg.int === undefined) throw new LoadError(`argument ${i} is not an integer`)
      const v = BigInt(arg.int)
      const [low, high] = INT_RANGES[kind]
      if (v < low || v > high) throw new LoadError(`argument ${i} does not fit ${kind}`)
      return kind === 'i32' ? Number(BigInt.asIntN(32, v)) : BigInt.asIntN(64, v)
    }
    return arg.int !== undefined ? Number(BigInt(arg.int)) : arg.float
  })
  return { name: exportName, sig, values }
}

// The receipt's trap kind (kuro_wasm.model.outcome.trap_kind) of a trap V8 raised, read from its message — or,
// where V8 says the same words for two traps wasmtime tells apart, both kinds (a list; the parity tests accept
// wasmtime's kind if it is one of them): "float unrepresentable in integer range" is a NaN (bad-conversion-to-integer)
// or a number out of range (integer-overflow); "null function or function signature mismatch" is an empty slot
// (indirect-call-to-null) or a function of another type (bad-signature).
export function trapKind (err) {
  const text = String(err && err.message)
  if (err && err.name === 'RangeError' && /call stack/i.test(text)) return 'stack-overflow'
  const kinds = [
    [/unreachable/, 'unreachable'], [/divide by zero|remainder by zero/, 'integer-division-by-zero'],
    [/integer overflow|divide result unrepresentable/, 'integer-overflow'],
    [/float unrepresentable/, ['bad-conversion-to-integer', 'integer-overflow']],
    [/memory access out of bounds/, 'memory-out-of-bounds'], [/table index is out of bounds/, 'table-out-of-bounds'],
    [/null function or function signature mismatch/, ['indirect-call-to-null', 'bad-signature']],
    [/null function/, 'indirect-call-to-null'], [/signature mismatch/, 'bad-signature']
  ]
  for (const [pattern, kind] of kinds) if (pattern.test(text)) return kind
  return 'trap'
}

// ---- guest bytes by CID (kuro_wasm/host/loader.fetch_guest)

function fetchGuest (store, cid) {
  if (!store.blocks.has(cid)) return { outcome: 'guest-not-found' }
  if (store.get(cid) === null) return { outcome: 'load-error', error: 'guest block does not hash to its CID' }
  const codec = codecOf(cid)
  if (codec === RAW) return { bytes: store.get(cid) }
  if (codec !== DAG_PB) return { outcome: 'load-error', error: 'guest is not a raw block or a UnixFS file' }
  try {
    return { bytes: readFile(store, cid) }
  } catch (err) {
    return { outcome: 'load-error', error: `guest is not a complete UnixFS file: ${err.message}` }
  }
}

// ---- one run

export function runCase (c, store) {
  const run = {
    grant: new Set(c.grant),
    stdout: [], stderr: [], kept: 0, dropped: 0, truncated: false, chunks: 0, cappedBy: null,
    maxOut: c.limits.max_output_bytes ?? 1048576,
    maxChunks: c.limits.max_output_chunks ?? 100000,
    stdin: c.stdin ? Buffer.from(c.stdin, 'base64') : Buffer.alloc(0),
    reads: [], denials: [], denialIndex: new Map(), wrote: false,
    fs: null, fsRoot: c.fs_root, scratch: null, scratchBytes: 0,
    memory: null, command: c, store
  }
  if (!run.grant.has('guest/invoke')) return { denial: 'missing-capabilities', missing: ['guest/invoke'] }
  const result = execute(run, c, store)
  const out = Buffer.concat(run.stdout); const err = Buffer.concat(run.stderr)
  const view = {
    'exit-code': result.exit,
    outcome: result.outcome,
    'capped-by': run.cappedBy,
    'stdout-cid': cidFor(out, RAW),
    'stderr-cid': cidFor(err, RAW),
    reads: run.reads,
    denials: run.denials,
    'fs-root-after': run.wrote && run.fs ? run.fs.root : null,
    'trap-kind': result.trap ?? null,
    'timed-out?': result.outcome === 'timeout',
    'truncated?': run.truncated
  }
  return { view, error: result.error ?? null }
}

function execute (run, c, store) {
  const fetched = fetchGuestSafe(store, c.guest)
  if (fetched.outcome) return { exit: fetched.outcome === 'guest-not-found' ? 127 : 126, outcome: fetched.outcome, error: fetched.error }
  let module, shape, kind, chosen
  try {
    shape = readShape(fetched.bytes)
    if (shape.component) throw new LoadError('the guest is a component')
    module = new WebAssembly.Module(fetched.bytes)
    kind = classify(shape)
    if (kind.error) throw new LoadError(kind.error)
    chosen = entry(shape, c.export, c.args)
    const takes = kind.kind === 'kuro-browser-v0' && shape.imports.length ? ['fs_read_path'] : []
    if (takes.length && c.fs_read_path == null) throw new LoadError('the spec has no kuro/fs-read-path')
    // kuro_wasm.host.loader: an optional spec key the entry does not use is a load error, not silently ignored
    for (const [key, name] of Object.entries(OPTIONAL_KEYS)) {
      if (c[key] != null && !takes.includes(key)) throw new LoadError(`the spec's ${name} is not for it`)
    }
  } catch (err) {
    if (err instanceof LoadError || err instanceof ShapeError || err instanceof WebAssembly.CompileError) {
      return { exit: 126, outcome: 'load-error', error: String(err.message) }
    }
    throw err
  }
  const imports = kind.kind === 'kuro-browser-v0' ? browserImports(run) : v1Imports(run)
  let instance
  const call = () => {
    try {
      instance = new WebAssembly.Instance(module, imports)
    } catch (err) {
      if (err instanceof WebAssembly.LinkError) return { exit: 126, outcome: 'load-error', error: err.message }
      throw err
    }
    run.memory = instance.exports.memory instanceof WebAssembly.Memory ? instance.exports.memory : null
    const value = instance.exports[chosen.name](...chosen.values)
    if (kind.kind === 'kuro-browser-v0') {
      const text = textAt(run.memory)
      if (text.length && !emit(run, 'stdout', text)) throw new Stop('output-capped')
    }
    const code = chosen.sig.results.length ? value : 0
    return { exit: code, outcome: code === 0 ? 'ok' : 'exit' }
  }
  try {
    return vm.runInNewContext('call()', { call }, { timeout: c.limits.timeout_ms ?? 120000 })
  } catch (err) {
    if (err instanceof Stop) {
      if (err.reason === 'output-capped') return { exit: 125, outcome: 'output-capped' }
      return { exit: 70, outcome: 'host-error', error: err.message }
    }
    if (err && err.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') return { exit: 124, outcome: 'timeout' }
    if (err instanceof WebAssembly.RuntimeError || (err && err.name === 'RangeError')) {
      return { exit: 134, outcome: 'trap', trap: trapKind(err), error: err.message }
    }
    return { exit: 70, outcome: 'host-error', error: `host error: ${err && err.stack}` }
  }
}

function fetchGuestSafe (store, cid) {
  try {
    const got = fetchGuest(store, cid)
    if (got.bytes !== undefined && !(got.bytes[0] === 0 && got.bytes[1] === 0x61 && got.bytes[2] === 0x73 && got.bytes[3] === 0x6d)) {
      return { outcome: 'load-error', error: 'not a wasm binary (no \\0asm header)' }
    }
    return got
  } catch (err) {
    return { outcome: 'load-error', error: String(err.message) }
  }
}

// ---- guest memory (kuro_wasm/host/calls.py): every (ptr, len) is u32 and must lie inside memory now

function mem (run) { return run.memory ? new Uint8Array(run.memory.buffer) : new Uint8Array(0) }

function span (run, ptr, length) {
  const start = ptr >>> 0
  const end = start + (length >>> 0)
  const bytes = mem(run)
  if (end > bytes.length) throw new Fault()
  return [bytes, start, end]
}

function load (run, ptr, length) {
  const [bytes, start, end] = span(run, ptr, length)
  return Buffer.from(bytes.subarray(start, end))
}

function store (run, ptr, data) {
  const [bytes, start] = span(run, ptr, data.length)
  bytes.set(data, start)
}

function textAt (memory) {
  if (!memory) return Buffer.alloc(0)
  const bytes = new Uint8Array(memory.buffer)
  if (bytes.length <= TEXT_OFFSET) return Buffer.alloc(0)
  let end = bytes.indexOf(0, TEXT_OFFSET)
  if (end < 0) end = bytes.length
  return Buffer.from(bytes.subarray(TEXT_OFFSET, end))
}

// ---- the run's context (kuro_wasm/host/context.py)

// kuro_wasm.model.stream.append: one byte cap over both streams and a bound on kept chunks (bytes checked
// first); a chunk that does not fit is dropped whole, and every later one too.
function emit (run, name, data) {
  const capped = run.truncated ? run.cappedBy : data.length > run.maxOut - run.kept ? 'bytes' : run.chunks >= run.maxChunks ? 'chunks' : null
  if (capped !== null) {
    run.dropped += data.length
    run.truncated = true
    run.cappedBy = capped
    return false
  }
  run.kept += data.length
  run.chunks += 1
  run[name].push(data)
  return true
}

function deny (run, name, capability, path) {
  let key = JSON.stringify([name, capability, path])
  let index = run.denialIndex.get(key)
  if (index === undefined && run.denials.length >= MAX_DENIAL_ENTRIES) {
    path = null
    key = JSON.stringify([name, capability, null])
    index = run.denialIndex.get(key)
  }
  if (index === undefined) {
    const entry = { 'kuro/import': name, 'kuro/capability': capability }
    if (path !== null) entry['kuro/path'] = path
    run.denialIndex.set(key, run.denials.length)
    run.denials.push(entry)
  } else {
    const entry = run.denials[index]
    entry['kuro/count'] = (entry['kuro/count'] ?? 1) + 1
  }
  return ERR.DENIED
}

function rootFs (run, store) {
  if (run.fs === null) run.fs = codecOf(run.fsRoot) === DAG_CBOR ? new Fs(store, run.fsRoot) : null
  return run.fs
}

function scratchPath (run, path) {
  if (!run.grant.has('fs/scratch')) return null
  const parts = cleanPath(path)
  if (!parts || !parts.length || parts[0] !== 'tmp') return null
  return joinPath(parts.slice(1))
}

// fsgate.call_in: on the fs root or the scratch directory; {value, fs} or {reason}
function fsCall (run, at, op, ...args) {
  if (at.scratch) {
    if (run.scratch === null) run.scratch = Fs.empty(new BlockStore())
    if (op !== 'write') return run.scratch[op](at.path, ...args)
    // fsgate.call_in: past the budget stores nothing; only an accepted write counts against it
    if (run.scratchBytes + args[0].length > SCRATCH_MAX_BYTES) return { reason: 'over-budget' }
    const answer = run.scratch[op](at.path, ...args)
    if (!answer.reason) run.scratchBytes += args[0].length
    return answer
  }
  const fs = rootFs(run, run.store)
  if (fs === null) return { reason: 'block-missing' }
  return fs[op](at.path, ...args)
}

function advance (run, at, answer) {
  if (at.scratch) run.scratch = answer.fs
  else { run.fs = answer.fs; run.wrote = true }
  return 0
}

function readIntoGuest (run, at, bufPtr, cap) {
  span(run, bufPtr, cap)
  const answer = fsCall(run, at, 'readInto', cap >>> 0)
  if (answer.reason) return codeFor(answer.reason)
  store(run, bufPtr, answer.value.data)
  if (!at.scratch && !run.reads.includes(answer.value.cid)) run.reads.push(answer.value.cid)
  return Math.min(answer.value.size, I32_MAX)
}

// ---- the imports

function pathAt (run, ptr, length) {
  const bytes = load(run, ptr, length)
  try { return utf8.decode(bytes) } catch { return null }
}

function pathForRecord (run, ptr, length) {
  if ((length >>> 0) > MAX_PATH_BYTES) return null
  try { return pathAt(run, ptr, length) } catch (err) { if (err instanceof Fault) return null; throw err }
}

// kuro_v1._gate: where an fs import acts ({path, scratch}) or the code to answer now ({code})
function gate (run, name, ptr, length) {
  if (run.grant.has('fs/scratch')) {
    const path = pathAt(run, ptr, length)
    const inner = path === null ? null : scratchPath(run, path)
    if (inner !== null) return { path: inner, scratch: true }
  }
  const cap = ABI_V1[name].cap
  if (!run.grant.has(cap)) return { code: deny(run, name, cap, pathForRecord(run, ptr, length)) }
  const path = pathAt(run, ptr, length)
  if (path === null || path === '') return { code: ERR.BAD_PATH }
  return { path, scratch: false }
}

// A raw host function: a Fault is the fault code; every other answer is one i32.
function hostFn (fn) {
  return (...params) => {
    try {
      return fn(...params)
    } catch (err) {
      if (err instanceof Fault) return ERR.FAULT
      throw err
    }
  }
}

function v1Imports (run) {
  const kuro = {
    write: (fd, ptr, length) => {
      if (fd !== 1 && fd !== 2) return ERR.BAD_FD
      const data = load(run, ptr, length)
      if (!emit(run, fd === 1 ? 'stdout' : 'stderr', data)) throw new Stop('output-capped')
      return data.length
    },
    read: (ptr, cap) => {
      if (!run.grant.has('stdin/read')) return deny(run, 'read', 'stdin/read', null)
      span(run, ptr, cap)
      if (cap === 0) return 0
      const chunk = run.stdin.subarray(0, cap >>> 0)
      run.stdin = run.stdin.subarray(chunk.length)
      store(run, ptr, chunk)
      return chunk.length
    },
    fs_read: (pathPtr, pathLen, bufPtr, cap) => {
      const at = gate(run, 'fs_read', pathPtr, pathLen)
      return at.code ?? readIntoGuest(run, at, bufPtr, cap)
    },
    fs_read_at: (pathPtr, pathLen, offset, bufPtr, cap) => {
      const at = gate(run, 'fs_read_at', pathPtr, pathLen)
      if (at.code !== undefined) return at.code
      span(run, bufPtr, cap)
      if (offset < 0n) return ERR.FAULT
      const answer = fsCall(run, at, 'readAt', Number(offset), cap >>> 0)
      if (answer.reason) return codeFor(answer.reason)
      store(run, bufPtr, answer.value.data)
      if (!at.scratch && !run.reads.includes(answer.value.cid)) run.reads.push(answer.value.cid)
      return answer.value.data.length
    },
    fs_write: (pathPtr, pathLen, dataPtr, dataLen) => {
      const at = gate(run, 'fs_write', pathPtr, pathLen)
      if (at.code !== undefined) return at.code
      const answer = fsCall(run, at, 'write', load(run, dataPtr, dataLen))
      return answer.reason ? codeFor(answer.reason) : advance(run, at, answer)
    },
    fs_ls: (pathPtr, pathLen, bufPtr, cap) => {
      const at = gate(run, 'fs_ls', pathPtr, pathLen)
      if (at.code !== undefined) return at.code
      span(run, bufPtr, cap)
      const answer = fsCall(run, at, 'ls')
      if (answer.reason) return codeFor(answer.reason)
      const listing = Buffer.from(answer.value, 'utf-8')
      store(run, bufPtr, listing.subarray(0, cap >>> 0))
      return Math.min(listing.length, I32_MAX)
    },
    fs_rm: (pathPtr, pathLen) => {
      const at = gate(run, 'fs_rm', pathPtr, pathLen)
      if (at.code !== undefined) return at.code
      const answer = fsCall(run, at, 'rm')
      return answer.reason ? codeFor(answer.reason) : advance(run, at, answer)
    }
  }
  return { kuro: Object.fromEntries(Object.entries(kuro).map(([k, f]) => [k, hostFn(f)])) }
}

function browserImports (run) {
  const fsRead = (bufPtr, length) => {
    const path = run.command.fs_read_path
    const inner = scratchPath(run, path)
    if (inner === null && !run.grant.has('fs/read')) return deny(run, 'fs_read', 'fs/read', path)
    return readIntoGuest(run, inner === null ? { path, scratch: false } : { path: inner, scratch: true }, bufPtr, length)
  }
  return { kuro: { fs_read: hostFn(fsRead) } }
}
