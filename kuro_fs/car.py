"""CARv1: a DAG as one file — the header, then every block once, depth-first from the root.

## The one decision
Byte parity with ``ipfs dag export`` and the JS ``@ipld/car`` writer depends on
block order, so there is one order: **depth-first pre-order from the root**
(a node, then each of its links in order, recursively), each distinct CID
written **once**, at its first occurrence. Reading is the mirror image and is
strict: every varint minimal and bounded, the header exactly
``{"roots": [CID…≥1], "version": 1}`` in canonical dag-cbor, every section a
CID :mod:`kuro_fs.cid` reads followed by bytes that hash to it
(:func:`~kuro_fs.cid.matches`). A CAR that breaks any
of these is a :class:`~kuro_fs.errors.CarError`, and :func:`import_car` is
all-or-nothing: it reads the file **once**, verifying each block as it puts it
inside the store's batch (:func:`~kuro_fs.blocks.open_batch`), which makes the
blocks visible only after the last one checked and discards them all on an
error. A CAR that is tampered with — or changed while it is read — imports
nothing. (The earlier design verified in a first pass and stored in a second, so
a file changed between the passes could leave verified blocks stored before the
error.) A store without ``batch()`` gets the same guarantee from a spool: the
verified blocks go to an unlinked temporary file and are put only once the whole
CAR has checked out. Each checked block is filed as
:func:`~kuro_fs.blocks.put_matched` files it: a sha2-256 block (CIDv1 or CIDv0) through
the store's own ``put``, another hash through ``put(data, cid=…)``, an identity block
not at all (its bytes are its name).

## Pure / Effects
:func:`write_car`, :func:`read_car`, :func:`dag_blocks` and :func:`links_of`
are pure over injected streams and ``get`` callables. :func:`export_car` and
:func:`import_car` at the bottom open files (thin wrappers).

## Not done here
No CARv2 (index, pragma). Sections are read in every CID profile :mod:`kuro_fs.cid` reads (issue 17).
"""

from __future__ import annotations

import contextvars
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from typing import IO, Any, Final

from kuro_fs import dagcbor
from kuro_fs.atomic import write_target
from kuro_fs.blocks import BlockStore, open_batch, put_matched
from kuro_fs.cid import ParsedCID, cid_bytes, decode_binary, matches, parse
from kuro_fs.dagpb import decode as decode_pb
from kuro_fs.dagpb import decode_uvarint, encode_uvarint
from kuro_fs.errors import CarError, DagCborError, InvalidCID
from kuro_fs.fsdir import HasStoreRoot
from kuro_fs.importer import _join, _Pool
from kuro_fs.unixfs import MissingBlock

__all__ = [
    "MAX_HEADER_BYTES",
    "MAX_SECTION_BYTES",
    "PUT_RUN",
    "PUT_RUN_BYTES",
    "dag_blocks",
    "export_car",
    "import_car",
    "links_of",
    "read_car",
    "write_car",
]

MAX_HEADER_BYTES: Final = 1 << 20
MAX_SECTION_BYTES: Final = 1 << 28
_READ_BUFFER: Final = 1 << 20
#: A section as read: its CID (checked against the reading profile), its block (not yet hashed), its offset.
_Section = tuple[ParsedCID, bytes, int]


# ---- links and traversal


def links_of(cid: str, block: bytes) -> list[str]:
    """The CIDs ``block`` links to, in order (raw: none; dag-pb: Links; dag-cbor: tag-42 values in key order).

    Raises DagPbError / DagCborError: if the block does not decode as its codec.
    """
    codec = parse(cid).codec
    if codec == "raw":
        return []
    if codec == "dag-pb":
        return [link.cid for link in decode_pb(block).links]
    return dagcbor.links(dagcbor.decode(block))


def dag_blocks(get: Callable[[str], bytes | None], root: str) -> Iterator[tuple[str, bytes]]:
    """Every block reachable from ``root``: depth-first pre-order, each distinct CID once.

    Raises MissingBlock: if a reachable block is absent (CorruptBlock from the store passes through).
    """
    seen: set[str] = set()
    stack = [root]
    while stack:
        cid = stack.pop()
        if cid in seen:
            continue
        seen.add(cid)
        block = get(cid)
        if block is None:
            raise MissingBlock(cid)
        yield cid, block
        stack.extend(reversed(links_of(cid, block)))


# ---- writing


def write_car(roots: Sequence[str], blocks: Iterable[tuple[str, bytes]]) -> Iterator[bytes]:
    """The CARv1 bytes for ``roots`` and ``blocks`` (written in the order given), as chunks.

    Raises CarError: if ``roots`` is empty. Raises InvalidCID: on a bad root or block CID.
    """
    if not roots:
        raise CarError("a CAR needs at least one root")
    header = dagcbor.encode({"roots": [dagcbor.Link(r) for r in roots], "version": 1})
    yield encode_uvarint(len(header)) + header
    for cid, block in blocks:
        binary = cid_bytes(cid)
        yield encode_uvarint(len(binary) + len(block)) + binary
        yield block


