// A second engine for kuro components: V8 (node), running a component that `jco transpile
// --instantiation async` turned into JavaScript, with the kuro:host@1.0.0 imports written here
// over the same blocks (kuro.fs directories — flat or sharded — read by CID through the V8 guest
// host's tools/v8host/kurofs.mjs, files with @ipld/dag-pb + ipfs-unixfs). The parity test (tests/parity/test_component_parity.py) runs every
// component fixture here and through kuro_wasm, and compares exit code, stdout/stderr CIDs, the
// typed result and kuro/reads.
//
//   node [--experimental-wasm-extended-const] tools/component_host.mjs < request.json > answer.json
//
// request: {module: path of the transpiled .js, export, func: WitFunc data, args: lowered args
//   (JSON: tuples as lists, bytes as {"/": {"bytes": b64}}, big ints as {"$big": "…"}), grant,
//   stdin: b64 | null, root: fs root CID, blocks: {cid: b64}, max_output_bytes, max_output_chunks, timeout_ms,
//   env: {name: value} (the spec's kuro/env), argv0: the spec's kuro/argv0 or the guest's CID,
//   spec_args: the spec's args as given (strings become argv[1:]), max_value_bytes: the run's bound on one value
//   (kuro_wasm.model.limits.Limits.value_bound)}
// answer: {exit_code, outcome, stdout, stderr (b64), stdout_cid, stderr_cid, result?, reads, denials,
//   fs_root_after: the fs root after the run's writes, or null, capped_by: "bytes" | "chunks" | null — the output
//   bound a dropped write hit, as kuro/capped-by; trap_kind: a trap's kind as kuro/trap's, when it trapped}
//
// What this host does not do (the parity test skips those fixtures): fuel and memory limits (V8
// has neither), and load errors (decided by kuro's model before any engine runs; so is an arg past
// max_value_bytes). What one call carries is bounded by max_value_bytes as docs/components.md says
// and kuro_wasm/host/kuro_world.py, wasi_p2.py and kinds/component.py do: a kuro:host answer or a
// value from the guest past it is err(too-large), stdin.read is short, a WASI write or
// get-random-bytes past it traps, and so does an export whose typed result is past it (counted as
// kuro_wasm.model.wit.value_bytes). fs.write and fs.rm write kuro.fs blocks as kuro_fs does
// (kurofs.mjs): fs_root_after is the root they leave.
// WASI 0.2 imports get the same virtual WASI as kuro_wasm/host/wasi_p2.py (virtualWasi below).
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads'
import { pathToFileURL } from 'node:url'
import { readFile } from 'node:fs/promises'
import { sha256 } from 'multiformats/hashes/sha2'
import { CID } from 'multiformats/cid'
import { BlockStore, Fs } from './v8host/kurofs.mjs'
import { trapKind } from './v8host/host.mjs'

const b64 = (bytes) => Buffer.from(bytes).toString('base64')
const unb64 = (text) => new Uint8Array(Buffer.from(text, 'base64'))

// ---- kuro.fs over the request's blocks: the V8 guest host's (tools/v8host/kurofs.mjs), errors by name

const MAX_PATH_BYTES = 4096
const MAX_DENIAL_ENTRIES = 256 // kuro_wasm.host.context.MAX_DENIAL_ENTRIES
class Refused extends Error {
  constructor (code) { super(code); this.payload = code }
}

// kuro.fs denial reason -> kuro:host error-code (kuro_wasm.model.abi.REASON_CODES by name)
const ERROR_NAMES = {
  'missing-capability': 'denied',
  'not-found': 'not-found',
  'not-a-file': 'wrong-type',
  'is-a-directory': 'wrong-type',
  'not-a-directory': 'wrong-type',
  'path-blocked': 'wrong-type',
  'bad-path': 'bad-path',
  'directory-not-empty': 'not-empty',
  'block-missing': 'io',
  'bad-range': 'fault',
  'over-budget': 'too-large'
}
const MAX_LIST = 2 ** 32 - 1

// ---- the size of a value as max_value_bytes counts it (kuro_wasm.model.wit.value_bytes), over jco's values

