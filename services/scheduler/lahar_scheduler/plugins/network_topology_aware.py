"""network-topology-aware: HyperNode gradients, HyperNode scores and node scores by topology.

Volcano's plugin of that name: for a job with a networkTopology it lists the HyperNodes the job
may go to, tier by tier from the lowest (``hypernode_gradient``), scores candidate HyperNodes by
how full they would be with the job in them (``hypernode_order``, binpacking across HyperNodes),
and scores nodes by how close they are to where the job already runs (``node_order``: the tier
of the lowest common ancestor).  Pods without a networkTopology are binpacked into HyperNodes
too, each tier weighted by ``fading^(tier-1)``.  Per-HyperNode sums are arrays kept current by
the allocate/deallocate events; node scores gather them per tier (vectors over nodes).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.hypernodes import HyperNodeTree
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.topology import PURPOSE_EVICT, JobTopology, task_topology
from lahar_scheduler.plugins.base import Plugin

if TYPE_CHECKING:
    from lahar.api.resource import Resource
    from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray, IntArray
    from lahar_scheduler.framework.subjobs import SubJobInfo

NAME = "network-topology-aware"
MAX_NODE_SCORE = 100.0
PREFIX = "hypernode.binpack.resources."
_INTS = {
    "weight": "weight",
    "hypernode.binpack.cpu": "cpu",
    "hypernode.binpack.memory": "memory",
    "hypernode.gradient.evict.max-hypernodes": "evict_max_hypernodes",
}

_KNOWN = (
    *_INTS,
    "hypernode.binpack.resources",
    PREFIX + "<name>",
    "hypernode.binpack.normal-pod.enable",
    "hypernode.binpack.normal-pod.fading",
)


class NetworkTopologyArgs(msgspec.Struct):
    weight: int = 1
    cpu: int = 1
    memory: int = 1
    resources: dict[str, int] = {}
    normal_pod_enable: bool = True
    normal_pod_fading: float = 0.8
    evict_max_hypernodes: int = 8


def parse_args(raw: dict[str, Any], path: str, errors: list[str]) -> NetworkTopologyArgs:
    """Dotted, open-ended keys (``hypernode.binpack.resources.<name>``), so parsed by hand;
    negative weights fall back to 1 and a negative fading to 0.8, as Volcano does."""
    out = NetworkTopologyArgs()
    listed: list[str] = []
    weights: dict[str, int] = {}
    for key, val in ((str(k), v) for k, v in raw.items()):
        where = f"{path}.{key}"
        if key == "hypernode.binpack.resources":
            if not isinstance(val, str):
                errors.append(f"{where}: expected a comma-separated string of resource names")
            else:
                listed = [r.strip() for r in val.split(",") if r.strip()]
        elif key in _INTS or key.startswith(PREFIX):
            if not isinstance(val, int) or isinstance(val, bool):
                errors.append(f"{where}: expected an integer, got {val!r}")
            elif key in _INTS:
                default = 8 if key.endswith("max-hypernodes") else 1
                setattr(out, _INTS[key], val if val > (0 if default == 8 else -1) else default)
            else:
                weights[key[len(PREFIX) :]] = val if val >= 0 else 1
        elif key == "hypernode.binpack.normal-pod.enable":
            if not isinstance(val, bool):
                errors.append(f"{where}: expected true or false, got {val!r}")
            else:
                out.normal_pod_enable = val
        elif key == "hypernode.binpack.normal-pod.fading":
            if not isinstance(val, int | float) or isinstance(val, bool):
                errors.append(f"{where}: expected a number, got {val!r}")
            else:
                out.normal_pod_fading = float(val) if val >= 0 else 0.8
        else:
            errors.append(f"{where}: unknown argument (known: {', '.join(_KNOWN)})")
    out.resources = {name: weights.get(name, 1) for name in listed}
    return out


class NetworkTopologyAwarePlugin(Plugin):
    name = NAME
    Args = NetworkTopologyArgs
    parse_args = staticmethod(parse_args)

    def on_session_open(self, ssn: Session) -> None:
        self.args: NetworkTopologyArgs = self.args or NetworkTopologyArgs()
        self.ssn = ssn
        self.weights = {"cpu": self.args.cpu, "memory": self.args.memory, **self.args.resources}
        if not ssn.topology and not ssn.snapshot.hypernode_objects:
            # No HyperNodes and no job asking for one: every node would score alike.
            return
        tree = self.tree = ssn.hypernodes
        table = ssn.nodes
        self.names = list(tree.infos)
        self.index = {n: i for i, n in enumerate(self.names)}
        rows = tree.rows(table)
        self.rows = [rows[n] for n in self.names]
        self.alloc = np.array([table.alloc[r].sum(axis=0) for r in self.rows])
        self.used = np.array([table.used[r].sum(axis=0) for r in self.rows])
        self.idle = np.array([table.idle[r].sum(axis=0) for r in self.rows])
        self.future = np.array([table.future_idle(r).sum(axis=0) for r in self.rows])
        # Per tier, each node row's HyperNode there as an index into self.names (-1: none).
        member = tree.member_of_tier(table)
        self.node_hn = {
            t: np.where(col >= 0, np.array([self.index[n] for n in tree.by_tier[t]], dtype=np.intp)[col], -1)
            for t, col in member.items()
        }
        # Each node row's lowest-tier HyperNode (index into self.names), -1 for none.
        self.all_rows = np.arange(len(table), dtype=np.intp)
        self.leaf_row = self._leaf_rows(self.all_rows)
        self.min_tier, self.max_tier = tree.tiers[0], tree.tiers[-1]
        self.placed: dict[int, list[int]] = {}
        self._near: dict[str, FloatArray] = {}  # per allocated HyperNode, the tier score of each
        self._under: dict[str, IntArray] = {}  # per HyperNode, it and every HyperNode below it
        # Per candidate list, its subtrees concatenated and where each starts (for score_bound).
        self._spans: dict[tuple[str, ...], tuple[IntArray, IntArray]] = {}
        # Gradients read only session-open sums and the job's constants: one answer per search.
        # Kept for one job (and allocated HyperNode) at a time: allocate searches job by job.
        self._asked: tuple[str, int, str, str] = ("", 0, "", "")
        self._gradients: dict[str, list[list[str]]] = {}  # per root
        self._eligibility: dict[str, bool] = {}  # per HyperNode
        self._bfs: dict[str, list[tuple[str, int]]] = {}
        self._requests: dict[str, dict[str, float]] = {}  # per job, Σ of its tasks' requests
        # Per tier with HyperNodes, its fading weight and each node row's HyperNode there.
        self._tier_cols = [
            (math.pow(self.args.normal_pod_fading, t - 1), self.node_hn.get(t))
            for t in range(self.min_tier, self.max_tier + 1)
        ]
        ssn.add(P.HYPERNODE_GRADIENT, self.hypernode_gradient)
        ssn.add(P.HYPERNODE_ORDER, _HyperNodeOrder(self))
        ssn.add(P.NODE_ORDER, self.node_order)
        ssn.add_event_handler(EventHandler(self._on_allocate, self._on_deallocate))

    # -- resource sums per HyperNode -----------------------------------------------------------
    def _containing(self, node_name: str) -> list[int]:
        node = self.ssn.nodes.by_name.get(node_name)
        if node is None:
            return []
        return [int(col[node.index]) for col in self.node_hn.values() if col[node.index] >= 0]

    def _on_allocate(self, task: TaskInfo) -> None:
        hns = self._containing(task.node_name)
        self.placed[id(task)] = hns
        for h in hns:
            self.used[h] += task.res_vec

    def _on_deallocate(self, task: TaskInfo) -> None:
        # A discarded allocation has already lost its node name: use where it was added.
        hns = self.placed.pop(id(task), None)
        for h in hns if hns is not None else self._containing(task.node_name):
            self.used[h] -= task.res_vec

    def _plan(self, request: dict[str, float]) -> tuple[IntArray, FloatArray, FloatArray]:
        """(columns, requests, weights) of the weighted resources requested; -1: not offered."""
        cols, reqs, ws = [], [], []
        for name, value in request.items():
            if value == 0 or name not in self.weights:
                continue
            col = self.ssn.nodes.space.index.get(name)
            cols.append(-1 if col is None else col)
            reqs.append(value)
            ws.append(self.weights[name])
        return np.array(cols, dtype=np.intp), np.array(reqs, dtype=float), np.array(ws, dtype=float)

    def _binpack(self, hns: IntArray, request: dict[str, float]) -> FloatArray:
        """Σ w·(used + request)/allocatable over Σ w per HyperNode; 0 where anything overflows."""
        cols, reqs, ws = self._plan(request)
        if not len(cols) or ws.sum() <= 0:
            return np.zeros(len(hns))
        known = cols >= 0
        safe = np.where(known, cols, 0)
        cap = np.where(known, self.alloc[hns[:, None], safe], 0.0)
        after = np.where(known, self.used[hns[:, None], safe], 0.0) + reqs
        over = (after > cap).any(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            part = np.where(cap > 0, after / cap, 0.0) * ws
        return np.where(over, 0.0, part.sum(axis=1) / ws.sum())

    # -- hypernode_gradient -----------------------------------------------------------------------
    def hypernode_gradient(self, job: JobInfo | SubJobInfo, topo: JobTopology, root: str) -> list[list[str]] | None:
        """Eligible HyperNodes under the search root, grouped by tier, lowest tier first (the
        same lists for the same question: callers only read them)."""
        asked = (job.uid, topo.highest_tier, topo.allocated, topo.purpose)
        if asked != self._asked:
            self._asked, self._gradients, self._eligibility = asked, {}, {}
        got = self._gradients.get(root)
        if got is None:
            got = self._gradients[root] = self._gradient(job, topo, root)
        return got

    def _gradient(self, job: JobInfo | SubJobInfo, topo: JobTopology, root: str) -> list[list[str]]:
        tree = self.tree
        start = search_root(tree, root, topo.highest_tier, topo.allocated)
        if start is None:
            return []
        eligible: dict[int, list[str]] = {}
        need = job.min_resources  # once: a sub-job sums its pending tasks for it
        for name, tier in self._breadth_first(start):
            if tier <= topo.highest_tier and self._eligible(name, need, topo):
                eligible.setdefault(tier, []).append(name)
        out = [eligible[t] for t in sorted(eligible)]
        return reverse_and_cap(out, self.args.evict_max_hypernodes) if topo.purpose == PURPOSE_EVICT else out

    def _breadth_first(self, start: str) -> list[tuple[str, int]]:
        """``start`` and the HyperNodes below it, breadth first (children by name), with tiers."""
        got = self._bfs.get(start)
        if got is None:
            tree = self.tree
            got, queue, seen = [], [start], {start}
            while queue:
                name = queue.pop(0)
                got.append((name, tree.tier(name)))
                for child in sorted(tree.infos[name].children):
                    if child not in seen:
                        seen.add(child)
                        queue.append(child)
            self._bfs[start] = got
        return got

    def _eligible(self, name: str, need: Resource | None, topo: JobTopology) -> bool:
        got = self._eligibility.get(name)
        if got is None:
            got = self._eligibility[name] = self._check_eligible(name, need, topo)
        return got

    def _check_eligible(self, name: str, need: Resource | None, topo: JobTopology) -> bool:
        if self.tree.tier(name) > topo.highest_tier:
            return False
        if topo.allocated:
            return True  # partly running: no resource pre-filter (as Volcano)
        if need is None or need.is_empty():
            return True
        h = self.index[name]
        space = self.ssn.nodes.space
        if topo.purpose == PURPOSE_EVICT:
            # Evicting may free everything: only what the HyperNode has at all counts.
            return need.less_equal(space.resource(self.alloc[h]))
        idle, future = space.resource(self.idle[h]), space.resource(self.future[h])
        return need.less_equal(idle) or need.less_equal(future)

    # -- hypernode_order ----------------------------------------------------------------------------
    def _job_request(self, job: JobInfo | SubJobInfo) -> dict[str, float]:
        """The sum of every task's request (tasks and requests are fixed for the session)."""
        got = self._requests.get(job.uid)
        if got is None:
            got = self._requests[job.uid] = _job_request(job)
        return got

    def hypernode_order(self, job: JobInfo | SubJobInfo, candidates: list[str]) -> dict[str, float]:
        request = self._job_request(job)
        hns = np.array([self.index[c] for c in candidates], dtype=np.intp)
        scores = self._binpack(hns, request)
        best = np.flatnonzero(scores == scores.max()) if len(scores) else np.zeros(0, dtype=np.intp)
        if len(best) > 1:
            # Ties: prefer the HyperNode already holding more of the job's tasks.
            for k in best:
                scores[k] += self._task_share(candidates[k], job)
        return {c: MAX_NODE_SCORE * self.args.weight * float(s) for c, s in zip(candidates, scores, strict=True)}

    def score_bound(self, job: JobInfo | SubJobInfo, candidates: list[str]) -> FloatArray:
        """Per candidate, a score ``hypernode_order`` cannot exceed for it or for any HyperNode
        under it, whatever the other candidates: its binpack score plus the whole tie bonus."""
        every = np.arange(len(self.names), dtype=np.intp)
        best = self._binpack(every, self._job_request(job)) + self._shares(job)
        key = tuple(candidates)
        spans = self._spans.get(key)
        if spans is None:
            parts = [self._subtree(c) for c in candidates]
            starts = np.cumsum([0, *(len(p) for p in parts[:-1])]).astype(np.intp)
            if len(self._spans) >= 256:
                self._spans.clear()  # candidate lists repeat job after job; a few suffice
            spans = self._spans[key] = (np.concatenate(parts), starts)
        flat, starts = spans
        per = np.maximum.reduceat(best[flat], starts) if len(candidates) else np.zeros(0)
        return MAX_NODE_SCORE * self.args.weight * per

    def _subtree(self, hypernode: str) -> IntArray:
        got = self._under.get(hypernode)
        if got is None:
            names, stack = [], [hypernode]
            while stack:
                name = stack.pop()
                if name in self.index and self.index[name] not in names:
                    names.append(self.index[name])
                    stack.extend(self.tree.infos[name].children)
            got = self._under[hypernode] = np.array(names, dtype=np.intp)
        return got

    def _shares(self, job: JobInfo | SubJobInfo) -> FloatArray:
        """Per HyperNode, the share of the job's tasks on its nodes (``_task_share`` for all)."""
        out = np.zeros(len(self.names))
        if not job.tasks:
            return out
        by_name = self.ssn.nodes.by_name
        for t in job.tasks.values():
            node = by_name.get(t.node_name) if t.node_name else None
            if node is not None:
                for col in self.node_hn.values():
                    if col[node.index] >= 0:
                        out[col[node.index]] += 1
        return out / len(job.tasks)

    def _task_share(self, hypernode: str, job: JobInfo | SubJobInfo) -> float:
        if not job.tasks:
            return 0.0
        nodes = self.tree.infos[hypernode].nodes
        return sum(1 for t in job.tasks.values() if t.node_name in nodes) / len(job.tasks)

    # -- node_order -----------------------------------------------------------------------------------
    def node_order(self, task: TaskInfo, idx: IntArray) -> FloatArray:
        topo, owner = task_topology(self.ssn, task)
        if topo is not None:
            scores = self._near_allocated(owner, topo, idx)
        elif self.args.normal_pod_enable:
            scores = self._tiered_binpack(task, idx)
        else:
            return np.zeros(len(idx))
        return MAX_NODE_SCORE * self.args.weight * scores

    def _tiered_binpack(self, task: TaskInfo, idx: IntArray) -> FloatArray:
        """Σ over tiers of fading^(tier-1) × the node's HyperNode binpack score there (1 for a
        node in no HyperNode of the tier), over Σ of the tier weights."""
        request = {n: task.resreq.get(n) for n in task.resreq.names()}
        # Every HyperNode's score at once, then a 1 for "in no HyperNode of the tier" (index -1).
        every = np.append(self._binpack(np.arange(len(self.names), dtype=np.intp), request), 1.0)
        total, weight_sum = np.zeros(len(idx)), 0.0
        # Every node row in order (allocate's usual question): no gather needed.
        whole = len(idx) == len(self.all_rows) and bool(np.array_equal(idx, self.all_rows))
        for w, col in self._tier_cols:
            weight_sum += w
            if col is None:
                total += w
                continue
            total += w * every[col if whole else col[idx]]
        return total / weight_sum if weight_sum > 0 else np.zeros(len(idx))

    def _near_allocated(self, owner: JobInfo | SubJobInfo | None, topo: JobTopology, idx: IntArray) -> FloatArray:
        """The tier score of LCA(node's lowest HyperNode, the job's allocated HyperNode); ties at
        the top broken by the share of the job's tasks already in the node's HyperNode."""
        allocated = topo.placing
        if not allocated:
            return np.zeros(len(idx))
        leaf = self.leaf_row[idx]
        # Index -1 (no HyperNode) reads the appended 0.
        scores = self._near_scores(allocated)[leaf]
        top = np.flatnonzero(scores == scores.max())
        if len(top) > 1:
            # The share of the job's (or its sub-job's) tasks already in each node's HyperNode.
            job = owner
            if job is not None:
                shares = np.append(self._shares(job), 0.0)
                scores[top] += shares[leaf[top]]
        return scores

    def _near_scores(self, allocated: str) -> FloatArray:
        """The tier score of every HyperNode against ``allocated`` (then a 0 for "none")."""
        got = self._near.get(allocated)
        if got is None:
            got = np.array([*(self._tier_score(n, allocated) for n in self.names), 0.0])
            self._near[allocated] = got
        return got

    def _leaf_rows(self, idx: IntArray) -> IntArray:
        """Each node's lowest-tier HyperNode (index into self.names), -1 for none."""
        out = np.full(len(idx), -1, dtype=np.intp)
        for tier in sorted(self.node_hn, reverse=True):
            hn = self.node_hn[tier][idx]
            out = np.where(hn >= 0, hn, out)
        return out

    def _tier_score(self, hypernode: str, allocated: str) -> float:
        if hypernode == allocated:
            return 1.0
        lca = self.tree.lca(hypernode, allocated)
        if lca not in self.tree:
            return 0.0
        if self.min_tier == self.max_tier:
            return 1.0
        tier = self.tree.tier(lca)
        if self.min_tier <= tier <= self.max_tier:
            return (self.max_tier - tier) / (self.max_tier - self.min_tier)
        return 0.0


