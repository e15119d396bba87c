"""The HyperNode tree: network-topology domains over real nodes, as Volcano's HyperNodesInfo.

Each HyperNode has a tier (1 is closest to the nodes), members that are real nodes (by exact
name, name regex or label selector) or other HyperNodes (by exact name only, as in Volcano), one
parent at most, and the set of real nodes under it.  A session adds a virtual cluster-top
HyperNode one tier above the highest real tier, the parent of every HyperNode without one, whose
real nodes are every node: "anywhere in the cluster" is then one more tier to search.

The tree is rebuilt whole when a HyperNode or the node set changes (both rare next to pod
changes); node rows are resolved per NodeTable, so the arrays a session reads stay current.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from lahar.api.objects import HyperNode, MemberSelector, Node
from lahar_scheduler.framework.nodes import IntArray, NodeTable

CLUSTER_TOP = "<cluster-top-hypernode>"
MEMBER_NODE = "Node"
MEMBER_HYPERNODE = "HyperNode"


@dataclass
class HyperNodeInfo:
    name: str
    tier: int
    tier_name: str = ""
    parent: str = ""
    children: set[str] = field(default_factory=set)
    nodes: frozenset[str] = frozenset()  # real nodes under it, nested HyperNodes included


def member_nodes(selector: MemberSelector, nodes: Mapping[str, Node]) -> set[str]:
    """Volcano's GetMembers: the node names a Node-type member selects (an invalid regex or an
    empty label selector selects nothing)."""
    out: set[str] = set()
    if selector.exact_match is not None and selector.exact_match.name:
        out.add(selector.exact_match.name)
    if selector.regex_match is not None:
        try:
            pattern = re.compile(selector.regex_match.pattern)
        except re.error:
            return set()
        # Go's MatchString finds a match anywhere in the name.
        out.update(n for n in nodes if pattern.search(n))
    sel = selector.label_match
    if sel is not None and (sel.match_labels or sel.match_expressions):
        # Imported here: the plugins package imports the session, which imports this module.
        from lahar_scheduler.plugins.k8s.selectors import label_selector_matches

        out.update(n for n, obj in nodes.items() if label_selector_matches(sel, obj.metadata.labels))
    return out


class HyperNodeTree:
    """The tree of one set of HyperNode objects over one set of nodes."""

    def __init__(self, hypernodes: Iterable[HyperNode], nodes: Mapping[str, Node]) -> None:
        self.infos: dict[str, HyperNodeInfo] = {}
        objs = {h.metadata.name: h for h in hypernodes}
        for name, h in objs.items():
            self.infos[name] = HyperNodeInfo(name, h.spec.tier, h.spec.tier_name)
        direct: dict[str, set[str]] = {}
        for name, h in sorted(objs.items()):
            mine = direct.setdefault(name, set())
            for m in h.spec.members:
                if m.type == MEMBER_NODE:
                    mine |= member_nodes(m.selector, nodes)
                elif m.type == MEMBER_HYPERNODE and m.selector.exact_match is not None:
                    self._adopt(name, m.selector.exact_match.name)
        self._resolve(direct, set(nodes))
        top_tier = max((i.tier for i in self.infos.values()), default=0) + 1
        top = HyperNodeInfo(CLUSTER_TOP, top_tier, nodes=frozenset(nodes))
        for info in self.infos.values():
            if not info.parent:
                info.parent = CLUSTER_TOP
                top.children.add(info.name)
        self.infos[CLUSTER_TOP] = top
        self.real = len(objs)
        self.tiers = sorted({i.tier for i in self.infos.values()})
        self.by_tier: dict[int, list[str]] = {t: [] for t in self.tiers}
        for name in sorted(self.infos):
            self.by_tier[self.infos[name].tier].append(name)
        self._rows: tuple[NodeTable, dict[str, IntArray], dict[int, IntArray]] | None = None

    def _adopt(self, parent: str, child: str) -> None:
        info = self.infos.get(child)
        if info is None or child == parent:
            return  # not (yet) created: Volcano waits for it too
        if info.parent and info.parent != parent:
            return  # a HyperNode has one parent; the first claim (by name order) holds
        info.parent = parent
        self.infos[parent].children.add(child)

    def _resolve(self, direct: dict[str, set[str]], existing: set[str]) -> None:
        """Real nodes per HyperNode: its own members plus its children's, cycles cut."""
        done: dict[str, frozenset[str]] = {}

        def walk(name: str, chain: set[str]) -> frozenset[str]:
            if name in done:
                return done[name]
            if name in chain:
                return frozenset()
            chain.add(name)
            got = set(direct.get(name, ())) & existing
            for child in sorted(self.infos[name].children):
                got |= walk(child, chain)
            chain.discard(name)
            done[name] = frozenset(got)
            return done[name]

        for name in self.infos:
            self.infos[name].nodes = walk(name, set())

    # -- queries ---------------------------------------------------------------------------
    def __contains__(self, name: str) -> bool:
        return name in self.infos

    def tier(self, name: str) -> int:
        return self.infos[name].tier

    def ancestors(self, name: str) -> list[str]:
        """``name`` and its ancestors, nearest first (Volcano's GetAncestors)."""
        out: list[str] = []
        while name and name in self.infos and name not in out:
            out.append(name)
            name = self.infos[name].parent
        return out

    def lca(self, a: str, b: str) -> str:
        """Lowest common ancestor; an empty name is the identity (Volcano's GetLCAHyperNode)."""
        if not a:
            return b
        if not b:
            return a
        mine = set(self.ancestors(a))
        for anc in self.ancestors(b):
            if anc in mine:
                return anc
        return ""

    def tier_by_name(self) -> dict[str, int]:
        return {i.tier_name: i.tier for i in self.infos.values() if i.tier_name}

    def leaf_of(self, node: str) -> str:
        """The lowest-tier HyperNode holding ``node`` (Volcano's FindHyperNodeForNode)."""
        for tier in self.tiers:
            for name in self.by_tier[tier]:
                if node in self.infos[name].nodes:
                    return name
        return ""

    # -- node rows, per NodeTable ------------------------------------------------------------
    def rows(self, table: NodeTable) -> dict[str, IntArray]:
        """Each HyperNode's real nodes as sorted rows of ``table``."""
        return self._resolve_rows(table)[1]

    def member_of_tier(self, table: NodeTable) -> dict[int, IntArray]:
        """Per tier, for every node row, the index into ``by_tier[tier]`` of its HyperNode
        there, or -1: the vector form of "which HyperNode of this tier holds this node"."""
        return self._resolve_rows(table)[2]

    def _resolve_rows(self, table: NodeTable) -> tuple[NodeTable, dict[str, IntArray], dict[int, IntArray]]:
        if self._rows is not None and self._rows[0] is table:
            return self._rows
        by_name = table.by_name
        rows: dict[str, IntArray] = {}
        for name, info in self.infos.items():
            got = [by_name[n].index for n in info.nodes if n in by_name]
            rows[name] = np.array(sorted(got), dtype=np.intp)
        member: dict[int, IntArray] = {}
        for tier, names in self.by_tier.items():
            col = np.full(len(table), -1, dtype=np.intp)
            for k, name in enumerate(names):
                col[rows[name]] = k
            member[tier] = col
        self._rows = (table, rows, member)
        return self._rows
