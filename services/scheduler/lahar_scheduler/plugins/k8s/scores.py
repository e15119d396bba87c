"""kube-scheduler score plugins as vector operations over candidate nodes.

The formulas follow kube-scheduler v1.36 (k8s.io/kubernetes v1.36.1 is what Volcano's nodeorder
plugin vendors at ed72c7c8; pkg/scheduler/framework/plugins/...): LeastAllocated, MostAllocated,
BalancedAllocation (improvement form), TaintToleration, NodeAffinity, InterPodAffinity and
PodTopologySpread.

Each function returns int scores in 0..100 for the nodes in ``idx`` (already normalised the way
the kube plugin's NormalizeScore does, over exactly those nodes), or None when the plugin's
PreScore would skip the pod.  Integer arithmetic follows kube's int64 maths.

ImageLocality is not scored.  Volcano runs it per node without normalising (weight
``imagelocality.weight``, 1 by default): the sizes of the pod's container images already on the
node, each scaled by the share of nodes holding it, mapped from 23 MB..1000 MB per container onto
0..100.  Lahar's Node objects are decoded without ``status.images``, so every node would score 0
and the order would not change; on a cluster whose nodes report images, Volcano prefers nodes
that already hold the pod's images and Lahar does not (a known divergence).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from lahar.api.objects import LabelSelector, Pod, PodAffinityTerm, PreferredSchedulingTerm, TopologySpreadConstraint
from lahar_scheduler.plugins.k8s.selectors import label_selector_matches, node_term_matches, tolerates
from lahar_scheduler.plugins.k8s.topology import TopologyIndex

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray, IntArray, NodeTable

MAX = 100
GPU = "nvidia.com/gpu"


def _resource_scores(table: NodeTable, task: TaskInfo, idx: IntArray) -> tuple[FloatArray, FloatArray]:
    """(allocatable, requested-after) of cpu and memory per node, with kube's non-zero defaults."""
    return table.alloc[idx, :2], table.nonzero[idx] + task.nonzero_vec


def least_allocated(table: NodeTable, task: TaskInfo, idx: IntArray) -> FloatArray:
    """NodeResourcesFit LeastAllocated over cpu and memory (weights 50/50), non-zero requests.

    Scores are integers computed with floats: every operand is an integer below 2^53, so the
    floor of the quotient equals kube's int64 division.
    """
    a, r = _resource_scores(table, task, idx)
    valid = a > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(valid & (r <= a), np.floor((a - r) * MAX / a), 0.0)
    count = valid.sum(axis=1)
    return np.where(count > 0, np.floor(per.sum(axis=1) / np.maximum(count, 1)), 0.0)


def most_allocated(table: NodeTable, task: TaskInfo, idx: IntArray) -> FloatArray:
    """NodeResourcesFit MostAllocated over cpu and memory (weights 1/1, as Volcano configures it),
    non-zero requests (v1.36 ``mostResourceScorer``): per resource with allocatable > 0,
    ``min(requested, allocatable) × 100 // allocatable``; the weighted mean of those, int64
    division; a resource the node has none of is left out of the mean."""
    a, r = _resource_scores(table, task, idx)
    valid = a > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(valid, np.floor(np.minimum(r, a) * MAX / a), 0.0)
    count = valid.sum(axis=1)
    return np.where(count > 0, np.floor(per.sum(axis=1) / np.maximum(count, 1)), 0.0)


