"""``lahar job view``'s text: a Volcano Job described the way ``kubectl describe`` lays objects
out (aligned ``Key:  value`` sections), then its Events from both Event APIs."""

from __future__ import annotations

import json
from typing import Any

from lahar.cli._printing import age
from lahar.cli._vc import Connection

Obj = dict[str, Any]
Line = tuple[int, str, str | None]  # indent level, key, value (None: a section heading)


def describe(job: Obj, events: list[Obj]) -> str:
    lines: list[Line] = [*_head(job), *_spec(job.get("spec") or {}), *_status(job.get("status") or {})]
    return render(lines) + render_events(events)


def _map(value: Any) -> str:
    if not value:
        return "<none>"
    return "\n".join(f"{k}={v}" for k, v in sorted(value.items()))


def _head(job: Obj) -> list[Line]:
    meta = job["metadata"]
    return [
        (0, "Name", meta["name"]),
        (0, "Namespace", meta.get("namespace", "")),
        (0, "Labels", _map(meta.get("labels"))),
        (0, "Annotations", _map(meta.get("annotations"))),
        (0, "API Version", job.get("apiVersion", "")),
        (0, "Kind", job.get("kind", "")),
        (0, "Metadata", None),
        (1, "Creation Timestamp", meta.get("creationTimestamp", "")),
        (1, "Generation", str(meta.get("generation", ""))),
        (1, "Resource Version", meta.get("resourceVersion", "")),
        (1, "UID", meta.get("uid", "")),
    ]


def _spec(spec: Obj) -> list[Line]:
    lines: list[Line] = [(0, "Spec", None)]
    for key, title in (
        ("minAvailable", "Min Available"),
        ("minSuccess", "Min Success"),
        ("queue", "Queue"),
        ("schedulerName", "Scheduler Name"),
        ("priorityClassName", "Priority Class Name"),
        ("maxRetry", "Max Retry"),
        ("ttlSecondsAfterFinished", "TTL Seconds After Finished"),
    ):
        if spec.get(key) is not None:
            lines.append((1, title, str(spec[key])))
    if spec.get("plugins"):
        lines.append((1, "Plugins", None))
        lines += [(2, name, " ".join(args or []) or "<none>") for name, args in sorted(spec["plugins"].items())]
    lines += _policies(spec.get("policies"), 1)
    lines.append((1, "Tasks", None))
    for task in spec.get("tasks") or []:
        lines += _task(task)
    return lines


def _policies(policies: Any, level: int) -> list[Line]:
    if not policies:
        return []
    lines: list[Line] = [(level, "Policies", None)]
    for policy in policies:
        when = policy.get("event") or ",".join(policy.get("events") or []) or f"exit code {policy.get('exitCode')}"
        lines.append((level + 1, when, policy.get("action", "")))
    return lines


def _task(task: Obj) -> list[Line]:
    lines: list[Line] = [(2, "Name", task.get("name") or "<unnamed>"), (3, "Replicas", str(task.get("replicas", 0)))]
    if task.get("minAvailable") is not None:
        lines.append((3, "Min Available", str(task["minAvailable"])))
    if task.get("dependsOn"):
        lines.append((3, "Depends On", ",".join(task["dependsOn"].get("name") or [])))
    lines += _policies(task.get("policies"), 3)
    pod = (task.get("template") or {}).get("spec") or {}
    lines.append((3, "Restart Policy", pod.get("restartPolicy") or "<none>"))
    for container in pod.get("containers") or []:
        resources = container.get("resources") or {}
        lines += [
            (3, "Container", container.get("name", "")),
            (4, "Image", container.get("image", "")),
            (4, "Command", " ".join(container.get("command") or []) or "<none>"),
            (4, "Requests", _resources(resources.get("requests"))),
            (4, "Limits", _resources(resources.get("limits"))),
        ]
    return lines


def _resources(value: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) if value else "<none>"


