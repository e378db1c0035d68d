"""kuro.fs against a plain dict model: random write/link/mkdir/rm/mv/read/ls sequences agree, denial reasons included.

The filesystem runs with a tiny directory layout (flat up to 2 entries, then a HashMap of
8 slots and buckets of 1), so directories cross the shard threshold both ways, and
buckets overflow into child nodes and fold back, all the time.

Also checked: every root ever produced still reads back its old content, a denied op
stores no block, a lost block is denied as ``block-missing`` naming it (and a write through
it stores nothing), every directory's CID is the one its entries alone give (canonical
layout, whatever the history), and every block in the store re-hashes to its CID.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import verify
from kuro_fs.fs import CAPABILITIES, DENIAL_REASONS, OP_CAPABILITIES, RECEIPT_KEYS, Fs, FsResult
from kuro_fs.fsdir import DirLayout, Entry, write_dir
from kuro_fs.hamt import Shape
from kuro_fs.paths import clean_path, join_path, names_a_directory
from kuro_fs.unixfs import write_file

Path = tuple[str, ...]

SEGMENTS = ["a", "b", "c", "d", "e"]
LAYOUT = DirLayout(max_flat=2, shape=Shape(3, 1))
GOOD_PATHS = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3).map("/".join)
HOSTILE_PATHS = st.sampled_from(
    ["..", "a/../b", "", " ", "a\x00", "/", ".", "/a//b/", "./c", "/../a", "a\nb", "b/\x1b]0;t", "c/\x85", "a/ /b"]
)
DIR_PATHS = GOOD_PATHS.map(lambda p: p + "/")  # a trailing '/': only a directory may be there
PATHS = st.one_of(GOOD_PATHS, GOOD_PATHS, DIR_PATHS, HOSTILE_PATHS)
DATA = st.binary(max_size=24)
GRANTS = st.one_of(
    st.just(frozenset(CAPABILITIES)),
    st.sets(st.sampled_from(CAPABILITIES)).map(frozenset),
)


class Model:
    """The filesystem as two plain collections: file bytes by path, and the set of directories."""

    def __init__(self) -> None:
        self.files: dict[Path, bytes] = {}
        self.dirs: set[Path] = {()}

    def copy(self) -> Model:
        other = Model()
        other.files = dict(self.files)
        other.dirs = set(self.dirs)
        return other

    def lookup(self, p: Path) -> str | None:
        """Read-style: the kind at ``p``, or raise the denial reason."""
        for i in range(1, len(p)):
            if p[:i] in self.files:
                raise Denied("not-a-directory")
            if p[:i] not in self.dirs:
                raise Denied("not-found")
        if p in self.files:
            return "file"
        if p in self.dirs:
            return "dir"
        raise Denied("not-found")

    def check_parents_for_write(self, p: Path) -> None:
        for i in range(1, len(p)):
            if p[:i] in self.files:
                raise Denied("path-blocked")
            if p[:i] not in self.dirs:
                return

    def add_parents(self, p: Path) -> None:
        for i in range(len(p)):
            self.dirs.add(p[:i])

    def children(self, p: Path) -> list[tuple[str, str]]:
        names = {q[len(p)]: "file" for q in self.files if len(q) == len(p) + 1 and q[: len(p)] == p}
        names.update({q[len(p)]: "dir" for q in self.dirs if len(q) == len(p) + 1 and q[: len(p)] == p})
        return sorted(names.items())


class LossyStore(MemoryBlockStore):
    """A view of another store that has lost the blocks in ``lost`` (puts go through to the real store)."""

    def __init__(self, real: MemoryBlockStore, lost: set[str]) -> None:
        super().__init__()
        self.real = real
        self.lost = lost

    def put(self, data: bytes, codec: str = "raw") -> str:
        return self.real.put(data, codec)

    def get(self, cid: str) -> bytes | None:
        return None if cid in self.lost else self.real.get(cid)


class Denied(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def gate(op: str, grant: frozenset[str], *paths: object) -> list[tuple[Path, bool]]:
    """Each path's segments and whether it ends in '/' (names a directory); bad-path, then the grant."""
    out = []
    for path in paths:
        parts = clean_path(path)
        if parts is None:
            raise Denied("bad-path")
        assert isinstance(path, str)
        out.append((parts, names_a_directory(path)))
    for cap in OP_CAPABILITIES[op]:
        if cap not in grant:
            raise Denied("missing-capability")
    return out


class FsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryBlockStore()
        self.fs = Fs(self.store, Fs.empty(self.store).root, chunk_size=4, width=2, layout=LAYOUT)
        self.model = Model()
        self.snapshots: list[tuple[Fs, Model]] = [(self.fs, self.model.copy())]

    # ---- comparing one op's outcome

    def apply(self, result: FsResult, expect: Any, op: str, mutate: bool) -> None:
        assert set(result.receipt) <= set(RECEIPT_KEYS)
        assert result.receipt["kuro.fs/op"] == op
        if isinstance(expect, Denied):
            assert not result.ok, (op, result.receipt, expect.reason)
            assert result.receipt["kuro.fs/reason"] == expect.reason, (op, result.receipt)
            assert result.receipt["kuro.fs/reason"] in DENIAL_REASONS
            assert result.fs.root == self.fs.root
            return
        assert result.ok, (op, result.receipt)
        if mutate:
            self.fs = Fs(self.store, result.fs.root, chunk_size=4, width=2, layout=LAYOUT)
            self.snapshots.append((self.fs, self.model.copy()))

    def attempt(self, decide: Any) -> Any:
        try:
            return decide()
        except Denied as deny:
            return deny

    # ---- rules

    @rule(path=PATHS, data=DATA, grant=GRANTS)
    def write(self, path: str, data: bytes, grant: frozenset[str]) -> None:
        self._write_or_link("write", path, data, grant)

    @rule(path=PATHS, data=DATA, grant=GRANTS)
    def link(self, path: str, data: bytes, grant: frozenset[str]) -> None:
        self._write_or_link("link", path, data, grant)

    def _write_or_link(self, op: str, path: str, data: bytes, grant: frozenset[str]) -> None:
        cid = write_file(self.store.put, data, chunk_size=4, width=2).cid if op == "link" else ""
        before = self.store.cids()
        trial = self.model.copy()

        def decide() -> None:
            ((p, wants_dir),) = gate(op, grant, path)
            if not p:
                raise Denied("is-a-directory")
            trial.check_parents_for_write(p)
            if p in trial.dirs:
                raise Denied("is-a-directory")
            if wants_dir:
                raise Denied("not-a-directory")
            trial.files[p] = data
            trial.add_parents(p)

        expect = self.attempt(decide)
        fs = self.fs.with_grant(grant)
        result = fs.link(path, cid) if op == "link" else fs.write(path, data)
        if not isinstance(expect, Denied):
            self.model = trial
        else:
            assert self.store.cids() == before
        self.apply(result, expect, op, True)

    @rule(path=PATHS, grant=GRANTS)
    def mkdir(self, path: str, grant: frozenset[str]) -> None:
        before = self.store.cids()
        trial = self.model.copy()

        def decide() -> None:
            ((p, _),) = gate("mkdir", grant, path)
            trial.check_parents_for_write(p)
            if p in trial.files:
                raise Denied("path-blocked")
            trial.dirs.add(p)
            trial.add_parents(p)

        expect = self.attempt(decide)
        result = self.fs.with_grant(grant).mkdir(path)
        if not isinstance(expect, Denied):
            self.model = trial
        else:
            assert self.store.cids() == before
        self.apply(result, expect, "mkdir", True)

    @rule(path=PATHS, grant=GRANTS)
    def rm(self, path: str, grant: frozenset[str]) -> None:
        trial = self.model.copy()

        def decide() -> None:
            ((p, wants_dir),) = gate("rm", grant, path)
            if not p:
                raise Denied("not-found")
            kind = trial.lookup(p)
            if kind == "file" and wants_dir:
                raise Denied("not-a-directory")
            if kind == "dir":
                if trial.children(p):
                    raise Denied("directory-not-empty")
                trial.dirs.discard(p)
            else:
                del trial.files[p]

        before = self.store.cids()
        expect = self.attempt(decide)
        result = self.fs.with_grant(grant).rm(path)
        if not isinstance(expect, Denied):
            self.model = trial
        else:
            assert self.store.cids() == before
        self.apply(result, expect, "rm", True)

    @rule(src=PATHS, dst=PATHS, grant=GRANTS)
    def mv(self, src: str, dst: str, grant: frozenset[str]) -> None:
        trial = self.model.copy()

        def decide() -> None:
            (s, s_dir), (d, d_dir) = gate("mv", grant, src, dst)
            if not s:
                raise Denied("not-found")
            kind = trial.lookup(s)
            if kind == "file" and s_dir:
                raise Denied("not-a-directory")
            if d == s:
                if kind == "file" and d_dir:
                    raise Denied("not-a-directory")
                return
            if kind == "dir" and d[: len(s)] == s:
                raise Denied("bad-path")
            if not d:
                raise Denied("is-a-directory")
            trial.check_parents_for_write(d)
            if d in trial.dirs:
                raise Denied("is-a-directory")
            if (d in trial.files and kind == "dir") or (kind == "file" and d_dir):
                raise Denied("not-a-directory")
            trial.files.pop(d, None)
            moved_files = {q: v for q, v in trial.files.items() if q[: len(s)] == s}
            moved_dirs = {q for q in trial.dirs if q[: len(s)] == s}
            for q in moved_files:
                del trial.files[q]
            trial.dirs -= moved_dirs
            trial.files.update({d + q[len(s) :]: v for q, v in moved_files.items()})
            trial.dirs |= {d + q[len(s) :] for q in moved_dirs}
            trial.add_parents(d)

        before = self.store.cids()
        expect = self.attempt(decide)
        result = self.fs.with_grant(grant).mv(src, dst)
        if not isinstance(expect, Denied):
            self.model = trial
        else:
            assert self.store.cids() == before
        self.apply(result, expect, "mv", True)

    @rule(path=PATHS, grant=GRANTS, offset=st.integers(0, 30), length=st.integers(0, 30))
    def read(self, path: str, grant: frozenset[str], offset: int, length: int) -> None:
        def decide() -> bytes:
            ((p, wants_dir),) = gate("read", grant, path)
            kind = self.model.lookup(p)
            if kind == "file" and wants_dir:
                raise Denied("not-a-directory")
            if kind == "dir":
                raise Denied("not-a-file")
            return self.model.files[p]

        expect = self.attempt(decide)
        whole = self.fs.with_grant(grant).read(path)
        self.apply(whole, expect, "read", False)
        part = self.fs.with_grant(grant).read_range(path, offset, length)
        self.apply(part, expect, "read-range", False)
        if not isinstance(expect, Denied):
            assert whole.value == expect
            assert part.value == expect[offset : offset + length]

    @rule(path=PATHS, grant=GRANTS)
    def ls(self, path: str, grant: frozenset[str]) -> None:
        def decide() -> list[tuple[str, str]]:
            ((p, _),) = gate("ls", grant, path)
            if self.model.lookup(p) == "file":
                raise Denied("not-a-directory")
            return self.model.children(p)

        expect = self.attempt(decide)
        result = self.fs.with_grant(grant).ls(path)
        self.apply(result, expect, "ls", False)
        if not isinstance(expect, Denied):
            assert [(e["name"], e["kind"]) for e in result.value] == expect

    @rule(which=st.integers(0, 1 << 16), data=DATA, lose_parent=st.booleans())
    def lose_a_block(self, which: int, data: bytes, lose_parent: bool) -> None:
        # Against a view of the store that lost one block — a file's root block, or the block of the
        # directory holding it (the fs root for a top-level file) — every op that needs that block is
        # denied block-missing, naming it, and a write through it stores nothing.
        if not self.model.files:
            return
        p = sorted(self.model.files)[which % len(self.model.files)]
        path, parent = join_path(p), join_path(p[:-1])
        lost = self.fs.stat(parent if lose_parent else path).value["cid"]
        damaged = Fs(LossyStore(self.store, {lost}), self.fs.root, chunk_size=4, width=2, layout=LAYOUT)
        before = self.store.cids()
        for result in [damaged.read(path), damaged.read_range(path, 0, 1)]:
            assert result.receipt["kuro.fs/reason"] == "block-missing" and result.receipt["kuro.fs/cid"] == lost
        if lose_parent:
            for result in [damaged.ls(parent), damaged.write(path, data), damaged.rm(path), damaged.mkdir(path + "/x")]:
                assert result.receipt["kuro.fs/reason"] == "block-missing" and result.receipt["kuro.fs/cid"] == lost
                assert result.fs.root == self.fs.root
            assert self.store.cids() == before
        else:
            assert damaged.stat(path).ok and damaged.ls(parent).ok  # listing reads no file block

    # ---- invariants

    @invariant()
    def the_tree_matches_the_model(self) -> None:
        listing = self.fs.walk(".").value
        assert {tuple(e["path"].split("/")) for e in listing if e["kind"] == "dir"} == self.model.dirs - {()}
        assert {tuple(e["path"].split("/")): e["size"] for e in listing if e["kind"] == "file"} == {
            p: len(v) for p, v in self.model.files.items()
        }

    @invariant()
    def every_directory_has_the_cid_of_its_entries_alone(self) -> None:
        for d in self.model.dirs:
            listing = self.fs.ls(join_path(d)).value
            entries = {e["name"]: Entry(e["cid"], e["size"]) for e in listing}
            assert self.fs.stat(join_path(d)).value["cid"] == write_dir(self.store, entries, LAYOUT)

    def teardown(self) -> None:
        for fs, model in self.snapshots:
            for p, data in model.files.items():
                assert fs.read("/".join(p)).value == data
            assert {tuple(e["path"].split("/")) for e in fs.walk().value} == (model.dirs - {()}) | set(model.files)
        for cid in self.store.cids():
            assert verify(cid, self.store.get(cid) or b"")


FsMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
test_kuro_fs_agrees_with_a_dict_model = FsMachine.TestCase
