"""``lahar describe KIND NAME...``: an object the way ``kubectl describe`` shows it, with its
Events (Type, Reason, Age, From, Message), so a user sees why a pod or a PodGroup waits or was
evicted.  Pods get kubectl's pod layout; any other kind (PodGroups, Queues, Volcano Jobs, ...)
kubectl's generic one: its metadata, then spec and status as indented ``Key:  value`` lines.

Events are found as kubectl finds them: by the object's kind, namespace, name and uid (so an
earlier object of the same name does not lend its Events)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from lahar.cli.jobview import Line, render, render_events
from lahar.cli.kubectl import CliError, Cluster, server_error

Obj = dict[str, Any]


def register(sub: Any) -> None:
    p = sub.add_parser("describe", help="show objects in detail with their Events (like kubectl describe)")
    p.add_argument("kind", metavar="KIND", help="resource: plural, singular, kind or short name (pod, pg, queue...)")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--kubeconfig", help="path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="the kubeconfig context to use")
    p.add_argument("-n", "--namespace", help="the namespace (default: the context's, else default)")
    p.set_defaults(handler=run_describe)


def run_describe(args: argparse.Namespace) -> int:
    try:
        return _describe(args)
    except CliError as exc:
        print(exc, file=sys.stderr)
        return 1


def _describe(args: argparse.Namespace) -> int:
    from kubernetes.dynamic.exceptions import DynamicApiError

    cluster = Cluster(args)
    res = cluster.resource(args.kind)
    namespace = cluster.default_namespace if res.namespaced else None
    events = cluster.resource("events")
    failed = False
    texts = []
    for name in args.names:
        try:
            obj = res.get(name=name, namespace=namespace).to_dict()
            listed = events.get(namespace=obj["metadata"].get("namespace"), field_selector=event_selector(obj))
        except DynamicApiError as exc:
            print(server_error(exc), file=sys.stderr)
            failed = True
            continue
        texts.append(describe(obj, [core_event(e) for e in listed.to_dict().get("items") or []]))
    print("\n\n".join(texts), end="")
    return 1 if failed else 0


def event_selector(obj: Obj) -> str:
    """kubectl describe's field selector for an object's Events."""
    meta = obj["metadata"]
    terms = [f"involvedObject.name={meta['name']}", f"involvedObject.kind={obj.get('kind', '')}"]
    if meta.get("namespace"):
        terms.append(f"involvedObject.namespace={meta['namespace']}")
    if meta.get("uid"):
        terms.append(f"involvedObject.uid={meta['uid']}")
    return ",".join(terms)


def core_event(e: Obj) -> Obj:
    """A core/v1 Event as ``render_events`` wants it."""
    source = e.get("source") or {}
    meta = e.get("metadata") or {}
    return {
        "type": e.get("type") or "",
        "reason": e.get("reason") or "",
        "time": e.get("lastTimestamp") or e.get("eventTime") or meta.get("creationTimestamp") or "",
        "first": e.get("firstTimestamp") or "",
        "count": int(e.get("count") or 1),
        "from": source.get("component") or e.get("reportingComponent") or "",
        "message": (e.get("message") or "").strip(),
    }


def describe(obj: Obj, events: list[Obj]) -> str:
    events = sorted(events, key=lambda e: e["time"])
    if obj.get("kind") == "Pod" and obj.get("apiVersion") == "v1":
        return describe_pod(obj) + render_events(events)
    return render(generic(obj)) + render_events(events)


# --- pods ---------------------------------------------------------------------------------------------


def describe_pod(pod: Obj) -> str:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    node = spec.get("nodeName") or "<none>"
    if spec.get("nodeName") and status.get("hostIP"):
        node = f"{node}/{status['hostIP']}"
    head: list[Line] = [
        (0, "Name", meta["name"]),
        (0, "Namespace", meta.get("namespace", "")),
        (0, "Priority", str(spec.get("priority") or 0)),
    ]
    if spec.get("priorityClassName"):
        head.append((0, "Priority Class Name", spec["priorityClassName"]))
    head += [
        (0, "Service Account", spec.get("serviceAccountName") or "default"),
        (0, "Node", node),
    ]
    if status.get("startTime"):
        head.append((0, "Start Time", kubectl_time(status["startTime"])))
    head += [
        (0, "Labels", _pairs(meta.get("labels"), "=")),
        (0, "Annotations", _pairs(meta.get("annotations"), ": ")),
        (0, "Status", status.get("phase") or "Pending"),
    ]
    if status.get("nominatedNodeName"):
        head.append((0, "NominatedNodeName", status["nominatedNodeName"]))
    head.append((0, "IP", status.get("podIP") or ""))
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    if owner:
        head.append((0, "Controlled By", f"{owner.get('kind')}/{owner.get('name')}"))
    head += _containers(spec.get("containers") or [])
    tail: list[Line] = [
        (0, "Node-Selectors", _pairs(spec.get("nodeSelector"), "=")),
        (0, "Tolerations", _tolerations(spec.get("tolerations"))),
    ]
    return render(head) + _conditions(status.get("conditions") or []) + render(tail)


def kubectl_time(stamp: str) -> str:
    """RFC 3339 as kubectl describe prints times (Go's RFC1123Z), or as given if unreadable."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).strftime("%a, %d %b %Y %H:%M:%S %z")
    except ValueError:
        return stamp


def _containers(containers: list[Obj]) -> list[Line]:
    lines: list[Line] = [(0, "Containers", None)]
    for c in containers:
        lines += [(1, c.get("name", ""), None), (2, "Image", c.get("image") or "")]
        resources = c.get("resources") or {}
        for key, title in (("limits", "Limits"), ("requests", "Requests")):
            if resources.get(key):
                lines.append((2, title, None))
                lines += [(3, k, str(v)) for k, v in sorted(resources[key].items())]
    return lines


def _conditions(conditions: list[Obj]) -> str:
    if not conditions:
        return ""
    rows = [("Type", "Status"), *((str(c.get("type", "")), str(c.get("status", ""))) for c in conditions)]
    width = max(len(t) for t, _ in rows) + 3
    return "Conditions:\n" + "".join(f"  {t.ljust(width)}{s}\n" for t, s in rows)


def _pairs(value: Any, sep: str) -> str:
    if not value:
        return "<none>"
    return "\n".join(f"{k}{sep}{v}" for k, v in sorted(value.items()))


def _tolerations(tolerations: Any) -> str:
    if not tolerations:
        return "<none>"
    out = []
    for t in tolerations:
        text = t.get("key") or ""
        if t.get("value"):
            text += f"={t['value']}"
        if t.get("effect"):
            text += f":{t['effect']}"
        if t.get("operator") == "Exists" and not t.get("key"):
            text = "op=Exists"
        out.append(text)
    return "\n".join(out)


# --- any other kind: kubectl's generic describer ------------------------------------------------------

# Metadata fields kubectl's generic describer shows under "Metadata:" (the rest are above or noise).
_SKIPPED_META = {"name", "namespace", "labels", "annotations", "managedFields"}
_ACRONYMS = {"id": "ID", "uid": "UID", "api": "API", "ip": "IP", "url": "URL", "cpu": "CPU", "gpu": "GPU"}


def generic(obj: Obj) -> list[Line]:
    meta = obj.get("metadata") or {}
    lines: list[Line] = [
        (0, "Name", meta.get("name", "")),
        (0, "Namespace", meta.get("namespace", "")),
        (0, "Labels", _pairs(meta.get("labels"), "=")),
        (0, "Annotations", _pairs(meta.get("annotations"), ": ")),
        (0, "API Version", obj.get("apiVersion", "")),
        (0, "Kind", obj.get("kind", "")),
    ]
    rest = {k: v for k, v in meta.items() if k not in _SKIPPED_META and v not in (None, "", [], {})}
    lines += _tree("metadata", rest, 0)
    for key in sorted(k for k in obj if k not in ("apiVersion", "kind", "metadata")):
        lines += _tree(key, obj[key], 0)
    return lines


def _tree(key: str, value: Any, level: int) -> list[Line]:
    title = label(key)
    if isinstance(value, dict):
        if not value:
            return []
        lines: list[Line] = [(level, title, None)]
        for k in sorted(value):
            lines += _tree(k, value[k], level + 1)
        return lines
    if isinstance(value, list):
        if not value:
            return []
        if not all(isinstance(v, dict) for v in value):
            return [(level, title, "\n".join(_scalar(v) for v in value))]
        lines = [(level, title, None)]
        for item in value:
            for k in sorted(item):
                lines += _tree(k, item[k], level + 1)
        return lines
    return [(level, title, _scalar(value))]


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def label(key: str) -> str:
    """kubectl's label for a field: ``minMember`` → ``Min Member``, ``transitionID`` → ``Transition ID``."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+|[A-Z]", key) or [key]
    return " ".join(_ACRONYMS.get(w.lower(), w[:1].upper() + w[1:]) for w in words)