const SCALAR_BYTES = { bool: 1, s8: 1, u8: 1, s16: 2, u16: 2, s32: 4, u32: 4, f32: 4, char: 4, s64: 8, u64: 8, f64: 8, enum: 1 }
const utf8Length = (text) => Buffer.byteLength(text, 'utf8')

function valueBytes (t, v) {
  const k = typeof t === 'string' ? t : t.kind
  if (SCALAR_BYTES[k] !== undefined) return SCALAR_BYTES[k]
  if (k === 'string') return utf8Length(v)
  switch (k) {
    case 'list': {
      const elem = t.items[0]
      const size = SCALAR_BYTES[typeof elem === 'string' ? elem : elem.kind]
      if (size !== undefined) return size * v.length
      let n = 0
      for (const x of v) n += Math.max(1, valueBytes(elem, x))
      return n
    }
    case 'record': return t.names.reduce((n, name, i) => n + valueBytes(t.items[i], v[camel(name)]), 0)
    case 'tuple': return t.items.reduce((n, it, i) => n + valueBytes(it, v[i]), 0)
    case 'variant': {
      const it = t.items[t.names.indexOf(v.tag)]
      return 1 + (it === null ? 0 : valueBytes(it, v.val))
    }
    case 'result': {
      const it = t.items[v.tag === 'ok' ? 0 : 1]
      return 1 + (it === null ? 0 : valueBytes(it, v.val))
    }
    case 'option': return 1 + (v === undefined ? 0 : valueBytes(t.items[0], v))
    case 'flags': return Math.max(1, Math.ceil(t.names.length / 8))
  }
  return 1
}

// ---- values: lowered JSON → jco's JS values (params) and jco's values → receipt data (results)

const camel = (name) => name.replace(/-([a-z0-9])/g, (_, c) => c.toUpperCase())
const INTS = new Set(['s8', 'u8', 's16', 'u16', 's32', 'u32', 's64', 'u64'])

function fromJson (v) {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    if (v['/'] && v['/'].bytes !== undefined) return unb64(v['/'].bytes)
    if (v.$big !== undefined) return BigInt(v.$big)
  }
  return v
}

function toJco (t, v) {
  v = fromJson(v)
  const k = typeof t === 'string' ? t : t.kind
  if (k === 's64' || k === 'u64') return BigInt(v)
  if (typeof t === 'string') return v
  switch (k) {
    case 'list': return (t.items[0] === 'u8') ? v : v.map((x) => toJco(t.items[0], x))
    case 'record': return Object.fromEntries(t.names.map((n, i) => [camel(n), toJco(t.items[i], v[i])]))
    case 'tuple': return t.items.map((it, i) => toJco(it, v[i]))
    case 'variant': {
      const i = t.names.indexOf(v[0])
      return t.items[i] === null ? { tag: v[0] } : { tag: v[0], val: toJco(t.items[i], v[1]) }
    }
    case 'result': {
      const it = t.items[v[0] === 'ok' ? 0 : 1]
      return { tag: v[0], val: it === null ? undefined : toJco(it, v[1]) }
    }
    case 'enum': return v
    case 'option': return v === null ? undefined : toJco(t.items[0], v[0])
    case 'flags': return Object.fromEntries(t.names.map((n) => [camel(n), v.includes(n)]))
  }
  throw new Error(`cannot pass a ${k}`)
}

function plainFloat (f) {
  if (Number.isNaN(f)) return 'NaN'
  if (!Number.isFinite(f)) return f > 0 ? 'Infinity' : '-Infinity'
  return f
}