def balanced_allocation(table: NodeTable, task: TaskInfo, idx: IntArray) -> FloatArray | None:
    """NodeResourcesBalancedAllocation (v1.36) over cpu, memory and nvidia.com/gpu, actual requests.

    v1.36 scores the improvement in balance the pod brings, not the balance with the pod:
    ``50 + (50 + with − without) // 2``, in 50..100 (each balance term is in 50..100).
    """
    space = table.space
    cols = [0, 1]
    gpu = space.index.get(GPU)
    if gpu is not None and task.init_vec[gpu] > 0:
        cols.append(gpu)
    pod_req = task.init_vec[cols]
    if not pod_req.any():
        return None  # best-effort pods are not scored (kube skips them)
    rows = idx[:, None]
    alloc = table.alloc[rows, cols]
    before = table.requested[rows, cols]
    with_pod = _balance(alloc, before + pod_req, len(cols))
    without = _balance(alloc, before, len(cols))
    # The difference is in −50..50, so the floor division equals Go's truncation.
    return np.asarray(MAX // 2 + (MAX // 2 + with_pod - without) // 2)


def _balance(alloc: FloatArray, req: FloatArray, ncols: int) -> FloatArray:
    """balancedResourceScore: floor((1 − std of the requested fractions) × 100) per row."""
    valid = alloc > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(valid, np.minimum(req / alloc, 1.0), 0.0)
    if ncols == 2 and valid.all():
        # The common case: cpu and memory on every node; kube's std is then |f0 − f1| / 2.
        return np.asarray(np.floor((1 - np.abs(frac[:, 0] - frac[:, 1]) / 2) * MAX))
    count = valid.sum(axis=1)
    mean = np.where(count > 0, frac.sum(axis=1) / np.maximum(count, 1), 0.0)
    var = np.where(valid, (frac - mean[:, None]) ** 2, 0.0).sum(axis=1) / np.maximum(count, 1)
    std = np.where(count == 2, np.abs(_pair_diff(frac, valid)) / 2, np.where(count > 2, np.sqrt(var), 0.0))
    return np.asarray(np.floor((1 - std) * MAX))


# Scalar twins of the vector kernels above, for updating one node (see RowCache).


def least_allocated_row(table: NodeTable, task: TaskInfo, i: int) -> float:
    # Rows as Python floats (the same doubles): element-wise numpy scalars cost more.
    alloc, held, asked = table.alloc[i, :2].tolist(), table.nonzero[i].tolist(), task.nonzero_vec.tolist()
    total, count = 0.0, 0
    for c in (0, 1):
        a = alloc[c]
        if a <= 0:
            continue
        count += 1
        r = held[c] + asked[c]
        if r <= a:
            total += math.floor((a - r) * MAX / a)
    return float(math.floor(total / count)) if count else 0.0


def most_allocated_row(table: NodeTable, task: TaskInfo, i: int) -> float:
    alloc, held, asked = table.alloc[i, :2].tolist(), table.nonzero[i].tolist(), task.nonzero_vec.tolist()
    total, count = 0.0, 0
    for c in (0, 1):
        a = alloc[c]
        if a <= 0:
            continue
        count += 1
        r = held[c] + asked[c]
        total += math.floor(min(r, a) * MAX / a)
    return float(math.floor(total / count)) if count else 0.0


def balanced_allocation_row(table: NodeTable, task: TaskInfo, i: int) -> float | None:
    cols = [0, 1]
    gpu = table.space.index.get(GPU)
    init = task.init_vec.tolist()
    if gpu is not None and init[gpu] > 0:
        cols.append(gpu)
    pod_req = [init[c] for c in cols]
    if not any(pod_req):
        return None
    alloc_row, requested_row = table.alloc[i].tolist(), table.requested[i].tolist()
    alloc = [alloc_row[c] for c in cols]
    before = [requested_row[c] for c in cols]
    with_pod = _balance_row(alloc, [b + w for b, w in zip(before, pod_req, strict=True)])
    without = _balance_row(alloc, before)
    return float(MAX // 2 + (MAX // 2 + with_pod - without) // 2)


def _balance_row(alloc: list[float], req: list[float]) -> int:
    fracs = [min(r / a, 1.0) for a, r in zip(alloc, req, strict=True) if a > 0]
    if len(fracs) == 2:
        std = abs(fracs[0] - fracs[1]) / 2
    elif len(fracs) > 2:
        mean = sum(fracs) / len(fracs)
        std = math.sqrt(sum((f - mean) ** 2 for f in fracs) / len(fracs))
    else:
        std = 0.0
    return math.floor((1 - std) * MAX)


def _pair_diff(frac: FloatArray, valid: np.ndarray) -> FloatArray:
    """fraction[0] − fraction[1] over the two valid resources of each row."""
    order = np.argsort(~valid, axis=1, kind="stable")
    first = np.take_along_axis(frac, order[:, :1], axis=1)[:, 0]
    second = np.take_along_axis(frac, order[:, 1:2], axis=1)[:, 0] if frac.shape[1] > 1 else first
    return np.asarray(first - second)


def default_normalize(raw: IntArray, reverse: bool) -> IntArray | int:
    """kube's DefaultNormalizeScore: scale so the maximum becomes 100 (reversed when asked).

    An all-zero input gives a constant, returned as a plain int to spare an array.
    """
    top = int(raw.max()) if len(raw) else 0
    if top == 0:
        return MAX if reverse else 0
    scaled = raw * MAX // top
    return MAX - scaled if reverse else scaled


def preferred_terms(pod: Pod) -> list[PreferredSchedulingTerm]:
    aff = pod.spec.affinity
    if aff is None or aff.node_affinity is None:
        return []
    return list(aff.node_affinity.preferred_during_scheduling_ignored_during_execution)


def node_affinity_raw(table: NodeTable, terms: list[PreferredSchedulingTerm]) -> IntArray:
    """NodeAffinity's Score (v1.36): Σ weights of the preferred terms each node matches, over
    every node (a term of weight 0 or with no requirements matches nothing).  The caller
    normalises with ``default_normalize(reverse=False)``; a pod without preferred terms is
    skipped by PreScore and adds nothing."""
    raw = np.zeros(len(table.infos), dtype=np.int64)
    for j, node in enumerate(table.infos):
        raw[j] = sum(t.weight for t in terms if t.weight and node_term_matches(t.preference, node.name, node.labels))
    return raw


def taint_raw(table: NodeTable, pod: Pod) -> IntArray:
    """TaintToleration's Score (v1.36): per node, the PreferNoSchedule taints not tolerated by the
    pod's tolerations of effect PreferNoSchedule or none.  The caller normalises with
    ``default_normalize(reverse=True)``: 100 − 100 × count // max count (all 100 when no node has
    such a taint)."""
    tolerations = [t for t in pod.spec.tolerations if t.effect in ("", "PreferNoSchedule")]
    raw = np.zeros(len(table.infos), dtype=np.int64)
    for j, node in enumerate(table.infos):
        if node.taints:
            raw[j] = sum(
                1
                for t in node.taints
                if t.effect == "PreferNoSchedule" and not tolerates(tolerations, t.key, t.value, t.effect)
            )
    return raw


def _weighted_terms(pod: Pod, anti: bool) -> list[tuple[PodAffinityTerm, int]]:
    aff = pod.spec.affinity
    group = (aff.pod_anti_affinity if anti else aff.pod_affinity) if aff else None
    if group is None:
        return []
    return [(w.pod_affinity_term, w.weight) for w in group.preferred_during_scheduling_ignored_during_execution]


def inter_pod_affinity(
    topo: TopologyIndex, pod: Pod, idx: IntArray, with_affinity: int, hard_weight: int = 1
) -> IntArray | None:
    """InterPodAffinity scoring: preferred terms both ways, plus existing pods' required affinity.

    ``with_affinity`` counts placed pods that carry affinity terms; when it is zero and the pod
    has none either, kube's PreScore finds nothing to score.
    """
    aff = pod.spec.affinity
    has_own = aff is not None and (aff.pod_affinity is not None or aff.pod_anti_affinity is not None)
    if not has_own and not with_affinity:
        return None
    own = [(t, w, 1) for t, w in _weighted_terms(pod, False)] + [(t, w, -1) for t, w in _weighted_terms(pod, True)]
    scores: dict[tuple[str, str], int] = {}
    table = topo.table
    any_existing = False
    for other, n in topo.placed():
        node = table.infos[n]
        if not node.labels:
            continue
        for term, weight, sign in own:
            _credit(scores, topo, pod, term, other.pod, node.labels, weight * sign)
        oaff = other.pod.spec.affinity
        if oaff is None:
            continue
        if oaff.pod_affinity is not None:
            any_existing = True
            if hard_weight > 0:
                for term in oaff.pod_affinity.required_during_scheduling_ignored_during_execution:
                    _credit(scores, topo, other.pod, term, pod, node.labels, hard_weight)
            for w in oaff.pod_affinity.preferred_during_scheduling_ignored_during_execution:
                _credit(scores, topo, other.pod, w.pod_affinity_term, pod, node.labels, w.weight)
        if oaff.pod_anti_affinity is not None:
            any_existing = True
            for w in oaff.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution:
                _credit(scores, topo, other.pod, w.pod_affinity_term, pod, node.labels, -w.weight)
    if not has_own and not any_existing:
        return None
    if not scores:
        return np.zeros(len(idx), dtype=np.int64)
    raw = np.zeros(len(idx), dtype=np.int64)
    for (key, value), s in scores.items():
        dom = topo.domains(key)
        for j, n in enumerate(idx):
            if table.infos[n].labels.get(key) == value:
                raw[j] += s
        del dom
    # v1.36 normalises over the candidates' actual range; older versions forced it to include 0,
    # which halves the best score when every raw score has the same sign.
    top, bottom = int(raw.max()), int(raw.min())
    diff = top - bottom
    if diff <= 0:
        return np.zeros(len(idx), dtype=np.int64)
    return (MAX * ((raw - bottom) / diff)).astype(np.int64)


def _credit(
    scores: dict[tuple[str, str], int],
    topo: TopologyIndex,
    term_owner: Pod,
    term: PodAffinityTerm,
    candidate: Pod,
    node_labels: dict[str, str],
    amount: int,
) -> None:
    """processTerm: if ``candidate`` matches the term, credit the node's topology domain."""
    value = node_labels.get(term.topology_key)
    if value is None or amount == 0:
        return
    names = topo.namespaces_of(term_owner, term)
    if names is not None and candidate.metadata.namespace not in names:
        return
    if not label_selector_matches(term.label_selector, candidate.metadata.labels):
        return
    scores[(term.topology_key, value)] = scores.get((term.topology_key, value), 0) + amount


def topology_spread(topo: TopologyIndex, pod: Pod, idx: IntArray) -> IntArray | None:
    """PodTopologySpread scoring of ScheduleAnyway constraints (v1.36 ``scoring.go``).

    PreScore: candidates missing any constraint's key are ignored (score 0); each constraint
    weighs log(domains among the other candidates + 2) (hostname: their number).  Pods are
    counted per domain over every node that has all the keys and passes the constraint's node
    inclusion policies (nodeAffinityPolicy Honor by default: the pod's nodeSelector and required
    node affinity; nodeTaintsPolicy Ignore by default, Honor: no untolerated NoSchedule or
    NoExecute taint), in domains some candidate is in; hostname constraints count the candidate's
    own pods.  A pod counts when it is not terminating, is in the pod's namespace and matches the
    selector (with matchLabelKeys' values from the pod merged in); an empty selector counts
    nothing.  Score: Σ count × weight + (maxSkew − 1), rounded half away from zero.  Normalise:
    100 × (max + min − score) // max over the candidates not ignored (all 100 when max is 0).
    Pods without ScheduleAnyway constraints are skipped (no system default constraints: Lahar
    has no Services or ReplicaSets to build them from).
    """
    soft = [c for c in pod.spec.topology_spread_constraints if c.when_unsatisfiable == "ScheduleAnyway"]
    if not soft or not len(topo.table.infos):
        return None
    table = topo.table
    doms = [topo.domains(c.topology_key) for c in soft]
    ignored = np.zeros(len(idx), dtype=bool)
    for d in doms:
        ignored |= d.code[idx] < 0
    scored = idx[~ignored]
    weights = []
    for c, d in zip(soft, doms, strict=True):
        size = len(scored) if c.topology_key == "kubernetes.io/hostname" else len(np.unique(d.code[scored]))
        weights.append(math.log(size + 2))
    all_keys = np.ones(len(table.infos), dtype=bool)
    for d in doms:
        all_keys &= d.code >= 0
    candidate_domains = [set(np.unique(d.code[scored]).tolist()) for d in doms]
    total = np.zeros(len(idx))
    for ci, (c, d) in enumerate(zip(soft, doms, strict=True)):
        hostname = c.topology_key == "kubernetes.io/hostname"
        selector = _spread_selector(c, pod)
        counts = np.zeros(max(d.count, 1) if not hostname else len(table.infos), dtype=np.int64)
        eligible = all_keys if hostname or selector is None else all_keys & spread_included(c, pod, table)
        for t, n in topo.placed() if selector is not None else ():
            code = d.code[n]
            if code < 0 or t.pod.metadata.deletion_timestamp is not None or t.namespace != pod.metadata.namespace:
                continue
            if not hostname and (not eligible[n] or code not in candidate_domains[ci]):
                continue
            if label_selector_matches(selector, t.pod.metadata.labels):
                counts[n if hostname else code] += 1
        cnt = counts[idx] if hostname else counts[np.maximum(d.code[idx], 0)]
        total += cnt * weights[ci] + (c.max_skew - 1)
    # Go's math.Round rounds halves away from zero; the totals are never negative.
    rounded = np.floor(total + 0.5).astype(np.int64)
    valid = ~ignored
    if not valid.any():
        return np.zeros(len(idx), dtype=np.int64)
    lo, hi = int(rounded[valid].min()), int(rounded[valid].max())
    out = np.zeros(len(idx), dtype=np.int64)
    if hi == 0:
        out[valid] = MAX
    else:
        out[valid] = MAX * (hi + lo - rounded[valid]) // hi
    return out


def _spread_selector(c: TopologySpreadConstraint, pod: Pod) -> LabelSelector | None:
    """The constraint's selector with matchLabelKeys' values from the pod merged in; None when it
    counts nothing (no selector, or an empty one: kube's countPodsMatchSelector skips it)."""
    sel = c.label_selector
    if sel is None:
        return None
    extra = {k: pod.metadata.labels[k] for k in c.match_label_keys if k in pod.metadata.labels}
    if extra:
        sel = LabelSelector(match_labels={**sel.match_labels, **extra}, match_expressions=sel.match_expressions)
    if not sel.match_labels and not sel.match_expressions:
        return None
    return sel


def spread_included(c: TopologySpreadConstraint, pod: Pod, table: NodeTable) -> np.ndarray:
    """Nodes whose pods count for a spread constraint, filter and score alike (v1.36
    ``matchNodeInclusionPolicies``): nodeAffinityPolicy Honor (the default) keeps the nodes
    matching the pod's nodeSelector and required node affinity; nodeTaintsPolicy Honor (default
    Ignore) keeps the nodes with no NoSchedule or NoExecute taint the pod does not tolerate."""
    from lahar_scheduler.plugins.k8s.selectors import pod_matches_node

    out = np.ones(len(table.infos), dtype=bool)
    if (c.node_affinity_policy or "Honor") == "Honor":
        out &= np.array([pod_matches_node(pod, n.name, n.labels) for n in table.infos], dtype=bool)
    if c.node_taints_policy == "Honor":
        tol = pod.spec.tolerations
        out &= np.array(
            [
                not any(
                    t.effect in ("NoSchedule", "NoExecute") and not tolerates(tol, t.key, t.value, t.effect)
                    for t in n.taints
                )
                for n in table.infos
            ],
            dtype=bool,
        )
    return out
