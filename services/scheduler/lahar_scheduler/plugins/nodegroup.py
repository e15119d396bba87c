"""nodegroup: queues choose the node groups (``volcano.sh/nodegroup-name`` node label) their
jobs may use, from the Queue's ``spec.affinity``, and may cap what they take in each group.

A queue's affinity lists groups as required or preferred, for affinity and anti-affinity.  A node
passes when its group is required or preferred, unless anti-affinity requires it away; a group
that anti-affinity only prefers away from still passes (scored −1).  Scores: required +100,
preferred +50 (or, with ``enablePreferredOrder``, 50·(n−i)/n for the i-th of n preferred groups);
anti-preferred makes the score −1.  A node without the label passes only with ``strict: false``
and a queue without affinity; a labelled node never passes for a queue without affinity.  With
``enableHierarchy`` a queue without affinity inherits its nearest ancestor's.  The queue
annotation ``volcano.sh/nodegroup-resource-limits`` (JSON, group → resource list) caps what the
queue's running and placed tasks may hold in a group, on the resource names it lists.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from lahar.api.quantity import Quantity
from lahar.api.resource import MIN_RESOURCE, Resource
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import QueueInfo, TaskInfo
from lahar_scheduler.framework.predicate import Failure
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.types import ALLOCATED_STATUSES, Code
from lahar_scheduler.plugins.base import Plugin

if TYPE_CHECKING:
    from lahar_scheduler.framework.nodes import FloatArray, IntArray

NODEGROUP_NAME_KEY = "volcano.sh/nodegroup-name"
RESOURCE_LIMITS_KEY = "volcano.sh/nodegroup-resource-limits"
BASE_SCORE = 100.0
ROOT = "root"

ERR_AFFINITY_NOT_FOUND = "node group affinity not specified"
ERR_LABEL_NOT_FOUND = "node group label not found"
ERR_UNSATISFIED = "node does not satisfy the node group affinity"
ERR_LIMIT_INVALID = "node group resource limit annotation invalid"
ERR_LIMIT_EXCEEDED = "node group resource limit exceeded"


class NodeGroupArgs(msgspec.Struct, forbid_unknown_fields=True):
    strict: bool = True
    enable_preferred_order: bool = msgspec.field(default=False, name="enablePreferredOrder")


@dataclass
class GroupAffinity:
    required: set[str] = field(default_factory=set)
    preferred: list[str] = field(default_factory=list)
    anti_required: set[str] = field(default_factory=set)
    anti_preferred: set[str] = field(default_factory=set)

    def empty(self) -> bool:
        return not (self.required or self.preferred or self.anti_required or self.anti_preferred)

    def admits(self, group: str) -> bool:
        """Anti-affinity outranks affinity; an anti-preferred group still passes (it scores −1)."""
        ok = group in self.required or group in self.preferred
        if group in self.anti_required:
            ok = False
        return ok or group in self.anti_preferred

    def score(self, group: str, preferred_order: bool) -> float:
        total = BASE_SCORE if group in self.required else 0.0
        if group in self.preferred:
            if preferred_order:
                n = len(self.preferred)
                # the last index of a repeated group counts, as Volcano's map keeps it
                i = n - 1 - self.preferred[::-1].index(group)
                total += 0.5 * BASE_SCORE * (n - i) / n
            else:
                total += 0.5 * BASE_SCORE
        return -1.0 if group in self.anti_preferred else total


def _strings(raw: Any, key: str) -> list[str]:
    if not isinstance(raw, dict):
        return []
    got = raw.get(key) or []
    return [str(g) for g in got] if isinstance(got, list) else []


def queue_affinity(queue: QueueInfo) -> GroupAffinity | None:
    """The queue's spec.affinity as group sets, None when it sets none."""
    raw = queue.queue.spec.affinity
    if raw is None:
        return None
    aff, anti = raw.get("nodeGroupAffinity"), raw.get("nodeGroupAntiAffinity")
    req, pref = "requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"
    return GroupAffinity(
        set(_strings(aff, req)), _strings(aff, pref), set(_strings(anti, req)), set(_strings(anti, pref))
    )


def resource_limits(queue: QueueInfo) -> tuple[dict[str, tuple[Resource, set[str]]], str | None]:
    """group → (limit, the names it limits), or the parse error of the annotation."""
    raw = queue.queue.metadata.annotations.get(RESOURCE_LIMITS_KEY, "")
    if not raw:
        return {}, None
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise ValueError("expected an object of group → resource list")
        out = {}
        for group, rl in doc.items():
            parsed = {str(k): Quantity(v if isinstance(v, (int, float)) else str(v)) for k, v in (rl or {}).items()}
            out[str(group)] = (Resource.from_list(parsed), set(parsed))
        return out, None
    except (ValueError, TypeError, AttributeError) as exc:
        return {}, f"parse annotation {RESOURCE_LIMITS_KEY}: {exc}"


def exceeded_names(used: Resource, limit: Resource, names: set[str]) -> list[str]:
    out = []
    for name in ("cpu", "memory", *sorted(names - {"cpu", "memory"})):
        if name in names and used.get(name) > limit.get(name) and used.get(name) - limit.get(name) >= MIN_RESOURCE:
            out.append(name)
    return out