function plain (t, v) {
  const k = typeof t === 'string' ? t : t.kind
  if (k === 'f32' || k === 'f64') return plainFloat(v)
  if (k === 's64' || k === 'u64') return Number.isSafeInteger(Number(v)) ? Number(v) : { $big: BigInt(v).toString() }
  if (INTS.has(k) || k === 'bool' || k === 'char' || k === 'string' || k === 'enum') return v
  switch (k) {
    case 'list': return t.items[0] === 'u8' ? { '/': { bytes: b64(v) } } : Array.from(v, (x) => plain(t.items[0], x)) // jco gives typed arrays for number lists
    case 'record': return Object.fromEntries(t.names.map((n, i) => [n, plain(t.items[i], v[camel(n)])]))
    case 'tuple': return t.items.map((it, i) => plain(it, v[i]))
    case 'variant': {
      const it = t.items[t.names.indexOf(v.tag)]
      return it === null ? v.tag : { [v.tag]: plain(it, v.val) }
    }
    case 'result': {
      const it = t.items[v.tag === 'ok' ? 0 : 1]
      return { [v.tag]: it === null ? null : plain(it, v.val) }
    }
    case 'option': return v === undefined ? null : plain(t.items[0], v)
    case 'flags': return t.names.filter((n) => v[camel(n)])
  }
  throw new Error(`cannot read a ${k}`)
}

// ---- one run (in a worker, so a deadline can stop a guest that never returns)

class Stopped extends Error {}
class Fault extends Error {} // the guest's fault (a call past a bound): a trap, as wasi_p2.py's fault()
class Exited extends Error {
  constructor (code) { super(`exit ${code}`); this.code = code }
}

// As kuro_wasm/host/wasi_p2.py: at most 1 MiB per get-random-bytes call, more is the guest's trap
// (crypto.getRandomValues fills at most 64 KiB at a time).
const MAX_RANDOM = 1 << 20
// wasi_p2.py's _WRITE_BUDGET (what check-write permits, at most) and _BLOCKING_WRITE (WASI 0.2's 4096)
const WRITE_BUDGET = 1 << 20
const BLOCKING_WRITE = 4096
function randomBytes (len) {
  const n = Number(len)
  if (n > MAX_RANDOM) throw new Fault(`kuro: wasi:random get-random-bytes(${n}): more than ${MAX_RANDOM} bytes`)
  const out = new Uint8Array(n)
  for (let at = 0; at < n; at += 65536) crypto.getRandomValues(out.subarray(at, Math.min(n, at + 65536)))
  return out
}

