"""``lahar explain``: why a pod or PodGroup waits, as a chain a person can act on.

Runs the scheduler over a set of objects (a dump, or the mirror's content) exactly as
``lahar simulate`` does, then reads the last session's record for the job: which action and
plugin stopped it, with the numbers, and what would let it run.  Pure: objects in, lines out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from lahar.api.objects import KubeObject, Pod, PodGroup, Queue
from lahar.wire.messages import Delta
from lahar_scheduler.deltas import decode
from lahar_scheduler.framework.conf import SchedulerConf
from lahar_scheduler.framework.session import JobDecision, PodGroupUpdate, SessionResult
from lahar_scheduler.framework.types import GROUP_NAME_ANNOTATION
from lahar_scheduler.framework.why import Why, missing_group_why, missing_queue_why, no_group_why
from lahar_scheduler.simulation import simulate


class NotFound(LookupError):
    pass


def explain(
    objects: Iterable[KubeObject], conf: SchedulerConf, kind: str, key: str, *, cycles: int = 1, now: float = 0.0
) -> list[str]:
    """Lines explaining ``kind`` (pod or podgroup) ``key`` (namespace/name); NotFound if absent.
    ``now`` is the sessions' clock (epoch seconds), for time-based plugins (sla)."""
    objs = list(objects)
    pods = {_key(o): o for o in objs if isinstance(o, Pod)}
    groups = {_key(o): o for o in objs if isinstance(o, PodGroup)}
    queues = {o.metadata.name for o in objs if isinstance(o, Queue)}
    lines: list[str] = []
    if kind == "pod":
        pod = pods.get(key)
        if pod is None:
            raise NotFound(f"pod {key} not found")
        if pod.spec.node_name:
            return [f"pod {key}: bound to {pod.spec.node_name}; not waiting"]
        group = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION, "")
        if not group:
            return [f"pod {key}: Pending, waiting", *_why_lines_of(no_group_why(pod))]
        lines.append(f"pod {key}: Pending, in PodGroup {pod.metadata.namespace}/{group}")
        key = f"{pod.metadata.namespace}/{group}"
        if key not in groups:
            return [*lines, *_why_lines_of(missing_group_why(key))]
    pg = groups.get(key)
    if pg is None:
        raise NotFound(f"PodGroup {key} not found")
    if pg.spec.queue not in queues:
        return [
            *lines,
            f"PodGroup {key}: {pg.status.phase or 'Pending'}, waiting",
            *_why_lines_of(missing_queue_why(pg.spec.queue)),
        ]
    result = simulate(objs, conf, cycles=cycles, now=now).results[-1]
    return [*lines, *_job_lines(key, pg, result, f"session-{cycles}")]


def _key(obj: KubeObject) -> str:
    return f"{obj.metadata.namespace}/{obj.metadata.name}"


def _job_lines(key: str, pg: PodGroup, result: SessionResult, session: str) -> list[str]:
    update = result.podgroups.get(key)
    decision = result.decisions.get(key)
    phase = update.phase if update is not None else pg.status.phase or "Pending"
    head = f"PodGroup {key} (queue {pg.spec.queue}, minMember {pg.spec.min_member}): {phase}"
    cond = _unschedulable(update, session)
    why = decision.why if decision is not None else None
    if cond is None and why is None:
        bound = sum(1 for t, _ in result.binds if t.job == key)
        return [f"{head}; not waiting" + (f" ({bound} pods bound this session)" if bound else "")]
    # Without an Unschedulable condition gang counts the job ready (pending BestEffort tasks
    # count, as in Volcano), yet some of its pods still wait: say why.
    lines = [f"{head}, waiting" if cond is not None else f"{head}, ready by gang's count; some pods still wait"]
    lines += _why_lines(decision)
    lines += [f"  note: {n}" for n in (decision.notes if decision is not None else [])]
    lines.append(f"  condition Unschedulable: {cond}" if cond is not None else "  condition Unschedulable: not set")
    return lines


def _unschedulable(update: PodGroupUpdate | None, session: str) -> str | None:
    """The condition this session set (an older one may linger from the dump)."""
    if update is None:
        return None
    for c in update.conditions:
        if c.type == "Unschedulable" and c.status == "True" and c.transition_id == session:
            return c.message
    return None


def _why_lines(decision: JobDecision | None) -> list[str]:
    why = decision.why if decision is not None else None
    if why is None:
        return ["  stopped by: node predicates (see the condition: counts per reason across nodes)"]
    return _why_lines_of(why)


def _why_lines_of(why: Why) -> list[str]:
    stage = (
        f"the scheduler's {why.action}" if why.plugin == "scheduler" else f"action {why.action}, plugin {why.plugin}"
    )
    lines = [
        f"  stopped by: {stage}",
        f"  why: {why.summary}",
        *(f"    {d}" for d in why.details),
    ]
    if why.remedy:
        lines.append(f"  to run: {why.remedy}")
    return lines


def mirror_objects(held: Mapping[str, Mapping[str, bytes]]) -> tuple[list[KubeObject], list[str]]:
    """The mirror's objects (kind → key → JSON), decoded as the scheduler decodes them; an
    object that cannot be read is left out and reported, as the scheduler skips it."""
    objects: list[KubeObject] = []
    skipped: list[str] = []
    for kind, items in held.items():
        for key, raw in items.items():
            delta = Delta(kind=kind, op="ADDED", key=key, rv="", obj=msgspec.Raw(raw))
            try:
                obj = decode(delta)
            except Exception as exc:  # one unreadable object never stops an explanation
                skipped.append(f"{kind} {key} left out: {exc}")
                continue
            if obj is not None:
                objects.append(obj)
    return objects, skipped
