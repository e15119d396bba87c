"""nodeorder: kube-scheduler's scoring plugins, weighted and summed (Volcano's BatchNodeOrderFn).

Each score is normalised over the candidate nodes handed in, as kube's NormalizeScore is.
Image locality is not scored: the snapshot carries no node image lists (see plugins/k8s/scores.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.rowcache import RowCache
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.snapshot import has_pod_affinity
from lahar_scheduler.plugins.base import Plugin
from lahar_scheduler.plugins.k8s import scores, scores_fast
from lahar_scheduler.plugins.k8s.topology import TopologyIndex

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray, IntArray


def _has_pod_affinity(task: TaskInfo) -> bool:
    return has_pod_affinity(task.pod)


class NodeOrderArgs(msgspec.Struct, forbid_unknown_fields=True):
    least_requested: int = msgspec.field(default=1, name="leastrequested.weight")
    most_requested: int = msgspec.field(default=0, name="mostrequested.weight")
    node_affinity: int = msgspec.field(default=2, name="nodeaffinity.weight")
    pod_affinity: int = msgspec.field(default=2, name="podaffinity.weight")
    balanced_resource: int = msgspec.field(default=1, name="balancedresource.weight")
    taint_toleration: int = msgspec.field(default=3, name="tainttoleration.weight")
    image_locality: int = msgspec.field(default=1, name="imagelocality.weight")
    pod_topology_spread: int = msgspec.field(default=2, name="podtopologyspread.weight")


class NodeOrderPlugin(Plugin):
    name = "nodeorder"
    Args = NodeOrderArgs

    def on_session_open(self, ssn: Session) -> None:
        self.w: NodeOrderArgs = self.args or NodeOrderArgs()
        self.table = ssn.nodes
        self.topo = TopologyIndex(ssn.nodes, ssn.snapshot.namespace_labels)
        # Static raw scores depend only on the pod's shape, so they are kept per shape.
        self._affinity_raw: dict[bytes, IntArray] = {}
        # The raw taint scores per shape, and whether any node has a PreferNoSchedule taint the
        # pod does not tolerate (asked once per shape instead of per task).
        self._taint_raw: dict[bytes, tuple[IntArray, bool]] = {}
        self._pod_local: dict[str, bool] = {}  # per task: scores_local as far as its pod goes
        self.with_affinity = (
            sum(1 for t, _ in self.topo.placed() if _has_pod_affinity(t)) if ssn.snapshot.pod_affinity_tasks else 0
        )

        # Resource scores are row-local: cached per task shape, recomputed on changed nodes only.
        self._local = RowCache(self.table, self._local_scores, self._local_row)
        # Per shape: whether the resource scores take the common case's kernels (scores_fast).
        self._both = scores_fast.every_node_has_cpu_and_memory(self.table)
        self._fast: dict[bytes, bool] = {}
        ssn.add(P.NODE_ORDER, self.score)
        ssn.add_event_handler(EventHandler(self.on_allocate, None))

    def on_allocate(self, task: TaskInfo) -> None:
        if _has_pod_affinity(task):
            self.with_affinity += 1

    def _common(self, task: TaskInfo) -> bool:
        got = self._fast.get(task.template_key)
        if got is None:
            got = self._fast[task.template_key] = self._both and scores_fast.applies(
                self.table, task, self.w.most_requested
            )
        return got

    def _local_scores(self, task: TaskInfo, rows: IntArray) -> FloatArray:
        w, table = self.w, self.table
        if self._common(task):
            return scores_fast.local_scores(table, task, rows, w.least_requested, w.balanced_resource)
        total = np.zeros(len(rows))
        if w.least_requested:
            total += scores.least_allocated(table, task, rows) * w.least_requested
        if w.most_requested:
            total += scores.most_allocated(table, task, rows) * w.most_requested
        if w.balanced_resource:
            got = scores.balanced_allocation(table, task, rows)
            if got is not None:
                total += got * w.balanced_resource
        return total

    def _static(self, cache: dict[bytes, IntArray], key: bytes, make: Callable[[], IntArray]) -> IntArray:
        got = cache.get(key)
        if got is None:
            got = cache[key] = make()
        return got

    def _local_row(self, task: TaskInfo, i: int) -> float:
        w, table = self.w, self.table
        if self._common(task):
            return scores_fast.local_score_row(table, task, i, w.least_requested, w.balanced_resource)
        total = 0.0
        if w.least_requested:
            total += scores.least_allocated_row(table, task, i) * w.least_requested
        if w.most_requested:
            total += scores.most_allocated_row(table, task, i) * w.most_requested
        if w.balanced_resource:
            got = scores.balanced_allocation_row(table, task, i)
            if got is not None:
                total += got * w.balanced_resource
        return total

    def _taint(self, task: TaskInfo) -> tuple[IntArray, bool]:
        got = self._taint_raw.get(task.template_key)
        if got is None:
            raw = scores.taint_raw(self.table, task.pod)
            got = self._taint_raw[task.template_key] = (raw, bool(raw.any()))
        return got

    def scores_local(self, task: TaskInfo) -> bool:
        """Whether ``score`` gives each node what it would give it among any other candidates:
        true when only the resource scores (row-local) and a constant taint score apply, none
        of the scores normalised over the candidate set (``Session.scores_local``)."""
        if self.w.pod_affinity and self.with_affinity:
            return False
        # The rest reads the pod alone, which does not change in a session: kept per task
        # (preempt asks for every preemptor).
        got = self._pod_local.get(task.uid)
        if got is None:
            got = self._pod_local[task.uid] = self._pod_scores_local(task)
        return got

    def _pod_scores_local(self, task: TaskInfo) -> bool:
        w, pod = self.w, task.pod
        if w.node_affinity and scores.preferred_terms(pod):
            return False
        if w.pod_affinity and _has_pod_affinity(task):
            return False
        if w.taint_toleration and self._taint(task)[1]:
            return False
        return not (
            w.pod_topology_spread
            and any(c.when_unsatisfiable == "ScheduleAnyway" for c in pod.spec.topology_spread_constraints)
        )

    def score_row(self, task: TaskInfo, i: int) -> float:
        """``score`` of node ``i`` alone, for a task whose scores are local (``scores_local``):
        then only the resource scores and the constant taint score apply, added as ``score``
        adds them (a caller rescoring one changed node skips the array machinery and the
        cache, which catches up on its own next read)."""
        total = float(self._local_row(task, i))
        if self.w.taint_toleration:
            total += scores.MAX * self.w.taint_toleration
        return total

    def score(self, task: TaskInfo, idx: IntArray) -> FloatArray:
        w, table, pod = self.w, self.table, task.pod
        total = self._local.get(task.template_key, task)[idx]
        if w.node_affinity:
            terms = scores.preferred_terms(pod)
            if terms:
                raw = self._static(
                    self._affinity_raw, task.template_key, lambda: scores.node_affinity_raw(table, terms)
                )
                total += scores.default_normalize(raw[idx], reverse=False) * w.node_affinity
        if w.pod_affinity:
            got = scores.inter_pod_affinity(self.topo, pod, idx, self.with_affinity)
            if got is not None:
                total += got * w.pod_affinity
        if w.taint_toleration:
            raw, tainted = self._taint(task)
            if tainted:
                total += scores.default_normalize(raw[idx], reverse=True) * w.taint_toleration
            else:
                total += scores.MAX * w.taint_toleration  # no PreferNoSchedule taint anywhere
        if w.pod_topology_spread:
            got = scores.topology_spread(self.topo, pod, idx)
            if got is not None:
                total += got * w.pod_topology_spread
        return total
