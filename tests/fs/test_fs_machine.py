"""kuro.fs against a plain dict model: random write/mkdir/rm/mv/read/ls sequences agree, denial reasons included.

Also checked: every root ever produced still reads back its old content, a denied op
stores no block, and every block in the store re-hashes to its CID.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import verify
from kuro_fs.fs import CAPABILITIES, DENIAL_REASONS, OP_CAPABILITIES, RECEIPT_KEYS, Fs, FsResult
from kuro_fs.paths import clean_path

Path = tuple[str, ...]

SEGMENTS = ["a", "b", "c"]
GOOD_PATHS = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3).map("/".join)
HOSTILE_PATHS = st.sampled_from(["..", "a/../b", "", " ", "a\x00", "/", ".", "/a//b/", "./c", "/../a"])
PATHS = st.one_of(GOOD_PATHS, GOOD_PATHS, HOSTILE_PATHS)
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


class Denied(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def gate(op: str, grant: frozenset[str], *paths: object) -> list[Path]:
    out = []
    for path in paths:
        parts = clean_path(path)
        if parts is None:
            raise Denied("bad-path")
        out.append(parts)
    for cap in OP_CAPABILITIES[op]:
        if cap not in grant:
            raise Denied("missing-capability")
    return out


class FsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryBlockStore()
        self.fs = Fs(self.store, Fs.empty(self.store).root, chunk_size=4, width=2)
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
            self.fs = Fs(self.store, result.fs.root, chunk_size=4, width=2)
            self.snapshots.append((self.fs, self.model.copy()))

    def attempt(self, decide: Any) -> Any:
        try:
            return decide()
        except Denied as deny:
            return deny

    # ---- rules

    @rule(path=PATHS, data=DATA, grant=GRANTS)
    def write(self, path: str, data: bytes, grant: frozenset[str]) -> None:
        before = self.store.cids()
        trial = self.model.copy()

        def decide() -> None:
            (p,) = gate("write", grant, path)
            if not p:
                raise Denied("is-a-directory")
            trial.check_parents_for_write(p)
            if p in trial.dirs:
                raise Denied("is-a-directory")
            trial.files[p] = data
            trial.add_parents(p)

        expect = self.attempt(decide)
        result = self.fs.with_grant(grant).write(path, data)
        if not isinstance(expect, Denied):
            self.model = trial
        else:
            assert self.store.cids() == before
        self.apply(result, expect, "write", True)

    @rule(path=PATHS, grant=GRANTS)
    def mkdir(self, path: str, grant: frozenset[str]) -> None:
        before = self.store.cids()
        trial = self.model.copy()

        def decide() -> None:
            (p,) = gate("mkdir", grant, path)
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
            (p,) = gate("rm", grant, path)
            if not p:
                raise Denied("not-found")
            kind = trial.lookup(p)
            if kind == "dir":
                if trial.children(p):
                    raise Denied("directory-not-empty")
                trial.dirs.discard(p)
            else:
                del trial.files[p]

        expect = self.attempt(decide)
        result = self.fs.with_grant(grant).rm(path)
        if not isinstance(expect, Denied):
            self.model = trial
        self.apply(result, expect, "rm", True)

    @rule(src=PATHS, dst=PATHS, grant=GRANTS)
    def mv(self, src: str, dst: str, grant: frozenset[str]) -> None:
        trial = self.model.copy()

        def decide() -> None:
            s, d = gate("mv", grant, src, dst)
            if not s:
                raise Denied("not-found")
            kind = trial.lookup(s)
            if d == s:
                return
            if kind == "dir" and d[: len(s)] == s:
                raise Denied("bad-path")
            if not d:
                raise Denied("is-a-directory")
            trial.check_parents_for_write(d)
            if d in trial.dirs:
                raise Denied("is-a-directory")
            if d in trial.files and kind == "dir":
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

        expect = self.attempt(decide)
        result = self.fs.with_grant(grant).mv(src, dst)
        if not isinstance(expect, Denied):
            self.model = trial
        self.apply(result, expect, "mv", True)

    @rule(path=PATHS, grant=GRANTS, offset=st.integers(0, 30), length=st.integers(0, 30))
    def read(self, path: str, grant: frozenset[str], offset: int, length: int) -> None:
        def decide() -> bytes:
            (p,) = gate("read", grant, path)
            if self.model.lookup(p) == "dir":
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
            (p,) = gate("ls", grant, path)
            if self.model.lookup(p) == "file":
                raise Denied("not-a-directory")
            return self.model.children(p)

        expect = self.attempt(decide)
        result = self.fs.with_grant(grant).ls(path)
        self.apply(result, expect, "ls", False)
        if not isinstance(expect, Denied):
            assert [(e["name"], e["kind"]) for e in result.value] == expect

    # ---- invariants

    @invariant()
    def the_tree_matches_the_model(self) -> None:
        listing = self.fs.walk(".").value
        assert {tuple(e["path"].split("/")) for e in listing if e["kind"] == "dir"} == self.model.dirs - {()}
        assert {tuple(e["path"].split("/")): e["size"] for e in listing if e["kind"] == "file"} == {
            p: len(v) for p, v in self.model.files.items()
        }

    def teardown(self) -> None:
        for fs, model in self.snapshots:
            for p, data in model.files.items():
                assert fs.read("/".join(p)).value == data
            assert {tuple(e["path"].split("/")) for e in fs.walk().value} == (model.dirs - {()}) | set(model.files)
        for cid in self.store.cids():
            assert verify(cid, self.store.get(cid) or b"")


FsMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
test_kuro_fs_agrees_with_a_dict_model = FsMachine.TestCase