// The virtual WASI 0.2 of kuro_wasm/host/wasi_p2.py, in JavaScript: stdio on the run's stream, stdin
// gated by stdin/read, the spec's environment and argv, exit, the host's clocks and randomness, no
// preopens; the filesystem's descriptors and the sockets exist only as names (calling them fails).
function virtualWasi ({ emit, readStdin, stdinReady, environment, args, bound }) {
  const closed = () => { const e = new Error('closed'); e.payload = { tag: 'closed' }; return e }
  class Pollable {
    constructor (ready = () => true) { this.isReady = ready }
    ready () { return this.isReady() }
    block () { while (!this.isReady()) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1) }
  }
  // WASI 0.2's permits, as wasi_p2.py _emit: a write within what check-write last permitted (less what was written
  // since; nothing before the first check-write), a blocking-write-and-flush of at most 4096 bytes; past either,
  // the guest's trap
  class OutputStream {
    constructor (stream) { this.stream = stream; this.permit = 0 }
    checkWrite () { this.permit = Math.min(WRITE_BUDGET, bound); return BigInt(this.permit) }
    write (bytes) {
      if (bytes.length > this.permit) {
        throw new Fault(`kuro: wasi:io/streams write of ${bytes.length} bytes: more than check-write permitted (${this.permit})`)
      }
      bounded(bytes)
      this.permit -= bytes.length
      emit(this.stream, bytes)
    }

    blockingWriteAndFlush (bytes) {
      if (bytes.length > BLOCKING_WRITE) {
        throw new Fault(`kuro: wasi:io/streams blocking-write-and-flush of ${bytes.length} bytes: more than ${BLOCKING_WRITE}`)
      }
      emit(this.stream, bounded(bytes))
    }

    flush () {}
    blockingFlush () {}
    subscribe () { return new Pollable() }
  }
  class InputStream {
    read (len) { const got = readStdin(Number(len)); if (got === null) throw closed(); return got }
    blockingRead (len) { return this.read(len) }
    subscribe () { return new Pollable(stdinReady) }
  }
  const bounded = (bytes) => {
    if (bytes.length > bound) throw new Fault(`kuro: wasi:io/streams write of ${bytes.length} bytes: more than max_value_bytes (${bound})`)
    return bytes
  }
  const missing = (name) => () => { throw new Fault(`${name}: not provided by this host`) }
  class Stub {}
  const deadline = (ns) => new Pollable(() => process.hrtime.bigint() >= ns)
  return {
    'wasi:cli/stdout': { getStdout: () => new OutputStream('stdout') },
    'wasi:cli/stderr': { getStderr: () => new OutputStream('stderr') },
    'wasi:cli/stdin': { getStdin: () => new InputStream() },
    'wasi:cli/environment': { getEnvironment: () => environment, getArguments: () => args, initialCwd: () => undefined },
    'wasi:cli/exit': { exit: (status) => { throw new Exited(status.tag === 'ok' ? 0 : 1) } },
    'wasi:cli/terminal-input': { TerminalInput: class TerminalInput {} },
    'wasi:cli/terminal-output': { TerminalOutput: class TerminalOutput {} },
    'wasi:cli/terminal-stdin': { getTerminalStdin: () => undefined },
    'wasi:cli/terminal-stdout': { getTerminalStdout: () => undefined },
    'wasi:cli/terminal-stderr': { getTerminalStderr: () => undefined },
    'wasi:io/error': { Error: class Error_ { toDebugString () { return 'error' } } },
    'wasi:io/poll': {
      Pollable,
      poll: (list) => {
        // WASI 0.2: "at least one" pollable; waiting for none would never end, so it is the guest's trap (wasi_p2.py)
        if (list.length === 0) throw new Fault('kuro: wasi:io/poll poll of no pollables: it would never return')
        for (;;) {
          const ready = list.map((p, i) => (p.ready() ? i : -1)).filter((i) => i >= 0)
          if (ready.length) return new Uint32Array(ready)
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1)
        }
      }
    },
    'wasi:io/streams': { InputStream, OutputStream },
    'wasi:clocks/monotonic-clock': {
      now: () => process.hrtime.bigint(),
      resolution: () => 1000n,
      subscribeInstant: (when) => deadline(when),
      subscribeDuration: (ns) => deadline(process.hrtime.bigint() + ns)
    },
    'wasi:clocks/wall-clock': {
      now: () => { const ms = Date.now(); return { seconds: BigInt(Math.floor(ms / 1000)), nanoseconds: (ms % 1000) * 1e6 } },
      resolution: () => ({ seconds: 0n, nanoseconds: 1000 })
    },
    'wasi:random/random': {
      getRandomBytes: (len) => {
        if (Number(len) > bound && bound < MAX_RANDOM) throw new Fault(`kuro: wasi:random get-random-bytes(${len}): more than ${bound} bytes (max_value_bytes)`)
        return randomBytes(len)
      },
      getRandomU64: () => crypto.getRandomValues(new BigUint64Array(1))[0]
    },
    'wasi:random/insecure-seed': {
      insecureSeed: () => { const [a, b] = crypto.getRandomValues(new BigUint64Array(2)); return [a, b] }
    },
    'wasi:filesystem/preopens': { getDirectories: () => [] },
    'wasi:filesystem/types': { Descriptor: Stub, DirectoryEntryStream: Stub, filesystemErrorCode: () => undefined },
    'wasi:sockets/network': { Network: Stub },
    'wasi:sockets/instance-network': { instanceNetwork: missing('instance-network') },
    'wasi:sockets/tcp': { TcpSocket: Stub },
    'wasi:sockets/tcp-create-socket': { createTcpSocket: missing('create-tcp-socket') },
    'wasi:sockets/udp': { UdpSocket: Stub, IncomingDatagramStream: Stub, OutgoingDatagramStream: Stub },
    'wasi:sockets/udp-create-socket': { createUdpSocket: missing('create-udp-socket') },
    'wasi:sockets/ip-name-lookup': { ResolveAddressStream: Stub, resolveAddresses: missing('resolve-addresses') }
  }
}

