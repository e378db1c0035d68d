"""The overlay's in-memory tree, and how its changes fold into the fewest kuro.fs operations.

## The one decision
Nodes are **inodes**, not paths: a directory maps names to node objects, and a handle holds the
node, so an open file survives being renamed or unlinked, as POSIX requires. Each node remembers
its *origin* — the slot ``(directory, name)`` it occupies in the base tree (None for a node made
since the last commit) — and each directory the names whose slot or subtree changed
(:attr:`DirNode.changed`, marked up both the current and the origin chain by :func:`touch`), so a
commit visits only what changed.

:func:`plan_commit` turns the difference between origins and current places into path operations on
the base :class:`~kuro_fs.fs.Fs`, in an order every intermediate tree accepts:

1. **detach**, post-order over the *base* tree: a deleted entry is ``rm``-ed (its children went
   first, so a directory is empty by then); a file that moved is ``rm``-ed unless a file takes its
   slot (then the link below replaces it); a directory that moved is ``mv``-ed into a staging
   directory at the root, unless it can move directly (step 2);
2. **direct moves**: a node whose old and new parents both sit unmoved in their own slots, and whose
   new slot was empty or held a deleted entry, is one ``mv`` from its base path to its new path;
3. **attach**, pre-order over the *current* tree: a staged directory is ``mv``-ed to its place, a
   new or changed file is ``link``-ed by the CID of its new DAG, a new empty directory is ``mkdir``-ed
   (a non-empty one is made by its children's operations); finally the staging directory is removed.

Every walk (detach, attach, whether a directory sits in its base slot all the way up) keeps a stack of
its own, not Python's: a chain of directories may be as deep as a 4096-byte path allows (2048 levels),
past the interpreter's recursion limit (tests/fs/test_overlay_plan.py holds it to the recursive walk).

So a file written, renamed or removed costs one operation, a renamed directory one (two when it
had to be staged, e.g. in a swap), and nothing unchanged costs anything.

## Pure
No I/O here: the plan is data; :mod:`kuro_fs.overlay` runs it against the Fs.

## Not done here
Path resolution, errno and handles (:mod:`kuro_fs.overlay`); file bytes (:mod:`kuro_fs.extents`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from kuro_fs.extents import SparseFile

__all__ = [
    "STAGING",
    "DirNode",
    "FileNode",
    "Node",
    "Op",
    "inode_number",
    "origin_path",
    "path_of",
    "plan_commit",
    "touch",
]

#: The root-level name a commit stages moved directories under (a suffix is added if it is taken).
STAGING: Final = ".kuro-overlay-staging"


def inode_number(key: str) -> int:
    """A stable 64-bit inode number for an origin key (never 0).

    >>> inode_number("") == inode_number(""), inode_number("/a") != inode_number("/b")
    (True, True)
    """
    number = int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")
    return number or 1


class Node:
    """What files and directories share: where they are now, where they were in the base, identity."""

    __slots__ = ("key", "name", "opens", "origin_name", "origin_parent", "parent")

    def __init__(self, key: str, parent: DirNode | None, name: str, origin: bool) -> None:
        self.key = key
        self.parent = parent
        self.name = name
        self.origin_parent = parent if origin else None
        self.origin_name = name if origin else ""
        self.opens = 0

    @property
    def ino(self) -> int:
        return inode_number(self.key)

    def in_origin_slot(self) -> bool:
        return self.origin_parent is not None and self.parent is self.origin_parent and self.name == self.origin_name


class FileNode(Node):
    __slots__ = ("content",)

    def __init__(self, key: str, parent: DirNode | None, name: str, origin: bool, content: SparseFile) -> None:
        super().__init__(key, parent, name, origin)
        self.content = content


class DirNode(Node):
    """A directory. ``known``: current children looked up so far (None = known absent); ``base``: the
    node each looked-up name held in the base tree (None = absent); ``complete``: every child is known."""

    __slots__ = ("base", "changed", "complete", "known")

    def __init__(self, key: str, parent: DirNode | None, name: str, origin: bool, complete: bool) -> None:
        super().__init__(key, parent, name, origin)
        self.known: dict[str, Node | None] = {}
        self.base: dict[str, Node | None] = {}
        self.complete = complete
        self.changed: set[str] = set()

    def children(self) -> list[tuple[str, Node]]:
        """The known present children, sorted by name (all of them once :attr:`complete`)."""
        return sorted((n, c) for n, c in self.known.items() if c is not None)


def touch(directory: DirNode, name: str) -> None:
    """Record that the slot ``name`` of ``directory`` (or what is below it) changed, up both chains."""
    stack = [(directory, name)]
    while stack:
        here, slot = stack.pop()
        already = bool(here.changed)
        here.changed.add(slot)
        if already:
            continue
        if here.parent is not None:
            stack.append((here.parent, here.name))
        if here.origin_parent is not None:
            stack.append((here.origin_parent, here.origin_name))


@dataclass(frozen=True)
class Op:
    """One kuro.fs operation: ``kind`` is rm, mv, link or mkdir; ``node`` is the file to link."""

    kind: str
    path: tuple[str, ...]
    to: tuple[str, ...] = ()
    node: FileNode | None = field(default=None, compare=False)


@dataclass
class _Planner:
    root: DirNode
    staging: tuple[str, ...]
    ops: list[Op] = field(default_factory=list)
    staged: dict[int, tuple[str, ...]] = field(default_factory=dict)  # id(dir node) -> its staged path
    direct: list[tuple[Node, tuple[str, ...]]] = field(default_factory=list)
    direct_ids: set[int] = field(default_factory=set)
    left: list[Node] = field(default_factory=list)
    visited: list[DirNode] = field(default_factory=list)
    _stable: dict[int, bool] = field(default_factory=dict)

    def stable(self, d: DirNode) -> bool:
        # d sits in its own base slot all the way up, so its path is the same before and after. Walked up
        # without recursion (a chain may be as deep as the longest path allows), every node on it remembered.
        chain: list[DirNode] = []
        here: DirNode = d
        while True:
            known = self._stable.get(id(here))
            if known is not None:
                break
            if here is self.root:
                known = True
            elif not here.in_origin_slot() or here.parent is None:
                known = False
            else:
                chain.append(here)  # stable exactly when its parent is
                here = here.parent
                continue
            self._stable[id(here)] = known
            break
        for node in chain:
            self._stable[id(node)] = known
        return known

    def is_direct(self, node: Node) -> bool:
        if node.parent is None or node.origin_parent is None or node.in_origin_slot():
            return False
        if not (self.stable(node.origin_parent) and self.stable(node.parent)):
            return False
        occupant = node.parent.base.get(node.name)
        return occupant is None or occupant.parent is None

    # ---- 1. detach (post-order over the base tree) and choose direct moves

    def detach(self, root: DirNode) -> None:
        """Post-order over the base tree's changed slots, with a stack of its own (no recursion: a chain of
        directories may be as deep as the longest path allows); a slot whose base directory changed below
        is left once that directory's slots all are."""
        stack: list[tuple[DirNode, tuple[str, ...], Iterator[str], tuple[DirNode, tuple[str, ...], str, Node] | None]]
        stack = [(root, (), iter(sorted(root.changed)), None)]
        while stack:
            d, path, names, slot = stack[-1]
            name = next(names, None)
            if name is None:
                stack.pop()
                if slot is not None:
                    self.leave(*slot)
                continue
            was = d.base.get(name)
            if was is None:
                continue
            if isinstance(was, DirNode) and was.changed:
                stack.append((was, (*path, name), iter(sorted(was.changed)), (d, path, name, was)))
            else:
                self.leave(d, path, name, was)

    def leave(self, d: DirNode, path: tuple[str, ...], name: str, was: Node) -> None:
        """What the base node ``was`` of slot ``name`` of ``d`` (at ``path``) needs to leave it, if it left."""
        if was.parent is d and was.name == name:
            return
        self.left.append(was)
        if self.is_direct(was):
            self.direct_ids.add(id(was))
            self.direct.append((was, (*path, name)))
        elif isinstance(was, FileNode):
            if not isinstance(d.known.get(name), FileNode):  # else the file linked here replaces it
                self.ops.append(Op("rm", (*path, name)))
        elif was.parent is None:
            self.ops.append(Op("rm", (*path, name)))
        else:
            spot = (*self.staging, str(len(self.staged)))
            self.staged[id(was)] = spot
            self.ops.append(Op("mv", (*path, name), spot))

    # ---- 3. attach (pre-order over the current tree)

    def attach(self, root: DirNode) -> None:
        """Pre-order over the current tree's changed slots, with a stack of its own (no recursion)."""
        self.visited.append(root)
        stack: list[tuple[DirNode, tuple[str, ...], Iterator[str]]] = [(root, (), iter(sorted(root.changed)))]
        while stack:
            d, path, names = stack[-1]
            name = next(names, None)
            if name is None:
                stack.pop()
                continue
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
                self.visited.append(node)
                stack.append((node, where, iter(sorted(node.changed))))