def _job_request(job: JobInfo | SubJobInfo) -> dict[str, float]:
    """The sum of every task's request: what the job would add to a HyperNode."""
    request: dict[str, float] = {}
    for task in job.tasks.values():
        for name in task.resreq.names():
            request[name] = request.get(name, 0.0) + task.resreq.get(name)
    return request


class _HyperNodeOrder:
    """The HyperNodeOrderFn, with ``score_bound`` so allocate can try the likeliest HyperNodes
    first and stop when no other can score higher."""

    def __init__(self, plugin: NetworkTopologyAwarePlugin) -> None:
        self.plugin = plugin

    def __call__(self, job: JobInfo | SubJobInfo, candidates: list[str]) -> dict[str, float]:
        return self.plugin.hypernode_order(job, candidates)

    def score_bound(self, job: JobInfo | SubJobInfo, candidates: list[str]) -> FloatArray:
        return self.plugin.score_bound(job, candidates)


def search_root(tree: HyperNodeTree, available: str, highest_tier: int, allocated: str) -> str | None:
    """Volcano's getSearchRoot: the caller's subtree intersected with the highest HyperNode the
    job may still use given where it already runs; None when they do not meet."""
    if not allocated:
        return available
    highest = ""
    for anc in tree.ancestors(allocated):
        if tree.tier(anc) > highest_tier:
            break
        highest = anc
    if not highest:
        return None
    lca = tree.lca(available, highest)
    if lca == highest:
        return available
    if lca == available:
        return highest
    return None


def reverse_and_cap(gradients: list[list[str]], limit: int) -> list[list[str]]:
    """Volcano's reverseAndCapEvictionGradients: eviction tries the widest tiers first (more
    room to free), keeping at most ``limit`` HyperNodes in all (the last of a cut tier)."""
    if limit <= 0:
        return gradients
    out: list[list[str]] = []
    left = limit
    for gradient in reversed(gradients):
        if not left:
            break
        part = gradient if len(gradient) <= left else gradient[len(gradient) - left :]
        out.append(part)
        left -= len(part)
    return out
