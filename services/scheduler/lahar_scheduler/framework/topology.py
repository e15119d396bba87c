"""Jobs' network-topology constraints as a session sees them (Volcano's session adjustments).

At session open Volcano translates ``highestTierName`` into a tier, turns soft mode into hard
mode bounded by the cluster-top HyperNode's tier (so a soft job searches the same gradients and
may fall back to the whole cluster), and recovers each job's allocated HyperNode.  Jobs without
``networkTopology`` get no entry, so the plain allocate path pays nothing for this.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lahar.api.objects import NetworkTopologySpec
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.hypernodes import CLUSTER_TOP, HyperNodeTree
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
from lahar_scheduler.framework.types import ALLOCATED_STATUSES

if TYPE_CHECKING:
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.framework.subjobs import SubJobInfo

HARD, SOFT = "hard", "soft"
PURPOSE_ALLOCATE, PURPOSE_EVICT = "allocate", "evict"


@dataclass
class JobTopology:
    highest_tier: int  # after translation and soft→hard conversion
    soft: bool  # as written: soft jobs are searched as hard up to the cluster top
    allocated: str = ""  # the HyperNode holding the job's placed tasks (LCA), "" if none
    placing: str = ""  # the same while allocate places tasks (Volcano's task.JobAllocatedHyperNode)
    # Volcano's SearchPurpose: gradients for eviction (gangpreempt, gangreclaim) keep HyperNodes
    # whose allocatable could hold the job and list the widest first, capped.
    purpose: str = "allocate"


def constraint(spec: NetworkTopologySpec | None, tree: HyperNodeTree) -> JobTopology | None:
    """A networkTopology as a session applies it (tier names resolved, soft searched as hard up
    to the cluster top); None when it constrains nothing."""
    if spec is None:
        return None
    highest = spec.highest_tier_allowed
    if spec.highest_tier_name:
        # An unknown tier name leaves the tier as written (Volcano logs and goes on).
        highest = tree.tier_by_name().get(spec.highest_tier_name, highest)
    soft = spec.mode == SOFT
    if soft:
        highest = tree.tier(CLUSTER_TOP)
    if highest is None or spec.mode not in (HARD, SOFT):
        return None  # Volcano's IsHardTopologyMode needs both a mode and a tier
    return JobTopology(highest, soft)


def job_topologies(jobs: Iterable[JobInfo], tree: HyperNodeTree) -> dict[str, JobTopology]:
    out: dict[str, JobTopology] = {}
    for job in jobs:
        topo = constraint(job.network_topology, tree)
        if topo is not None:
            topo.allocated = recover_allocated(job, tree)
            out[job.uid] = topo
    return out


def sub_job_topologies(jobs: Iterable[JobInfo], tree: HyperNodeTree) -> dict[str, JobTopology]:
    """Per sub-job with a networkTopology, its constraint and where its placed tasks already are
    (Volcano's recoverAllocatedHyperNode for sub-jobs: the lowest HyperNode holding them all)."""
    out: dict[str, JobTopology] = {}
    for job in jobs:
        if job.sub_jobs is None:
            continue
        for sub in job.sub_jobs.all():
            topo = constraint(sub.network_topology, tree)
            if topo is None:
                continue
            for node in sub.placed_nodes():
                leaf = tree.leaf_of(node)
                if leaf:
                    topo.allocated = tree.lca(topo.allocated, leaf)
            out[sub.uid] = topo
    return out


def recover_allocated(job: JobInfo, tree: HyperNodeTree) -> str:
    """The recorded allocated HyperNode if it still exists and the job has placed tasks, else the
    LCA of the lowest HyperNodes holding the nodes its placed tasks are on."""
    placed = [t for s in ALLOCATED_STATUSES for t in job.tasks_in(s) if t.node_name]
    if not placed:
        return ""
    if job.allocated_hypernode and job.allocated_hypernode in tree:
        return job.allocated_hypernode
    found = ""
    for task in placed:
        leaf = tree.leaf_of(task.node_name)
        if leaf:
            found = tree.lca(found, leaf)
    return found


def gradients(ssn: Session, job: JobInfo | SubJobInfo, topo: JobTopology, root: str) -> list[list[str]]:
    """The first gradient callback's answer; without one the root is the only candidate."""
    got = ssn.call(P.HYPERNODE_GRADIENT, job, topo, root)
    return [[root]] if got is None else got


def hypernode_scores(ssn: Session, job: JobInfo | SubJobInfo, candidates: list[str]) -> dict[str, float]:
    scored = ssn.call(P.HYPERNODE_ORDER, job, candidates)
    return {c: scored.get(c, 0.0) for c in candidates}


def task_topology(ssn: Session, task: TaskInfo) -> tuple[JobTopology | None, JobInfo | SubJobInfo | None]:
    """The constraint a task is placed under and whose tasks it joins: its sub-job's when the job
    has a subGroupPolicy (Volcano's TaskToSubJob), else its job's."""
    job = ssn.jobs.get(task.job)
    if job is not None and job.sub_jobs is not None:
        sub = job.sub_jobs.of(task)
        if sub is None:
            return None, None
        return ssn.sub_topology.get(sub.uid), sub
    return ssn.topology.get(task.job), job