async function runGuest (req) {
  const store = new BlockStore()
  for (const [cid, bytes] of Object.entries(req.blocks)) store.blocks.set(cid, unb64(bytes))
  let fs = new Fs(store, req.root) // the run's fs; a write or rm moves it on
  const answer = (got) => { if (got.reason !== undefined) throw new Refused(ERROR_NAMES[got.reason] ?? 'io'); return got.value }
  const advance = (got) => {
    answer(got)
    fs = got.fs
    parentPort.postMessage({ fsRoot: fs.root })
  }
  const grant = new Set(req.grant)
  const bound = req.max_value_bytes
  const tooLarge = (size) => { if (size > bound) throw new Refused('too-large') }
  const reads = []
  const denials = []
  let kept = 0
  let chunks = 0
  let capped = null // the bound a dropped write hit (kuro_wasm.model.stream.append: bytes checked first), sticky
  let stdin = req.stdin === null ? new Uint8Array() : unb64(req.stdin)
  // kuro_wasm.host.context.RunContext.deny: one entry per distinct (import, capability, path), a repeat counted;
  // past MAX_DENIAL_ENTRIES entries a new one is folded into a path-less entry for its import and capability
  const find = (name, capability, path) => denials.find((d) => d['kuro/import'] === name && d['kuro/capability'] === capability && d['kuro/path'] === path)
  const deny = (name, capability, path) => {
    let found = find(name, capability, path)
    if (!found && denials.length >= MAX_DENIAL_ENTRIES) {
      path = undefined
      found = find(name, capability, path)
    }
    if (found) found['kuro/count'] = (found['kuro/count'] ?? 1) + 1
    else denials.push(path === undefined ? { 'kuro/import': name, 'kuro/capability': capability } : { 'kuro/import': name, 'kuro/capability': capability, 'kuro/path': path })
    parentPort.postMessage({ denials })
    throw new Refused('denied')
  }
  const gate = (func, capability, path) => {
    const size = utf8Length(path)
    if (!grant.has(capability)) deny(`kuro:host/fs@1.0.0#${func}`, capability, size <= MAX_PATH_BYTES ? path : undefined)
    tooLarge(size)
    if (path === '') throw new Refused('bad-path')
    return path
  }
  const recordRead = (cid) => { if (!reads.includes(cid)) { reads.push(cid); parentPort.postMessage({ reads }) } }
  const emit = (stream, data) => {
    capped = capped ?? (kept + data.length > req.max_output_bytes ? 'bytes' : chunks >= req.max_output_chunks ? 'chunks' : null)
    if (capped !== null) { parentPort.postMessage({ cappedBy: capped }); throw new Stopped('output-capped') }
    kept += data.length
    chunks += 1
    parentPort.postMessage({ chunk: [stream, b64(data)] })
  }
  const imports = {
    ...virtualWasi({
      emit,
      // as kuro_wasm/host/kinds/component.py: names sorted by their UTF-8 bytes; argv[0], then the spec's args
      // when every one is a string
      environment: Object.entries(req.env ?? {}).sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b))),
      args: [req.argv0, ...(req.spec_args.every((a) => typeof a === 'string') ? req.spec_args : [])],
      readStdin: (max) => {
        if (!grant.has('stdin/read')) {
          const name = 'wasi:io/streams#[method]input-stream.read'
          const found = denials.find((d) => d['kuro/import'] === name)
          if (found) found['kuro/count'] = (found['kuro/count'] ?? 1) + 1
          else denials.push({ 'kuro/import': name, 'kuro/capability': 'stdin/read' })
          parentPort.postMessage({ denials })
          return null
        }
        // as wasi_p2.py's _read: at most what check-write would permit, and a read of 0 asks for nothing (never
        // "closed", even at the end of input)
        const cap = Math.min(max, WRITE_BUDGET, bound)
        if (cap === 0) return new Uint8Array()
        if (stdin.length === 0) return null
        const out = stdin.slice(0, cap)
        stdin = stdin.slice(out.length)
        return out
      },
      stdinReady: () => true,
      bound
    }),
    'kuro:host/types': {},
    'kuro:host/output': {
      write (stream, data) { tooLarge(data.length); emit(stream, data) }
    },
    'kuro:host/stdin': {
      read (max) {
        if (!grant.has('stdin/read')) deny('kuro:host/stdin@1.0.0#read', 'stdin/read', undefined)
        if (max === 0) return new Uint8Array()
        if (bound === 0) throw new Refused('too-large')
        const out = stdin.slice(0, Math.min(max, bound)) // a short read: the guest asks again
        stdin = stdin.slice(out.length)
        return out
      }
    },
    'kuro:host/fs': {
      // A file longer than one call may carry is too-large from its root block, before a byte is read
      // (kuro_wasm/host/fsgate.py _read_into with whole); read-at reads at most one byte past the bound.
      read (path) {
        gate('read', 'fs/read', path)
        const cap = Math.min(MAX_LIST, bound)
        if (answer(fs.readInto(path, 0)).size > cap) throw new Refused('too-large')
        const got = answer(fs.readInto(path, cap))
        recordRead(got.cid)
        return got.data
      },
      readAt (path, offset, len) {
        gate('read-at', 'fs/read', path)
        const got = answer(fs.readAt(path, Number(offset), Math.min(len, bound + 1)))
        tooLarge(got.data.length)
        recordRead(got.cid)
        return got.data
      },
      write (path, data) {
        gate('write', 'fs/write', path)
        tooLarge(data.length)
        advance(fs.write(path, data))
      },
      ls (path) {
        gate('ls', 'fs/ls', path)
        const listing = answer(fs.entries(path)).map(({ name, kind, size, cid }) => ({ name, kind, size: BigInt(size), cid }))
        tooLarge(listing.reduce((n, e) => n + Math.max(1, utf8Length(e.name) + 1 + 8 + utf8Length(e.cid)), 0))
        return listing
      },
      rm (path) {
        gate('rm', 'fs/rm', path)
        advance(fs.rm(path))
      },
      stat (path) {
        gate('stat', 'fs/ls', path)
        const meta = answer(fs.stat(path))
        tooLarge(1 + 8 + utf8Length(meta.cid))
        return { kind: meta.kind, size: BigInt(meta.size), cid: meta.cid }
      }
    }
  }
  const dir = new URL('.', pathToFileURL(req.module))
  const { instantiate } = await import(pathToFileURL(req.module).href)
  let exports
  try {
    exports = await instantiate(async (name) => WebAssembly.compile(await readFile(new URL(name, dir))),
      markingHostErrors(imports, req.break_import))
  } catch (e) {
    if (e instanceof Exited) return { exit_code: e.code } // wasi:cli/exit from a start function ends the run there
    throw e
  }
  const [iface, name] = req.export.includes('#') ? req.export.split('#') : [null, req.export]
  const target = iface === null ? exports[camel(name)] : exports[camel(iface.split('/').pop().split('@')[0])][camel(name)]
  const params = req.func.params.map(([, t], i) => toJco(t, req.args[i]))
  let value
  let isErr = false
  try {
    value = target(...params)
  } catch (e) {
    if (capped !== null) throw new Stopped('output-capped') // jco turned it into an err payload it could not lower
    if (e instanceof Exited) return { exit_code: e.code }
    if (e instanceof Stopped || e instanceof WebAssembly.RuntimeError || e instanceof RangeError || e?.payload === undefined) throw e
    value = e.payload // an export's result<_, E> err: jco throws the payload
    isErr = true
  }
  const rt = req.func.result
  if (rt === null) return { exit_code: 0 }
  const lifted = typeof rt === 'object' && rt.kind === 'result' ? { tag: isErr ? 'err' : 'ok', val: value } : value
  if (valueBytes(rt, lifted) > bound) {
    throw new Error(`kuro: export '${req.export}' returned more than max_value_bytes (${bound}) lets one call carry`)
  }
  if (req.export === 'run' && rt === 'u32') return { exit_code: value }
  if (typeof rt === 'object' && rt.kind === 'result') {
    return { exit_code: isErr ? 1 : 0, result: plain(rt, { tag: isErr ? 'err' : 'ok', val: value }) }
  }
  return { exit_code: 0, result: plain(rt, value) }
}

