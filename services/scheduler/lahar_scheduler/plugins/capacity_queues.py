"""capacity's queue accounting: explicit deserved/guarantee/capability per queue, flat or as a tree.

Flat (``enableHierarchy`` off): only queues with jobs get attributes; realCapability is
ExceededPart(cluster, Σ every queue's guarantee) + own guarantee, capped by capability (cpu or
memory ≤ 0 meaning unbounded); deserved is spec.deserved capped by realCapability and floored by
guarantee.

Tree (``enableHierarchy`` on, queues linked by ``spec.parent``, default parent ``root``): every
queue gets attributes; jobs must sit in leaves and their usage is added to every ancestor.
Children inherit the cpu, memory and scalars their capability leaves unset; root's capability is
unbounded unless set and its deserved/guarantee are its children's sums; a child's realCapability
is ExceededPart(parent's realCapability, Σ siblings' guarantees) + own guarantee, capped by its
capability.  A cycle, a missing parent, a job in a non-leaf queue or a missing root make the
plugin refuse everything for the session (Volcano's ``readyToSchedule``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from lahar.api.objects import ResourceList
from lahar.api.resource import Dim, Resource, exceeded_part, resource_max
from lahar_scheduler.framework.jobs import JobInfo, QueueInfo
from lahar_scheduler.framework.why import Pool
from lahar_scheduler.plugins.queueshare import dominant_share, elastic_resources, job_inqueue, job_usage

ROOT = "root"


@dataclass
class CapacityAttr:
    name: str
    deserved: Resource
    guarantee: Resource
    capability: Resource
    real_capability: Resource = field(default_factory=Resource)
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    inqueue: Resource = field(default_factory=Resource)
    elastic: Resource = field(default_factory=Resource)
    ancestors: list[str] = field(default_factory=list)  # root first, parent last
    children: list[str] = field(default_factory=list)
    share: float = 0.0
    pool: Pool | None = None  # what real_capability is carved from (for explanations)

    def update_share(self) -> None:
        # No deserved: a best-effort queue, served only after every queue with a deserved
        # share below 1 (so it always sorts as share 1).
        self.share = 1.0 if self.deserved.is_empty() else dominant_share(self.allocated, self.deserved)

    def is_leaf(self) -> bool:
        return not self.children


Attrs = dict[str, CapacityAttr]


def _spec_resource(rl: ResourceList | None) -> Resource:
    return Resource.from_list(rl) if rl else Resource()


def new_attr(queue: QueueInfo) -> CapacityAttr:
    spec = queue.queue.spec
    guarantee = spec.guarantee.resource if spec.guarantee is not None else None
    return CapacityAttr(
        queue.name, _spec_resource(spec.deserved), _spec_resource(guarantee), _spec_resource(spec.capability)
    )


def _job_usage(attr: CapacityAttr, job: JobInfo) -> None:
    """Add a job's allocated, request, inqueue reservation and elastic part to ``attr``."""
    allocated, request = job_usage(job)
    attr.allocated.add(allocated)
    attr.request.add(request)
    inqueue = job_inqueue(job)
    if inqueue is not None:
        attr.inqueue.add(inqueue)
    attr.elastic.add(elastic_resources(job))


# -- flat -------------------------------------------------------------------------------------
def build_flat(queues: dict[str, QueueInfo], jobs: list[JobInfo], total: Resource) -> Attrs:
    total_guarantee = Resource()
    for q in queues.values():
        spec = q.queue.spec
        if spec.guarantee is not None and spec.guarantee.resource:
            total_guarantee.add(Resource.from_list(spec.guarantee.resource))
    attrs: Attrs = {}
    for job in jobs:
        attr = attrs.get(job.queue)
        if attr is None:
            attr = attrs[job.queue] = flat_attr(queues[job.queue], total, total_guarantee)
        _job_usage(attr, job)
    for attr in attrs.values():
        attr.deserved.min_dimension(attr.real_capability, Dim.INFINITY)
        attr.deserved = resource_max(attr.deserved, attr.guarantee)
        attr.update_share()
    return attrs


def flat_attr(queue: QueueInfo, total: Resource, total_guarantee: Resource) -> CapacityAttr:
    attr = new_attr(queue)
    real = exceeded_part(total, total_guarantee).add(attr.guarantee)
    if queue.queue.spec.capability:
        if attr.capability.milli_cpu <= 0:
            attr.capability.milli_cpu = math.inf
        if attr.capability.memory <= 0:
            attr.capability.memory = math.inf
        real.min_dimension(attr.capability, Dim.INFINITY)
    attr.real_capability = real
    attr.pool = Pool("the cluster", total, total_guarantee)
    return attr


