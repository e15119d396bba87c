"""Why a job waits: the first thing that stopped it in a session, with the numbers and what
would let it run.

Volcano's conditions name no plugin and no resource (``3 Pending, 3 minAvailable, pod group is
not ready``).  A plugin or action that refuses a job records a ``Why`` on the job's decision;
the gang plugin appends its short form to Volcano's text in the PodGroup's ``Unschedulable``
condition (so tools matching Volcano's prefix still match), and ``lahar explain`` prints it whole.
Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from lahar.api.objects import Pod
from lahar.api.quantity import format_quantity
from lahar.api.resource import CPU, MEMORY, PODS, Resource


@dataclass
class Why:
    action: str  # the action that stopped the job: enqueue, allocate, ...
    plugin: str  # the plugin whose verdict stopped it (or "scheduler")
    summary: str  # "queue ml: cpu 300 requested, 12 of capability 100 left"
    remedy: str = ""  # "raise its capability or free 288 cpu in queue ml"
    details: list[str] = field(default_factory=list)

    def short(self) -> str:
        """The form carried by the PodGroup condition."""
        text = f"{self.plugin}: {self.summary}"
        return f"{text}; {self.remedy}" if self.remedy else text


def amount(name: str, value: float) -> str:
    """One dimension of a Resource as a person writes it: cpu in cores, memory in Gi/Mi."""
    if math.isinf(value):
        return "unlimited"
    if name == CPU:
        return format_quantity(value, True)
    if name == MEMORY:
        return format_quantity(value, False)
    return f"{value:g}" if name == PODS else f"{value / 1000:g}"


@dataclass
class Shortage:
    """``requested`` does not fit in ``limit − used`` on dimension ``name``."""

    name: str
    requested: float
    used: float
    limit: float

    @property
    def left(self) -> float:
        return max(0.0, self.limit - self.used)

    @property
    def missing(self) -> float:
        return self.requested - self.left

    def text(self, label: str) -> str:
        n = self.name
        return (
            f"{n} {amount(n, self.requested)} requested, {amount(n, self.left)} of {label} {amount(n, self.limit)} left"
        )


def shortages(requested: Resource, used: Resource, limit: Resource, names: list[str]) -> list[Shortage]:
    """The named dimensions where ``used + requested`` exceeds ``limit`` (Volcano's ``short``)."""
    out = []
    for name in names:
        s = Shortage(name, requested.get(name), used.get(name), limit.get(name))
        if s.missing > 0:
            out.append(s)
    return out


def quota_why(
    action: str, plugin: str, queue: str, short: list[Shortage], label: str, remedy: str, *, freeable: bool = True
) -> Why:
    """A queue limit (capability, deserved share) refused the request; unless ``freeable`` is
    False (the request exceeds the limit itself), freeing the excess would also let it run."""
    parts = "; ".join(s.text(label) for s in short)
    free = ", ".join(f"{amount(s.name, s.missing)} {s.name}" for s in short)
    details = [
        f"{s.name}: the queue uses {amount(s.name, s.used)} of its {label} {amount(s.name, s.limit)}" for s in short
    ]
    if freeable:
        remedy = f"{remedy} or free {free} in queue {queue}"
    return Why(action, plugin, f"queue {queue}: {parts}", remedy, details)


def queue_state_why(action: str, plugin: str, queue: str, state: str) -> Why:
    return Why(
        action,
        plugin,
        f"queue {queue} is {state}: it admits and allocates nothing",
        f"open queue {queue} (lahar queue operate {queue} --action open)",
    )


class QuotaAttr(Protocol):
    """What proportion's and capacity's per-queue state share: enough to explain a refusal."""

    @property
    def name(self) -> str: ...
    @property
    def capability(self) -> Resource | None: ...
    @property
    def real_capability(self) -> Resource: ...
    @property
    def guarantee(self) -> Resource: ...
    @property
    def pool(self) -> Pool | None: ...


@dataclass
class Pool:
    """What a queue's real capability is carved from: ``exceeded_part(total, guaranteed) +
    own guarantee`` — the cluster (flat) or the parent's real capability (hierarchy), less every
    guarantee carved from it (the queue's own included, then given back to it)."""

    label: str  # "the cluster", "parent queue eng's real capability"
    total: Resource
    guaranteed: Resource


def capability_why(action: str, plugin: str, attr: QuotaAttr, req: Resource, used: Resource, names: list[str]) -> Why:
    """The queue's real capability refused ``req``: its spec capability, or the cluster less the
    other queues' guarantees when that is smaller."""
    short = shortages(req, used, attr.real_capability, names)
    cap = attr.capability
    if cap is not None and all(cap.get(s.name) == s.limit for s in short):
        return quota_why(action, plugin, attr.name, short, "capability", "raise its capability")
    pool = attr.pool
    if pool is None:
        return quota_why(action, plugin, attr.name, short, "real capability", "add nodes")
    return guarantee_why(action, plugin, attr, short, pool)


def guarantee_why(action: str, plugin: str, attr: QuotaAttr, short: list[Shortage], pool: Pool) -> Why:
    """The real capability is what the other queues' guarantees leave: name them and the sums."""
    others = {s.name: max(0.0, pool.guaranteed.get(s.name) - attr.guarantee.get(s.name)) for s in short}
    held = ", ".join(f"{amount(n, v)} {n}" for n, v in others.items() if v > 0)
    remedy = f"lower other queues' guarantees ({held}), add nodes" if held else "add nodes"
    why = quota_why(action, plugin, attr.name, short, "real capability", remedy)
    if held:
        why.summary += f" (other queues' guarantees hold {held})"
    why.details = [
        f"{s.name}: real capability {amount(s.name, s.limit)} = {pool.label} {amount(s.name, pool.total.get(s.name))}"
        f" − {amount(s.name, pool.guaranteed.get(s.name))} guaranteed to its queues"
        f" + its own guarantee {amount(s.name, attr.guarantee.get(s.name))}; the queue uses {amount(s.name, s.used)}"
        for s in short
    ]
    return why


# -- pods outside any PodGroup ----------------------------------------------------------------
def missing_group_why(group: str) -> Why:
    """The pod names PodGroup ``group`` (namespace/name) and it does not exist: the scheduler's
    cache holds the pod's job without a spec, and no session schedules it (as in Volcano)."""
    return Why(
        "session open",
        "scheduler",
        f"PodGroup {group} does not exist; the pod waits until it is created",
        f"create PodGroup {group}, or fix the pod's scheduling.k8s.io/group-name annotation",
    )


def no_group_why(pod: Pod) -> Why:
    """The pod names no PodGroup: the controller makes ``podgroup-<controller owner uid>`` (else
    ``podgroup-<pod uid>``) and annotates the pod; until then no session sees it as a job."""
    meta = pod.metadata
    owner = next((r for r in meta.owner_references if r.controller), None)
    name = f"podgroup-{owner.uid if owner is not None else meta.uid}"
    return Why(
        "session open",
        "scheduler",
        "no PodGroup: the pod has no scheduling.k8s.io/group-name annotation, so no session schedules it yet",
        f"the controller creates PodGroup {meta.namespace}/{name} for it and annotates the pod: "
        "check that lahar's controller is running (or create a PodGroup and annotate the pod)",
    )


def missing_queue_why(queue: str) -> Why:
    """The PodGroup names a queue that does not exist: Volcano skips the job silently."""
    return Why(
        "session open",
        "scheduler",
        f"queue {queue!r} does not exist; the PodGroup waits until it is created",
        f"create queue {queue}, or move the PodGroup to an existing queue",
    )


def best_effort_why(waiting: int) -> Why:
    """Pending tasks with no requests: allocate leaves them to backfill, which is not configured."""
    return Why(
        "allocate",
        "scheduler",
        f"{waiting} pending task(s) request no resources (BestEffort): allocate leaves them to the backfill "
        "action, and the configuration's actions have no backfill",
        "add backfill to the actions of volcano-scheduler.conf, or give the tasks resource requests",
    )
