"""Hierarchical-queue checks: parent, depth, capability inheritance and children's sums."""

from __future__ import annotations

from lahar.api.resource import Resource
from lahar_admission.types import Queue
from lahar_admission.view import ClusterView, not_found
from lahar_admission.volres import format_for, less_partly, new_resource, volcano_string

QUEUE_RESOURCE = "queue.scheduling.volcano.sh"


def _is_top(parent: str) -> bool:
    return parent in ("", "root")


def parent_error(queue: Queue, view: ClusterView, max_depth: int) -> str:
    """Stage B: self-parent, depth, parent existence, and an allocated leaf becoming a parent."""
    name, parent = queue.metadata.name, queue.spec.parent
    if _is_top(parent):
        return ""
    if parent == name:
        return f"queue {name} cannot use itself as parent"
    depth, current = 1, parent
    while not _is_top(current):
        depth += 1
        if depth > max_depth:
            return f"queue {name} exceeds the maximum allowed depth of {max_depth}"
        ancestor = view.queue(current)
        if ancestor is None:
            return f"failed to get parent queue {current} of queue {name}: {not_found(QUEUE_RESOURCE, current)}"
        current = ancestor.spec.parent
    parent_queue = view.queue(parent)
    if parent_queue is None:
        return f"failed to get parent queue of queue {name}: {not_found(QUEUE_RESOURCE, parent)}"
    if not view.children(parent):
        pods = parent_queue.status.allocated.get("pods")
        if pods is not None and pods.amount != 0:
            return (
                f"queue {parent} cannot be the parent queue of queue {name} because it has allocated Pods: {pods.units}"
            )
    return ""


def _same_list(a: dict[str, object], b: dict[str, object]) -> bool:
    return a == b  # Quantity equality is by value


def resources_changed(old: Queue, new: Queue) -> bool:
    return not (
        _same_list(dict(old.spec.capability), dict(new.spec.capability))
        and _same_list(dict(old.spec.deserved), dict(new.spec.deserved))
        and _same_list(dict(old.spec.guarantee.resource), dict(new.spec.guarantee.resource))
    )


def _ancestor_limit(queue: Queue, name: str, view: ClusterView) -> float | None:
    """The first ancestor capability with a positive value for ``name``."""
    parent = queue.spec.parent
    seen: set[str] = set()
    while not _is_top(parent) and parent not in seen:
        seen.add(parent)
        pq = view.queue(parent)
        if pq is None:
            return None
        value = new_resource(pq.spec.capability).get(name)
        if value > 0:
            return value
        parent = pq.spec.parent
    return None


def _subtree_max(queue: Queue, name: str, view: ClusterView, seen: set[str]) -> float:
    value = new_resource(queue.spec.capability).get(name)
    if value > 0:
        return value
    if queue.metadata.name in seen:
        return 0.0
    seen.add(queue.metadata.name)
    return max((_subtree_max(c, name, view, seen) for c in view.children(queue.metadata.name)), default=0.0)


def _sum_error(owner: str, totals: list[tuple[Resource, Resource]], guarantee: Resource, deserved: Resource) -> str:
    """Add children one by one; report the first sum that exceeds the parent's."""
    total_g, total_d = Resource(), Resource()
    for g, d in totals:
        total_g.add(g)
        if less_partly(guarantee, total_g):
            return (
                f"{owner} validation failed: sum of children's guarantee ({volcano_string(total_g)}) "
                f"exceeds parent's guarantee limit ({volcano_string(guarantee)})"
            )
        total_d.add(d)
        if less_partly(deserved, total_d):
            return (
                f"{owner} validation failed: sum of children's deserved ({volcano_string(total_d)}) "
                f"exceeds parent's deserved limit ({volcano_string(deserved)})"
            )
    return ""


def _pair(q: Queue) -> tuple[Resource, Resource]:
    return new_resource(q.spec.guarantee.resource), new_resource(q.spec.deserved)


def resource_error(queue: Queue, view: ClusterView) -> str:
    """Stage D: this queue against its ancestors and siblings, then against its children."""
    name, parent = queue.metadata.name, queue.spec.parent
    if not _is_top(parent):
        pq = view.queue(parent)
        if pq is None:
            return f"parent queue {parent} not found: {not_found(QUEUE_RESOURCE, parent)}"
        cap = new_resource(queue.spec.capability)
        for rname in cap.names():
            mine, limit = cap.get(rname), _ancestor_limit(queue, rname, view)
            if limit is not None and mine > limit:
                return (
                    f"queue {name} capability[{rname}]={format_for(rname, mine)} "
                    f"exceeds its ancestor's capability={format_for(rname, limit)}"
                )
        siblings = [_pair(s) for s in view.children(parent) if s.metadata.name != name]
        err = _sum_error(f"parent queue {parent}", [*siblings, _pair(queue)], *_pair(pq))
        if err:
            return err
    children = view.children(name)
    if not children:
        return ""
    if queue.spec.capability:
        cap = new_resource(queue.spec.capability)
        for rname in cap.names():
            mine = cap.get(rname)
            child_max = max((_subtree_max(c, rname, view, {name}) for c in children), default=0.0)
            if mine < child_max:
                return (
                    f"queue {name} capability[{rname}]={format_for(rname, mine)} "
                    f"is smaller than its descendants' max capability={format_for(rname, child_max)}"
                )
    return _sum_error(f"queue {name}", [_pair(c) for c in children], *_pair(queue))