# -- tree -------------------------------------------------------------------------------------
class HierarchyError(ValueError):
    """The queue tree cannot be used this session."""


def build_tree(queues: dict[str, QueueInfo], jobs: list[JobInfo], total: Resource) -> Attrs:
    attrs: Attrs = {}
    for queue in queues.values():
        if queue.name not in attrs:
            attrs[queue.name] = new_attr(queue)
            _link(queue, queues, attrs, set())
    for job in jobs:
        attr = attrs.get(job.queue)
        if attr is None:
            continue
        if not attr.is_leaf():
            raise HierarchyError(f"queue {attr.name} of job {job.uid} is not a leaf queue")
        before = (attr.allocated.clone(), attr.request.clone(), attr.inqueue.clone(), attr.elastic.clone())
        _job_usage(attr, job)
        after = (attr.allocated, attr.request, attr.inqueue, attr.elastic)
        deltas = [now.clone().sub(old) for now, old in zip(after, before, strict=True)]
        for name in attr.ancestors:
            up = attrs[name]
            for mine, delta in zip((up.allocated, up.request, up.inqueue, up.elastic), deltas, strict=True):
                mine.add(delta)
    root = attrs.get(ROOT)
    if root is None:
        raise HierarchyError("root queue not found")
    if root.capability.is_empty():
        # Root is not limited by today's cluster size: users bound usage with their own queues.
        root.capability = Resource(math.inf, math.inf, {name: math.inf for name in total.scalars})
    root.real_capability = root.capability
    _settle(root, attrs)
    for attr in attrs.values():
        attr.update_share()
    return attrs


def _link(queue: QueueInfo, queues: dict[str, QueueInfo], attrs: Attrs, visiting: set[str]) -> None:
    """Record ``queue`` among its parent's children and its ancestors (creating parents first)."""
    if queue.name == ROOT:
        return
    if queue.name in visiting:
        raise HierarchyError(f"cycle in the queue hierarchy at {queue.name}")
    visiting.add(queue.name)
    parent_name = queue.parent or ROOT
    parent = queues.get(parent_name)
    if parent is None:
        raise HierarchyError(f"queue {queue.name} has an invalid parent {parent_name}")
    if parent_name not in attrs:
        attrs[parent_name] = new_attr(parent)
        _link(parent, queues, attrs, visiting)
    visiting.discard(queue.name)
    attrs[parent_name].children.append(queue.name)
    attrs[queue.name].ancestors = [*attrs[parent_name].ancestors, parent_name]


def _settle(attr: CapacityAttr, attrs: Attrs) -> None:
    """Top-down: children's deserved floored by guarantee, capability inherited, realCapability."""
    children = [attrs[name] for name in attr.children]
    total_guarantee, total_deserved = Resource(), Resource()
    for child in children:
        child.deserved = resource_max(child.deserved, child.guarantee)
        total_deserved.add(child.deserved)
        total_guarantee.add(child.guarantee)
        cap = child.capability
        if cap.milli_cpu <= 0:
            cap.milli_cpu = attr.capability.milli_cpu
        if cap.memory <= 0:
            cap.memory = attr.capability.memory
        for name, amount in attr.capability.scalars.items():
            cap.scalars.setdefault(name, amount)
    if attr.name == ROOT:
        attr.guarantee = total_guarantee
        attr.deserved = total_deserved
    for child in children:
        real = exceeded_part(attr.real_capability, total_guarantee).add(child.guarantee)
        child.real_capability = real.min_dimension(child.capability, Dim.INFINITY)
        child.pool = Pool(f"parent queue {attr.name}'s real capability", attr.real_capability, total_guarantee)
    for child in children:
        _settle(child, attrs)


# -- tree positions ---------------------------------------------------------------------------
def common_level(left: CapacityAttr, right: CapacityAttr) -> int:
    """Index of the deepest ancestor both share (0 = root) — Volcano's getQueueLevel."""
    level = 0
    for i in range(min(len(left.ancestors), len(right.ancestors))):
        if left.ancestors[i] != right.ancestors[i]:
            return level
        level = i
    return level


def ancestor_at(attr: CapacityAttr, depth: int) -> str | None:
    """The ancestor ``depth`` levels up (1 = parent), if there is one."""
    if depth <= 0 or len(attr.ancestors) < depth:
        return None
    return attr.ancestors[len(attr.ancestors) - depth]


def ancestors_within(attr: CapacityAttr, levels: int) -> dict[int, str]:
    out = {}
    for level in range(1, levels + 1):
        name = ancestor_at(attr, level)
        if name is not None:
            out[level] = name
    return out
