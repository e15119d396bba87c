"""Turning a session's result into decision messages for the binders (pure).

Status writes are expensive for an API server (Volcano's per-session writes are a known cause of
load), so PodGroup, Queue and pod-condition updates are sent only when they changed since the
last time this scheduler sent them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from lahar.api.resource import Resource
from lahar.wire.messages import BindItem, Binds, ClaimAllocation, Evict, PodGroupStatus, PodStatus, QueueStatus
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.session import PodGroupUpdate, SessionResult
from lahar_scheduler.framework.snapshot import Snapshot, claim_keys, parse_time
from lahar_scheduler.framework.types import TaskStatus
from lahar_scheduler.framework.why import Why, missing_group_why, missing_queue_why, no_group_why


@dataclass
class Sent:
    """What was last sent per object, to send only changes."""

    queues: dict[str, dict[str, str]] = field(default_factory=dict)
    queues_at: dict[str, float] = field(default_factory=dict)  # when each queue's was sent
    pods: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    missing_queue: dict[str, str] = field(default_factory=dict)
    podgroups: dict[str, tuple[str, tuple[tuple[str, str, str, str], ...], float]] = field(default_factory=dict)


BINDS_PER_MESSAGE = 64

# A PodGroup whose condition text changes every session (counts of pods arriving) is written at
# most this often; phase changes and new condition types are written at once.
MESSAGE_REWRITE_SECONDS = 2.0
# A status sent this long ago that the cluster still does not show is sent again: the write was
# lost (dropped by a binder after its retries, or overwritten by another writer's stale update),
# and what was sent is no proof of what the API server holds.
STATUS_RESEND_SECONDS = 5.0


@dataclass
class Decisions:
    binds: list[Binds] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)
    podgroups: list[PodGroupStatus] = field(default_factory=list)
    queues: list[QueueStatus] = field(default_factory=list)
    pods: list[PodStatus] = field(default_factory=list)


def podgroup_status(update: PodGroupUpdate, now: str) -> dict[str, Any]:
    conditions = [
        {
            "type": c.type,
            "status": c.status,
            "reason": c.reason,
            "message": c.message,
            "transitionID": c.transition_id,
            "lastTransitionTime": now,
        }
        for c in update.conditions
    ]
    return {
        "phase": update.phase,
        "conditions": conditions,
        "running": update.running,
        "succeeded": update.succeeded,
        "failed": update.failed,
    }


def queue_allocated(r: Resource) -> dict[str, str]:
    return r.to_list()


def missing_queues(snapshot: Snapshot, session: str, fence: int, sent: Sent, now: str) -> list[PodGroupStatus]:
    """PodGroups naming a queue that does not exist: Volcano ignores them silently; say why."""
    out = []
    for job in snapshot.jobs.values():
        pg = job.podgroup
        if pg is None or job.queue in snapshot.queues:
            sent.missing_queue.pop(job.uid, None)
            continue
        if sent.missing_queue.get(job.uid) == job.queue:
            continue
        sent.missing_queue[job.uid] = job.queue
        cond = {
            "type": "Unschedulable",
            "status": "True",
            "reason": "QueueNotFound",
            "message": _text(missing_queue_why(job.queue)),
            "transitionID": session,
            "lastTransitionTime": now,
        }
        status = {"phase": pg.status.phase or "Pending", "conditions": [cond]}
        out.append(
            PodGroupStatus(
                id=f"{session}/podgroup/{job.uid}",
                namespace=job.namespace,
                name=job.name,
                status=status,
                fence=fence,
                uid=pg.metadata.uid or "",
            )
        )
    return out


def invalid_pod(namespace: str, name: str, why: str, session: str, fence: int) -> PodStatus:
    """The condition set on a pod the scheduler cannot read (e.g. a request that is no quantity)."""
    return PodStatus(
        id=f"{session}/invalid/{namespace}/{name}",
        namespace=namespace,
        name=name,
        reason="Unschedulable",
        message=f"ignored by the scheduler: {why}",
        fence=fence,
    )


def pod_conditions(
    snapshot: Snapshot, invalid: dict[str, str], session: str, fence: int, sent: Sent, grace: float = 5.0
) -> list[PodStatus]:
    """Conditions for pods no session will ever explain: pods the scheduler cannot read, pods
    whose PodGroup does not exist, and pods of ours with no PodGroup at all.  A pod younger than
    ``grace`` seconds is left alone: its PodGroup is usually created just after it."""
    out = []
    for key, why in invalid.items():
        out.extend(_condition(sent, key, f"ignored by the scheduler: {why}", session, fence, "invalid", ""))
    for job in snapshot.jobs.values():
        if job.podgroup is not None:
            continue
        why = _text(missing_group_why(job.uid))
        for task in job.tasks.values():
            if task.status == TaskStatus.PENDING and _older(task, snapshot.now, grace):
                out.extend(_condition(sent, task.key, why, session, fence, "nopodgroup", _uid(task)))
    for key, task in snapshot.others.items():
        if task.node_name or not _older(task, snapshot.now, grace):
            continue
        if task.pod.spec.scheduler_name in snapshot.scheduler_names:
            why = _text(no_group_why(task.pod))
            out.extend(_condition(sent, key, why, session, fence, "nopodgroup", _uid(task)))
    return out


def _text(why: Why) -> str:
    """A pod condition's message: what stops the pod and what would let it run."""
    return f"{why.summary}; {why.remedy}"