// A host function's own error (a bug: not a refusal, a fault, an exit or a stop) ends the run as a host error, as
// wasmtime's host reports one (kuro_wasm/host/calls.py: 70, not a trap). Every import is wrapped to mark what it
// throws so; ``broken`` names one ("iface#func" or "iface#Class.method") that throws a TypeError (a test's request).
function markingHostErrors (imports, broken) {
  const ours = (e) => e instanceof Fault || e instanceof Exited || e instanceof Stopped || e?.payload !== undefined
  const wrap = (name, fn) => function (...args) {
    try {
      if (name === broken) throw new TypeError(`${name}: broken on purpose`)
      return fn.apply(this, args)
    } catch (e) {
      if (!ours(e) && typeof e === 'object' && e !== null) e.kuroHostError = name
      throw e
    }
  }
  for (const [iface, members] of Object.entries(imports)) {
    for (const [key, value] of Object.entries(members)) {
      if (typeof value !== 'function') continue
      if (/^[A-Z]/.test(key)) { // a resource class: its methods
        for (const m of Object.getOwnPropertyNames(value.prototype)) {
          if (m !== 'constructor' && typeof value.prototype[m] === 'function') value.prototype[m] = wrap(`${iface}#${key}.${m}`, value.prototype[m])
        }
      } else {
        members[key] = wrap(`${iface}#${key}`, value)
      }
    }
  }
  return imports
}

