"""Tasks (pods), jobs (PodGroup + pods) and queues, with Volcano's counters."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from lahar.api.objects import Container, NetworkTopologySpec, Pod, PodGroup, Queue, SubGroupPolicySpec
from lahar.api.resource import Resource
from lahar_scheduler.framework.subjobs import SubJobs
from lahar_scheduler.framework.subjobs import build as build_sub_jobs
from lahar_scheduler.framework.types import (
    ALLOCATED_STATUSES,
    PREEMPTABLE_KEY,
    SCHEDULED_STATUSES,
    TASK_PRIORITY_KEY,
    TASK_SPEC_KEY,
    PodGroupPhase,
    TaskStatus,
)

if TYPE_CHECKING:
    from lahar_scheduler.framework.devices import CardUse, DeviceRequest
    from lahar_scheduler.framework.fiterrors import FitErrors
    from lahar_scheduler.framework.nodes import FloatArray, IntArray

S = TaskStatus
# Statuses ready_num counts (Volcano's ReadyTaskNum).
_READY = (S.BOUND, S.BINDING, S.RUNNING, S.ALLOCATED, S.SUCCEEDED)
# Statuses valid_num and allocated_num count, in the order they always counted them.
_VALID = (S.BOUND, S.BINDING, S.RUNNING, S.ALLOCATED, S.SUCCEEDED, S.PIPELINED, S.PENDING)
_ALLOCATED = (S.BOUND, S.BINDING, S.RUNNING, S.ALLOCATED)
_READY_SET, _VALID_SET = frozenset(_READY), frozenset(_VALID)
_PIPELINED = S.PIPELINED
_PENDING = S.PENDING
_RELEASING = S.RELEASING
_PENDING_PHASES = ("", PodGroupPhase.PENDING)
# The PodGroup annotation Volcano records a job's allocated HyperNode in.
JOB_ALLOCATED_HYPERNODE = "volcano.sh/job-allocated-hypernode"


def pod_status(pod: Pod) -> TaskStatus:
    """Volcano's getTaskStatus: the task status a pod's phase and fields imply."""
    phase = pod.status.phase
    deleting = pod.metadata.deletion_timestamp is not None
    if phase == "Running":
        return S.RELEASING if deleting else S.RUNNING
    if phase == "Pending" or phase == "":
        if deleting:
            return S.RELEASING
        return S.BOUND if pod.spec.node_name else S.PENDING
    if phase == "Succeeded":
        return S.SUCCEEDED
    if phase == "Failed":
        return S.FAILED
    return S.UNKNOWN


def pod_preemptable(pod: Pod) -> bool:
    """Annotation, else label, ``volcano.sh/preemptable``; default true, unparsable false."""
    meta = pod.metadata
    raw = meta.annotations.get(PREEMPTABLE_KEY)
    if raw is None:
        raw = meta.labels.get(PREEMPTABLE_KEY)
    if raw is None:
        return True
    return _parse_bool(raw) is True


def _parse_bool(raw: str) -> bool | None:
    """Go's strconv.ParseBool."""
    if raw in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if raw in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def parse_bool(raw: str) -> bool | None:
    return _parse_bool(raw)


def pod_requests(pod: Pod) -> tuple[Resource, Resource]:
    """(Resreq, InitResreq): both are the pod's effective request, init containers and ``pods: 1``
    included.

    Volcano's NewTaskInfo sets ``Resreq := InitResreq`` (GetPodResourceRequest).  Using only the
    regular containers for Resreq would let node accounting, DRF shares and queue usage miss the
    pod slot and an init container's peak: a node would take more pods than its ``pods`` (when the
    predicates plugin is not configured) and more init-heavy pods than its cpu (the kubelet then
    rejects them).
    """
    launch = Resource()
    for c in pod.spec.containers:
        launch.add(Resource.from_list(c.resources.requests))
    restartable = Resource()
    init_max = Resource()
    for c in pod.spec.init_containers:
        req = Resource.from_list(c.resources.requests)
        if c.restart_policy == "Always":
            launch.add(req)
            restartable.add(req)
            req = restartable.clone()
        else:
            req = req.clone().add(restartable)
        init_max.set_max(req)
    launch.set_max(init_max)
    launch.add_scalar("pods", 1)
    _amend(launch, pod)
    return launch.clone(), launch