def _older(task: Any, now: float, grace: float) -> bool:
    created = parse_time(task.pod.metadata.creation_timestamp)
    return not created or now - created >= grace


def _uid(task: Any) -> str:
    return str(task.pod.metadata.uid or "")


def _condition(sent: Sent, key: str, message: str, session: str, fence: int, tag: str, uid: str) -> list[PodStatus]:
    now_sent = ("Unschedulable", message, "")
    if sent.pods.get(key) == now_sent:
        return []
    sent.pods[key] = now_sent
    namespace, _, name = key.partition("/")
    return [
        PodStatus(
            id=f"{session}/{tag}/{key}",
            namespace=namespace,
            name=name,
            reason="Unschedulable",
            message=message,
            fence=fence,
            uid=uid,
        )
    ]


def _podgroup_due(uid: str, update: PodGroupUpdate, sent: Sent, clock: float) -> bool:
    """Send a PodGroup status only when it differs from what was last sent (the API may not have
    echoed our previous write yet), and message-only changes at most every few seconds.  The
    caller asks only for statuses that differ from what the cluster shows: the same status sent
    ``STATUS_RESEND_SECONDS`` ago and still not shown is sent again."""
    conds = tuple((c.type, c.status, c.reason, c.message) for c in update.conditions)
    last = sent.podgroups.get(uid)
    if last is not None:
        phase, old, when = last
        if phase == update.phase and old == conds:
            if clock - when < STATUS_RESEND_SECONDS:
                return False
            sent.podgroups[uid] = (phase, conds, clock)
            return True
        same_shape = phase == update.phase and [c[:3] for c in old] == [c[:3] for c in conds]
        if same_shape and clock - when < MESSAGE_REWRITE_SECONDS:
            return False
    sent.podgroups[uid] = (update.phase, conds, clock)
    return True


def _queue_due(name: str, listed: dict[str, str], sent: Sent, clock: float, snapshot: Snapshot | None) -> bool:
    """A queue's allocated is sent when it differs from what was last sent, and again when the
    cluster still shows something else ``STATUS_RESEND_SECONDS`` after (a lost write)."""
    if sent.queues.get(name) != listed:
        return True
    if snapshot is None or clock - sent.queues_at.get(name, clock) < STATUS_RESEND_SECONDS:
        return False
    info = snapshot.queues.get(name)
    # Read back through the same formatting: "4000m" and "4" are the same quantity.
    return info is not None and Resource.from_list(info.queue.status.allocated).to_list() != listed