def plan_commit(root: DirNode, staging: tuple[str, ...]) -> tuple[list[Op], list[DirNode], list[Node]]:
    """The operations that make the base tree equal the current one, in an order every step accepts.

    ``staging`` is a root-level path free in both trees. Returns the operations, the directories the
    plan visited (to rebase after it ran) and the base nodes that left their slots.
    """
    plan = _Planner(root, staging)
    plan.detach(root)
    for node, src in plan.direct:
        assert node.parent is not None
        plan.ops.append(Op("mv", src, (*path_of(node.parent), node.name)))
    plan.attach(root)
    if plan.staged:
        plan.ops.append(Op("rm", staging))
    return plan.ops, plan.visited, plan.left


def path_of(node: Node) -> tuple[str, ...]:
    """The names from the root down to ``node`` in the current tree (``()`` for the root)."""
    return _chain(node, origin=False)


def origin_path(node: Node) -> tuple[str, ...]:
    """The names from the root down to ``node`` in the base tree (its origin chain)."""
    return _chain(node, origin=True)


def _chain(node: Node, *, origin: bool) -> tuple[str, ...]:
    names: list[str] = []
    here: Node | None = node
    while here is not None:
        parent = here.origin_parent if origin else here.parent
        if parent is None:
            break
        names.append(here.origin_name if origin else here.name)
        here = parent
    return tuple(reversed(names))