@dataclass
class QueueAttr:
    affinity: GroupAffinity | None
    limits: dict[str, tuple[Resource, set[str]]]
    limit_error: str | None
    allocated: dict[str, Resource] = field(default_factory=dict)


class NodeGroupPlugin(Plugin):
    name = "nodegroup"
    Args = NodeGroupArgs

    def on_session_open(self, ssn: Session) -> None:
        self.cfg: NodeGroupArgs = self.args or NodeGroupArgs()
        self.ssn = ssn
        opt = ssn.conf.plugin(self.name)
        self.attrs = {name: QueueAttr(queue_affinity(q), *resource_limits(q)) for name, q in ssn.queues.items()}
        if opt is not None and opt.enabled("enableHierarchy"):
            self._inherit()
        # Node groups as small integers, so a verdict per group spreads to every node at once.
        labels = [info.labels.get(NODEGROUP_NAME_KEY) for info in ssn.node_list]
        self.groups = sorted({g for g in labels if g is not None})
        index = {g: i for i, g in enumerate(self.groups)}
        self.group_of = np.array([-1 if g is None else index[g] for g in labels], dtype=np.intp)
        self.placed: dict[str, str] = {}  # task uid → the group its allocation was counted in
        for job in ssn.jobs.values():
            for status in ALLOCATED_STATUSES:
                for t in job.tasks_in(status):
                    self._count(t, +1)
        ssn.add(P.PREDICATE, self.predicate)
        ssn.add(P.NODE_ORDER, self.node_order)
        ssn.add_event_handler(EventHandler(lambda t: self._count(t, +1), lambda t: self._count(t, -1)))

    def _inherit(self) -> None:
        """A queue without affinity takes its nearest ancestor's (root is every queue's last)."""
        queues = self.ssn.queues
        for name, attr in self.attrs.items():
            seen = {name}
            current = queues[name]
            while attr.affinity is None and name != ROOT:
                parent = current.parent or ROOT
                if parent in seen or parent not in queues:
                    break
                seen.add(parent)
                attr.affinity = self.attrs[parent].affinity
                current = queues[parent]
                if parent == ROOT:
                    break

    def _attr(self, task: TaskInfo) -> QueueAttr | None:
        job = self.ssn.jobs.get(task.job)
        return None if job is None else self.attrs.get(job.queue)

    def _count(self, task: TaskInfo, sign: int) -> None:
        attr = self._attr(task)
        if attr is None:
            return
        if sign > 0:
            node = self.ssn.nodes.by_name.get(task.node_name) if task.node_name else None
            group = node.labels.get(NODEGROUP_NAME_KEY) if node is not None else None
            if group is None:
                return
            self.placed[task.uid] = group
            attr.allocated.setdefault(group, Resource()).add(task.resreq)
        else:
            group = self.placed.pop(task.uid, None)
            if group is not None and group in attr.allocated:
                attr.allocated[group].sub(task.resreq)

    # -- predicate ------------------------------------------------------------------------------
    def _group_verdicts(self, task: TaskInfo, attr: QueueAttr | None) -> list[str | None]:
        """Per group (by index), the reason it fails, or None."""
        aff = attr.affinity if attr is not None else None
        out: list[str | None] = []
        for group in self.groups:
            if aff is None or aff.empty():
                out.append(ERR_AFFINITY_NOT_FOUND)
            elif not aff.admits(group):
                out.append(ERR_UNSATISFIED)
            elif attr is not None and self._over_limit(task, group, attr):
                out.append(ERR_LIMIT_EXCEEDED)
            else:
                out.append(None)
        return out

    @staticmethod
    def _over_limit(task: TaskInfo, group: str, attr: QueueAttr) -> bool:
        limit = attr.limits.get(group)
        if limit is None:
            return False
        used = attr.allocated.get(group, Resource()).clone().add(task.resreq)
        return bool(exceeded_names(used, limit[0], limit[1]))

    def predicate(self, task: TaskInfo, idx: IntArray) -> list[Failure]:
        """Not marked local: the verdict depends on the job's queue, which tasks of one template
        need not share, and on the queue's usage in each group as tasks are placed."""
        attr = self._attr(task)
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        if attr is not None and attr.limit_error is not None:
            return [Failure(np.ones(len(idx), dtype=bool), ERR_LIMIT_INVALID, code)]
        groups = self.group_of[idx]
        unset = attr is None or attr.affinity is None or attr.affinity.empty()
        failures = []
        bare = groups < 0
        if bare.any() and (self.cfg.strict or not unset):
            failures.append(Failure(bare, ERR_LABEL_NOT_FOUND, code))
        verdicts = self._group_verdicts(task, attr)
        for reason in sorted({v for v in verdicts if v is not None}):
            bad = np.array([v == reason for v in verdicts], dtype=bool)
            mask = ~bare & bad[np.maximum(groups, 0)]
            if mask.any():
                failures.append(Failure(mask, reason, code))
        return failures

    def node_order(self, task: TaskInfo, idx: IntArray) -> FloatArray:
        attr = self._attr(task)
        if attr is None or attr.affinity is None or not self.groups:
            return np.zeros(len(idx))
        per_group = np.array([attr.affinity.score(g, self.cfg.enable_preferred_order) for g in self.groups])
        groups = self.group_of[idx]
        return np.where(groups >= 0, per_group[np.maximum(groups, 0)], 0.0)