// ---- main: start the worker, collect its chunks, stop it at the deadline

async function cidOf (bytes) {
  return CID.createV1(0x55, await sha256.digest(bytes)).toString()
}

async function main () {
  let text = ''
  for await (const piece of process.stdin) text += piece
  const req = JSON.parse(text)
  const out = { stdout: [], stderr: [] }
  let reads = []
  let denials = []
  let fsRootAfter = null
  let cappedBy = null
  const answer = await new Promise((resolve) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: req })
    const timer = setTimeout(() => { worker.terminate(); resolve({ exit_code: 124, outcome: 'timeout' }) }, req.timeout_ms)
    worker.on('message', (m) => {
      if (m.chunk) out[m.chunk[0]].push(unb64(m.chunk[1]))
      if (m.reads) reads = m.reads
      if (m.denials) denials = m.denials
      if (m.fsRoot) fsRootAfter = m.fsRoot
      if (m.cappedBy) cappedBy = m.cappedBy
      if (m.done) { clearTimeout(timer); resolve(m.done) }
    })
    worker.on('error', (e) => { clearTimeout(timer); resolve({ exit_code: 134, outcome: 'trap', trap_kind: 'trap', error: String(e) }) })
  })
  const stdout = Buffer.concat(out.stdout)
  const stderr = Buffer.concat(out.stderr)
  if (answer.outcome === undefined) answer.outcome = answer.exit_code === 0 ? 'ok' : 'exit'
  Object.assign(answer, {
    stdout: b64(stdout), stderr: b64(stderr), stdout_cid: await cidOf(stdout), stderr_cid: await cidOf(stderr), reads, denials, fs_root_after: fsRootAfter, capped_by: cappedBy
  })
  process.stdout.write(JSON.stringify(answer) + '\n')
  process.exit(0)
}

if (isMainThread) {
  await main()
} else {
  try {
    parentPort.postMessage({ done: await runGuest(workerData) })
  } catch (e) {
    if (e instanceof Stopped) parentPort.postMessage({ done: { exit_code: 125, outcome: 'output-capped' } })
    else if (e?.kuroHostError !== undefined) {
      parentPort.postMessage({ done: { exit_code: 70, outcome: 'host-error', error: `host error: ${e.kuroHostError}: ${e}` } })
    } else {
      // a wasm trap's kind from V8's message; a host function's own error (a value past a bound) is a plain trap
      const kind = e instanceof WebAssembly.RuntimeError || e instanceof RangeError ? trapKind(e) : 'trap'
      parentPort.postMessage({ done: { exit_code: 134, outcome: 'trap', trap_kind: kind, error: String(e) } })
    }
  }
}
