"""reservation: the target job elect picks, the nodes reserve locks, and who may use them.

As Volcano's retired reservation plugin (v1.5, removed in b27b4bbe7): the target is the Pending
job of highest priority that has waited longest; each session reserve locks the unlocked node
with the most idle resources.  Volcano's allocate never honoured the locks (it read the target
once at start-up); here the predicate refuses locked nodes to every other job's tasks.
"""

from __future__ import annotations

import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
from lahar_scheduler.framework.nodes import IntArray
from lahar_scheduler.framework.predicate import Failure
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.snapshot import parse_time
from lahar_scheduler.framework.types import Code
from lahar_scheduler.plugins.base import NoArgs, Plugin

# Volcano's Resource.LessEqual tolerance, per dimension.
_TOLERANCE = 0.1


class ReservationPlugin(Plugin):
    name = "reservation"
    Args = NoArgs

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.state = ssn.snapshot.reservation
        ssn.add(P.TARGET_JOB, self.target_job)
        ssn.add(P.RESERVED_NODES, self.reserve_node)
        ssn.add(P.PREDICATE, _LockedNodes(self))

    def target_job(self, jobs: list[JobInfo]) -> JobInfo | None:
        """Highest priority first; among those, the longest waiting (first listed on a tie)."""
        if not jobs:
            return None
        top = max(job.priority for job in jobs)
        best: JobInfo | None = None
        for job in jobs:
            if job.priority == top and (best is None or parse_time(job.creation) < parse_time(best.creation)):
                best = job
        return best

    def reserve_node(self) -> None:
        """Lock the unlocked node with the most idle resources (every dimension at least as large)."""
        locked = set(self.state.locked)
        table = self.ssn.nodes
        best: int | None = None
        for node in self.ssn.node_list:
            if node.name in locked:
                continue
            i = node.index
            if best is None or bool(np.all(table.idle[best] <= table.idle[i] + _TOLERANCE)):
                best = i
        if best is not None:
            self.state.locked.append(self.ssn.node_list[best].name)

    def locked_rows(self, task: TaskInfo) -> set[int]:
        """Node rows closed to ``task``: every locked node unless it belongs to the target job."""
        if not self.state.locked or task.job == self.state.target:
            return set()
        by_name = self.ssn.nodes.by_name
        return {by_name[n].index for n in self.state.locked if n in by_name}


class _LockedNodes:
    """The predicate: a locked node refuses tasks of jobs other than the target."""

    def __init__(self, plugin: ReservationPlugin) -> None:
        self.plugin = plugin

    def is_local(self, task: TaskInfo) -> bool:
        # Verdicts differ between jobs of the same pod shape only while nodes are locked.
        return not self.plugin.state.locked

    def __call__(self, task: TaskInfo, idx: IntArray) -> list[Failure]:
        rows = self.plugin.locked_rows(task)
        if not rows:
            return []
        mask = np.isin(idx, np.fromiter(rows, dtype=np.intp, count=len(rows)))
        job = self.plugin.ssn.jobs.get(self.plugin.state.target or "")
        who = f"{job.namespace}/{job.name}" if job is not None else "another job"
        return [Failure(mask, f"node(s) were reserved for job {who}", Code.UNSCHEDULABLE)]
