"""The tree of hierarchical DRF (drf with ``enableHierarchy``).

Queues name their place in the tree with the ``volcano.sh/hierarchy`` annotation (``root/eng/dev``)
and one weight per level with ``volcano.sh/hierarchy-weights`` (``1/2/8``).  Jobs are the leaves.
An inner node's allocation is its children's, each non-saturated child first rescaled to the
smallest dominant share among them: what matters between siblings is how much of what they can
still use they hold, so a child that has its fill ("saturated": it holds all it asked for, or
asks for a resource nobody can get any more) neither lifts nor lowers its parent.  Queues are
compared top down, by share over weight at the first level where their paths differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lahar.api.resource import Resource, max_share


@dataclass
class Attr:
    """What a job (or tree node) holds and its dominant share of the cluster."""

    allocated: Resource = field(default_factory=Resource)
    share: float = 0.0

    def clone(self) -> Attr:
        return Attr(self.allocated.clone(), self.share)


def dominant_share(allocated: Resource, total: Resource, names: list[str] | None = None) -> float:
    """The largest ratio held over the cluster's resources (Volcano's calculateShare);
    ``names``: the cluster's resource names, when the caller has them at hand."""
    return max_share(allocated, total, total.names() if names is None else names)


def saturated(allocated: Resource, request: Resource, demanding: frozenset[str]) -> bool:
    """A job holds all of some resource it asked for, or asks for one that is used up."""
    for name in allocated.names():
        need = request.get(name)
        if need == 0:
            continue
        held = allocated.get(name)
        if held != 0 and held >= need:
            return True
        if name not in demanding:
            return True
    return False


class Node:
    """A level of the hierarchy (children set) or a job (leaf, ``children`` None)."""

    __slots__ = ("attr", "children", "name", "parent", "request", "saturated", "weight")

    def __init__(self, name: str, weight: float, attr: Attr, *, leaf: bool, request: Resource | None = None) -> None:
        self.name = name
        self.weight = weight
        self.attr = attr
        self.request = request if request is not None else Resource()
        self.saturated = False
        self.parent: Node | None = None
        self.children: dict[str, Node] | None = None if leaf else {}

    def clone(self, parent: Node | None = None) -> Node:
        copy = Node(self.name, self.weight, self.attr.clone(), leaf=self.children is None, request=self.request.clone())
        copy.saturated, copy.parent = self.saturated, parent
        if self.children is not None:
            assert copy.children is not None
            for key, child in self.children.items():
                copy.children[key] = child.clone(copy)
        return copy


def _weight(weights: list[str], level: int) -> float:
    """A level's weight; missing, unreadable or below 1 counts as 1 (Volcano floors at 1)."""
    try:
        w = float(weights[level])
    except (IndexError, ValueError):
        return 1.0
    return w if w >= 1 else 1.0


class Tree:
    """The HDRF tree of one session: jobs hung under their queue's path, shares kept current."""

    def __init__(self, total: Resource) -> None:
        self.total = total
        self.allocated = Resource()  # what every job in the tree holds
        self.root = Node("root", 1.0, Attr(), leaf=False)
        self.demanding: frozenset[str] = frozenset()

    def clone(self) -> Tree:
        copy = Tree(self.total)
        copy.allocated = self.allocated.clone()
        copy.root = self.root.clone()
        copy.demanding = self.demanding
        return copy

    # -- building -----------------------------------------------------------------------------
    def place(self, job: str, attr: Attr, request: Resource, hierarchy: str, weights: str) -> Node:
        """Hang (or re-hang) a job's leaf under its queue's path, creating levels on the way.

        A level keeps the weight of the queue that created it (Volcano's first-come rule)."""
        node = self.root
        names, levels = hierarchy.split("/"), weights.split("/")
        for level in range(1, len(names)):
            assert node.children is not None
            child = node.children.get(names[level])
            if child is None or child.children is None:
                child = Node(names[level], _weight(levels, level), Attr(), leaf=False)
                child.parent = node
                node.children[names[level]] = child
            node = child
        assert node.children is not None
        leaf = Node(job, 1.0, attr, leaf=True, request=request.clone())
        leaf.parent = node
        node.children[job] = leaf
        return leaf

    # -- shares -------------------------------------------------------------------------------
    def _demanding(self) -> frozenset[str]:
        """Resources not yet used up by the jobs in the tree."""
        return frozenset(n for n in self.total.names() if self.allocated.get(n) < self.total.get(n))

    def refresh(self, leaf: Node | None = None) -> None:
        """Recompute shares: the whole tree when the used-up set changed (every leaf's saturation
        may move), else only the path from ``leaf`` to the root (nothing else changed)."""
        demanding = self._demanding()
        if leaf is None or demanding != self.demanding:
            self.demanding = demanding
            self._update(self.root)
            return
        self._update_leaf(leaf)
        node = leaf.parent
        while node is not None:
            self._update_inner(node)
            node = node.parent

    def _update(self, node: Node) -> None:
        if node.children is None:
            self._update_leaf(node)
            return
        for child in node.children.values():
            self._update(child)
        self._update_inner(node)

    def _update_leaf(self, node: Node) -> None:
        node.saturated = saturated(node.attr.allocated, node.request, self.demanding)

    def _update_inner(self, node: Node) -> None:
        assert node.children is not None
        children = [c for c in node.children.values() if c.attr.share != 0]
        # Rescale every demanding child to the smallest dominant share among them.
        floor = min((dominant_share(c.attr.allocated, self.total) for c in children if not c.saturated), default=1.0)
        floor = min(floor, 1.0)
        allocated = Resource()
        for child in children:
            if child.saturated:
                allocated.add(child.attr.allocated)
            else:
                allocated.add(child.attr.allocated.clone().multi(floor / child.attr.share))
        node.attr.allocated = allocated
        node.attr.share = dominant_share(allocated, self.total)
        node.saturated = all(c.saturated for c in node.children.values())

    # -- order --------------------------------------------------------------------------------
    def compare(self, left: str, right: str) -> float:
        """Negative when the queue at hierarchy ``left`` goes first: walking both paths from the
        root, a demanding level beats a saturated one, then the lower share over weight wins."""
        lpath, rpath = left.split("/"), right.split("/")
        lnode: Node | None = self.root
        rnode: Node | None = self.root
        depth = min(len(lpath), len(rpath))
        for level in range(depth):
            if lnode is None or rnode is None:
                return 0.0  # a path no job has built yet: nothing to compare it by
            if not lnode.saturated and rnode.saturated:
                return -1.0
            if lnode.saturated and not rnode.saturated:
                return 1.0
            lv, rv = lnode.attr.share / lnode.weight, rnode.attr.share / rnode.weight
            if lv != rv:
                return lv - rv
            if level < depth - 1:
                lnode = _child(lnode, lpath[level + 1])
                rnode = _child(rnode, rpath[level + 1])
        return 0.0


def _child(node: Node, name: str) -> Node | None:
    return node.children.get(name) if node.children is not None else None
