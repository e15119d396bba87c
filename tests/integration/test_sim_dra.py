"""The emulator serves resource.k8s.io/v1 as kube-apiserver 1.34 does, through the official
client's ResourceV1Api: claims (namespaced, status subresource), slices and classes
(cluster-scoped).  Each expectation is kube-apiserver's: pkg/registry/resource/resourceclaim
strategy.go (status reset on create and on update, spec reset on status update),
pkg/apis/resource/v1 defaults.go (SetDefaults_ExactDeviceRequest), pkg/apis/resource/validation
(ValidateResourceClaimUpdate, ValidateResourceClaimStatusUpdate, the slice's node selection),
and resourceslice/deviceclass strategy.go (generation counted from 1)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lahar.sim import Emulator


@pytest.fixture
def resource(api_client: client.ApiClient) -> client.ResourceV1Api:
    return client.ResourceV1Api(api_client)


@pytest.fixture
def unique(sim: Emulator) -> Iterator[str]:
    yield f"d{uuid.uuid4().hex[:8]}"


def claim_body(name: str) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
        "status": {"reservedFor": [{"resource": "pods", "name": "x", "uid": "1"}]},
    }


ALLOCATION = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "g0"}]}}


def _status(exc: ApiException) -> dict[str, Any]:
    return json.loads(exc.body)  # type: ignore[no-any-return]


def test_discovery_lists_the_three_kinds(resource: client.ResourceV1Api) -> None:
    found = {r.name: r for r in resource.get_api_resources().resources}
    expected = {"resourceclaims", "resourceclaims/status", "resourceclaimtemplates", "resourceslices", "deviceclasses"}
    assert expected <= set(found)
    assert found["resourceclaims"].namespaced and found["resourceclaimtemplates"].namespaced
    assert not found["resourceslices"].namespaced and not found["deviceclasses"].namespaced


def test_a_new_claim_is_defaulted_and_starts_without_status(resource: client.ResourceV1Api, ns: str) -> None:
    created = resource.create_namespaced_resource_claim(ns, claim_body("c"))
    exact = created.spec.devices.requests[0].exactly
    assert (exact.allocation_mode, exact.count) == ("ExactCount", 1)
    assert created.status is None or not (created.status.reserved_for or created.status.allocation)


def test_a_claim_spec_is_immutable(resource: client.ResourceV1Api, ns: str) -> None:
    resource.create_namespaced_resource_claim(ns, claim_body("c"))
    patch = {"spec": {"devices": {"requests": [{"name": "other", "exactly": {"deviceClassName": "x"}}]}}}
    with pytest.raises(ApiException) as err:
        resource.patch_namespaced_resource_claim("c", ns, patch)
    assert err.value.status == 422
    assert (
        "spec: Invalid value" in _status(err.value)["message"] and "field is immutable" in _status(err.value)["message"]
    )


def test_claim_status_rules(resource: client.ResourceV1Api, core: client.CoreV1Api, ns: str, pod: Any) -> None:
    resource.create_namespaced_resource_claim(ns, claim_body("c"))
    uid = core.create_namespaced_pod(ns, pod("p")).metadata.uid  # a reservation names a live pod
    consumer = {"resource": "pods", "name": "p", "uid": uid}
    # reservedFor without an allocation is refused.
    with pytest.raises(ApiException) as err:
        resource.patch_namespaced_resource_claim_status("c", ns, {"status": {"reservedFor": [consumer]}})
    assert err.value.status == 422
    assert "may not be specified when `allocated` is not set" in _status(err.value)["message"]
    # Allocation and reservation together (kube-scheduler's PreBind) go through; the status
    # write does not change the spec.
    body = {"status": {"allocation": ALLOCATION, "reservedFor": [consumer]}, "spec": {"devices": {"requests": []}}}
    got = resource.patch_namespaced_resource_claim_status("c", ns, body)
    assert got.status.allocation.devices.results[0].device == "g0"
    assert got.status.reserved_for[0].uid == uid
    assert got.spec.devices.requests[0].name == "gpu"
    # A main-resource update cannot touch status.
    got = resource.patch_namespaced_resource_claim("c", ns, {"status": {"reservedFor": []}})
    assert got.status.reserved_for[0].uid == uid
    # Once set, the allocation cannot change; a consumer appears once.
    other = {"devices": {"results": [{**ALLOCATION["devices"]["results"][0], "device": "g1"}]}}
    with pytest.raises(ApiException) as err:
        resource.patch_namespaced_resource_claim_status("c", ns, {"status": {"allocation": other}})
    assert "status.allocation: Invalid value" in _status(err.value)["message"]
    with pytest.raises(ApiException) as err:
        resource.patch_namespaced_resource_claim_status("c", ns, {"status": {"reservedFor": [consumer, consumer]}})
    assert "Duplicate value" in _status(err.value)["message"]


def test_slices_and_classes_are_cluster_scoped_and_count_generations(
    resource: client.ResourceV1Api, unique: str
) -> None:
    spec = {
        "driver": "gpu.example.com",
        "nodeName": "n1",
        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
    }
    created = resource.create_resource_slice({"metadata": {"name": unique}, "spec": {**spec, "devices": []}})
    assert created.metadata.generation == 1 and created.metadata.namespace is None
    patched = resource.patch_resource_slice(unique, {"spec": {"devices": [{"name": "g0"}]}})
    assert patched.metadata.generation == 2
    cls = resource.create_device_class({"metadata": {"name": unique}, "spec": {}})
    assert cls.metadata.generation == 1
    # A slice names its nodes exactly one way.
    with pytest.raises(ApiException) as err:
        resource.create_resource_slice({"metadata": {"name": f"{unique}-b"}, "spec": {**spec, "allNodes": True}})
    assert err.value.status == 422
    # Their stores return the deleted object, as pods' do.
    assert resource.delete_resource_slice(unique).metadata.name == unique
    assert resource.delete_device_class(unique).metadata.name == unique


def test_a_deleted_claim_comes_back_in_the_reply(resource: client.ResourceV1Api, ns: str) -> None:
    resource.create_namespaced_resource_claim(ns, claim_body("gone"))
    assert resource.delete_namespaced_resource_claim("gone", ns).metadata.name == "gone"


def test_finished_or_deleted_pods_leave_their_claims(
    resource: client.ResourceV1Api, core: client.CoreV1Api, ns: str, pod: Any, wait_for: Any
) -> None:
    # kube-controller-manager's resourceclaim controller (syncClaim): reservations of pods that
    # are done or gone go; a claim left unreserved that the scheduler allocated (it carries the
    # delete-protection finalizer) is deallocated and loses the finalizer; one that someone else
    # allocated keeps its allocation.
    p1 = core.create_namespaced_pod(ns, pod("p1"))
    p2 = core.create_namespaced_pod(ns, pod("p2"))
    refs = [{"resource": "pods", "name": p.metadata.name, "uid": p.metadata.uid} for p in (p1, p2)]
    finalizer = {"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}}
    for name, reserved, protected in (("shared", refs, True), ("mine", refs[:1], True), ("foreign", refs[:1], False)):
        resource.create_namespaced_resource_claim(ns, {**claim_body(name), "status": {}})
        if protected:
            resource.patch_namespaced_resource_claim(name, ns, finalizer)
        body = {"status": {"allocation": ALLOCATION, "reservedFor": reserved}}
        resource.patch_namespaced_resource_claim_status(name, ns, body)
    core.patch_namespaced_pod_status("p1", ns, {"status": {"phase": "Succeeded"}})

    def released() -> bool:
        return not resource.read_namespaced_resource_claim("mine", ns).status.reserved_for

    wait_for(released, what="p1 out of claim mine")
    mine = resource.read_namespaced_resource_claim("mine", ns)
    assert mine.status.allocation is None and not mine.metadata.finalizers
    foreign = resource.read_namespaced_resource_claim("foreign", ns)
    assert not foreign.status.reserved_for and foreign.status.allocation is not None
    shared = resource.read_namespaced_resource_claim("shared", ns)
    assert [r.name for r in shared.status.reserved_for] == ["p2"] and shared.status.allocation is not None
    core.delete_namespaced_pod("p2", ns)  # unbound: gone at once
    wait_for(lambda: resource.read_namespaced_resource_claim("shared", ns).status.allocation is None, what="shared")


def test_claims_are_made_from_templates_for_their_pods(
    resource: client.ResourceV1Api, core: client.CoreV1Api, ns: str, pod: Any, wait_for: Any
) -> None:
    # The resourceclaim controller's handleClaim: a claim per pod claim that names a template,
    # generateName "<pod>-<claim>-", owned by the pod, annotated with the pod claim's name, with
    # the template's labels and spec (defaulted), recorded in status.resourceClaimStatuses.  A pod
    # whose template does not exist yet waits; once the pod is done the made claim is deleted.
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    template = {
        "metadata": {"name": "tpl"},
        "spec": {"metadata": {"labels": {"team": "ml"}}, "spec": {"devices": {"requests": [request]}}},
    }
    made = resource.create_namespaced_resource_claim_template(ns, template)
    assert made.spec.spec.devices.requests[0].exactly.count == 1
    claims = [{"name": "gpu", "resourceClaimTemplateName": "tpl"}]
    p = core.create_namespaced_pod(ns, pod("trainer", resourceClaims=claims))

    def recorded() -> Any:
        return core.read_namespaced_pod("trainer", ns).status.resource_claim_statuses

    [status] = wait_for(recorded, what="the pod's resourceClaimStatuses")
    assert status.name == "gpu" and status.resource_claim_name.startswith("trainer-gpu-")
    assert len(status.resource_claim_name) == len("trainer-gpu-") + 5
    claim = resource.read_namespaced_resource_claim(status.resource_claim_name, ns)
    assert claim.metadata.annotations == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert claim.metadata.labels == {"team": "ml"}
    [owner] = claim.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Pod", "trainer", p.metadata.uid, True)
    assert claim.spec.devices.requests[0].exactly.allocation_mode == "ExactCount"

    # A template that comes later: the pod waits for it, then gets its claim.
    later = [{"name": "gpu", "resourceClaimTemplateName": "later"}]
    core.create_namespaced_pod(ns, pod("waiter", resourceClaims=later))
    assert not core.read_namespaced_pod("waiter", ns).status.resource_claim_statuses
    resource.create_namespaced_resource_claim_template(ns, {**template, "metadata": {"name": "later"}})
    wait_for(lambda: core.read_namespaced_pod("waiter", ns).status.resource_claim_statuses, what="waiter's claim")

    # Reserved for the pod, then the pod finishes: released, and deleted as nobody needs it.
    ref = {"resource": "pods", "name": "trainer", "uid": p.metadata.uid}
    body = {"status": {"allocation": ALLOCATION, "reservedFor": [ref]}}
    resource.patch_namespaced_resource_claim_status(status.resource_claim_name, ns, body)
    core.patch_namespaced_pod_status("trainer", ns, {"status": {"phase": "Succeeded"}})

    def deleted() -> bool:
        names = [c.metadata.name for c in resource.list_namespaced_resource_claim(ns).items]
        return status.resource_claim_name not in names

    wait_for(deleted, what="the made claim deleted")


def test_slices_are_selected_by_node_and_driver(resource: client.ResourceV1Api, unique: str) -> None:
    # resourceslice strategy.go toSelectableFields: spec.nodeName ("" for slices of no one node)
    # and spec.driver, besides metadata.name; other fields are refused.
    pool = {"name": "p", "generation": 1, "resourceSliceCount": 1}
    for name, extra in ((f"{unique}-a", {"nodeName": "n1"}), (f"{unique}-b", {"allNodes": True})):
        spec = {"driver": f"{unique}.example.com", "pool": pool, **extra}
        resource.create_resource_slice({"metadata": {"name": name}, "spec": spec})
    driver = f"spec.driver={unique}.example.com"
    on_n1 = resource.list_resource_slice(field_selector=f"spec.nodeName=n1,{driver}")
    assert [s.metadata.name for s in on_n1.items] == [f"{unique}-a"]
    no_node = resource.list_resource_slice(field_selector=f"spec.nodeName=,{driver}")
    assert [s.metadata.name for s in no_node.items] == [f"{unique}-b"]
    with pytest.raises(ApiException) as err:
        resource.list_resource_slice(field_selector="spec.pool.name=p")
    assert err.value.status == 400
    for name in (f"{unique}-a", f"{unique}-b"):
        resource.delete_resource_slice(name)


def test_a_reservation_for_a_pod_that_does_not_exist_goes(
    resource: client.ResourceV1Api, ns: str, wait_for: Any
) -> None:
    # syncClaim runs on the claim's own changes too: a consumer pod that is not there (as
    # kube-controller-manager 1.34 does within moments) is removed, and a claim the scheduler
    # allocated (with the delete-protection finalizer) is deallocated.
    resource.create_namespaced_resource_claim(ns, {**claim_body("c"), "status": {}})
    finalizer = {"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}}
    resource.patch_namespaced_resource_claim("c", ns, finalizer)
    ghost = {"resource": "pods", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000001"}
    body = {"status": {"allocation": ALLOCATION, "reservedFor": [ghost]}}
    resource.patch_namespaced_resource_claim_status("c", ns, body)

    def released() -> bool:
        got = resource.read_namespaced_resource_claim("c", ns)
        return not got.status.reserved_for and got.status.allocation is None and not got.metadata.finalizers

    wait_for(released, what="the ghost's reservation gone and the claim deallocated")
