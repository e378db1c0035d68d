"""The durable block store: one file per block under fan-out directories.

## The one decision
A block file exists under its CID's name only once all of its bytes are on disk.
Every ``put`` writes a private temp file in the block's own fan-out directory,
fsyncs it, ``os.replace``-s it onto ``<root>/<shard>/<cid>`` and fsyncs the
directory. A crash can leave a torn *temp* file behind (``.tmp-…``), never a
torn block under a valid name, and temp files are invisible to ``get``, ``has``,
``stats`` and ``iter_cids``. Because the final rename is atomic and every writer
of one CID writes the same bytes, any number of threads and processes may put
the same and different blocks at once without a lock.

``get`` re-hashes what it read (``verify=True``, the default) and raises
:class:`~kuro_fs.errors.CorruptBlock` naming the CID on a mismatch: disks rot
and people edit files, and a reader must never be handed bytes that do not match
the name it asked for.

A CIDv0 is filed under its CIDv1 (:attr:`~kuro_fs.cid.ParsedCID.key`), so both names reach one
file; an identity CID is never a file (its bytes are inline in the name). ``put(data, cid=c)`` files
bytes of any hash :mod:`kuro_fs.cid` reads under ``c``, only after :func:`~kuro_fs.cid.matches` says
they are that block.

The shard is the next-to-last two characters of the CID (go-ipfs flatfs's
``next-to-last/2``): the leading characters are the fixed ``bafkrei`` /
``bafybei`` / ``bafyrei`` prefix and the last one carries only 3 bits, so these
two spread blocks over up to 1024 directories. A CID is parsed before it
becomes a path, so no name can escape the root.

## Effects
Disk only: creates, reads, renames and unlinks files under ``root``. OS errors
are translated to :class:`~kuro_fs.errors.BlockStoreError` (``from`` the OSError).

## Not done here
No cross-process lock, no garbage collection of leftover temp files (they are
ignored, not swept: sweeping could race a live writer in another process), no
durability fsync on ``delete``/``drop_cache``, no network.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType

from kuro_fs.atomic import TMP_PREFIX, fsync_dir, write_atomic
from kuro_fs.blocks import DeleteResult, DropResult, PublishResult, StatsResult, block_bytes, publish_blocks
from kuro_fs.cid import ParsedCID, cid_for, matches, parse
from kuro_fs.errors import BlockStoreError, CorruptBlock
from kuro_fs.home import blocks_dir

__all__ = ["FileBlockStore", "default_store", "shard_of"]

_TMP_PREFIX = TMP_PREFIX
_BLOCK_NAME = re.compile(r"b[a-z2-7]{58}|b[a-z2-7]{109}")  # 32-byte digests; 64-byte (sha2-512)
_SHARD_NAME = re.compile(r"[a-z2-7]{2}")

# ---- helpers


def shard_of(cid: str) -> str:
    """The fan-out directory name of ``cid``: its next-to-last two characters.

    >>> shard_of("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
    'yk'
    """
    return cid[-3:-1]


def _fail(what: str, cid: str, exc: OSError) -> BlockStoreError:
    return BlockStoreError(f"{what} {cid} failed: {exc.strerror or exc} ({exc.filename or ''})")


# ---- the store


class FileBlockStore:
    """A :class:`~kuro_fs.blocks.BlockStore` on disk under ``root_dir`` (created if missing).

    ``verify`` (default True) makes ``get`` re-hash every block it returns.
    Threads and processes may use one root concurrently. ``close()`` is idempotent,
    ``with`` works, and any operation after close raises ``BlockStoreError``.

    Raises BlockStoreError: if ``root_dir`` cannot be created or is not a directory.
    """

    def __init__(self, root_dir: str | os.PathLike[str], *, verify: bool = True) -> None:
        self._root = Path(root_dir)
        self._verify = verify
        self._closed = False
        try:
            self._root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BlockStoreError(f"cannot open block store at {self._root}: {exc.strerror or exc}") from exc

    # ---- lifecycle

    @property
    def root(self) -> Path:
        """The directory this store keeps its blocks under."""
        return self._root

    @property
    def verify(self) -> bool:
        """Whether ``get`` re-hashes blocks before returning them."""
        return self._verify

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._closed

    def close(self) -> None:
        """Close the store. Idempotent; later operations raise ``BlockStoreError``."""
        self._closed = True

    def __enter__(self) -> FileBlockStore:
        self._check_open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"FileBlockStore({str(self._root)!r}, verify={self._verify}) [{state}]"

    def _check_open(self) -> None:
        if self._closed:
            raise BlockStoreError(f"block store at {self._root} is closed")

    def _locate(self, cid: str) -> tuple[Path, ParsedCID]:
        parsed = parse(cid)  # raises InvalidCID; after this the name is base32 (or CIDv0 → its CIDv1)
        key = cid if parsed.version == 1 else parsed.key
        return self._root / shard_of(key) / key, parsed

    # ---- the seven operations

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        """Store ``data`` as a block of ``codec`` and return its CID.

        With ``cid``, file the bytes under that name instead (any hash :mod:`kuro_fs.cid` reads;
        nothing for an identity CID), only if they hash to it: else CorruptBlock, nothing stored.

        An already-present block with the same bytes is not rewritten. A block
        file of the wrong length, or (with ``verify``) the wrong content, is
        replaced atomically, so ``put`` heals a damaged block.

        Raises InvalidCID: for an unknown codec. Raises TypeError: if ``data`` is not
        bytes-like. Raises BlockStoreError: on an OS failure.
        """
        self._check_open()
        data = block_bytes(data)
        if cid is None:
            cid = cid_for(data, codec)
            path = self._root / shard_of(cid) / cid
        else:
            path, parsed = self._locate(cid)
            if not matches(parsed, data):
                raise CorruptBlock(cid, f"{len(data)} given bytes do not hash to this CID; nothing stored")
            if parsed.hash == "identity":
                return cid
        try:
            if self._present_and_equal(path, data):
                return cid
            self._atomic_write(path, data)
        except OSError as exc:
            raise _fail("put", cid, exc) from exc
        return cid

    def get(self, cid: str) -> bytes | None:
        """The bytes stored under ``cid``, or ``None`` if absent.

        Raises InvalidCID: if ``cid`` is malformed. Raises CorruptBlock: if
        ``verify`` is on and the stored bytes do not hash to ``cid``. Raises
        BlockStoreError: on an OS failure other than "no such file".
        """
        self._check_open()
        path, parsed = self._locate(cid)
        if parsed.hash == "identity":
            return parsed.digest
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _fail("get", cid, exc) from exc
        if self._verify and not matches(parsed, data):
            raise CorruptBlock(cid, f"{len(data)} stored bytes at {path} do not hash to this CID")
        return data

    def has(self, cid: str) -> bool:
        """True if a regular block file exists under ``cid`` (its content is not re-hashed).

        Raises InvalidCID: if ``cid`` is malformed. Raises BlockStoreError: on an OS failure.
        """
        self._check_open()
        path, parsed = self._locate(cid)
        if parsed.hash == "identity":
            return True
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _fail("has", cid, exc) from exc
        return stat.S_ISREG(mode)

    def delete(self, cid: str) -> DeleteResult:
        """Remove the block; ``{"removed": False}`` if it was absent (idempotent).

        Raises InvalidCID: if ``cid`` is malformed. Raises BlockStoreError: on a real OS failure.
        """
        self._check_open()
        path, _ = self._locate(cid)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return {"removed": False}
        except OSError as exc:
            raise _fail("delete", cid, exc) from exc
        return {"removed": True}

    def stats(self) -> StatsResult:
        """``{"blocks": n, "bytes": n}`` over block files; temp files are not counted."""
        self._check_open()
        blocks = 0
        total = 0
        for path in self._block_paths():
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:  # deleted by another writer mid-scan
                continue
            except OSError as exc:
                raise _fail("stats", path.name, exc) from exc
            blocks += 1
            total += size
        return {"blocks": blocks, "bytes": total}

    def publish(self, cids: Iterable[str]) -> PublishResult:
        """Re-hash each named block (whatever ``verify`` says); see :func:`~kuro_fs.blocks.publish_blocks`."""
        self._check_open()
        return publish_blocks(self, cids)

    def drop_cache(self) -> DropResult:
        """Remove every block file; ``{"removed": n}`` counts the files this call removed.

        Raises BlockStoreError: on an OS failure (the message says how many were removed first).
        """
        self._check_open()
        removed = 0
        for path in self._block_paths():
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise BlockStoreError(
                    f"drop_cache failed after removing {removed} blocks: {exc.strerror or exc} ({path})"
                ) from exc
            removed += 1
        return {"removed": removed}

    def iter_cids(self) -> Iterator[str]:
        """Every CID with a block file, in no particular order (for audits)."""
        self._check_open()
        return (path.name for path in self._block_paths())

    def cids(self) -> list[str]:
        """Every CID held, sorted (for tests and audits)."""
        return sorted(self.iter_cids())

    # ---- private effects

    def _present_and_equal(self, path: Path, data: bytes) -> bool:
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            return False
        if size != len(data):
            return False
        if not self._verify:
            return True
        try:
            return path.read_bytes() == data
        except FileNotFoundError:
            return False

    def _atomic_write(self, path: Path, data: bytes) -> None:
        shard = path.parent
        if not shard.is_dir():
            shard.mkdir(parents=True, exist_ok=True)
            fsync_dir(self._root)
        write_atomic(path, data)

    def _block_paths(self) -> Iterator[Path]:
        try:
            shards = sorted(os.scandir(self._root), key=lambda e: e.name)
        except FileNotFoundError:  # the whole store was removed from outside: it is empty
            return
        except OSError as exc:
            raise BlockStoreError(f"cannot list block store at {self._root}: {exc.strerror or exc}") from exc
        for shard in shards:
            if not _SHARD_NAME.fullmatch(shard.name) or not shard.is_dir(follow_symlinks=False):
                continue
            try:
                entries = list(os.scandir(shard.path))
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno == errno.ENOTDIR:
                    continue
                raise BlockStoreError(f"cannot list {shard.path}: {exc.strerror or exc}") from exc
            for entry in entries:
                if (
                    _BLOCK_NAME.fullmatch(entry.name)
                    and shard_of(entry.name) == shard.name
                    and entry.is_file(follow_symlinks=False)
                ):
                    yield Path(entry.path)


def default_store(home: str | os.PathLike[str] | None = None, *, verify: bool = True) -> FileBlockStore:
    """Open the durable store of the embedded home: ``<home>/blocks`` (see :mod:`kuro_fs.home`)."""
    return FileBlockStore(blocks_dir(home), verify=verify)
