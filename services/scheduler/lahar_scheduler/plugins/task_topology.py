"""task-topology: affinity and anti-affinity between the tasks (roles) of one job, by buckets.

A PodGroup's annotations name the job's roles (``volcano.sh/task-spec`` of its pods):
``volcano.sh/task-topology-affinity: "ps,worker;ps,chief"`` (roles to place together; one role
alone: its pods together), ``volcano.sh/task-topology-anti-affinity: "ps;worker,chief"`` (apart),
``volcano.sh/task-topology-task-order: "ps,worker,chief"`` (which role goes first).  At session
open each job with pending tasks and such annotations has its topology-bearing tasks packed into
*buckets*: greedily, in task order, each task joins the bucket whose tasks it is most attracted
to (affinity count minus anti-affinity count), the lightest on ties, or a new bucket when every
bucket repels it; bound tasks seed one bucket per node.  Buckets then drive the task order (fuller
buckets first, bucket by bucket) and the node order: a node scores the bucket's tasks already on it
plus the bucket's pending tasks that would still fit there, less anti-affinity with the roles
already placed there, × weight × 100 / the largest bucket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from lahar.api.resource import MIN_RESOURCE
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.types import TASK_SPEC_KEY, TaskStatus
from lahar_scheduler.plugins.base import Plugin

if TYPE_CHECKING:
    from lahar_scheduler.framework.nodes import FloatArray, IntArray

AFFINITY_KEY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY_KEY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER_KEY = "volcano.sh/task-topology-task-order"
MAX_NODE_SCORE = 100.0

# How strongly a role is bound by its topology, for the task order (Volcano's affinityPriority).
SELF_ANTI_AFFINITY, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI_AFFINITY = 4, 3, 2, 1


class TaskTopologyArgs(msgspec.Struct, forbid_unknown_fields=True):
    weight: int = msgspec.field(default=1, name="task-topology.weight")


@dataclass
class TaskTopology:
    affinity: list[list[str]] | None = None
    anti_affinity: list[list[str]] | None = None
    task_order: list[str] | None = None


class TopologyError(ValueError):
    pass


def _check(job: JobInfo, groups: list[list[str]]) -> None:
    """Every named role exists in the job and appears once per group (empty names are skipped)."""
    roles = {t.role for t in job.tasks.values()}
    for group in groups:
        seen: set[str] = set()
        for role in group:
            if not role:
                continue
            if role not in roles:
                raise TopologyError(f"task {role} do not exist in job <{job.namespace}/{job.name}>")
            if role in seen:
                raise TopologyError(f"task {role} is duplicate in job <{job.namespace}/{job.name}>")
            seen.add(role)


def read_topology(job: JobInfo) -> TaskTopology | None:
    """The PodGroup's topology annotations, None when it has none; TopologyError when they name
    roles the job does not have (Volcano then ignores the job's topology)."""
    annotations = job.podgroup.metadata.annotations if job.podgroup is not None else {}
    if not any(k in annotations for k in (AFFINITY_KEY, ANTI_AFFINITY_KEY, TASK_ORDER_KEY)):
        return None
    topo = TaskTopology()
    if AFFINITY_KEY in annotations:
        topo.affinity = [part.split(",") for part in annotations[AFFINITY_KEY].split(";")]
        _check(job, topo.affinity)
    if ANTI_AFFINITY_KEY in annotations:
        topo.anti_affinity = [part.split(",") for part in annotations[ANTI_AFFINITY_KEY].split(";")]
        _check(job, topo.anti_affinity)
    if TASK_ORDER_KEY in annotations:
        topo.task_order = annotations[TASK_ORDER_KEY].split(",")
        _check(job, [topo.task_order])
    return topo


def task_name(task: TaskInfo) -> str:
    """The role as Volcano's plugin reads it: the pod's task-spec annotation only."""
    return task.pod.metadata.annotations.get(TASK_SPEC_KEY, "")


def _score_of(vec: FloatArray, memory_col: int = 1) -> float:
    """Bucket weight for ties: millicpu + MiB of memory + the scalars."""
    return float(vec.sum() - vec[memory_col] + vec[memory_col] / 1024 / 1024)


@dataclass
class Bucket:
    index: int
    width: int
    tasks: dict[str, TaskInfo] = field(default_factory=dict)  # pending members, by uid
    names: dict[str, int] = field(default_factory=dict)  # role → members
    request: FloatArray = field(default_factory=lambda: np.zeros(0))
    bound: int = 0
    nodes: dict[str, int] = field(default_factory=dict)  # node → members placed there

    def __post_init__(self) -> None:
        self.request = np.zeros(self.width)

    @property
    def req_score(self) -> float:
        return _score_of(self.request)

    def add(self, name: str, task: TaskInfo) -> None:
        self.names[name] = self.names.get(name, 0) + 1
        if task.node_name:
            self.nodes[task.node_name] = self.nodes.get(task.node_name, 0) + 1
            self.bound += 1
            return
        self.tasks[task.uid] = task
        self.request = self.request + task.res_vec

    def task_bound(self, task: TaskInfo) -> None:
        self.nodes[task.node_name] = self.nodes.get(task.node_name, 0) + 1
        self.bound += 1
        self.tasks.pop(task.uid, None)
        self.request = self.request - task.res_vec


class JobManager:
    """One job's roles, their topology and its buckets."""

    def __init__(self, topo: TaskTopology, width: int) -> None:
        self.width = width
        self.buckets: list[Bucket] = []
        self.bucket_of: dict[str, int] = {}  # task uid → bucket index (absent: out of bucket)
        self.name_of: dict[str, str] = {}
        self.priority: dict[str, int] = {}
        self.order: dict[str, int] = {}
        self.inter_affinity: dict[str, set[str]] = {}
        self.self_affinity: set[str] = set()
        self.inter_anti: dict[str, set[str]] = {}
        self.self_anti: set[str] = set()
        self.max_size = 0
        self.node_names: dict[str, dict[str, int]] = {}  # node → role → placed this session
        self._apply(topo)

    def _mark(self, name: str, priority: int) -> None:
        self.priority[name] = max(self.priority.get(name, 0), priority)

    def _apply(self, topo: TaskTopology) -> None:
        for group, single, inter, self_kind, inter_kind in (
            (topo.affinity, self.self_affinity, self.inter_affinity, SELF_AFFINITY, INTER_AFFINITY),
            (topo.anti_affinity, self.self_anti, self.inter_anti, SELF_ANTI_AFFINITY, INTER_ANTI_AFFINITY),
        ):
            for roles in group or []:
                if len(roles) == 1:
                    single.add(roles[0])
                    self._mark(roles[0], self_kind)
                    continue
                for i, src in enumerate(roles):
                    for dst in roles[:i]:
                        inter.setdefault(src, set()).add(dst)
                        inter.setdefault(dst, set()).add(src)
                    self._mark(src, inter_kind)
        order = topo.task_order or []
        for i, name in enumerate(order):
            self.order[name] = len(order) - i

    def affinity_order(self, left: TaskInfo, right: TaskInfo) -> int:
        """Positive when ``left``'s role ranks higher (earlier in task order, then tighter bound)."""
        ln, rn = self.name_of.get(left.uid, ""), self.name_of.get(right.uid, "")
        if ln == rn:
            return 0
        for table in (self.order, self.priority):
            lv, rv = table.get(ln, 0), table.get(rn, 0)
            if lv != rv:
                return 1 if lv > rv else -1
        return 0

    def attraction(self, name: str, placed: dict[str, int], only_anti: bool) -> int:
        """Σ over roles in ``placed`` of their count, + for affinity, − for anti-affinity."""
        total = 0
        if not name:
            return total
        for other, count in placed.items():
            same = other == name
            if not only_anti and (name in self.self_affinity if same else other in self.inter_affinity.get(name, ())):
                total += count
            if name in self.self_anti if same else other in self.inter_anti.get(name, ()):
                total -= count
        return total

    def construct(self, job: JobInfo) -> None:
        members = []
        for t in job.tasks.values():
            name = task_name(t)
            if name and name in self.priority:
                self.name_of[t.uid] = name
                members.append(t)

        def key(t: TaskInfo) -> tuple[int, str, int, int, str]:
            # Volcano sorts Reverse(TaskOrder): placed tasks first by node name, then by task
            # order, then by topology strength, then by name.
            if t.node_name:
                return (0, t.node_name, 0, 0, t.name)
            name = self.name_of[t.uid]
            return (1, "", -self.order.get(name, 0), -self.priority.get(name, 0), t.name)

        by_node: dict[str, Bucket] = {}
        for t in sorted(members, key=key):
            self._place(t, by_node)

    def _place(self, task: TaskInfo, by_node: dict[str, Bucket]) -> None:
        name = task_name(task)
        chosen: Bucket | None = None
        best = -math.inf
        if task.node_name:
            best = 0
            chosen = by_node.get(task.node_name)
        else:
            for b in self.buckets:
                pull = self.attraction(name, b.names, False)
                if pull > best:
                    best, chosen = pull, b
                elif pull == best and chosen is not None and b.req_score < chosen.req_score:
                    chosen = b
        if best < 0 or chosen is None:
            chosen = Bucket(len(self.buckets), self.width)
            self.buckets.append(chosen)
            if task.node_name:
                by_node[task.node_name] = chosen
        self.bucket_of[task.uid] = chosen.index
        chosen.add(name, task)
        self.max_size = max(self.max_size, len(chosen.tasks) + chosen.bound)

    def bucket(self, task: TaskInfo) -> Bucket | None:
        i = self.bucket_of.get(task.uid)
        return None if i is None else self.buckets[i]

    def task_bound(self, task: TaskInfo) -> None:
        name = task_name(task)
        if name:
            placed = self.node_names.setdefault(task.node_name, {})
            placed[name] = placed.get(name, 0) + 1
        b = self.bucket(task)
        if b is not None:
            b.task_bound(task)


class TaskTopologyPlugin(Plugin):
    name = "task-topology"
    Args = TaskTopologyArgs

    def on_session_open(self, ssn: Session) -> None:
        self.weight = (self.args or TaskTopologyArgs()).weight
        self.ssn = ssn
        self.managers: dict[str, JobManager] = {}
        width = len(ssn.nodes.space)
        for uid, job in ssn.jobs.items():
            if not job.count(TaskStatus.PENDING):
                continue
            try:
                topo = read_topology(job)
            except TopologyError:
                continue  # Volcano logs it and schedules the job without topology
            if topo is None:
                continue
            manager = JobManager(topo, width)
            manager.construct(job)
            self.managers[uid] = manager
        ssn.add(P.TASK_ORDER, self.task_order)
        ssn.add(P.NODE_ORDER, self.node_order)
        ssn.add_event_handler(EventHandler(allocate=self.allocated))

    def allocated(self, task: TaskInfo) -> None:
        manager = self.managers.get(task.job)
        if manager is not None:
            manager.task_bound(task)

    def task_order(self, left: TaskInfo, right: TaskInfo) -> int:
        lm, rm = self.managers.get(left.job), self.managers.get(right.job)
        if lm is None or rm is None:
            return 0
        lb, rb = lm.bucket(left), rm.bucket(right)
        if (lb is None) != (rb is None):
            return -1 if lb is not None else 1
        if left.job != right.job or lb is None or rb is None:
            return 0
        if len(lb.tasks) != len(rb.tasks):
            return -1 if len(lb.tasks) > len(rb.tasks) else 1
        if lb.index == rb.index:
            return -lm.affinity_order(left, right)
        return -1 if lb.index < rb.index else 1

    def node_order(self, task: TaskInfo, idx: IntArray) -> FloatArray:
        manager = self.managers.get(task.job)
        if manager is None:
            return np.zeros(len(idx))
        bucket = manager.bucket(task)
        if bucket is None:
            return np.zeros(len(idx))
        table = self.ssn.nodes
        room = table.idle[idx] + table.releasing[idx]  # what the node could give the bucket
        # Only the few nodes holding the bucket's or the job's placed tasks differ: scatter them.
        pos = np.full(len(table), -1, dtype=np.intp)
        pos[idx] = np.arange(len(idx))
        score = np.zeros(len(idx))
        for node, count in bucket.nodes.items():
            info = table.by_name.get(node)
            if info is not None and pos[info.index] >= 0:
                score[pos[info.index]] += count
        name = task_name(task)
        for node, placed in manager.node_names.items():
            info = table.by_name.get(node)
            if info is not None and pos[info.index] >= 0:
                anti = manager.attraction(name, placed, True)
                if anti < 0:
                    score[pos[info.index]] += anti
        score += len(bucket.tasks)
        score -= self._overflow(task, bucket, room)
        # A node that cannot hold the task itself scores 0 (Volcano's LessPartly check).
        short = (room[:, task.fit_cols] < task.res_vec[task.fit_cols]).any(axis=1)
        score = np.where(short, 0.0, score) * self.weight
        if manager.max_size:
            score = score * MAX_NODE_SCORE / manager.max_size
        return score

    @staticmethod
    def _overflow(task: TaskInfo, bucket: Bucket, room: FloatArray) -> FloatArray:
        """Per node, how many of the bucket's other pending tasks must be left out before what is
        left of the bucket's request fits (Volcano drops them in its map's order; here in the
        order they joined the bucket)."""
        width = room.shape[1]
        remains = np.zeros(width)
        remains[: len(bucket.request)] = bucket.request
        fits = _fits(remains, room)
        dropped = np.zeros(len(room))
        pending = ~fits
        for uid, other in bucket.tasks.items():
            if not pending.any():
                break
            if uid == task.uid:
                continue
            remains[: len(other.res_vec)] -= other.res_vec
            dropped[pending] += 1
            pending &= ~_fits(remains, room)
        return dropped


def _fits(request: FloatArray, room: FloatArray) -> np.ndarray:
    """``request.LessEqual(room, Zero)`` per row: every dimension within room, up to MIN_RESOURCE."""
    return np.asarray(((request <= room) | (np.abs(request - room) < MIN_RESOURCE)).all(axis=1))