# ---- reading


def _read_varint(stream: IO[bytes], what: str, offset: int) -> tuple[int, int] | None:
    raw = bytearray()
    while True:
        byte = stream.read(1)
        if not byte:
            if raw:
                raise CarError(f"truncated varint ({what}) at offset {offset}")
            return None
        raw += byte
        if byte[0] < 0x80 or len(raw) >= 10:
            break
    try:
        value, _ = decode_uvarint(bytes(raw))
    except ValueError as exc:
        raise CarError(f"bad varint ({what}) at offset {offset}: {exc}") from exc
    return value, len(raw)


def _exact(stream: IO[bytes], n: int, what: str, offset: int) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise CarError(f"truncated {what} at offset {offset}: expected {n} bytes, got {len(data)}")
    return data


def _split_cid(section: bytes, offset: int) -> tuple[ParsedCID, bytes]:
    # The CID at the start of a section (any profile kuro_fs.cid reads); return (parsed, block).
    try:
        parsed, end = decode_binary(section)
    except InvalidCID as exc:
        raise CarError(f"bad CID in section at offset {offset}: {exc}") from exc
    return parsed, section[end:]


def _read_header(stream: IO[bytes]) -> tuple[list[str], int]:
    got = _read_varint(stream, "header length", 0)
    if got is None:
        raise CarError("empty file: a CAR starts with a header")
    length, used = got
    if length == 0 or length > MAX_HEADER_BYTES:
        raise CarError(f"header length {length} out of range (1..{MAX_HEADER_BYTES})")
    raw = _exact(stream, length, "header", used)
    try:
        header = dagcbor.decode(raw)
    except DagCborError as exc:
        raise CarError(f"header is not dag-cbor: {exc}") from exc
    if not isinstance(header, dict):
        raise CarError("header is not a dag-cbor map")
    version = header.get("version")
    if type(version) is not int or version != 1:  # the integer 1: not true, not 1.0 (both == 1 in Python)
        raise CarError(f"unsupported CAR version {version!r} (only CARv1)")
    roots = header.get("roots")
    if set(header) != {"roots", "version"} or not isinstance(roots, list):
        raise CarError("header must be exactly {roots: [CID…], version: 1}")
    if not roots or not all(isinstance(r, dagcbor.Link) for r in roots):
        raise CarError("header roots must be a non-empty list of CIDs (zero roots is not a CAR kuro reads)")
    return [r.cid for r in roots], used + length


def _sections(stream: IO[bytes], offset: int, cap: int = MAX_SECTION_BYTES) -> Iterator[_Section]:
    # Every section after the header as (parsed CID, block, offset), its CID checked against the
    # reading profile but its block NOT hashed: the callers verify (each once, with _check_block).
    # A section longer than ``cap`` is refused from its length prefix, before it is read.
    pos = offset
    while True:
        got = _read_varint(stream, "section length", pos)
        if got is None:
            return
        length, used = got
        if length == 0 or length > cap:
            raise CarError(f"section length {length} at offset {pos} out of range (1..{cap})")
        parsed, block = _split_cid(_exact(stream, length, "section", pos + used), pos)
        yield parsed, block, pos
        pos += used + length


def read_car(
    stream: IO[bytes], *, max_section: int = MAX_SECTION_BYTES
) -> tuple[list[str], Iterator[tuple[str, bytes]]]:
    """Parse a CARv1 ``stream``: the roots now, then ``(cid, block)`` pairs, each verified, lazily.

    ``max_section`` caps one section (CID + block) in bytes; a longer one is refused from its
    length prefix, before its bytes are read (a reader of a stranger's CAR passes its block cap).

    Raises CarError: a bad header (not dag-cbor, not v1, zero roots), a bad or
    non-minimal varint, a truncated or over-long section, a CID outside kuro's profile, or a
    block that does not hash to its CID — naming the byte offset.
    """
    roots, offset = _read_header(stream)

    def verified() -> Iterator[tuple[str, bytes]]:
        for parsed, block, pos in _sections(stream, offset, max_section):
            _check_block(parsed, block, pos)
            yield str(parsed), block

    return roots, verified()


# ---- effects: files


