"""What the steps of the fidelity sequence share: a registry per module (``@step``, in order),
paths, object makers and small helpers.  Steps run in order on one server and may leave names
for later ones in ``client.state``; everything lives in the run's namespace (``client.run_id``)
or, when cluster-scoped, is named after it and labelled ``LABEL`` for the cleanup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lahar.sim.fidelity.client import Client, Reply, Step
from lahar.sim.fidelity.compare import Obj, Record

LABEL = "fidelity.lahar.io/run"  # on every object a run creates, for the cleanup
CM = "configmaps"
Steps = list[tuple[str, Step]]


def registrar(steps: Steps) -> Callable[[str], Callable[[Step], Step]]:
    """``@step(name)`` for one module: adds the function to ``steps``, in the order of the module."""

    def step(name: str) -> Callable[[Step], Step]:
        def add(fn: Step) -> Step:
            steps.append((name, fn))
            return fn

        return add

    return step


# --- paths and objects ---------------------------------------------------------------------------------


def ns_path(c: Client, plural: str, name: str = "", sub: str = "", prefix: str = "/api/v1") -> str:
    path = f"{prefix}/namespaces/{c.run_id}/{plural}"
    return path + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


def volcano(c: Client, group_version: str, plural: str, name: str = "", sub: str = "", namespaced: bool = True) -> str:
    if namespaced:
        return ns_path(c, plural, name, sub, prefix=f"/apis/{group_version}")
    return f"/apis/{group_version}/{plural}" + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


def configmap(c: Client, name: str, labels: dict[str, str] | None = None, **data: str) -> Obj:
    meta: Obj = {"name": name, "labels": {"fid": "1", LABEL: c.run_id, **(labels or {})}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def pod(c: Client, name: str, node: str = "", image: str = "busybox") -> Obj:
    spec: Obj = {
        "containers": [{"name": "c", "image": image, "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {LABEL: c.run_id}}, "spec": spec}


def names(reply: Reply) -> list[str] | Any:
    """The names of a list reply's items, or the whole reply when it is not a list."""
    if reply.code != 200 or not isinstance(reply.body, dict):
        return reply.record()
    return [item["metadata"]["name"] for item in reply.body.get("items", [])]


def metadata_of(reply: Reply, *fields: str) -> Record:
    """The code and chosen metadata fields of a reply (whose other parts hold no semantics here)."""
    meta = reply.body.get("metadata", {}) if isinstance(reply.body, dict) else {}
    return {"code": reply.code, **{f: meta.get(f) for f in fields}}


def create(c: Client, path: str, obj: Obj) -> Reply:
    reply = c.call("POST", path, obj)
    if reply.code != 201:
        raise RuntimeError(f"creating {obj['metadata'].get('name')} at {path}: {reply.code} {reply.body}")
    return reply


def merge(c: Client, path: str, patch: Obj, params: dict[str, str] | None = None) -> Reply:
    return c.call("PATCH", path, patch, "application/merge-patch+json", params)


MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
SCHED = "scheduling.volcano.sh/v1beta1"
BATCH = "batch.volcano.sh/v1alpha1"


def queue_path(c: Client, sub: str = "") -> str:
    return volcano(c, SCHED, "queues", c.run_id + "-q", sub, namespaced=False)


def binding(name: str, node: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}


def gone(c: Client, path: str, seconds: float = 15.0) -> bool:
    return c.poll(lambda: c.get(path).code == 404, seconds)


WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
