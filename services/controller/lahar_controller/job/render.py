"""A Volcano Job's PodGroup and pods, rendered as Volcano's job controller renders them (pure).

Objects are plain dicts of Kubernetes JSON.  Nothing here reads the cluster or a clock: the
caller passes what is needed (the job's existing PodGroup, the PriorityClass values).

* ``podgroup_for(job, existing, priority_classes)`` — the PodGroup to create, or the updated
  copy of ``existing``, or None when ``existing`` is already right.
* ``render_pod(job, task, index)`` — pod ``<job>-<task>-<index>`` before plugins run;
  ``build_pod`` adds the plugins' pod-create hooks (see ``job.plugins``).
* ``podgroup_event(job, podgroup)`` — the Warning event Volcano records on the job while its
  PodGroup's latest condition is not Scheduled.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from lahar_controller.job import names
from lahar_controller.job.resources import (
    Usage,
    as_resource_list,
    parse_resource_list,
    pod_quota_usage,
    scaled,
    total,
)

Obj = dict[str, Any]


# --- small readers ------------------------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def copy_json(value: Any) -> Any:
    """A deep copy of JSON data (faster than ``copy.deepcopy`` on the hot pod-creation path)."""
    return msgspec.json.decode(msgspec.json.encode(value))


def tasks(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = _spec(job).get("tasks")
    return [t for t in raw if isinstance(t, Mapping)] if isinstance(raw, list) else []


def task_named(job: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return next((t for t in tasks(job) if t.get("name") == name), None)


def replicas(task: Mapping[str, Any]) -> int:
    return _int(task.get("replicas"))


def task_min_available(task: Mapping[str, Any]) -> int | None:
    value = task.get("minAvailable")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def template_spec(task: Mapping[str, Any]) -> Mapping[str, Any]:
    template = task.get("template")
    return _spec(template) if isinstance(template, Mapping) else {}


def job_name(job: Mapping[str, Any]) -> str:
    return str(_meta(job).get("name") or "")


def job_namespace(job: Mapping[str, Any]) -> str:
    return str(_meta(job).get("namespace") or "")


def job_uid(job: Mapping[str, Any]) -> str:
    return str(_meta(job).get("uid") or "")


def owner_ref(job: Mapping[str, Any]) -> Obj:
    """The controller reference every object the job controller makes carries to its Job."""
    return {
        "apiVersion": names.JOB_API_VERSION,
        "kind": names.JOB_KIND,
        "name": job_name(job),
        "uid": job_uid(job),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def podgroup_name(job: Mapping[str, Any]) -> str:
    return names.podgroup_name(job_name(job), job_uid(job))


def find_podgroup(job: Mapping[str, Any], podgroups: Mapping[str, Obj]) -> Obj | None:
    """The job's PodGroup among ``podgroups`` (name -> PodGroup, in the job's namespace): the
    ``<job>-<uid>`` one, else a group named after the job alone (made before Volcano 1.5)."""
    return podgroups.get(podgroup_name(job)) or podgroups.get(job_name(job))


# --- PodGroup -----------------------------------------------------------------------------------


def min_task_member(task: Mapping[str, Any]) -> int:
    """Pods of the task the gang needs: its minAvailable, else minPartitions × partitionSize,
    else every replica."""
    minimum = task_min_available(task)
    if minimum is not None:
        return minimum
    policy = task.get("partitionPolicy")
    if isinstance(policy, Mapping):
        parts, size = _int(policy.get("minPartitions")), _int(policy.get("partitionSize"))
        if parts and size:
            return parts * size
    return replicas(task)


def _priority(task: Mapping[str, Any], priority_classes: Mapping[str, int]) -> int:
    name = template_spec(task).get("priorityClassName")
    return priority_classes.get(name, 0) if isinstance(name, str) and name else 0


def _by_priority(job: Mapping[str, Any], priority_classes: Mapping[str, int]) -> list[Mapping[str, Any]]:
    # stable: tasks of equal priority keep their order in the spec
    return sorted(tasks(job), key=lambda t: -_priority(t, priority_classes))


def _task_usage(task: Mapping[str, Any], count: int) -> Usage:
    return scaled(pod_quota_usage(template_spec(task)), count)


def _first_count(ordered: list[Mapping[str, Any]], count: int) -> Usage:
    """The first ``count`` replicas, taking whole tasks in priority order."""
    parts = []
    for task in ordered:
        if count <= replicas(task):
            parts.append(_task_usage(task, count))
            break
        parts.append(_task_usage(task, replicas(task)))
        count -= replicas(task)
    return total(parts)


def _task_minimums_first(ordered: list[Mapping[str, Any]], needed: int) -> Usage:
    """Each task up to its minAvailable, then (if still short of ``needed``) the remaining
    replicas, both in priority order."""
    parts, counted = [], 0
    for task in ordered:
        minimum = task_min_available(task)
        if minimum is None:
            continue
        take = min(minimum, needed - counted)
        parts.append(_task_usage(task, take))
        counted += take
        if counted >= needed:
            return total(parts)
    left = needed - counted
    for task in ordered:
        minimum = task_min_available(task)
        spare = replicas(task) - (minimum or 0)
        if minimum is not None and spare == 0:
            continue
        take = min(spare, left)
        parts.append(_task_usage(task, take))
        left -= take
        if left <= 0:
            break
    return total(parts)


def min_resources(job: Mapping[str, Any], priority_classes: Mapping[str, int]) -> dict[str, str]:
    """The resources of the ``minAvailable`` pods the gang starts with (Volcano's rule).

    Every sync of every job asks for this, and it walks every container of every task: it is
    computed once per distinct (tasks, minAvailable, priorities) and remembered (a profile of
    1,000 Jobs put a quarter of the controller's time here)."""
    spec = _spec(job)
    key = msgspec.json.encode([spec.get("tasks"), spec.get("minAvailable"), sorted(priority_classes.items())])
    return dict(_min_resources_of(key))


@functools.lru_cache(maxsize=4096)
def _min_resources_of(key: bytes) -> dict[str, str]:
    tasks_raw, min_available, priorities = msgspec.json.decode(key)
    job = {"spec": {"tasks": tasks_raw, "minAvailable": min_available}}
    return _min_resources(job, dict(priorities))


def _min_resources(job: Mapping[str, Any], priority_classes: Mapping[str, int]) -> dict[str, str]:
    ordered = _by_priority(job, priority_classes)
    job_min = _int(_spec(job).get("minAvailable"))
    sum_task_min = sum(m if (m := task_min_available(t)) is not None else replicas(t) for t in tasks(job))
    if job_min < sum_task_min:
        return as_resource_list(_first_count(ordered, job_min))
    return as_resource_list(_task_minimums_first(ordered, job_min))


def _network_topology(raw: Any, *, tier_fallback: bool) -> Obj | None:
    if not isinstance(raw, Mapping):
        return None
    out: Obj = {"mode": raw.get("mode", "")}
    if raw.get("highestTierAllowed") is not None:
        out["highestTierAllowed"] = raw["highestTierAllowed"]
        if tier_fallback:
            return out
    if raw.get("highestTierName"):
        out["highestTierName"] = raw["highestTierName"]
    return out


def subgroup_policy(task: Mapping[str, Any]) -> Obj:
    """The PodGroup sub-group of a partitioned task: its pods, grouped by partition id."""
    policy = task.get("partitionPolicy")
    policy = policy if isinstance(policy, Mapping) else {}
    name = str(task.get("name") or "")
    out: Obj = {
        "name": name,
        "subGroupSize": _int(policy.get("partitionSize")),
        "minSubGroups": _int(policy.get("minPartitions")),
        "labelSelector": {"matchLabels": {names.TASK_SPEC: name}},
        "matchLabelKeys": [names.PARTITION_ID],
    }
    topology = _network_topology(policy.get("networkTopology"), tier_fallback=False)
    if topology is not None:
        out["networkTopology"] = topology
    return out


def subgroup_policies(job: Mapping[str, Any]) -> list[Obj]:
    return [subgroup_policy(t) for t in tasks(job) if isinstance(t.get("partitionPolicy"), Mapping)]


def new_podgroup(job: Mapping[str, Any], priority_classes: Mapping[str, int]) -> Obj:
    """The PodGroup Volcano creates for a job that has none."""
    meta, spec = _meta(job), _spec(job)
    pg_spec: Obj = {
        "minMember": _int(spec.get("minAvailable")),
        "minTaskMember": {str(t.get("name") or ""): min_task_member(t) for t in tasks(job)},
        "queue": spec.get("queue") or "",
        "minResources": min_resources(job, priority_classes),
        "priorityClassName": spec.get("priorityClassName") or "",
    }
    topology = _network_topology(spec.get("networkTopology"), tier_fallback=True)
    if topology is not None:
        pg_spec["networkTopology"] = topology
    policies = subgroup_policies(job)
    if policies:
        pg_spec["subGroupPolicy"] = policies
    metadata: Obj = {
        "name": podgroup_name(job),
        "namespace": job_namespace(job),
        "ownerReferences": [owner_ref(job)],
    }
    for key in ("labels", "annotations"):
        if isinstance(meta.get(key), Mapping) and meta[key]:
            metadata[key] = dict(meta[key])
    return {
        "apiVersion": names.PODGROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": pg_spec,
    }


def _same_resources(left: Any, right: Any) -> bool:
    return parse_resource_list(left) == parse_resource_list(right)


def _subgroups_changed(pg_spec: Obj, job: Mapping[str, Any]) -> bool:
    old = pg_spec.get("subGroupPolicy")
    old_by_name = {p.get("name"): p for p in old if isinstance(p, Mapping)} if isinstance(old, list) else {}
    changed = False
    for task in tasks(job):
        if not isinstance(task.get("partitionPolicy"), Mapping):
            changed = changed or task.get("name") in old_by_name
            continue
        if _normal(subgroup_policy(task)) != _normal(old_by_name.get(task.get("name"), {})):
            changed = True
    if changed:
        pg_spec["subGroupPolicy"] = subgroup_policies(job)
    return changed


def _normal(value: Any) -> Any:
    """JSON with empty values dropped, so that ``{}``/``[]``/0/"" compare like absent fields."""
    if isinstance(value, Mapping):
        return {k: _normal(v) for k, v in value.items() if v not in (None, "", 0, False, {}, [])}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def updated_podgroup(
    job: Mapping[str, Any], existing: Mapping[str, Any], priority_classes: Mapping[str, int]
) -> Obj | None:
    """``existing`` brought in line with the job (priority class, gang sizes, minResources,
    sub-groups), or None when nothing differs."""
    pg = copy_json(existing)
    pg_spec = pg.setdefault("spec", {})
    spec = _spec(job)
    changed = False
    priority = spec.get("priorityClassName") or ""
    if (pg_spec.get("priorityClassName") or "") != priority:
        pg_spec["priorityClassName"] = priority
        changed = True
    wanted = min_resources(job, priority_classes)
    job_min = _int(spec.get("minAvailable"))
    if _int(pg_spec.get("minMember")) != job_min or not _same_resources(pg_spec.get("minResources"), wanted):
        pg_spec["minMember"] = job_min
        pg_spec["minResources"] = wanted
        changed = True
    members = pg_spec.get("minTaskMember")
    if not isinstance(members, dict):
        members = pg_spec["minTaskMember"] = {}
        changed = True
    for task in tasks(job):
        name, count = str(task.get("name") or ""), min_task_member(task)
        if members.get(name) != count:
            members[name] = count
            changed = True
    if _subgroups_changed(pg_spec, job):
        changed = True
    return pg if changed else None


def podgroup_for(
    job: Mapping[str, Any], existing: Mapping[str, Any] | None, priority_classes: Mapping[str, int]
) -> Obj | None:
    """The PodGroup write the job needs: a new group when ``existing`` is None (create it), the
    updated copy of ``existing`` (update it), or None (nothing to write)."""
    if existing is None:
        return new_podgroup(job, priority_classes)
    return updated_podgroup(job, existing, priority_classes)


def _instant(value: Any) -> datetime:
    """An RFC 3339 time; a missing or unreadable one sorts first (Go's zero time)."""
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def podgroup_event(job: Mapping[str, Any], podgroup: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(type, reason, message)`` of the event Volcano records on the job when its PodGroup's
    latest true condition is not Scheduled (e.g. Unschedulable), else None."""
    latest: Mapping[str, Any] | None = None
    conditions = _status(podgroup).get("conditions")
    for cond in conditions if isinstance(conditions, list) else []:
        if not isinstance(cond, Mapping) or cond.get("status") != "True":
            continue
        if latest is None or _instant(cond.get("lastTransitionTime")) > _instant(latest.get("lastTransitionTime")):
            latest = cond
    if latest is None or latest.get("type") == "Scheduled":
        return None
    kind = str(latest.get("type") or "").lower()
    message = f"PodGroup {job_namespace(job)}:{job_name(job)} {kind}, reason: {latest.get('message') or ''}"
    return ("Warning", "PodGroupPending", message)


# --- pods ---------------------------------------------------------------------------------------


def volume_name(job_name_: str, claim: str) -> str:
    """A pod volume's name for a job volume claim.  Volcano draws 12 random characters; a digest
    of the claim name gives every pod of the job the same, still collision-free, name."""
    digest = int.from_bytes(hashlib.sha256(claim.encode()).digest()[:10], "big")
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    chars = []
    for _ in range(12):
        digest, rest = divmod(digest, 36)
        chars.append(alphabet[rest])
    return f"{job_name_}-{''.join(chars)}"


def _mount_job_volumes(job: Mapping[str, Any], pod_spec: Obj) -> None:
    raw = _spec(job).get("volumes")
    seen: set[str] = set()
    for volume in raw if isinstance(raw, list) else []:
        if not isinstance(volume, Mapping):
            continue
        claim = str(volume.get("volumeClaimName") or "")
        if claim in seen:
            continue  # duplicate claims are refused at admission; mount the first only
        seen.add(claim)
        name = volume_name(job_name(job), claim)
        pod_spec.setdefault("volumes", []).append({"name": name, "persistentVolumeClaim": {"claimName": claim}})
        for container in pod_spec.get("containers") or []:
            container.setdefault("volumeMounts", []).append({"mountPath": volume.get("mountPath", ""), "name": name})


def _copied_from_job(job: Mapping[str, Any], annotations: dict[str, str], labels: dict[str, str]) -> None:
    job_annotations = _meta(job).get("annotations")
    job_annotations = job_annotations if isinstance(job_annotations, Mapping) else {}
    for key in (names.PREEMPTABLE, names.COOLDOWN_TIME, names.REVOCABLE_ZONE):
        if key in job_annotations:
            annotations[key] = job_annotations[key]
    if names.JDB_MIN_AVAILABLE in job_annotations:
        annotations[names.JDB_MIN_AVAILABLE] = job_annotations[names.JDB_MIN_AVAILABLE]
    elif names.JDB_MAX_UNAVAILABLE in job_annotations:
        annotations[names.JDB_MAX_UNAVAILABLE] = job_annotations[names.JDB_MAX_UNAVAILABLE]
    job_labels = _meta(job).get("labels")
    job_labels = job_labels if isinstance(job_labels, Mapping) else {}
    for key in (names.PREEMPTABLE, names.COOLDOWN_TIME):
        if key in job_labels:
            labels[key] = job_labels[key]


def task_key(task: Mapping[str, Any]) -> str:
    """The task's name as its pods carry it (``default`` when it has none)."""
    return str(task.get("name") or "") or names.DEFAULT_TASK_SPEC


def _pod_marks(job: Mapping[str, Any], task: Mapping[str, Any], index: int) -> tuple[dict[str, str], dict[str, str]]:
    """The annotations and labels the controller adds to every pod of the job."""
    name, key, spec = job_name(job), task_key(task), _spec(job)
    status = _status(job)
    queue = str(spec.get("queue") or "")
    annotations = {
        names.TASK_INDEX: str(index),
        names.TASK_SPEC: key,
        names.GROUP_NAME: podgroup_name(job),
        names.JOB_NAME: name,
        names.QUEUE_NAME: queue,
        names.JOB_VERSION: str(_int(status.get("version"))),
        names.TEMPLATE_UID: f"{name}-{task.get('name') or ''}",
        names.JOB_RETRY_COUNT: str(_int(status.get("retryCount"))),
    }
    if task.get("topologyPolicy"):
        annotations[names.NUMA_POLICY] = str(task["topologyPolicy"])
    labels = {
        names.TASK_INDEX: str(index),
        names.JOB_NAME: name,
        names.TASK_SPEC: key,
        names.JOB_NAMESPACE: job_namespace(job),
        names.QUEUE_NAME: queue,
    }
    return annotations, labels


def _partition_id(task: Mapping[str, Any], index: int) -> str | None:
    policy = task.get("partitionPolicy")
    if not isinstance(policy, Mapping):
        return None
    size = _int(policy.get("partitionSize"))
    return str(index // size) if size > 0 else "0"


def render_pod(job: Mapping[str, Any], task: Mapping[str, Any], index: int, *, forwarding: bool = False) -> Obj:
    """Pod ``index`` of ``task`` (an item of ``job.spec.tasks``), before plugins run.

    ``forwarding``: the job's queue forwards jobs to other clusters (``extendClusters``)."""
    template = task.get("template")
    template = template if isinstance(template, Mapping) else {}
    tmeta = _meta(template)
    pod_spec: Obj = copy_json(dict(_spec(template)))
    spec = _spec(job)
    if not pod_spec.get("schedulerName") and spec.get("schedulerName"):
        pod_spec["schedulerName"] = spec["schedulerName"]
    if not pod_spec.get("priorityClassName") and spec.get("priorityClassName"):
        pod_spec["priorityClassName"] = spec["priorityClassName"]
    _mount_job_volumes(job, pod_spec)
    annotations: dict[str, str] = dict(tmeta.get("annotations") or {})
    labels: dict[str, str] = dict(tmeta.get("labels") or {})
    marks, label_marks = _pod_marks(job, task, index)
    annotations.update(marks)
    _copied_from_job(job, annotations, labels)
    labels.update(label_marks)
    if forwarding:
        annotations[names.JOB_FORWARDING] = labels[names.JOB_FORWARDING] = "true"
    partition = _partition_id(task, index)
    if partition is not None:
        labels[names.PARTITION_ID] = partition
    metadata: Obj = {
        "name": names.pod_name(job_name(job), str(task.get("name") or ""), index),
        "namespace": job_namespace(job),
        "ownerReferences": [owner_ref(job)],
        "labels": labels,
        "annotations": annotations,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def build_pod(
    job: Mapping[str, Any],
    task: Mapping[str, Any],
    index: int,
    *,
    forwarding: bool = False,
) -> Obj:
    """The pod to create: ``render_pod`` then the job's plugins' pod-create hooks.

    Raises ``PluginError`` when a plugin is unknown or refuses the pod."""
    from lahar_controller.job.plugins import on_pod_create

    pod = render_pod(job, task, index, forwarding=forwarding)
    on_pod_create(job, pod)
    return pod


def desired_pod_names(job: Mapping[str, Any]) -> dict[str, list[str]]:
    """Task name -> the names of the pods the job should have (``replicas`` of each task)."""
    name = job_name(job)
    return {
        str(t.get("name") or ""): [names.pod_name(name, str(t.get("name") or ""), i) for i in range(replicas(t))]
        for t in tasks(job)
    }
