"""Sub-jobs: a job split by its PodGroup's ``subGroupPolicy``, as Volcano's SubJobInfo.

Each policy selects pods (``labelSelector``) and groups them by the values of its
``matchLabelKeys`` (a Volcano Job task's ``partitionPolicy`` is rendered into one such policy,
keyed by ``volcano.sh/partition-id``).  Each group is a sub-job: a gang of ``subGroupSize`` tasks
(1 when unset) carrying the policy's ``networkTopology``.  Pods no policy selects form the job's
default sub-job (minimum 1, the job's own networkTopology).  ``minSubGroups`` sub-jobs of a
policy must be ready (or pipelined) for the job to be.  Jobs without a policy have no sub-jobs
here at all: the job is its own single sub-job and the plain paths apply.

Counts are read from the tasks' live statuses, so statements need not tell the sub-jobs anything.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lahar.api.objects import NetworkTopologySpec, SubGroupPolicySpec
from lahar.api.resource import Resource
from lahar_scheduler.framework.types import ALLOCATED_STATUSES, TaskStatus

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo

S = TaskStatus
_READY = frozenset({S.BOUND, S.BINDING, S.RUNNING, S.ALLOCATED, S.SUCCEEDED})


@dataclass(eq=False)
class SubJobInfo:
    gid: str  # the policy's group: "<job>/<policy>", or the job's uid for the default sub-job
    uid: str
    job: str
    min_available: int = 1
    match_index: int = 0  # the first match value as a number (partition ids order sub-jobs)
    network_topology: NetworkTopologySpec | None = None
    tasks: dict[str, TaskInfo] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"SubJob({self.uid} min={self.min_available} tasks={len(self.tasks)})"

    @property
    def priority(self) -> int:
        """The highest task priority (Volcano starts from 0)."""
        return max((t.priority for t in self.tasks.values() if t.priority > 0), default=0)

    def count(self, statuses: frozenset[TaskStatus]) -> int:
        return sum(1 for t in self.tasks.values() if t.status in statuses)

    def pending(self) -> list[TaskInfo]:
        return [t for t in self.tasks.values() if t.status == S.PENDING]

    def ready_num(self) -> int:
        return self.count(_READY)

    def pending_best_effort(self) -> int:
        return sum(1 for t in self.tasks.values() if t.status == S.PENDING and t.best_effort)

    def is_ready(self) -> bool:
        return self.ready_num() + self.pending_best_effort() >= self.min_available

    def is_pipelined(self) -> bool:
        waiting = self.count(frozenset({S.PIPELINED}))
        return waiting + self.ready_num() + self.pending_best_effort() >= self.min_available

    @property
    def min_resources(self) -> Resource:
        """Volcano's SubJobInfo.GetMinResources: a sub-job is a whole gang, so what its pending
        tasks ask for (initial requests)."""
        out = Resource()
        for t in self.pending():
            out.add(t.init_resreq)
        return out

    def placed_nodes(self) -> list[str]:
        return [t.node_name for t in self.tasks.values() if t.status in ALLOCATED_STATUSES and t.node_name]


def match_values(policy: SubGroupPolicySpec, labels: Mapping[str, str]) -> list[str] | None:
    """Volcano's getSubJobMatchValues: None when the pod is not selected or lacks a key's value;
    [] for a selected pod of a policy without matchLabelKeys (one group for all)."""
    if policy.label_selector is not None:
        # Imported here: the plugins package imports the session, which imports jobs.
        from lahar_scheduler.plugins.k8s.selectors import label_selector_matches

        if not label_selector_matches(policy.label_selector, labels):
            return None
    out: list[str] = []
    for key in policy.match_label_keys:
        value = labels.get(key, "")
        if not value:
            return None
        out.append(value)
    return out


def sub_job_id(job: str, policy: str, values: list[str]) -> str:
    joined = "-".join(values)
    if len(joined) > 128:
        # Volcano hashes long ids too (FNV); any stable short digest serves the same purpose.
        joined = hashlib.sha256(joined.encode()).hexdigest()[:16]
    return f"{job}/{policy}-{joined}"


class SubJobs:
    """A job's sub-jobs, kept as tasks come and go."""

    def __init__(self, job: str, policies: list[SubGroupPolicySpec], topology: NetworkTopologySpec | None) -> None:
        self.job = job
        self.policies = policies
        self.topology = topology
        self.by_uid: dict[str, SubJobInfo] = {}
        self.of_task: dict[str, str] = {}
        # Per policy group, how many of its sub-jobs must be placed (minSubGroups, 0 when unset).
        self.min_sub_jobs = {f"{job}/{p.name}": p.min_sub_groups or 0 for p in policies}

    def _for(self, task: TaskInfo) -> SubJobInfo:
        labels = task.pod.metadata.labels
        for policy in self.policies:
            values = match_values(policy, labels)
            if values is None:
                continue
            uid = sub_job_id(self.job, policy.name, values)
            got = self.by_uid.get(uid)
            if got is None:
                index = int(values[0]) if values and values[0].lstrip("-").isdigit() else 0
                size = policy.sub_group_size if policy.sub_group_size is not None else 1
                got = SubJobInfo(f"{self.job}/{policy.name}", uid, self.job, size, index, policy.network_topology)
                self.by_uid[uid] = got
            return got
        got = self.by_uid.get(self.job)
        if got is None:
            got = self.by_uid[self.job] = SubJobInfo(self.job, self.job, self.job, 1, 0, self.topology)
        return got

    def add(self, task: TaskInfo) -> None:
        sub = self._for(task)
        sub.tasks[task.uid] = task
        self.of_task[task.uid] = sub.uid

    def remove(self, task: TaskInfo) -> None:
        uid = self.of_task.pop(task.uid, None)
        sub = self.by_uid.get(uid) if uid is not None else None
        if sub is not None:
            sub.tasks.pop(task.uid, None)

    def of(self, task: TaskInfo) -> SubJobInfo | None:
        uid = self.of_task.get(task.uid)
        return self.by_uid.get(uid) if uid is not None else None

    def all(self) -> list[SubJobInfo]:
        return list(self.by_uid.values())

    # -- gang checks over sub-jobs (Volcano's CheckSubJobValid / Ready / Pipelined) -------------
    def _counts(self, which: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for sub in self.by_uid.values():
            ok = which == "valid" or (sub.is_ready() if which == "ready" else sub.is_pipelined())
            out[sub.gid] = out.get(sub.gid, 0) + (1 if ok else 0)
        return out

    def valid(self) -> bool:
        counts = self._counts("valid")
        return all(counts.get(gid, 0) >= need for gid, need in self.min_sub_jobs.items())

    def unmet(self, which: str) -> tuple[str, int, int] | None:
        """The first policy with fewer ready (or pipelined) sub-jobs than its minSubGroups."""
        counts = self._counts(which)
        for gid, need in self.min_sub_jobs.items():
            if need and counts.get(gid, 0) < need:
                return gid, counts.get(gid, 0), need
        return None

    def ready(self) -> bool:
        return self.unmet("ready") is None

    def pipelined(self) -> bool:
        return self.unmet("pipelined") is None


def build(
    job: str, policies: list[SubGroupPolicySpec], topology: NetworkTopologySpec | None, tasks: Iterable[TaskInfo]
) -> SubJobs:
    out = SubJobs(job, policies, topology)
    for t in tasks:
        out.add(t)
    return out
