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

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.hypernodes import CLUSTER_TOP, HyperNodeTree
from lahar_scheduler.framework.jobs import JobInfo
from lahar_scheduler.framework.types import ALLOCATED_STATUSES

if TYPE_CHECKING:
    from lahar_scheduler.framework.session import Session

HARD, SOFT = "hard", "soft"


@dataclass
class JobTopology:
    highest_tier: int  # after translation and soft→hard conversion
    soft: bool  # as written: soft jobs are searched as hard up to the cluster top
    allocated: str = ""  # the HyperNode holding the job's placed tasks (LCA), "" if none
    placing: str = ""  # the same while allocate places tasks (Volcano's task.JobAllocatedHyperNode)


def job_topologies(jobs: Iterable[JobInfo], tree: HyperNodeTree) -> dict[str, JobTopology]:
    out: dict[str, JobTopology] = {}
    top_tier = tree.tier(CLUSTER_TOP)
    names: dict[str, int] | None = None
    for job in jobs:
        spec = job.network_topology
        if spec is None:
            continue
        highest = spec.highest_tier_allowed
        if spec.highest_tier_name:
            names = tree.tier_by_name() if names is None else names
            # An unknown tier name leaves the tier as written (Volcano logs and goes on).
            highest = names.get(spec.highest_tier_name, highest)
        soft = spec.mode == SOFT
        if soft:
            highest = top_tier
        if highest is None or spec.mode not in (HARD, SOFT):
            continue  # Volcano's IsHardTopologyMode needs both a mode and a tier
        out[job.uid] = JobTopology(highest, soft, recover_allocated(job, tree))
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


def gradients(ssn: Session, job: JobInfo, topo: JobTopology, root: str) -> list[list[str]]:
    """The first gradient callback's answer; without one the root is the only candidate."""
    got = ssn.call(P.HYPERNODE_GRADIENT, job, topo, root)
    return [[root]] if got is None else got


def hypernode_scores(ssn: Session, job: JobInfo, candidates: list[str]) -> dict[str, float]:
    scored = ssn.call(P.HYPERNODE_ORDER, job, candidates)
    return {c: scored.get(c, 0.0) for c in candidates}