_DEFAULT_CPU = 100.0
_DEFAULT_MEMORY = 200.0 * 1024 * 1024


def nonzero_request(pod: Pod) -> FloatArray:
    """[milli-cpu, memory] as kube-scheduler scores a pod: a missing request counts 100m / 200Mi."""

    def one(c: Container) -> tuple[float, float]:
        r = Resource.from_list(c.resources.requests)
        cpu = r.milli_cpu if "cpu" in c.resources.requests else _DEFAULT_CPU
        mem = r.memory if "memory" in c.resources.requests else _DEFAULT_MEMORY
        return cpu, mem

    cpu = mem = 0.0
    for c in pod.spec.containers:
        a, b = one(c)
        cpu += a
        mem += b
    for c in pod.spec.init_containers:
        a, b = one(c)
        cpu, mem = max(cpu, a), max(mem, b)
    if pod.spec.overhead:
        o = Resource.from_list(pod.spec.overhead)
        cpu += o.milli_cpu
        mem += o.memory
    return np.array([cpu, mem])


def _amend(r: Resource, pod: Pod) -> None:
    """Pod-level requests replace container sums; overhead adds on top."""
    spec = pod.spec
    if spec.resources is not None and spec.resources.requests:
        level = Resource.from_list(spec.resources.requests)
        for name in spec.resources.requests:
            if name in ("cpu", "memory") or name.startswith("hugepages-"):
                r.set(name, level.get(name))
    if spec.overhead:
        r.add(Resource.from_list(spec.overhead))


def pod_index(name: str) -> int | None:
    """The trailing ``-<n>`` index Volcano's CompareTask orders by (names with ≥3 dash parts)."""
    if name.count("-") < 2:  # fewer than three parts
        return None
    tail = name[name.rfind("-") + 1 :]
    body = tail[1:] if tail[:1] in "+-" and len(tail) > 1 else tail
    return int(tail) if body.isdigit() else None


_NO_VALUES: FloatArray = np.zeros(0)
_NO_COLUMNS: IntArray = np.zeros(0, dtype=np.intp)


class TaskShape(Protocol):
    """What every task of one pod shape derives alike (the snapshot's per-shape record)."""

    @property
    def resreq(self) -> Resource: ...
    @property
    def init_resreq(self) -> Resource: ...
    @property
    def best_effort(self) -> bool: ...
    @property
    def priority(self) -> int: ...
    @property
    def preemption_policy(self) -> str: ...
    @property
    def sch_gated(self) -> bool: ...
    @property
    def template_key(self) -> bytes: ...
    @property
    def res_vec(self) -> FloatArray: ...
    @property
    def init_vec(self) -> FloatArray: ...
    @property
    def fit_cols(self) -> IntArray: ...
    @property
    def nonzero_vec(self) -> FloatArray: ...
    @property
    def devreq(self) -> DeviceRequest | None: ...