def decisions(
    result: SessionResult,
    session: str,
    fence: int,
    sent: Sent,
    now: str,
    clock: float = 0.0,
    expires: float = 0.0,
    snapshot: Snapshot | None = None,
) -> Decisions:
    """The messages of one session.  Binds and evictions carry ``expires``: no binder executes
    them later, so the scheduler can tell when an unreported one will never run.  ``snapshot``
    (the session's) gives status writes and evictions the uid of their object, which the
    binder's Events need (``kubectl describe`` finds an object's Events by its uid), and an
    eviction the job it makes room for."""
    out = Decisions()
    by_job: dict[str, list[BindItem]] = {}
    for task, node in result.binds:
        item = BindItem(namespace=task.namespace, name=task.name, uid=task.pod.metadata.uid, node=node)
        if task.card_annotations:
            item.annotations = dict(task.card_annotations)  # the GPU cards chosen (deviceshare)
        if task.pod.spec.resource_claims:
            item.claims = _claims(task, result, snapshot)
        by_job.setdefault(task.job, []).append(item)
    for job, items in by_job.items():
        for start in range(0, len(items), BINDS_PER_MESSAGE):
            out.binds.append(
                Binds(
                    id=f"{session}/binds/{job}/{start}",
                    job=job,
                    session=session,
                    fence=fence,
                    expires=expires,
                    items=items[start : start + BINDS_PER_MESSAGE],
                )
            )
    waiting = _waiting_on(result, snapshot)
    for task, reason in result.evictions:
        out.evictions.append(
            Evict(
                id=f"{session}/evict/{task.key}",
                namespace=task.namespace,
                name=task.name,
                uid=task.pod.metadata.uid,
                node=task.node_name,
                reason=reason,
                job=task.job,
                session=session,
                fence=fence,
                expires=expires,
                for_job=_beneficiary(waiting, task),
                group_uid=_podgroup_uid(snapshot, task.job),
            )
        )
    for uid, update in result.podgroups.items():
        if update.changed and _podgroup_due(uid, update, sent, clock):
            ns, _, name = uid.partition("/")
            out.podgroups.append(
                PodGroupStatus(
                    id=f"{session}/podgroup/{uid}",
                    namespace=ns,
                    name=name,
                    status=podgroup_status(update, now),
                    fence=fence,
                    uid=_podgroup_uid(snapshot, uid),
                )
            )
    for name, allocated in result.queues.items():
        listed = queue_allocated(allocated)
        if _queue_due(name, listed, sent, clock, snapshot):
            sent.queues[name], sent.queues_at[name] = listed, clock
            out.queues.append(QueueStatus(id=f"{session}/queue/{name}", name=name, allocated=listed, fence=fence))
    for key, why in result.task_reasons.items():
        now_sent = (why.reason, why.message, why.nominated_node)
        if sent.pods.get(key) == now_sent:
            continue
        sent.pods[key] = now_sent
        ns, _, name = key.partition("/")
        out.pods.append(
            PodStatus(
                id=f"{session}/podstatus/{key}",
                namespace=ns,
                name=name,
                reason=why.reason,
                message=why.message,
                nominated_node=why.nominated_node,
                fence=fence,
                uid=_pod_uid(snapshot, key),
            )
        )
    return out


def _podgroup_uid(snapshot: Snapshot | None, job: str) -> str:
    info = snapshot.jobs.get(job) if snapshot is not None else None
    pg = info.podgroup if info is not None else None
    return str(pg.metadata.uid or "") if pg is not None else ""


def _pod_uid(snapshot: Snapshot | None, key: str) -> str:
    task = snapshot.tasks.get(key) if snapshot is not None else None
    return _uid(task) if task is not None else ""


def _waiting_on(result: SessionResult, snapshot: Snapshot | None) -> dict[str, set[str]]:
    """Per node, the jobs with tasks pipelined onto it: waiting for the room evictions make."""
    out: dict[str, set[str]] = {}
    if snapshot is None:
        return out
    for key, node in result.pipelined.items():
        task = snapshot.tasks.get(key)
        if task is not None:
            out.setdefault(node, set()).add(task.job)
    return out


def _beneficiary(waiting: dict[str, set[str]], victim: Any) -> str:
    """The job an eviction makes room for (the preemptor's or reclaimer's), when only one job
    waits on the victim's node; "" when it is not known which."""
    jobs = waiting.get(victim.node_name, set()) - {victim.job}
    return next(iter(jobs)) if len(jobs) == 1 else ""


def _claims(task: TaskInfo, result: SessionResult, snapshot: Snapshot | None) -> list[ClaimAllocation]:
    """The claims the binder writes before binding ``task``: those this session allocated (with
    their allocation) and those already allocated (the pod joins ``reservedFor``).  Claims no
    one allocated (DRA not enabled in the scheduler's configuration) are left alone."""
    out = []
    for key in claim_keys(task.pod)[0]:
        name = key.split("/", 1)[1]
        allocation = result.claim_allocations.get(key)
        if allocation is not None:
            out.append(ClaimAllocation(name=name, allocation=msgspec.Raw(msgspec.json.encode(allocation))))
        elif snapshot is not None and snapshot.dra.allocation(key) is not None:
            out.append(ClaimAllocation(name=name))
    return out
