"""Steps on resource.k8s.io/v1 (dynamic resource allocation): a claim's defaults and status
rules, what kube-scheduler's PreBind writes, a slice and a class (cluster-scoped)."""

from __future__ import annotations

from lahar.sim.fidelity.client import Client
from lahar.sim.fidelity.compare import Obj, Record
from lahar.sim.fidelity.steps.common import LABEL, Steps, create, merge, ns_path, pod, registrar

STEPS: Steps = []
step = registrar(STEPS)

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"
ALLOCATION = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "pool-a", "device": "gpu-0"}]}}


CLUSTER_SCOPED = (f"{RESOURCE}/resourceslices", f"{RESOURCE}/deviceclasses")  # for the cleanup


def claims(c: Client, name: str = "", sub: str = "") -> str:
    return ns_path(c, "resourceclaims", name, sub, prefix=RESOURCE)


def cluster_path(plural: str, name: str = "") -> str:
    return f"{RESOURCE}/{plural}" + (f"/{name}" if name else "")


@step("dra: claim create (defaults, status dropped)")
def claim_create(c: Client) -> Record:
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER}}
    obj: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "claim-a"},
        "spec": {"devices": {"requests": [request]}},
        "status": {"allocation": ALLOCATION},
    }
    return c.call("POST", claims(c), obj).record()


@step("dra: claim spec is immutable (422)")
def claim_immutable(c: Client) -> Record:
    patch = {"spec": {"devices": {"requests": [{"name": "other", "exactly": {"deviceClassName": "x"}}]}}}
    return merge(c, claims(c, "claim-a"), patch).record()


def consumer(c: Client) -> Obj:
    """A live pod to reserve the claim for: the resourceclaim controller drops a reservation for
    a pod that does not exist."""
    if "dra-pod" not in c.state:
        made = create(c, ns_path(c, "pods"), pod(c, "dra-consumer"))
        c.state["dra-pod"] = {"resource": "pods", "name": "dra-consumer", "uid": made.body["metadata"]["uid"]}
    return dict(c.state["dra-pod"])


@step("dra: reservedFor without an allocation (422)")
def claim_reserved_unallocated(c: Client) -> Record:
    return merge(c, claims(c, "claim-a", "status"), {"status": {"reservedFor": [consumer(c)]}}).record()


@step("dra: finalizer, then allocation and reservedFor (kube-scheduler's PreBind)")
def claim_prebind(c: Client) -> Record:
    protect = {"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}}
    finalizer = merge(c, claims(c, "claim-a"), protect)
    body = {"status": {"allocation": ALLOCATION, "reservedFor": [consumer(c)]}}
    status = merge(c, claims(c, "claim-a", "status"), body)
    return {"finalizer": finalizer.record(), "status": status.record()}


@step("dra: an allocation cannot change (422)")
def claim_reallocate(c: Client) -> Record:
    other = {"devices": {"results": [{**ALLOCATION["devices"]["results"][0], "device": "gpu-1"}]}}
    return merge(c, claims(c, "claim-a", "status"), {"status": {"allocation": other}}).record()


@step("dra: slice and class create (cluster-scoped, generation)")
def slice_and_class(c: Client) -> Record:
    name = c.run_id + "-dra"
    meta: Obj = {"name": name, "labels": {LABEL: c.run_id}}
    spec = {
        "driver": DRIVER,
        "nodeName": c.state["node"],
        "pool": {"name": "pool-a", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}],
    }
    made = c.call(
        "POST",
        cluster_path("resourceslices"),
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta, "spec": spec},
    )
    cls = {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}
    made_class = c.call(
        "POST",
        cluster_path("deviceclasses"),
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": meta, "spec": cls},
    )
    gone_slice = c.call("DELETE", cluster_path("resourceslices", name))
    gone_class = c.call("DELETE", cluster_path("deviceclasses", name))
    return {
        "slice": made.record(),
        "class": made_class.record(),
        "slice_deleted": gone_slice.code,
        "class_deleted": gone_class.code,
    }
