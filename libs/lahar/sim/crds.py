"""CustomResourceDefinitions: validation, status, the resource types they serve, and the
Volcano CRDs registered at startup (their names, scopes, subresources and printer columns
follow Volcano's own CRD manifests; schemas are not enforced)."""

from __future__ import annotations

from typing import Any

from lahar.sim.clock import iso
from lahar.sim.crd_defaults import volcano_skeletons
from lahar.sim.resources import CUSTOM_VERBS, ResourceType

Obj = dict[str, Any]
Causes = list[tuple[str, str]]


def validate_crd(obj: Obj) -> Causes:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "Required value")]
    causes: Causes = []
    group, names = spec.get("group"), spec.get("names") or {}
    if not group or "." not in str(group):
        causes.append(("spec.group", f'Invalid value: "{group or ""}": should be a domain with at least one dot'))
    if not names.get("plural"):
        causes.append(("spec.names.plural", "Required value"))
    if not names.get("kind"):
        causes.append(("spec.names.kind", "Required value"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(("spec.scope", 'Unsupported value: supported values: "Cluster", "Namespaced"'))
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        causes.append(("spec.versions", "Required value"))
    elif sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
        causes.append(("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
    expected = f"{names.get('plural')}.{group}"
    if obj["metadata"].get("name") != expected:
        causes.append(
            (
                "metadata.name",
                f'Invalid value: "{obj["metadata"].get("name")}": must be spec.names.plural+"."+spec.group',
            )
        )
    return causes


def crd_status(obj: Obj) -> Obj:
    spec = obj["spec"]
    names = dict(spec["names"])
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", names["kind"] + "List")
    now = iso()
    return {
        "acceptedNames": names,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": now,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": now,
            },
        ],
        "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")],
    }


def crd_types(obj: Obj) -> list[ResourceType]:
    spec = obj["spec"]
    names = spec["names"]
    out = []
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        out.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec["scope"] == "Namespaced",
                singular=names.get("singular", ""),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status="status" in (version.get("subresources") or {}),
                custom=True,
                verbs=CUSTOM_VERBS,
                printer_columns=list(version.get("additionalPrinterColumns") or []),
                schema=(version.get("schema") or {}).get("openAPIV3Schema"),
            )
        )
    return out


def _col(name: str, path: str, type_: str = "string", priority: int = 0) -> Obj:
    col: Obj = {"name": name, "type": type_, "jsonPath": path}
    if priority:
        col["priority"] = priority
    return col


_AGE = _col("AGE", ".metadata.creationTimestamp", "date")


def _crd(
    group: str,
    version: str,
    kind: str,
    plural: str,
    scope: str,
    short: list[str],
    status: bool,
    columns: list[Obj],
) -> Obj:
    schema = volcano_skeletons().get(f"{plural}.{group}/{version}") or {}
    ver: Obj = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {**schema, "type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        "subresources": {"status": {}} if status else {},
    }
    if columns:
        ver["additionalPrinterColumns"] = columns
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "versions": [ver],
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
            },
        },
    }


def volcano_crds() -> list[Obj]:
    """The Volcano CRDs Lahar serves from the start.  As in Volcano's manifests, podgroups and
    commands (and numatopologies) have no status subresource; queues, jobs, cronjobs, jobflows and
    jobtemplates have one."""
    return [
        _crd(
            "scheduling.volcano.sh",
            "v1beta1",
            "PodGroup",
            "podgroups",
            "Namespaced",
            ["pg", "podgroup-v1beta1"],
            False,
            [
                _col("STATUS", ".status.phase"),
                _col("minMember", ".spec.minMember", "integer"),
                _col("RUNNINGS", ".status.running", "integer"),
                _AGE,
                _col("QUEUE", ".spec.queue", priority=1),
            ],
        ),
        _crd(
            "scheduling.volcano.sh",
            "v1beta1",
            "Queue",
            "queues",
            "Cluster",
            ["q", "queue-v1beta1"],
            True,
            [_col("PARENT", ".spec.parent")],
        ),
        _crd(
            "batch.volcano.sh",
            "v1alpha1",
            "Job",
            "jobs",
            "Namespaced",
            ["vcjob", "vj"],
            True,
            [
                _col("STATUS", ".status.state.phase"),
                _col("minAvailable", ".spec.minAvailable", "integer"),
                _col("RUNNINGS", ".status.running", "integer"),
                _AGE,
                _col("QUEUE", ".spec.queue", priority=1),
            ],
        ),
        _crd("batch.volcano.sh", "v1alpha1", "CronJob", "cronjobs", "Namespaced", ["cronvcjob", "cronvj"], True, []),
        _crd("bus.volcano.sh", "v1alpha1", "Command", "commands", "Namespaced", [], False, []),
        _crd(
            "flow.volcano.sh",
            "v1alpha1",
            "JobFlow",
            "jobflows",
            "Namespaced",
            ["jf"],
            True,
            [_col("STATUS", ".status.state.phase"), _AGE],
        ),
        _crd("flow.volcano.sh", "v1alpha1", "JobTemplate", "jobtemplates", "Namespaced", ["jt"], True, []),
        # Written by the resource exporter on each node, read by the numa-aware plugin.
        _crd("nodeinfo.volcano.sh", "v1alpha1", "Numatopology", "numatopologies", "Cluster", ["numatopo"], False, []),
        _crd(
            "topology.volcano.sh",
            "v1alpha1",
            "HyperNode",
            "hypernodes",
            "Cluster",
            ["hn"],
            True,
            [
                _col("Tier", ".spec.tier"),
                _col("TierName", ".spec.tierName"),
                _col("NodeCount", ".status.nodeCount", "integer"),
                _AGE,
            ],
        ),
    ]