def export_car(source: BlockStore | HasStoreRoot, root_or_path: str | os.PathLike[str], path: Any = None) -> int:
    """Write the DAG under a root to a CARv1 file; return the number of blocks written.

    ``export_car(store, root_cid, path)`` or ``export_car(fs, path)`` (the fs root).
    The file is written with :func:`kuro_fs.atomic.write_target`, so a failed export leaves no CAR
    (a symlink such as ``/dev/stdout``, a FIFO or a device is written through, not replaced).
    Raises MissingBlock: a reachable block is absent.
    """
    if path is None:
        fs = source
        if not (hasattr(fs, "store") and hasattr(fs, "root")):
            raise TypeError("export_car(fs, path) needs an Fs; use export_car(store, root_cid, path) for a store")
        store: BlockStore = fs.store
        root: str = fs.root
        path = root_or_path
    else:
        store = source.store if hasattr(source, "store") else source
        root = str(root_or_path)
    parse(root)
    count = 0

    def counted() -> Iterator[tuple[str, bytes]]:
        nonlocal count
        for item in dag_blocks(store.get, root):
            count += 1
            yield item

    write_target(path, write_car([root], counted()))
    return count


def import_car(store: BlockStore, path: str | os.PathLike[str], *, workers: int = 2) -> list[str]:
    """Store every block of the CARv1 file at ``path``, all or nothing, in one pass; return its roots.

    Each block is hashed once, against the CID its section names, and put inside
    the store's batch: nothing becomes visible until the whole file has checked
    out, and on any error nothing staged survives (see the module docstring; a
    store without ``batch()`` is fed from a spool after the check). For a
    :class:`~kuro_fs.filestore.FileBlockStore` the commit is one sync–rename–sync,
    not two fsyncs per block; a crash mid-import leaves its staged blocks in an
    orphaned batch directory that the store never reads and the next batch sweeps.
    The file is parsed on this thread while ``workers`` threads check and put runs of
    :data:`PUT_RUN` blocks (creating a file is a system call that releases the GIL);
    ``store.put`` must then be thread-safe, as for :func:`~kuro_fs.importer.import_path`.

    Raises CarError (see :func:`read_car`); BlockStoreError from the store;
    ValueError: ``workers`` < 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    with open(path, "rb", buffering=_READ_BUFFER) as f:
        roots, offset = _read_header(f)
        with open_batch(store) as batched:
            if batched:
                _put_sections(store, _sections(f, offset), workers)
                return roots
        with tempfile.TemporaryFile() as spool:
            for parsed, block, pos in _sections(f, offset):
                _check_block(parsed, block, pos)
                binary = parsed.bytes
                spool.write(encode_uvarint(len(binary) + len(block)) + binary + block)  # a CAR section
            spool.seek(0)
            for parsed, block, _ in _sections(spool, 0):  # the sections just checked, read back
                put_matched(store, parsed, block)
    return roots


#: Blocks per task handed to an :func:`import_car` worker: at most this many, and no more blocks once
#: they hold :data:`PUT_RUN_BYTES`. No more than ``2 × workers`` runs, and no more than
#: ``2 × workers × PUT_RUN_BYTES`` bytes of them, are in flight while the parser reads on: an import
#: holds a bounded number of block bytes whatever the size of the blocks (a run is never less than
#: one section, up to ``MAX_SECTION_BYTES``).
PUT_RUN: Final = 512
PUT_RUN_BYTES: Final = 4 << 20


def _put_run(store: BlockStore, run: Iterable[_Section]) -> None:
    for parsed, block, pos in run:
        _check_block(parsed, block, pos)
        put_matched(store, parsed, block)  # a store mints the name from the bytes just checked: the section's


def _put_sections(store: BlockStore, sections: Iterator[_Section], workers: int) -> None:
    # Hand runs of sections to the workers, each in a copy of this context (so their puts join the
    # batch), with at most 2 runs (and 2 runs' worth of bytes) per worker in flight; on any error,
    # cancel what has not started and wait for what has (importer's pool: see _Pool there).
    if workers == 1:
        _put_run(store, sections)
        return
    pool = _Pool(workers)  # joins every thread that took a task, even one a Ctrl-C hit while it started
    try:
        pending: deque[tuple[Future[None], int]] = deque()
        in_flight = 0
        run: list[_Section] = []
        held = 0
        for section in sections:
            run.append(section)
            held += len(section[1])
            if len(run) == PUT_RUN or held >= PUT_RUN_BYTES:
                pending.append((pool.submit(contextvars.copy_context().run, _put_run, store, run), held))
                in_flight += held
                run, held = [], 0
                while len(pending) > 2 * workers or in_flight > 2 * workers * PUT_RUN_BYTES:
                    done, size = pending.popleft()
                    done.result()
                    in_flight -= size
        pending.append((pool.submit(contextvars.copy_context().run, _put_run, store, run), held))
        while pending:
            pending.popleft()[0].result()
    finally:
        _join(pool)  # (cancels the runs not started: after an error, no put may outlive the batch)


def _check_block(parsed: ParsedCID, block: bytes, pos: int) -> None:
    if not matches(parsed, block):
        raise CarError(f"block at offset {pos} does not hash to its CID {parsed}")