class TaskInfo:
    """A pod as the scheduler sees it."""

    __slots__ = (
        "best_effort",
        "card_annotations",
        "cards",
        "creation",
        "devreq",
        "eviction_occurred",
        "fit_cols",
        "index",
        "init_resreq",
        "init_vec",
        "job",
        "last_node",
        "last_status",
        "name",
        "namespace",
        "node_name",
        "nonzero_vec",
        "pod",
        "preemptable",
        "preemption_policy",
        "priority",
        "res_vec",
        "resreq",
        "role",
        "sch_gated",
        "status",
        "template_key",
        "uid",
        "unscored",
    )

    def __init__(
        self, pod: Pod, job_id: str, resreq: Resource, init_resreq: Resource, nonzero: FloatArray | None = None
    ) -> None:
        self._own(pod, job_id)
        self.resreq = resreq
        self.init_resreq = init_resreq
        self.best_effort = init_resreq.is_empty()
        self.priority = _task_priority(pod)
        self.preemption_policy = pod.spec.preemption_policy or ""
        self.sch_gated = bool(pod.spec.scheduling_gates)
        self.template_key: bytes = b""
        # Placeholders until the snapshot vectorises the task: shared, as an empty array holds
        # nothing to change (a new array per task cost 5% of a 50,000-pod snapshot load).
        self.res_vec: FloatArray = _NO_VALUES
        self.init_vec: FloatArray = _NO_VALUES
        self.fit_cols: IntArray = _NO_COLUMNS
        self.nonzero_vec: FloatArray = nonzero_request(pod) if nonzero is None else nonzero
        # Shared GPUs (framework/devices.py): the ask (None for nearly every pod).
        self.devreq: DeviceRequest | None = None

    @classmethod
    def like(cls, pod: Pod, job_id: str, model: TaskShape) -> TaskInfo:
        """The task of ``pod`` whose spec-derived fields are ``model``'s: what ``__init__`` and
        the snapshot's vectorising would compute again for a pod of the same shape key (the
        spec, the namespace and the volcano annotations), taken as they are (a restart's load
        makes 50,000 tasks of a few hundred shapes)."""
        task = cls.__new__(cls)
        task._own(pod, job_id)
        task.resreq, task.init_resreq, task.best_effort = model.resreq, model.init_resreq, model.best_effort
        task.priority, task.preemption_policy = model.priority, model.preemption_policy
        task.sch_gated, task.template_key = model.sch_gated, model.template_key
        task.res_vec, task.init_vec, task.fit_cols = model.res_vec, model.init_vec, model.fit_cols
        task.nonzero_vec, task.devreq = model.nonzero_vec, model.devreq
        return task

    def _own(self, pod: Pod, job_id: str) -> None:
        """The fields of the pod's own (identity, state, labels), and a session's marks unset."""
        meta = pod.metadata
        self.pod = pod
        self.uid = meta.uid or f"{meta.namespace}-{meta.name}"
        self.name = meta.name
        self.namespace = meta.namespace
        self.job = job_id
        self.node_name = pod.spec.node_name
        self.status = pod_status(pod)
        self.role = meta.labels.get(TASK_SPEC_KEY) or meta.annotations.get(TASK_SPEC_KEY) or ""
        self.preemptable = pod_preemptable(pod)  # its label counts too: not in the shape key
        self.creation = meta.creation_timestamp or ""
        self.index = pod_index(meta.name)
        self.last_status: TaskStatus | None = None
        self.last_node = ""
        self.eviction_occurred = False
        # Evicted in an open Statement: gone from the node view the kube scorers read.
        self.unscored = False
        # Shared GPUs (framework/devices.py): the cards held on the node, and the annotations a
        # session's choice of cards writes at bind.
        self.cards: CardUse | None = None
        self.card_annotations: dict[str, str] | None = None

    def __repr__(self) -> str:
        return f"Task({self.namespace}/{self.name} {self.status} {self.node_name})"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _task_priority(pod: Pod) -> int:
    raw = pod.metadata.annotations.get(TASK_PRIORITY_KEY)
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            pass
    return pod.spec.priority if pod.spec.priority is not None else 1