def _status(status: Obj) -> list[Line]:
    state = status.get("state") or {}
    lines: list[Line] = [(0, "Status", None), (1, "State", None), (2, "Phase", state.get("phase") or "<none>")]
    for key in ("reason", "message"):
        if state.get(key):
            lines.append((2, key.capitalize(), state[key]))
    for key, title in (
        ("minAvailable", "Min Available"),
        ("pending", "Pending"),
        ("running", "Running"),
        ("succeeded", "Succeeded"),
        ("failed", "Failed"),
        ("terminating", "Terminating"),
        ("unknown", "Unknown"),
        ("retryCount", "Retry Count"),
        ("version", "Version"),
    ):
        lines.append((1, title, str(int(status.get(key) or 0))))
    if status.get("conditions"):
        lines.append((1, "Conditions", None))
        for cond in status["conditions"]:
            lines.append((2, str(cond.get("status", "")), str(cond.get("lastTransitionTime", ""))))
    return lines


def render(lines: list[Line]) -> str:
    """Values of consecutive keys at one level start in one column, as kubectl describe's."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        level = lines[i][0]
        j = i
        while j < len(lines) and lines[j][0] == level and lines[j][2] is not None:
            j += 1
        if j == i:  # a heading
            out.append("  " * level + lines[i][1] + ":")
            i += 1
            continue
        width = max(len(key) for _, key, _ in lines[i:j]) + 1
        for _, key, value in lines[i:j]:
            pad = "  " * level
            first, *rest = str(value).split("\n")
            out.append(f"{pad}{(key + ':').ljust(width)}  {first}".rstrip())
            out += [f"{pad}{' ' * (width + 2)}{more}" for more in rest]
        i = j
    return "\n".join(out) + "\n"


# --- events ------------------------------------------------------------------------------------------


def events_of(conn: Connection, job: Obj) -> list[Obj]:
    """The Job's Events from core/v1 and events.k8s.io/v1, oldest first; events of an earlier
    Job of the same name (another uid) are left out."""
    from kubernetes import client

    meta = job["metadata"]
    ns, name, uid = meta["namespace"], meta["name"], meta.get("uid")
    core = _raw(conn, conn.core.list_namespaced_event, ns, f"involvedObject.name={name},involvedObject.kind=Job")
    rows = [_core_event(e) for e in core if (e.get("involvedObject") or {}).get("uid") in (None, "", uid)]
    modern_api = client.EventsV1Api(conn.api)
    modern = _raw(conn, modern_api.list_namespaced_event, ns, f"regarding.name={name},regarding.kind=Job")
    rows += [_modern_event(e) for e in modern if (e.get("regarding") or {}).get("uid") in (None, "", uid)]
    return sorted(rows, key=lambda r: r["time"])


def _raw(conn: Connection, fn: Any, namespace: str, selector: str) -> list[Obj]:
    # Raw JSON: the typed models refuse Events that lack fields they require.
    reply = conn.call(fn, namespace, field_selector=selector, _preload_content=False)
    items: list[Obj] = json.loads(reply.data).get("items") or []
    return items


def _core_event(e: Obj) -> Obj:
    source = e.get("source") or {}
    return {
        "type": e.get("type") or "",
        "reason": e.get("reason") or "",
        "time": e.get("lastTimestamp") or e.get("eventTime") or e["metadata"].get("creationTimestamp") or "",
        "count": int(e.get("count") or 1),
        "from": source.get("component") or e.get("reportingComponent") or "",
        "message": (e.get("message") or "").strip(),
    }


def _modern_event(e: Obj) -> Obj:
    series = e.get("series") or {}
    return {
        "type": e.get("type") or "",
        "reason": e.get("reason") or "",
        "time": series.get("lastObservedTime") or e.get("eventTime") or e["metadata"].get("creationTimestamp") or "",
        "count": int(series.get("count") or 1),
        "from": e.get("reportingController") or "",
        "message": (e.get("note") or "").strip(),
    }


def render_events(events: list[Obj]) -> str:
    if not events:
        return "Events:  <none>\n"
    header = ["Type", "Reason", "Age", "From", "Message"]
    rows = [header, ["----", "------", "----", "----", "-------"]]
    for e in events:
        when = age({"metadata": {"creationTimestamp": e["time"]}}) if e["time"] else "<unknown>"
        if e["count"] > 1:
            when = f"{when} (x{e['count']})"
        rows.append([e["type"], e["reason"], when, e["from"], e["message"]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows]
    return "Events:\n" + "\n".join(line.rstrip() for line in lines) + "\n"
