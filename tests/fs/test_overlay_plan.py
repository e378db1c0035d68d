"""A commit's plan does not depend on how deep the tree is: it walks with stacks of its own, not Python's.

kuro.fs paths may be 4096 bytes, so a chain of 2048 one-letter directories is legal (the ABI's
``fs_write`` makes one); the planner once recursed per level and died past Python's recursion limit
(~1000 levels) with RecursionError. The iterative planner is held, plan for plan, to that recursive
one (kept below as the reference) on random trees of modest depth, and run at the maximum depth.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_fs.overlay import Handle, Overlay
from kuro_fs.overlay_tree import STAGING, DirNode, FileNode, Node, Op, _Planner, path_of, plan_commit
from kuro_fs.paths import MAX_PATH_BYTES

_MAX_DEPTH = (MAX_PATH_BYTES + 1) // 2  # "d/d/…/d": one-byte names and their separators


class _Recursive(_Planner):
    """The planner as it was: one Python frame per directory level (the reference for the new one)."""

    def stable(self, d: DirNode) -> bool:
        known = self._stable.get(id(d))
        if known is None:
            known = d is self.root or (d.in_origin_slot() and d.parent is not None and self.stable(d.parent))
            self._stable[id(d)] = known
        return known

    def detach_at(self, d: DirNode, path: tuple[str, ...]) -> None:
        for name in sorted(d.changed):
            was = d.base.get(name)
            if was is None:
                continue
            if isinstance(was, DirNode) and was.changed:
                self.detach_at(was, (*path, name))
            self.leave(d, path, name, was)

    def attach_at(self, d: DirNode, path: tuple[str, ...]) -> None:
        self.visited.append(d)
        for name in sorted(d.changed):
            node = d.known.get(name)
            if node is None:
                continue
            where = (*path, name)
            placed = node.in_origin_slot() or id(node) in self.direct_ids
            if isinstance(node, FileNode):
                if not placed or node.content.dirty:
                    self.ops.append(Op("link", where, node=node))
                continue
            assert isinstance(node, DirNode)
            if id(node) in self.staged:
                self.ops.append(Op("mv", self.staged[id(node)], where))
            elif not placed and not node.children():
                self.ops.append(Op("mkdir", where))
            if node.changed:
                self.attach_at(node, where)


def _recursive_plan(root: DirNode, staging: tuple[str, ...]) -> tuple[list[Op], list[DirNode], list[Node]]:
    plan = _Recursive(root, staging)
    plan.detach_at(root, ())
    for node, src in plan.direct:
        assert node.parent is not None
        plan.ops.append(Op("mv", src, (*path_of(node.parent), node.name)))
    plan.attach_at(root, ())
    if plan.staged:
        plan.ops.append(Op("rm", staging))
    return plan.ops, plan.visited, plan.left


def _same(a: tuple[list[Op], list[DirNode], list[Node]], b: tuple[list[Op], list[DirNode], list[Node]]) -> bool:
    ops_a, ops_b = ([(op.kind, op.path, op.to, id(op.node)) for op in plan[0]] for plan in (a, b))
    return ops_a == ops_b and [id(n) for n in a[1]] == [id(n) for n in b[1]] and a[2] == b[2]


_NAME = st.sampled_from(["a", "b", "c"])
_PATH = st.lists(_NAME, min_size=1, max_size=5).map("/".join)
_STEP = st.tuples(st.sampled_from(["mkdir", "write", "rename", "unlink", "rmdir"]), _PATH, _PATH)


def _apply(ov: Overlay, kind: str, path: str, other: str) -> None:
    if kind == "mkdir":  # with its parents, so later steps find somewhere to act
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            ov.mkdir("/".join(parts[:depth]))
    elif kind == "write":
        h = ov.open(path, create=True)
        if isinstance(h, Handle):
            ov.write(h, 0, other.encode())
            ov.close(h)
    elif kind == "rename":
        ov.rename(path, other)
    elif kind == "unlink":
        ov.unlink(path)
    else:
        ov.rmdir(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_PATH, st.booleans()), max_size=12), st.lists(_STEP, max_size=20))
@example(  # a moved directory whose children moved out first, and a swap that stages
    [("a/b", False), ("a/c/b", False), ("b/a", True)],
    [("rename", "a/b", "c"), ("rename", "a/c/b", "b/b"), ("rename", "a", "b/a/c"), ("rename", "b", "a")],
)
@example([("a/a/a", False), ("b/b", True)], [("rename", "a", "c"), ("rename", "b", "a"), ("rename", "c", "b")])
def test_the_iterative_plan_is_the_recursive_plan_on_random_trees(base: list[Any], steps: list[Any]) -> None:
    fs = Fs.empty(MemoryBlockStore())
    for path, is_dir in base:
        result = fs.mkdir(path) if is_dir else fs.write(path, path.encode())
        fs = result.fs if result.ok else fs
    ov = Overlay(fs)
    for step in steps:
        _apply(ov, *step)
    root = ov._root  # the plan is pure: both planners read the same tree, neither changes it
    assert _same(plan_commit(root, (STAGING,)), _recursive_plan(root, (STAGING,)))
    assert ov.commit().ok


def test_a_chain_of_directories_as_deep_as_a_path_allows_commits_renames_and_rewrites() -> None:
    ov = Overlay(Fs.empty(MemoryBlockStore()))
    chain = ["d"] * _MAX_DEPTH
    assert len("/".join(chain)) <= MAX_PATH_BYTES < len("/".join([*chain, "d"]))
    for depth in range(1, _MAX_DEPTH + 1):
        assert ov.mkdir("/".join(chain[:depth])) is None
    first = ov.commit()
    assert first.ok and first.fs.stat("/".join(chain)).ok
    deepest = "/".join([*chain[:-1], "f"])  # a file in place of the last directory: 4095 bytes
    assert ov.rmdir("/".join(chain)) is None
    h = ov.open(deepest, create=True)
    assert isinstance(h, Handle) and ov.write(h, 0, b"deep") == 4
    assert ov.rename("d", "e") is None  # the whole chain moves: every level is off its base path
    second = ov.commit()
    assert second.ok, second.denial
    assert second.fs.read("e/" + deepest.partition("/")[2]).value == b"deep"
    assert not second.fs.stat("d").ok
