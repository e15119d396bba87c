"""predicates: the kube-scheduler filters Volcano wraps, evaluated over all nodes at once.

Order and codes follow Volcano's predicates plugin: the pod-count check (never aborts), then the
stable filters NodeUnschedulable, NodeAffinity and TaintToleration (each UnschedulableAndUnresolvable,
so a node failing one is not shown to the next), then NodePorts, InterPodAffinity and
PodTopologySpread.  Stable results depend only on the pod's selector, affinity and tolerations,
so they are computed once per distinct combination and reused for every task that shares it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import numpy as np

from lahar.api.objects import LabelSelector, Pod, PodAffinityTerm, Taint, Toleration
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.predicate import Failure
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.types import Code
from lahar_scheduler.framework.why_nodes import NODE_AFFINITY_CONFLICT
from lahar_scheduler.plugins.base import Plugin
from lahar_scheduler.plugins.dra import DraAllocator, has_claims
from lahar_scheduler.plugins.k8s.scores import spread_included
from lahar_scheduler.plugins.k8s.selectors import label_selector_matches, pod_matches_node, tolerates
from lahar_scheduler.plugins.k8s.topology import TopologyIndex
from lahar_scheduler.plugins.predicates_sim import register_simulation

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray, IntArray, NodeTable

UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
POD_NUMBER_EXCEEDED = "node(s) pod number exceeded"
_static_key = msgspec.msgpack.Encoder()


class PredicatesArgs(msgspec.Struct, forbid_unknown_fields=True):
    node_affinity: bool = msgspec.field(default=True, name="predicate.NodeAffinityEnable")
    node_ports: bool = msgspec.field(default=True, name="predicate.NodePortsEnable")
    taint_toleration: bool = msgspec.field(default=True, name="predicate.TaintTolerationEnable")
    pod_affinity: bool = msgspec.field(default=True, name="predicate.PodAffinityEnable")
    node_volume_limits: bool = msgspec.field(default=True, name="predicate.NodeVolumeLimitsEnable")
    volume_zone: bool = msgspec.field(default=True, name="predicate.VolumeZoneEnable")
    pod_topology_spread: bool = msgspec.field(default=True, name="predicate.PodTopologySpreadEnable")
    volume_binding: bool = msgspec.field(default=True, name="predicate.VolumeBindingEnable")
    dra: bool = msgspec.field(default=False, name="predicate.DynamicResourceAllocationEnable")
    cache: bool = msgspec.field(default=False, name="predicate.CacheEnable")


def hard_taints(taints: list[Taint]) -> list[Taint]:
    return [t for t in taints if t.effect in ("NoSchedule", "NoExecute")]


def untolerated(taints: list[Taint], tolerations: list[Toleration]) -> Taint | None:
    for taint in hard_taints(taints):
        if not tolerates(tolerations, taint.key, taint.value, taint.effect):
            return taint
    return None


class StableFilters:
    """NodeUnschedulable, NodeAffinity and TaintToleration over every node, per pod shape."""

    def __init__(self, table: NodeTable, args: PredicatesArgs) -> None:
        self.table = table
        self.args = args
        self._cache: dict[bytes, list[Failure]] = {}
        self._by_shape: dict[bytes, list[Failure]] = {}
        self._label_values: dict[str, np.ndarray] = {}
        self._tainted = np.array([bool(hard_taints(n.taints)) for n in table.infos], dtype=bool)
        self._cordoned = np.array([n.unschedulable for n in table.infos], dtype=bool)

    def for_task(self, task: TaskInfo) -> list[Failure]:
        """``failures`` memoised per task shape (the shape key covers selector, affinity, tolerations)."""
        got = self._by_shape.get(task.template_key)
        if got is None:
            got = self._by_shape[task.template_key] = self.failures(task.pod)
        return got

    def failures(self, pod: Pod) -> list[Failure]:
        spec = pod.spec
        node_aff = spec.affinity.node_affinity if spec.affinity is not None else None
        key = _static_key.encode(
            (
                sorted(spec.node_selector.items()),
                msgspec.to_builtins(node_aff),
                msgspec.to_builtins(spec.tolerations),
            )
        )
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._compute(pod)
        return got

    def _labels(self, key: str) -> np.ndarray:
        arr = self._label_values.get(key)
        if arr is None:
            arr = np.array([n.labels.get(key) for n in self.table.infos], dtype=object)
            self._label_values[key] = arr
        return arr

    def _compute(self, pod: Pod) -> list[Failure]:
        n = len(self.table.infos)
        alive = np.ones(n, dtype=bool)
        out: list[Failure] = []
        tolerations = pod.spec.tolerations
        if self._cordoned.any() and not tolerates(tolerations, "node.kubernetes.io/unschedulable", "", "NoSchedule"):
            out.append(Failure(self._cordoned.copy(), "node(s) were unschedulable", UNRESOLVABLE))
            alive &= ~self._cordoned
        if self.args.node_affinity:
            bad = ~self._affinity_mask(pod) & alive
            if bad.any():
                out.append(Failure(bad, "node(s) didn't match Pod's node affinity/selector", UNRESOLVABLE))
                alive &= ~bad
        if self.args.taint_toleration:
            by_reason: dict[str, BoolArray] = {}
            for i in np.flatnonzero(self._tainted & alive):
                taint = untolerated(self.table.infos[i].taints, tolerations)
                if taint is not None:
                    reason = f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
                    by_reason.setdefault(reason, np.zeros(n, dtype=bool))[i] = True
            out.extend(Failure(mask, reason, UNRESOLVABLE) for reason, mask in by_reason.items())
        return out

    def _affinity_mask(self, pod: Pod) -> BoolArray:
        ok = np.ones(len(self.table.infos), dtype=bool)
        for key, val in pod.spec.node_selector.items():
            ok &= self._labels(key) == val
        aff = pod.spec.affinity
        required = (
            aff.node_affinity.required_during_scheduling_ignored_during_execution
            if aff is not None and aff.node_affinity is not None
            else None
        )
        if aff is not None and aff.node_affinity is not None and required is not None:
            for i in np.flatnonzero(ok):
                node = self.table.infos[i]
                if not pod_matches_node(pod, node.name, node.labels):
                    ok[i] = False
        return ok


def node_names_conflict(pod: Pod) -> bool:
    """kube's NodeAffinity PreFilter (v1.36): when every required term names nodes by
    ``metadata.name`` (In), the union of the names each term allows; empty = the terms conflict."""
    aff = pod.spec.affinity
    required = (
        aff.node_affinity.required_during_scheduling_ignored_during_execution
        if aff is not None and aff.node_affinity is not None
        else None
    )
    if required is None or not required.node_selector_terms:
        return False
    names: set[str] = set()
    for term in required.node_selector_terms:
        allowed: set[str] | None = None
        for req in term.match_fields:
            if req.key == "metadata.name" and req.operator == "In":
                allowed = set(req.values) if allowed is None else allowed & set(req.values)
        if allowed is None:
            return False  # a term without node names lets every node through (terms are ORed)
        names |= allowed
    return not names


def _required_terms(pod: Pod, anti: bool) -> list[PodAffinityTerm]:
    aff = pod.spec.affinity
    if aff is None:
        return []
    group = aff.pod_anti_affinity if anti else aff.pod_affinity
    return list(group.required_during_scheduling_ignored_during_execution) if group is not None else []


def _host_ports(pod: Pod) -> list[tuple[str, str, int]]:
    return [
        (p.host_ip or "0.0.0.0", p.protocol or "TCP", p.host_port)
        for c in pod.spec.containers
        for p in c.ports
        if p.host_port > 0
    ]


def _ports_conflict(want: list[tuple[str, str, int]], used: list[tuple[str, str, int]]) -> bool:
    for ip, proto, port in want:
        for uip, uproto, uport in used:
            if port == uport and proto == uproto and (ip == uip or "0.0.0.0" in (ip, uip)):
                return True
    return False


class PredicatesPlugin(Plugin):
    name = "predicates"
    Args = PredicatesArgs

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.opts: PredicatesArgs = self.args or PredicatesArgs()
        self.table = ssn.nodes
        self.stable = StableFilters(ssn.nodes, self.opts)
        # Per task, whether its pod asks host ports (its spec does not change in a session):
        # the one-node check below is asked for every node a preemptor's walk refreshes.
        self._asks_ports: dict[str, bool] = {}
        self._pod_local: dict[str, bool] = {}  # per task: is_local as far as its pod goes
        self.topo = TopologyIndex(ssn.nodes, ssn.snapshot.namespace_labels)
        # Pods on nodes with required anti-affinity terms: they can reject an incoming pod.  (No
        # pod with pod affinity of any kind in the snapshot: no need to look at every placed one.)
        self.anti: dict[int, TaskInfo] = {}
        if ssn.snapshot.pod_affinity_tasks:
            self.anti = {id(t): t for t, _ in self.topo.placed() if _required_terms(t.pod, anti=True)}

        # Pods per node as this plugin's node view counts them: every pod at open, then its own
        # Allocate/Deallocate events (an evicted pod leaves the view, as in Volcano's plugin).
        self.pods = ssn.nodes.pod_count.copy()
        self._node_of: dict[int, int] = {}
        # Pods deallocated (evicted) this session.  Affinity and spreading read the view as of
        # the task's pre_predicate (kube's PreFilter state, ``topo.hidden``): evictions made
        # while trying that task do not count until its next pre_predicate; the pod count is
        # read live.  The changes since the last pre_predicate are logged and applied to
        # ``topo.hidden`` there, rather than copying every evicted pod's id for each task.
        self._gone_log: list[tuple[bool, int]] = []

        ssn.add(P.PREDICATE, _Callback(self))
        ssn.add(P.PRE_PREDICATE, self.pre_predicate)
        ssn.add_event_handler(EventHandler(self.on_allocate, self.on_deallocate))
        self.dra: DraAllocator | None = None
        if self.opts.dra:
            self.dra = DraAllocator(ssn)
            ssn.add_event_handler(EventHandler(self.dra.on_allocate, self.dra.on_deallocate))
        register_simulation(ssn, self)

    def on_allocate(self, task: TaskInfo) -> None:
        # Entries whose task left its node are skipped when read (they have no node_name).
        if _required_terms(task.pod, anti=True):
            self.anti[id(task)] = task
        node = self.table.by_name.get(task.node_name)
        if node is not None:
            self.pods[node.index] += 1
            self._node_of[id(task)] = node.index
        self._gone_log.append((False, id(task)))

    def on_deallocate(self, task: TaskInfo) -> None:
        # An un-allocated task has lost its node name by now: use where it was allocated.
        index = self._node_of.pop(id(task), None)
        if index is None:
            node = self.table.by_name.get(task.node_name)
            index = node.index if node is not None else None
        if index is not None:
            self.pods[index] -= 1
        # An evicted pod stays on its node (Releasing) but leaves this plugin's view.
        self._gone_log.append((True, id(task)))

    def on_session_close(self, ssn: Session) -> None:
        if self.dra is not None:
            self.dra.report(ssn)

    def pre_predicate(self, task: TaskInfo) -> str | None:
        if self.dra is not None and has_claims(task.pod):
            err = self.dra.pre_predicate(task)
            if err is not None:
                return err
        if self._gone_log:
            hidden = self.topo.hidden
            for gone, key in self._gone_log:
                if gone:
                    hidden.add(key)
                else:
                    hidden.discard(key)
            self._gone_log.clear()
        if self.opts.node_affinity and node_names_conflict(task.pod):
            return f"plugin NodeAffinity pre-predicates failed {NODE_AFFINITY_CONFLICT}"
        return None

    def is_local(self, task: TaskInfo) -> bool:
        """Verdicts on node n depend only on node n unless affinity or spreading is involved."""
        # What the pod asks does not change in a session: kept per task (preempt asks for every
        # preemptor and every node it rechecks); the placed pods' anti-affinity is read afresh.
        local = self._pod_local.get(task.uid)
        if local is None:
            local = self._pod_local[task.uid] = self._pod_is_local(task.pod)
        if not local:
            return False
        return not (self.opts.pod_affinity and self.anti and self._existing_anti_applies(task))

    def _pod_is_local(self, pod: Pod) -> bool:
        if self.opts.pod_topology_spread and pod.spec.topology_spread_constraints:
            return False
        if self.dra is not None and has_claims(pod):
            return False  # devices one task takes change what the others see on shared slices
        return not (self.opts.pod_affinity and (_required_terms(pod, anti=False) or _required_terms(pod, anti=True)))

    def _existing_anti_applies(self, task: TaskInfo) -> bool:
        meta = task.pod.metadata
        for other in self.anti.values():
            for term in _required_terms(other.pod, anti=True):
                names = self.topo.namespaces_of(other.pod, term)
                if _ns_ok(names, meta.namespace) and label_selector_matches(term.label_selector, meta.labels):
                    return True
        return False

    # -- the PredicateFn ------------------------------------------------------------------
    def predicate(self, task: TaskInfo, idx: IntArray) -> list[Failure]:
        table = self.table
        failures: list[Failure] = []
        over = self.pods[idx] >= table.max_pods[idx]
        if over.any():
            failures.append(Failure(over, POD_NUMBER_EXCEEDED, Code.UNSCHEDULABLE))
        alive = np.ones(len(idx), dtype=bool)
        for f in self.stable.for_task(task):
            mask = f.mask[idx] & alive
            if mask.any():
                failures.append(Failure(mask, f.reason, f.code))
                alive &= ~mask
        pod = task.pod
        if self.opts.node_ports:
            self._ports(pod, idx, alive, failures)
        if self.opts.pod_affinity:
            self._inter_pod(task, idx, alive, failures)
        if self.opts.pod_topology_spread and pod.spec.topology_spread_constraints:
            self._spread(pod, idx, alive, failures)
        if self.dra is not None and has_claims(pod) and alive.any():
            for f in self.dra.failures(task, idx[alive]):
                mask = np.zeros(len(idx), dtype=bool)
                mask[np.flatnonzero(alive)[f.mask]] = True
                failures.append(Failure(mask, f.reason, f.code))
        return failures

    def passes_row(self, task: TaskInfo, i: int) -> bool:
        """Scalar twin of ``passes`` for one node (see RowCache)."""
        table = self.table
        if self.pods[i] >= table.max_pods[i]:
            return False
        for f in self.stable.for_task(task):  # a loop: a generator would be a frame of its own
            if f.mask[i]:
                return False
        if self.opts.node_ports and self._asks_host_ports(task):
            return bool(self.passes(task, np.array([i], dtype=np.intp))[0])
        return True

    def _asks_host_ports(self, task: TaskInfo) -> bool:
        asks = self._asks_ports.get(task.uid)
        if asks is None:
            asks = self._asks_ports[task.uid] = bool(_host_ports(task.pod))
        return asks

    def passes(self, task: TaskInfo, idx: IntArray) -> BoolArray:
        table = self.table
        ok = self.pods[idx] < table.max_pods[idx]
        for f in self.stable.for_task(task):
            ok &= ~f.mask[idx]
        if self.opts.node_ports and _host_ports(task.pod):
            failures: list[Failure] = []
            self._ports(task.pod, idx, np.ones(len(idx), dtype=bool), failures)
            for f in failures:
                ok &= ~f.mask
        return ok

    def _add(self, failures: list[Failure], mask: BoolArray, alive: BoolArray, reason: str, code: Code) -> None:
        mask = mask & alive
        if mask.any():
            failures.append(Failure(mask, reason, code))
            if code == UNRESOLVABLE:
                alive &= ~mask

    def _ports(self, pod: Pod, idx: IntArray, alive: BoolArray, failures: list[Failure]) -> None:
        want = _host_ports(pod)
        if not want:
            return
        bad = np.zeros(len(idx), dtype=bool)
        for j, n in enumerate(idx):
            used = [p for t in self.table.infos[n].tasks.values() for p in _host_ports(t.pod)]
            bad[j] = _ports_conflict(want, used)
        self._add(
            failures,
            bad,
            alive,
            "node(s) didn't have free ports for the requested pod ports",
            Code.UNSCHEDULABLE,
        )

    def _inter_pod(self, task: TaskInfo, idx: IntArray, alive: BoolArray, failures: list[Failure]) -> None:
        pod = task.pod
        affinity = _required_terms(pod, anti=False)
        anti = _required_terms(pod, anti=True)
        if affinity:
            self._add(
                failures,
                ~self._affinity_ok(pod, affinity, idx),
                alive,
                "node(s) didn't match pod affinity rules",
                UNRESOLVABLE,
            )
        if anti:
            bad = np.zeros(len(idx), dtype=bool)
            for term in anti:
                counts = self._term_counts(pod, term)
                codes = self.topo.node_domain_values(term.topology_key, idx)
                bad |= (codes >= 0) & (counts[np.maximum(codes, 0)] > 0)
            self._add(failures, bad, alive, "node(s) didn't match pod anti-affinity rules", Code.UNSCHEDULABLE)
        if self.anti:
            bad = self._existing_anti(task, idx)
            self._add(
                failures,
                bad,
                alive,
                "node(s) didn't satisfy existing pods anti-affinity rules",
                Code.UNSCHEDULABLE,
            )

    def _term_counts(self, pod: Pod, term: PodAffinityTerm) -> np.ndarray:
        names = self.topo.namespaces_of(pod, term)
        return self.topo.domain_counts(term.topology_key, term.label_selector, names)

    def _affinity_ok(self, pod: Pod, terms: list[PodAffinityTerm], idx: IntArray) -> BoolArray:
        ok = np.ones(len(idx), dtype=bool)
        any_match = False
        for term in terms:
            counts = self._term_counts(pod, term)
            any_match = any_match or bool(counts.sum())
            codes = self.topo.node_domain_values(term.topology_key, idx)
            ok &= (codes >= 0) & (counts[np.maximum(codes, 0)] > 0)
        if not any_match:
            # The first pod of a group that matches its own affinity may go anywhere the keys exist.
            self_match = all(
                label_selector_matches(t.label_selector, pod.metadata.labels)
                and _ns_ok(self.topo.namespaces_of(pod, t), pod.metadata.namespace)
                for t in terms
            )
            if self_match:
                ok = np.ones(len(idx), dtype=bool)
                for term in terms:
                    ok &= self.topo.node_domain_values(term.topology_key, idx) >= 0
        return ok

    def _existing_anti(self, task: TaskInfo, idx: IntArray) -> BoolArray:
        bad = np.zeros(len(idx), dtype=bool)
        meta = task.pod.metadata
        for other in self.anti.values():
            if other is task or not other.node_name or other.node_name not in self.table.by_name:
                continue
            if id(other) in self.topo.hidden:
                continue
            node = self.table.by_name[other.node_name]
            for term in _required_terms(other.pod, anti=True):
                names = self.topo.namespaces_of(other.pod, term)
                if not _ns_ok(names, meta.namespace) or not label_selector_matches(term.label_selector, meta.labels):
                    continue
                dom = self.topo.domains(term.topology_key)
                own = dom.code[node.index]
                if own >= 0:
                    bad |= dom.code[idx] == own
        return bad

    def _spread(self, pod: Pod, idx: IntArray, alive: BoolArray, failures: list[Failure]) -> None:
        hard = [c for c in pod.spec.topology_spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]
        if not hard:
            return
        table = self.table
        all_keys = np.ones(len(table.infos), dtype=bool)
        for c in hard:
            all_keys &= self.topo.domains(c.topology_key).code >= 0
        missing = np.zeros(len(idx), dtype=bool)
        skewed = np.zeros(len(idx), dtype=bool)
        for c in hard:
            dom = self.topo.domains(c.topology_key)
            codes = dom.code[idx]
            missing |= codes < 0
            # Nodes with every key that pass this constraint's node inclusion policies (kube v1.36).
            eligible = all_keys & spread_included(c, pod, table)
            selector = _with_match_label_keys(c.label_selector, c.match_label_keys, pod)
            # kube's countPodsMatchSelector counts nothing for an empty selector (it still matches
            # the incoming pod itself below).
            counted = (
                selector if selector is not None and (selector.match_labels or selector.match_expressions) else None
            )
            counts = _count_live(self.topo, c.topology_key, counted, pod.metadata.namespace, eligible)
            present = np.unique(dom.code[eligible])
            present = present[present >= 0]
            minimum = int(counts[present].min()) if len(present) else 0
            if c.min_domains is not None and len(present) < c.min_domains:
                minimum = 0
            self_match = 1 if label_selector_matches(selector, pod.metadata.labels) else 0
            have = counts[np.maximum(codes, 0)]
            skewed |= (codes >= 0) & (have + self_match - minimum > c.max_skew)
        self._add(
            failures,
            missing,
            alive,
            "node(s) didn't match pod topology spread constraints (missing required label)",
            UNRESOLVABLE,
        )
        self._add(
            failures,
            skewed,
            alive,
            "node(s) didn't match pod topology spread constraints",
            Code.UNSCHEDULABLE,
        )


class _Callback:
    """The PredicateFn, with ``is_local`` so the allocate action may cache verdicts per node."""

    def __init__(self, plugin: PredicatesPlugin) -> None:
        self.plugin = plugin
        self.is_local = plugin.is_local

    def __call__(self, task: TaskInfo, idx: IntArray) -> list[Failure]:
        return self.plugin.predicate(task, idx)

    def passes(self, task: TaskInfo, idx: IntArray) -> BoolArray:
        """Pass/fail only, for cached evaluation of local verdicts (no reasons collected)."""
        return self.plugin.passes(task, idx)

    def passes_row(self, task: TaskInfo, i: int) -> bool:
        return self.plugin.passes_row(task, i)


def _ns_ok(names: set[str] | None, namespace: str) -> bool:
    return names is None or namespace in names


def _with_match_label_keys(selector: LabelSelector | None, keys: list[str], pod: Pod) -> LabelSelector | None:
    if not keys or selector is None:
        return selector
    extra = {k: pod.metadata.labels[k] for k in keys if k in pod.metadata.labels}
    return LabelSelector(match_labels={**selector.match_labels, **extra}, match_expressions=selector.match_expressions)


def _count_live(
    topo: TopologyIndex, key: str, selector: LabelSelector | None, namespace: str, eligible: BoolArray
) -> np.ndarray:
    """Matching, non-terminating pods per domain, on eligible nodes only (kube's spread counting)."""
    dom = topo.domains(key)
    counts = np.zeros(max(dom.count, 1), dtype=np.int64)
    for t, n in topo.placed():
        c = dom.code[n]
        if c < 0 or not eligible[n] or t.pod.metadata.deletion_timestamp is not None:
            continue
        if t.namespace == namespace and label_selector_matches(selector, t.pod.metadata.labels):
            counts[c] += 1
    return counts
