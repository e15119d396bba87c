"""The resource types the emulator serves, and the discovery documents that describe them.

A ``ResourceType`` is one group/version/resource; built-in ones are listed here, custom ones
come from CustomResourceDefinition objects (see ``crds.py``).  Storage is per group/resource,
so a CRD with several versions shares one table (without conversion between versions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_NO_DELETECOLLECTION = tuple(v for v in ALL_VERBS if v != "deletecollection")
# The order the apiextensions server lists a custom resource's verbs in.
CUSTOM_VERBS = ("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch")


@dataclass(eq=False)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    status: bool = False  # has the status subresource
    extra_subresources: tuple[str, ...] = ()  # e.g. binding, eviction
    categories: tuple[str, ...] = ()
    custom: bool = False  # served from a CRD: no strategic merge patch, status dropped on create
    verbs: tuple[str, ...] = ALL_VERBS
    printer_columns: list[dict[str, Any]] = field(default_factory=list)
    schema: dict[str, Any] | None = None  # a custom resource's openAPIV3Schema (for its defaults)

    def __post_init__(self) -> None:
        if not self.singular:
            self.singular = self.kind.lower()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _core(plural: str, kind: str, namespaced: bool, **kw: Any) -> ResourceType:
    return ResourceType("", "v1", plural, kind, namespaced, **kw)


def _workload_types() -> list[ResourceType]:
    """The apps/v1 and batch/v1 kinds whose pods get PodGroups (objects only: no controllers)."""
    apps = [
        ("deployments", "Deployment", ("deploy",)),
        ("replicasets", "ReplicaSet", ("rs",)),
        ("statefulsets", "StatefulSet", ("sts",)),
        ("daemonsets", "DaemonSet", ("ds",)),
    ]
    out = [ResourceType("apps", "v1", p, k, True, short_names=s, status=True, categories=("all",)) for p, k, s in apps]
    out.append(ResourceType("batch", "v1", "jobs", "Job", True, status=True, categories=("all",)))
    out.append(
        ResourceType("batch", "v1", "cronjobs", "CronJob", True, short_names=("cj",), status=True, categories=("all",))
    )
    return out


def builtin_types() -> list[ResourceType]:
    return [
        _core(
            "pods",
            "Pod",
            True,
            short_names=("po",),
            status=True,
            extra_subresources=("binding", "eviction"),
            categories=("all",),
        ),
        _core("nodes", "Node", False, short_names=("no",), status=True),
        _core("namespaces", "Namespace", False, short_names=("ns",), status=True, verbs=_NO_DELETECOLLECTION),
        _core("events", "Event", True, short_names=("ev",)),
        _core("configmaps", "ConfigMap", True, short_names=("cm",)),
        _core("secrets", "Secret", True),
        _core("services", "Service", True, short_names=("svc",), status=True, categories=("all",)),
        _core("serviceaccounts", "ServiceAccount", True, short_names=("sa",)),
        _core("resourcequotas", "ResourceQuota", True, short_names=("quota",), status=True),
        _core("bindings", "Binding", True, verbs=("create",)),
        _core("persistentvolumeclaims", "PersistentVolumeClaim", True, short_names=("pvc",), status=True),
        *_workload_types(),
        ResourceType("events.k8s.io", "v1", "events", "Event", True, short_names=("ev",)),
        ResourceType("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, short_names=("netpol",)),
        ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short_names=("pc",)),
        ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
        ResourceType(
            "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, short_names=("pdb",), status=True
        ),
        ResourceType(
            "admissionregistration.k8s.io",
            "v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            False,
        ),
        ResourceType(
            "admissionregistration.k8s.io",
            "v1",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
            False,
        ),
        ResourceType(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            False,
            short_names=("crd", "crds"),
            status=True,
        ),
    ]


class Registry:
    """Resource types by group/version/plural, kept in the order they were added."""

    def __init__(self) -> None:
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.by_resource: dict[tuple[str, str], ResourceType] = {}  # (group, plural): first served version

    def add(self, rtype: ResourceType) -> None:
        self.types[(rtype.group, rtype.version, rtype.plural)] = rtype
        self.by_resource.setdefault(rtype.key, rtype)

    def remove(self, group: str, plural: str) -> None:
        for key in [k for k in self.types if k[0] == group and k[2] == plural]:
            del self.types[key]
        self.by_resource.pop((group, plural), None)

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.types.get((group, version, plural))

    def group_versions(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for group, version, _ in self.types:
            versions = out.setdefault(group, [])
            if version not in versions:
                versions.append(version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for (g, v, _), t in self.types.items() if g == group and v == version]


# --- discovery documents -----------------------------------------------------------------------------

_SUBRESOURCE_KINDS = {
    "status": (None, ("get", "patch", "update")),
    "binding": ("Binding", ("create",)),
    "eviction": ("Eviction", ("create",)),
}


def resource_list(group: str, version: str, types: list[ResourceType]) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for t in types:
        entry: dict[str, Any] = {
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": list(t.verbs),
        }
        if t.short_names:
            entry["shortNames"] = list(t.short_names)
        if t.categories:
            entry["categories"] = list(t.categories)
        resources.append(entry)
        subs = (("status",) if t.status else ()) + t.extra_subresources
        for sub in subs:
            kind, verbs = _SUBRESOURCE_KINDS[sub]
            sub_entry: dict[str, Any] = {
                "name": f"{t.plural}/{sub}",
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": kind or t.kind,
                "verbs": list(verbs),
            }
            if sub == "eviction":
                sub_entry.update(group="policy", version="v1")
            resources.append(sub_entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def api_group(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": entries,
        "preferredVersion": entries[0],
    }


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [api_group(g, vs) for g, vs in registry.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


VERSION_INFO = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-lahar-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
    "emulationMajor": "1",
    "emulationMinor": "32",
}