class JobInfo:
    """A PodGroup and its pods."""

    def __init__(self, uid: str, podgroup: PodGroup | None, default_queue: str = "default") -> None:
        self.uid = uid
        self.namespace, _, self.name = uid.partition("/")
        self.podgroup = podgroup
        self.tasks: dict[str, TaskInfo] = {}
        self.status_index: dict[TaskStatus, dict[str, TaskInfo]] = {}
        self.allocated = Resource()
        self.total_request = Resource()
        self.pending_best_effort = 0
        self.priority = 0
        self.fit_errors: dict[str, FitErrors] = {}
        self.job_fit_error = ""
        self.queue = default_queue
        self.min_available = 0
        self.task_min_available: dict[str, int] = {}
        self.task_min_total = 0
        self.min_resources: Resource | None = None
        self.network_topology: NetworkTopologySpec | None = None
        self.allocated_hypernode = ""  # Volcano's JobAllocatedHyperNode (PodGroup annotation)
        # Sub-jobs by the PodGroup's subGroupPolicy; None without one (the job is its own sub-job).
        self.sub_jobs: SubJobs | None = None
        self.creation = ""
        self.preemptable = False
        self.waiting_time: str | None = None
        self.phase = ""
        self.conditions: list[tuple[str, str, str]] = []
        if podgroup is not None:
            self.set_podgroup(podgroup, default_queue)

    def set_podgroup(self, pg: PodGroup, default_queue: str = "default") -> None:
        self.podgroup = pg
        spec = pg.spec
        self.queue = spec.queue or default_queue
        self.min_available = spec.min_member
        self.task_min_available = dict(spec.min_task_member)
        self.task_min_total = sum(spec.min_task_member.values())
        self.min_resources = Resource.from_list(spec.min_resources) if spec.min_resources is not None else None
        self.network_topology = spec.network_topology
        self.allocated_hypernode = pg.metadata.annotations.get(JOB_ALLOCATED_HYPERNODE, "")
        self._split(spec.sub_group_policy)
        self.creation = pg.metadata.creation_timestamp or ""
        raw = pg.metadata.annotations.get(PREEMPTABLE_KEY, pg.metadata.labels.get(PREEMPTABLE_KEY, ""))
        self.preemptable = parse_bool(raw) is True
        self.waiting_time = pg.metadata.annotations.get("volcano.sh/sla-waiting-time") or pg.metadata.annotations.get(
            "sla-waiting-time"
        )
        self.phase = pg.status.phase

    def __repr__(self) -> str:
        return f"Job({self.uid} min={self.min_available} tasks={len(self.tasks)})"

    # -- membership ---------------------------------------------------------------------
    def add_task(self, task: TaskInfo) -> None:
        self.tasks[task.uid] = task
        self._index(task)
        self.total_request.add(task.resreq)
        if self.sub_jobs is not None:
            self.sub_jobs.add(task)

    def add_tasks(self, tasks: list[TaskInfo]) -> None:
        """``add_task`` of each, in order (a snapshot's build): the same dicts and the same sums,
        each sum taken by runs of one request object (``Resource.add_times``: bit for bit the
        adds one at a time); the tasks of one shape share their request."""
        index, subs = self.status_index, self.sub_jobs
        held: list[TaskInfo] = []
        for task in tasks:
            self.tasks[task.uid] = task
            status = task.status
            bucket = index.get(status)
            if bucket is None:
                bucket = index[status] = {}
            bucket[task.uid] = task
            if status in ALLOCATED_STATUSES:
                held.append(task)
            elif status == S.PENDING and task.best_effort:
                self.pending_best_effort += 1
            if subs is not None:
                subs.add(task)
        add_runs(self.allocated, held)
        add_runs(self.total_request, tasks)

    def remove_task(self, task: TaskInfo) -> None:
        if self.tasks.pop(task.uid, None) is None:
            return
        self._unindex(task)
        self.total_request.sub(task.resreq)
        if self.sub_jobs is not None:
            self.sub_jobs.remove(task)

    def _split(self, policies: list[SubGroupPolicySpec]) -> None:
        if not policies:
            self.sub_jobs = None
            return
        old = self.sub_jobs
        if old is not None and old.policies == policies and old.topology == self.network_topology:
            return
        self.sub_jobs = build_sub_jobs(self.uid, list(policies), self.network_topology, self.tasks.values())

    def _index(self, task: TaskInfo) -> None:
        idx = self.status_index
        bucket = idx.get(task.status)
        if bucket is None:
            bucket = idx[task.status] = {}  # setdefault would make a dict per call
        bucket[task.uid] = task
        if task.status in ALLOCATED_STATUSES:
            self.allocated.add(task.resreq)
        if task.status == _PENDING and task.best_effort:
            self.pending_best_effort += 1

    def _unindex(self, task: TaskInfo) -> None:
        bucket = self.status_index.get(task.status)
        if bucket is not None:
            bucket.pop(task.uid, None)
        if task.status in ALLOCATED_STATUSES:
            self.allocated.sub(task.resreq)
        if task.status == _PENDING and task.best_effort:
            self.pending_best_effort -= 1

    def update_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """``_unindex``, the new status, ``_index``: inline, as every task move comes here."""
        idx = self.status_index
        old = task.status
        bucket = idx.get(old)
        if bucket is not None:
            bucket.pop(task.uid, None)
        if old in ALLOCATED_STATUSES:
            self.allocated.sub(task.resreq)
        if old == _PENDING and task.best_effort:
            self.pending_best_effort -= 1
        task.status = status
        bucket = idx.get(status)
        if bucket is None:
            bucket = idx[status] = {}
        bucket[task.uid] = task
        if status in ALLOCATED_STATUSES:
            self.allocated.add(task.resreq)
        if status == _PENDING and task.best_effort:
            self.pending_best_effort += 1

    # -- counters -----------------------------------------------------------------------
    def count(self, *statuses: TaskStatus) -> int:
        # A plain loop: asked several times per task placed (readiness, job order).
        idx = self.status_index
        n = 0
        for s in statuses:
            bucket = idx.get(s)
            if bucket:
                n += len(bucket)
        return n

    def tasks_in(self, status: TaskStatus) -> Iterable[TaskInfo]:
        return self.status_index.get(status, {}).values()

    # The counters below are asked per task placed and per victim weighed: each loops over its
    # statuses itself (no ``count(*statuses)`` call), and the statuses are module tuples (on
    # Python 3.11 reading a member off the TaskStatus class takes the enum's slow lookup hook).
    def ready_num(self) -> int:
        idx = self.status_index
        n = 0
        for s in _READY:
            bucket = idx.get(s)
            if bucket:
                n += len(bucket)
        return n

    def waiting_num(self) -> int:
        bucket = self.status_index.get(_PIPELINED)
        return len(bucket) if bucket else 0

    def valid_num(self) -> int:
        # Over the job's buckets (one or two, mostly), not over the seven statuses.
        n = 0
        for s, bucket in self.status_index.items():
            if s in _VALID_SET:
                n += len(bucket)
        return n

    def allocated_num(self) -> int:
        idx = self.status_index
        n = 0
        for s in _ALLOCATED:
            bucket = idx.get(s)
            if bucket:
                n += len(bucket)
        return n

    def scheduled_num(self) -> int:
        return sum(len(v) for k, v in self.status_index.items() if k in SCHEDULED_STATUSES)

    def releasing_scheduled_num(self) -> int:
        bucket = self.status_index.get(_RELEASING)
        return sum(1 for t in bucket.values() if t.node_name) if bucket else 0

    def is_ready(self) -> bool:
        # ready_num() + pending_best_effort, counted here: asked per job at every session's
        # close and per task placed.
        n = self.pending_best_effort
        for s, bucket in self.status_index.items():  # its buckets: mostly one or two
            if s in _READY_SET:
                n += len(bucket)
        return n >= self.min_available

    def is_pipelined(self) -> bool:
        return self.waiting_num() + self.ready_num() + self.pending_best_effort >= self.min_available

    def is_starving(self) -> bool:
        return self.waiting_num() + self.ready_num() < self.min_available

    def is_pending(self) -> bool:
        return self.podgroup is None or self.phase in _PENDING_PHASES

    # -- per-role (task-spec) checks; all skipped when minMember < Σ minTaskMember -------
    def _roles(self, statuses: frozenset[TaskStatus], empty_pending: bool) -> dict[str, int]:
        out: dict[str, int] = {}
        for status, bucket in self.status_index.items():
            if status in statuses:
                for t in bucket.values():
                    out[t.role] = out.get(t.role, 0) + 1
            elif empty_pending and status == S.PENDING:
                for t in bucket.values():
                    if t.best_effort:
                        out[t.role] = out.get(t.role, 0) + 1
        return out

    def _roles_meet(self, counts: dict[str, int], skip_zero: bool) -> bool:
        for role, minimum in self.task_min_available.items():
            if skip_zero and minimum == 0:
                continue
            if counts.get(role, 0) < minimum:
                return False
        return True

    def valid_by_role(self) -> dict[str, int]:
        """Valid tasks (pending or placed) per role, as check_task_valid counts them."""
        return self._roles(frozenset(ALLOCATED_STATUSES | {S.SUCCEEDED, S.PIPELINED, S.PENDING}), False)

    def check_task_valid(self) -> bool:
        if not self.task_min_available or self.min_available < self.task_min_total:
            return True
        counts = self.valid_by_role()
        for role, minimum in self.task_min_available.items():
            if minimum and (role not in counts or counts[role] < minimum):
                return False
        return True

    def check_task_ready(self) -> bool:
        if not self.task_min_available or self.min_available < self.task_min_total:
            return True
        return self._roles_meet(self.allocated_roles(), False)

    def check_task_pipelined(self) -> bool:
        if not self.task_min_available or self.min_available < self.task_min_total:
            return True
        counts = self._roles(frozenset(ALLOCATED_STATUSES | {S.SUCCEEDED, S.PIPELINED}), True)
        return self._roles_meet(counts, False)

    def check_task_starving(self) -> bool:
        if not self.task_min_available or self.min_available < self.task_min_total:
            return True
        counts = self._roles(frozenset(ALLOCATED_STATUSES | {S.SUCCEEDED, S.PIPELINED}), False)
        return not self._roles_meet(counts, False)

    def allocated_roles(self) -> dict[str, int]:
        return self._roles(frozenset(ALLOCATED_STATUSES | {S.SUCCEEDED}), True)

    def fit_failed_roles(self) -> set[str]:
        return {self.tasks[tid].role for tid in self.fit_errors if tid in self.tasks}

    def task_has_fit_errors(self, task: TaskInfo) -> bool:
        return bool(task.role) and task.role in self.fit_failed_roles()

    def need_continue_allocating(self) -> bool:
        """After a task fails predicates: may the job's other tasks still be tried?"""
        if self.min_available == len(self.tasks):
            return False
        failed = self.fit_failed_roles()
        if self.min_available < self.task_min_total:
            pending: dict[str, int] = {}
            for t in self.tasks_in(S.PENDING):
                pending[t.role] = pending.get(t.role, 0) + 1
            left = sum(c for role, c in pending.items() if role not in failed)
            return self.ready_num() + left >= self.min_available
        allocated = self.allocated_roles()
        for role in failed:
            minimum = self.task_min_available.get(role, 0)
            if minimum and allocated.get(role, 0) < minimum:
                return False
        return True

    def reset_fit_errors(self) -> None:
        self.job_fit_error = ""
        self.fit_errors = {}


