"""nodeorder: kube-scheduler's scoring plugins, weighted and summed (Volcano's BatchNodeOrderFn).

Each score is normalised over the candidate nodes handed in, as kube's NormalizeScore is.
Image locality is not scored: the snapshot carries no node image lists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import numpy as np

from lahar_scheduler.framework.session import Session
from lahar_scheduler.plugins.base import Plugin
from lahar_scheduler.plugins.k8s import scores
from lahar_scheduler.plugins.k8s.topology import TopologyIndex

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray, IntArray


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
        ssn.add("node_order", self.score)

    def score(self, task: TaskInfo, idx: IntArray) -> FloatArray:
        w, table, pod = self.w, self.table, task.pod
        total = np.zeros(len(idx))
        if w.least_requested:
            total += scores.least_allocated(table, task, idx) * w.least_requested
        if w.most_requested:
            total += scores.most_allocated(table, task, idx) * w.most_requested
        if w.balanced_resource:
            got = scores.balanced_allocation(table, task, idx)
            if got is not None:
                total += got * w.balanced_resource
        if w.node_affinity:
            got = scores.node_affinity(table, pod, idx)
            if got is not None:
                total += got * w.node_affinity
        if w.pod_affinity:
            got = scores.inter_pod_affinity(self.topo, pod, idx)
            if got is not None:
                total += got * w.pod_affinity
        if w.taint_toleration:
            total += scores.taint_toleration(table, pod, idx) * w.taint_toleration
        if w.pod_topology_spread:
            got = scores.topology_spread(self.topo, pod, idx)
            if got is not None:
                total += got * w.pod_topology_spread
        return total
