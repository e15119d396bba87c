"""Node fleets: from a one-line spec (``COUNT:key=value,...``) or a YAML file of Node objects.

Spec keys:
* a resource name (``cpu``, ``memory``, ``pods``, ``ephemeral-storage``, ``nvidia.com/gpu``, any
  name with a ``/``, or ``hugepages-*``): capacity and allocatable; defaults cpu=8, memory=32Gi, pods=110;
* ``label.K=V``: a label;
* ``taint.K=V:Effect`` (or ``taint.K=:Effect``): a taint, Effect one of NoSchedule,
  PreferNoSchedule, NoExecute;
* ``name=PREFIX``: nodes are named ``PREFIX-0001``, ``PREFIX-0002``, ... (default prefix ``node``);
  numbering goes on across specs that share a prefix.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lahar.api import safeyaml
from lahar.api.quantity import Quantity, QuantityError

Obj = dict[str, Any]
_DEFAULTS = {"cpu": "8", "memory": "32Gi", "pods": "110"}
_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage", "storage"})
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class NodeSpecError(ValueError):
    pass


class NodeSpec:
    def __init__(
        self, count: int, prefix: str, resources: dict[str, str], labels: dict[str, str], taints: list[Obj]
    ) -> None:
        self.count = count
        self.prefix = prefix
        self.resources = resources
        self.labels = labels
        self.taints = taints


def parse_spec(text: str) -> NodeSpec:
    where = f"--nodes {text!r}"
    count_text, sep, rest = text.partition(":")
    if not sep and "=" in count_text:
        raise NodeSpecError(f"{where}: expected COUNT:key=value,..., e.g. 10:cpu=32,memory=128Gi")
    try:
        count = int(count_text)
    except ValueError:
        raise NodeSpecError(f"{where}: COUNT {count_text!r} is not a whole number") from None
    if count < 1:
        raise NodeSpecError(f"{where}: COUNT must be at least 1")
    resources, labels, taints, prefix = dict(_DEFAULTS), {}, [], "node"
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise NodeSpecError(f"{where}: {item!r} is not key=value")
        if key == "name":
            if not value or not value.replace("-", "").isalnum() or value != value.lower():
                raise NodeSpecError(f"{where}: name {value!r} must be lower-case letters, digits and '-'")
            prefix = value
        elif key.startswith("label."):
            labels[key[6:]] = value
        elif key.startswith("taint."):
            taints.append(_taint(where, key[6:], value))
        elif key in _RESOURCES or "/" in key or key.startswith("hugepages-"):
            try:
                Quantity(value)
            except QuantityError as exc:
                raise NodeSpecError(f"{where}: {key}: {exc}") from None
            resources[key] = value
        else:
            raise NodeSpecError(
                f"{where}: unknown key {key!r}; use a resource name (cpu, memory, pods, "
                "vendor.com/name), label.K=V, taint.K=V:Effect or name=PREFIX"
            )
    return NodeSpec(count, prefix, resources, labels, taints)


def _taint(where: str, key: str, value: str) -> Obj:
    val, sep, effect = value.rpartition(":")
    if not sep or effect not in _EFFECTS:
        raise NodeSpecError(
            f"{where}: taint.{key}: effect {effect or value!r} must be one of {', '.join(_EFFECTS)} "
            "(taint.KEY=VALUE:EFFECT)"
        )
    if not key:
        raise NodeSpecError(f"{where}: taint needs a key (taint.KEY=VALUE:EFFECT)")
    taint: Obj = {"key": key, "effect": effect}
    if val:
        taint["value"] = val
    return taint


def build_nodes(specs: Iterable[NodeSpec]) -> list[Obj]:
    specs = list(specs)
    counters: dict[str, int] = {}
    totals: dict[str, int] = {}
    for spec in specs:
        totals[spec.prefix] = totals.get(spec.prefix, 0) + spec.count
    nodes = []
    for index, spec in enumerate(specs):
        width = max(4, len(str(totals[spec.prefix])))
        for _ in range(spec.count):
            n = counters[spec.prefix] = counters.get(spec.prefix, 0) + 1
            nodes.append(node_object(f"{spec.prefix}-{n:0{width}d}", spec, index * 65536 + n))
    return nodes


def node_object(name: str, spec: NodeSpec, serial: int) -> Obj:
    ip = f"10.{(serial >> 16) % 256}.{(serial >> 8) & 255}.{serial & 255}"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        **spec.labels,
    }
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": list(spec.taints)} if spec.taints else {},
        "status": {
            "capacity": dict(spec.resources),
            "allocatable": dict(spec.resources),
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0-lahar-sim",
                "containerRuntimeVersion": "sim://1.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "Lahar simulated node",
                "kernelVersion": "6.0.0",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kubeProxyVersion": "",
            },
        },
    }
    return node


def load_nodes_file(path: str) -> list[Obj]:
    """Node objects from a YAML (or JSON) file: documents, or a List of them."""
    try:
        with open(path, encoding="utf-8") as handle:
            docs = [d for _, d in safeyaml.documents(safeyaml.load_all(safeyaml.read(handle, path), path))]
    except OSError as exc:
        raise NodeSpecError(f"--nodes-file {path}: cannot read: {exc.strerror}") from None
    except safeyaml.YamlError as exc:
        raise NodeSpecError(f"--nodes-file {exc}") from None
    nodes: list[Obj] = []
    for doc in docs:
        items = doc.get("items") if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") else [doc]
        for i, item in enumerate(items or []):
            if not isinstance(item, dict) or item.get("kind") != "Node":
                raise NodeSpecError(f"--nodes-file {path}: document {len(nodes) + i}: not a Node (kind: Node)")
            if not (item.get("metadata") or {}).get("name"):
                raise NodeSpecError(f"--nodes-file {path}: document {len(nodes) + i}: metadata.name is required")
            nodes.append(item)
    return nodes
