"""How ``lahar get`` prints objects: kubectl's tables (pods, nodes, namespaces, and the printer
columns of a CRD), ``-o yaml|json|name|wide`` and ``-o jsonpath=TEMPLATE``."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import yaml

from lahar.cli._jsonpath import JsonPathError, render

Obj = dict[str, Any]


def display_name(res: Any) -> str:
    singular = res.kind.lower()
    return f"{singular}.{res.group}" if res.group else singular


OUTPUTS = ("wide", "yaml", "json", "name", "jsonpath=TEMPLATE")


def output_format(text: str) -> str:
    """An ``-o`` value, checked (argparse ``type``)."""
    if text in OUTPUTS[:4]:
        return text
    if text.startswith("jsonpath="):
        try:
            render(text[len("jsonpath=") :], {})
        except JsonPathError as exc:
            raise argparse.ArgumentTypeError(f"error parsing jsonpath: {exc}") from None
        return text
    allowed = ", ".join(OUTPUTS)
    raise argparse.ArgumentTypeError(f"unable to match a printer for the output format {text!r}; allowed: {allowed}")


def print_objects(
    res: Any, items: list[Obj], output: str | None, single: bool, all_namespaces: bool, show_header: bool = True
) -> None:
    if output in ("json", "yaml") or (output or "").startswith("jsonpath="):
        doc: Any = (
            items[0]
            if single and items
            else {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
        )
        if output and output.startswith("jsonpath="):
            print(render(output[len("jsonpath=") :], doc), end="")
            return
        print(
            json.dumps(doc, indent=4) if output == "json" else yaml.safe_dump(doc, sort_keys=False),
            end="\n" if output == "json" else "",
        )
        return
    if output == "name":
        for item in items:
            print(f"{display_name(res)}/{item['metadata']['name']}")
        return
    header, rows = table(res, items, wide=output == "wide")
    if all_namespaces and res.namespaced:
        header = ["NAMESPACE", *header]
        rows = [[item["metadata"].get("namespace", ""), *row] for item, row in zip(items, rows, strict=True)]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    for row in [header, *rows] if show_header else rows:
        print("   ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def table(res: Any, items: list[Obj], wide: bool) -> tuple[list[str], list[list[str]]]:
    kind = res.kind if not res.group else ""
    if kind == "Pod":
        header = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"] + (["IP", "NODE"] if wide else [])
        return header, [_pod_row(p, wide) for p in items]
    if kind == "Node":
        header = ["NAME", "STATUS", "ROLES", "AGE", "VERSION"] + (["INTERNAL-IP"] if wide else [])
        return header, [_node_row(n, wide) for n in items]
    if kind == "Namespace":
        return ["NAME", "STATUS", "AGE"], [
            [n["metadata"]["name"], (n.get("status") or {}).get("phase", ""), age(n)] for n in items
        ]
    columns = _printer_columns(res, wide)
    header = ["NAME"] + [c["name"].upper() for c in columns]
    rows = [[item["metadata"]["name"]] + [_column(item, c) for c in columns] for item in items]
    if not any(c["name"].upper() == "AGE" for c in columns):
        header.append("AGE")
        rows = [[*row, age(item)] for row, item in zip(rows, items, strict=True)]
    return header, rows


def _printer_columns(res: Any, wide: bool) -> list[Obj]:
    """additionalPrinterColumns of the resource's CRD, when it has one (read from the cluster)."""
    if not res.group or res.group.endswith("k8s.io"):
        return []
    try:
        crds = res.client.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
        crd = crds.get(name=f"{res.name}.{res.group}").to_dict()
    except Exception:
        return []
    for version in crd["spec"].get("versions") or []:
        if version.get("name") == res.api_version:
            return [c for c in version.get("additionalPrinterColumns") or [] if wide or not c.get("priority")]
    return []


def _column(item: Obj, column: Obj) -> str:
    value: Any = item
    for key in str(column.get("jsonPath", "")).lstrip(".").split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if value is None:
        return "<none>" if column.get("type") != "date" else ""
    if column.get("type") == "date":
        return age({"metadata": {"creationTimestamp": value}})
    return str(value)


def _pod_row(pod: Obj, wide: bool) -> list[str]:
    status, spec = pod.get("status") or {}, pod.get("spec") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    phase = "Terminating" if pod["metadata"].get("deletionTimestamp") else status.get("phase", "Unknown")
    terminated = [((c.get("state") or {}).get("terminated") or {}).get("reason") for c in statuses]
    if phase in ("Succeeded", "Failed") and terminated and terminated[0]:
        phase = terminated[0]
    row = [
        pod["metadata"]["name"],
        f"{ready}/{len(spec.get('containers') or [])}",
        phase,
        str(sum(int(c.get("restartCount") or 0) for c in statuses)),
        age(pod),
    ]
    if wide:
        row += [status.get("podIP") or "<none>", spec.get("nodeName") or "<none>"]
    return row


def _node_row(node: Obj, wide: bool) -> list[str]:
    status = node.get("status") or {}
    ready: Obj = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    state = "Ready" if ready.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = node["metadata"].get("labels") or {}
    roles = ",".join(sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))) or "<none>"
    row = [
        node["metadata"]["name"],
        state,
        roles,
        age(node),
        (status.get("nodeInfo") or {}).get("kubeletVersion", ""),
    ]
    if wide:
        row.append(
            next(
                (a["address"] for a in status.get("addresses") or [] if a.get("type") == "InternalIP"),
                "<none>",
            )
        )
    return row


def age(obj: Obj, now: float | None = None) -> str:
    """kubectl's short human duration since creationTimestamp (Go's HumanDuration, as the
    emulator's Tables print it)."""
    from lahar.sim.clock import parse_iso
    from lahar.sim.tables import human_duration

    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    return human_duration(max((now or time.time()) - parse_iso(str(stamp)), 0))