def add_runs(total: Resource, tasks: Iterable[TaskInfo]) -> None:
    """``total.add(t.resreq)`` for each task in order, one ``add_times`` per run of tasks that
    hold the very same request object."""
    last: Resource | None = None
    run = 0
    for t in tasks:
        if t.resreq is last:
            run += 1
            continue
        if last is not None:
            total.add_times(last, run)
        last, run = t.resreq, 1
    if last is not None:
        total.add_times(last, run)


class QueueInfo:
    """A Queue with the fields the plugins read."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        meta = queue.metadata
        spec = queue.spec
        self.uid = meta.name
        self.name = meta.name
        self.weight = spec.weight
        self.capability = Resource.from_list(spec.capability) if spec.capability else None
        self.guarantee = (
            Resource.from_list(spec.guarantee.resource)
            if spec.guarantee is not None and spec.guarantee.resource
            else None
        )
        self.deserved = Resource.from_list(spec.deserved) if spec.deserved else None
        self.reclaimable = spec.reclaimable is None or spec.reclaimable
        self.parent = spec.parent
        self.priority = spec.priority
        self.state = queue.status.state or "Open"
        self.creation = meta.creation_timestamp or ""
        self.hierarchy = meta.annotations.get("volcano.sh/hierarchy", "")
        self.hierarchy_weights = meta.annotations.get("volcano.sh/hierarchy-weights", "")
        self.children: list[str] = []

    def __repr__(self) -> str:
        return f"Queue({self.name} w={self.weight} {self.state})"

    def is_open(self) -> bool:
        return self.state == "Open"
