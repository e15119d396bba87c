"""numa-aware: for Guaranteed pods, nodes whose kubelet would align the pod's whole cpus on NUMA
nodes as its topology manager policy demands; nodes that keep the pod on fewer NUMA nodes score
higher.

The filter replays the kubelet's topology manager on each node's Numatopology (cpumanager hints,
then the node's policy: best-effort, restricted, single-numa-node), assigns the cpus, and keeps
the assignment for the score and for allocate.  Cpus given in earlier sessions to pods the
exporter does not list yet stay taken (Volcano's UnassignedNumaPods).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.numa import (
    CPU_MANAGER_POLICY,
    NONE,
    NUMA_POLICY_KEY,
    TOPOLOGY_MANAGER_POLICY,
    NumaInfo,
    admit,
    allocate,
    container_hints,
    format_cpuset,
    is_guaranteed,
    numa_count,
    numa_info,
)
from lahar_scheduler.framework.predicate import Failure
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.types import Code, TaskStatus
from lahar_scheduler.plugins.base import Plugin

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray, IntArray

MAX_NODE_SCORE = 100
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
_HOLDS = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})


class NumaAwareArgs(msgspec.Struct, forbid_unknown_fields=True):
    weight: int = 1


def task_policy(task: TaskInfo) -> str:
    return task.pod.metadata.annotations.get(NUMA_POLICY_KEY, "")


class NumaAwarePlugin(Plugin):
    name = "numa-aware"
    Args = NumaAwareArgs

    def on_session_open(self, ssn: Session) -> None:
        opts: NumaAwareArgs = self.args or NumaAwareArgs()
        self.weight = opts.weight
        self.ssn = ssn
        snap = ssn.snapshot
        table = ssn.nodes
        self.infos: dict[int, NumaInfo] = {}
        self.free: dict[int, frozenset[int]] = {}  # node row -> cpus free for exclusive use
        for name, topo in snap.numatopologies.items():
            node = table.by_name.get(name)
            if node is None:
                continue
            info = numa_info(topo)
            self.infos[node.index] = info
            self.free[node.index] = info.allocatable - self._unassigned(snap.numa_unassigned, name, info)
        self.has_numa = np.zeros(len(table), dtype=bool)
        self.has_numa[list(self.infos)] = True
        self.assign: dict[int, dict[int, frozenset[int]]] = {}  # id(task) -> row -> cpus chosen
        self.held: dict[int, tuple[TaskInfo, int, frozenset[int]]] = {}  # allocated this session
        self.reasons: dict[int, dict[int, str]] = {}
        if not self.infos:
            return  # no node reports its NUMA layout: nothing to filter or score
        ssn.add(P.PREDICATE, self.predicate)
        ssn.add(P.NODE_ORDER, self.node_order)
        ssn.add_event_handler(EventHandler(self.on_allocate, self.on_deallocate))

    def _unassigned(self, held: dict[str, dict[str, frozenset[int]]], node: str, info: NumaInfo) -> frozenset[int]:
        """Cpus given earlier to pods the exporter does not list yet; listed ones are dropped."""
        pods = held.get(node)
        if not pods:
            return frozenset()
        for key in [k for k in pods if k in info.assigned]:
            del pods[key]
        if not pods:
            held.pop(node, None)
            return frozenset()
        return frozenset().union(*pods.values())

    # -- filter ----------------------------------------------------------------------------------
    def predicate(self, task: TaskInfo, idx: IntArray) -> list[Failure]:
        if not is_guaranteed(task.pod):
            return []
        policy = task_policy(task)
        strict = policy not in ("", NONE)
        bad: dict[str, np.ndarray] = {}
        assign = self.assign.setdefault(id(task), {})
        for k, row in enumerate(idx.tolist()):
            why = self._node_verdict(task, policy, strict, row, assign)
            if why:
                bad.setdefault(why, np.zeros(len(idx), dtype=bool))[k] = True
        # Policy mismatches are plain fit errors in Volcano (NewFitError); a refused container is
        # UnschedulableAndUnresolvable (preemption cannot change the node's layout).
        return [
            Failure(mask, why, UNRESOLVABLE if why.startswith("container ") else Code.UNSCHEDULABLE)
            for why, mask in bad.items()
        ]

    def _node_verdict(
        self, task: TaskInfo, policy: str, strict: bool, row: int, assign: dict[int, frozenset[int]]
    ) -> str:
        info = self.infos.get(row)
        if strict:
            if info is None:
                return "numa info is empty"
            if info.policies.get(CPU_MANAGER_POLICY) != "static":
                return "cpu manager policy isn't static"
            node_policy = info.policies.get(TOPOLOGY_MANAGER_POLICY, "")
            if policy != node_policy:
                return f"task topology policy[{policy}] is different with node[{node_policy}]"
            if not info.allocatable:
                return "cpu allocatable map is empty"
        elif (
            info is None
            or info.policies.get(CPU_MANAGER_POLICY) != "static"
            or info.policies.get(TOPOLOGY_MANAGER_POLICY, "") in ("", NONE)
        ):
            return ""  # no task policy and nothing for the kubelet to align: the node passes
        return self._fit(task, info, row, assign)

    def _fit(self, task: TaskInfo, info: NumaInfo, row: int, assign: dict[int, frozenset[int]]) -> str:
        free = self.free[row]
        chosen: set[int] = set()
        nodes = info.numa_nodes
        for c in task.pod.spec.containers:
            hint, ok = admit(info.policies.get(TOPOLOGY_MANAGER_POLICY, ""), nodes, container_hints(info, free, c))
            if not ok:
                # Volcano's words, then what each NUMA node has free (Lahar's addition).
                per_node = ", ".join(f"{n}: {len(free & info.cpus_in(frozenset({n})))}" for n in nodes)
                return f"container {c.name} cannot be assigned by numa (free cpus per NUMA node {per_node})"
            got = allocate(info, free, c, hint)
            chosen |= got
            free = free - got
        assign[row] = frozenset(chosen)
        return ""

    # -- score -------------------------------------------------------------------------------------
    def node_order(self, task: TaskInfo, idx: IntArray) -> FloatArray:
        """Fewest NUMA nodes best: counts normalised to 100 and reversed (NormalizeScore)."""
        assign = self.assign.get(id(task))
        if assign is None or task_policy(task) in ("", NONE):
            return np.zeros(len(idx))
        counts = np.array(
            [numa_count(self.infos[r], assign.get(r, frozenset())) if r in self.infos else 0 for r in idx.tolist()],
            dtype=np.int64,
        )
        top = int(counts.max()) if len(counts) else 0
        if top == 0:
            return np.full(len(idx), float(MAX_NODE_SCORE * self.weight))
        scores = MAX_NODE_SCORE - (MAX_NODE_SCORE * counts) // top
        return (scores * self.weight).astype(float)

    # -- allocate / deallocate -----------------------------------------------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        node = self.ssn.nodes.by_name.get(task.node_name)
        cpus = self.assign.get(id(task), {}).get(node.index) if node is not None else None
        if node is None or cpus is None or task.status not in _HOLDS:
            return
        self.free[node.index] = self.free[node.index] - cpus
        self.held[id(task)] = (task, node.index, cpus)

    def on_deallocate(self, task: TaskInfo) -> None:
        held = self.held.pop(id(task), None)
        if held is not None:
            self.free[held[1]] = self.free[held[1]] | held[2]

    def on_session_close(self, ssn: Session) -> None:
        """Cpus of pods dispatched this session stay taken until the exporter lists them."""
        for task, row, cpus in self.held.values():
            if task.status in (TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING):
                name = ssn.node_list[row].name
                ssn.snapshot.numa_unassigned.setdefault(name, {})[task.key] = cpus

    def cpus_of(self, task: TaskInfo) -> str:
        """The cpus assigned to ``task`` on its node this session, as a cpuset list (for tests)."""
        held = self.held.get(id(task))
        return format_cpuset(held[2]) if held is not None else ""
