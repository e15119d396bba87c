"""Create, read, update, patch and delete through the official client, with the API server's
errors and resourceVersion semantics."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException


def status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_create_get_list_delete(core: client.CoreV1Api, ns: str, pod) -> None:
    created = core.create_namespaced_pod(ns, pod("a"))
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.status.phase == "Pending"
    assert created.spec.scheduler_name == "default-scheduler"
    got = core.read_namespaced_pod("a", ns)
    assert got.metadata.resource_version == created.metadata.resource_version
    listed = core.list_namespaced_pod(ns)
    assert [p.metadata.name for p in listed.items] == ["a"]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)
    core.delete_namespaced_pod("a", ns)  # unbound: deleted at once
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("a", ns)
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'pods "a" not found'
    assert status_of(err.value)["reason"] == "NotFound"


def test_resource_versions_increase_globally(core: client.CoreV1Api, ns: str, pod) -> None:
    rvs = [int(core.create_namespaced_pod(ns, pod(f"p{i}")).metadata.resource_version) for i in range(3)]
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"k": "v"}})
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    assert int(cm.metadata.resource_version) > rvs[-1]


def test_create_existing_is_already_exists(core: client.CoreV1Api, ns: str, pod) -> None:
    core.create_namespaced_pod(ns, pod("dup"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("dup"))
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["reason"] == "AlreadyExists" and body["message"] == 'pods "dup" already exists'


def test_stale_update_is_conflict(core: client.CoreV1Api, ns: str) -> None:
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"k": "1"}})
    cm.data = {"k": "2"}
    updated = core.replace_namespaced_config_map("c", ns, cm)
    assert updated.data == {"k": "2"}
    cm.data = {"k": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("c", ns, cm)
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]
    assert core.read_namespaced_config_map("c", ns).data == {"k": "2"}


def test_update_missing_is_not_found(core: client.CoreV1Api, ns: str) -> None:
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("nope", ns, {"metadata": {"name": "nope"}, "data": {}})
    assert err.value.status == 404


def test_generate_name(core: client.CoreV1Api, ns: str, pod) -> None:
    manifest = pod("")
    manifest["metadata"] = {"generateName": "worker-"}
    created = core.create_namespaced_pod(ns, manifest)
    assert created.metadata.name.startswith("worker-") and len(created.metadata.name) == len("worker-") + 5


def test_invalid_pod_is_422_naming_the_field(core: client.CoreV1Api, ns: str) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, {"metadata": {"name": "x"}, "spec": {"containers": []}})
    assert err.value.status == 422
    assert "spec.containers: Required value" in status_of(err.value)["message"]


def test_negative_or_unreadable_requests_are_422_as_kube_apiserver_says(core: client.CoreV1Api, ns: str, pod) -> None:
    manifest = pod("neg")
    manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "-1"}, "limits": {"memory": "-5Gi"}}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, manifest)
    assert err.value.status == 422
    status = status_of(err.value)
    assert status["reason"] == "Invalid"
    assert status["message"] == (
        'Pod "neg" is invalid: '
        'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0, '
        'spec.containers[0].resources.limits[memory]: Invalid value: "-5Gi": must be greater than or equal to 0'
    )
    manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "9" * 400}}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, manifest)
    assert err.value.status == 422
    assert "requests[cpu]: Invalid value: " in status_of(err.value)["message"]
    assert "longer than 64 characters" in status_of(err.value)["message"]
    with pytest.raises(ApiException):
        core.read_namespaced_pod("neg", ns)


def test_malformed_body_is_400(sim) -> None:
    import httpx

    with httpx.Client(base_url=sim.url, trust_env=False) as http:
        reply = http.post(
            "/api/v1/namespaces/default/configmaps",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
        assert reply.status_code == 400
        assert reply.json()["reason"] == "BadRequest"
        assert "json parse error" in reply.json()["message"]  # the API server's wording
        reply = http.post(
            "/api/v1/namespaces/default/configmaps",
            json={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}},
        )
        assert reply.status_code == 400 and "cannot be handled as a ConfigMap" in reply.json()["message"]
        assert http.get("/api/v1/nodes").status_code == 200  # the server lives on


def test_merge_json_and_strategic_patches(core: client.CoreV1Api, ns: str, pod) -> None:
    core.create_namespaced_pod(ns, pod("p", labels={"a": "1"}))
    # the official client sends strategic merge patch for a dict body
    patched = core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"b": "2"}}})
    assert patched.metadata.labels == {"a": "1", "b": "2"}
    # strategic merge: containers merge by name
    patched = core.patch_namespaced_pod("p", ns, {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}})
    assert [(c.name, c.image) for c in patched.spec.containers] == [("main", "busybox:2")]
    assert patched.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    # JSON patch: a list body
    patched = core.patch_namespaced_pod("p", ns, [{"op": "remove", "path": "/metadata/labels/a"}])
    assert patched.metadata.labels == {"b": "2"}
    # merge patch with null deletes
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"x": "1", "y": "2"}})
    del cm
    patched_cm = core.patch_namespaced_config_map(
        "c", ns, {"data": {"x": None}}, _content_type="application/merge-patch+json"
    )
    assert patched_cm.data == {"y": "2"}


def test_pod_spec_is_immutable_but_image_is_not(core: client.CoreV1Api, ns: str, pod) -> None:
    core.create_namespaced_pod(ns, pod("p"))
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("p", ns, {"spec": {"restartPolicy": "Never"}})
    assert err.value.status == 422 and "pod updates may not change fields" in status_of(err.value)["message"]


def test_pod_status_subresource(core: client.CoreV1Api, ns: str, pod) -> None:
    core.create_namespaced_pod(ns, pod("p"))
    # the main resource ignores status changes
    ignored = core.patch_namespaced_pod("p", ns, {"status": {"phase": "Running"}, "metadata": {"labels": {"x": "y"}}})
    assert ignored.status.phase == "Pending" and ignored.metadata.labels == {"x": "y"}
    # the status subresource changes only status
    changed = core.patch_namespaced_pod_status(
        "p", ns, {"status": {"phase": "Failed"}, "metadata": {"labels": {"x": "z"}}}
    )
    assert changed.status.phase == "Failed" and changed.metadata.labels == {"x": "y"}
    current = core.read_namespaced_pod_status("p", ns)
    current.status.message = "hello"
    assert core.replace_namespaced_pod_status("p", ns, current).status.message == "hello"


def test_finalizers_hold_deletion(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "f", "finalizers": ["lahar.io/hold"]}})
    core.delete_namespaced_config_map("f", ns)
    held = core.read_namespaced_config_map("f", ns)
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("f", ns, [{"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("f", ns)
    assert err.value.status == 404


def test_delete_collection(core: client.CoreV1Api, ns: str) -> None:
    for i in range(3):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"c{i}", "labels": {"keep": str(i == 0).lower()}}})
    core.delete_collection_namespaced_config_map(ns, label_selector="keep=false")
    # kube-root-ca.crt: every namespace has it, as on a real cluster
    assert [c.metadata.name for c in core.list_namespaced_config_map(ns).items] == ["c0", "kube-root-ca.crt"]


def test_list_pagination(core: client.CoreV1Api, ns: str) -> None:
    for i in range(5):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"c{i}", "labels": {"page": "yes"}}})
    first = core.list_namespaced_config_map(ns, limit=2, label_selector="page")
    assert [c.metadata.name for c in first.items] == ["c0", "c1"] and first.metadata._continue
    rest = core.list_namespaced_config_map(ns, limit=10, _continue=first.metadata._continue, label_selector="page")
    assert [c.metadata.name for c in rest.items] == ["c2", "c3", "c4"] and not rest.metadata._continue


def test_cluster_scoped_and_other_groups(api_client: client.ApiClient) -> None:
    sched = client.SchedulingV1Api(api_client)
    pc = sched.create_priority_class({"metadata": {"name": "high-crud"}, "value": 1000})
    assert pc.value == 1000
    names = [p.metadata.name for p in sched.list_priority_class().items]
    assert {"high-crud", "system-node-critical", "system-cluster-critical"} <= set(names)
    coord = client.CoordinationV1Api(api_client)
    lease = coord.create_namespaced_lease(
        "default", {"metadata": {"name": "lahar-leader-crud"}, "spec": {"holderIdentity": "me"}}
    )
    assert lease.spec.holder_identity == "me"
    quota = client.CoreV1Api(api_client).create_namespaced_resource_quota(
        "default", {"metadata": {"name": "q-crud"}, "spec": {"hard": {"pods": "10"}}}
    )
    assert quota.spec.hard == {"pods": "10"}
    event = client.CoreV1Api(api_client).create_namespaced_event(
        "default",
        {
            "metadata": {"name": "e-crud.123"},
            "involvedObject": {"kind": "Pod", "name": "x"},
            "reason": "Scheduled",
            "message": "m",
            "type": "Normal",
        },
    )
    assert event.reason == "Scheduled"


def test_namespaces_are_not_enforced_but_listed(core: client.CoreV1Api, pod) -> None:
    core.create_namespaced_pod("no-such-namespace-crud", pod("p"))
    assert core.read_namespaced_pod("p", "no-such-namespace-crud").metadata.namespace == "no-such-namespace-crud"
    names = [n.metadata.name for n in core.list_namespace().items]
    assert "default" in names and "kube-system" in names
    core.delete_namespaced_pod("p", "no-such-namespace-crud")


def test_namespace_delete_removes_its_objects(core: client.CoreV1Api, pod) -> None:
    core.create_namespace({"metadata": {"name": "doomed-crud"}})
    core.create_namespaced_config_map("doomed-crud", {"metadata": {"name": "c"}})
    assert core.read_namespace("doomed-crud").metadata.labels["kubernetes.io/metadata.name"] == "doomed-crud"
    core.delete_namespace("doomed-crud")
    assert core.list_namespaced_config_map("doomed-crud").items == []


def test_malformed_metadata_is_422(sim, core: client.CoreV1Api, ns: str) -> None:
    import httpx

    with httpx.Client(base_url=sim.url, trust_env=False) as http:
        reply = http.post(f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": "x", "labels": {"a": 1}}})
    assert reply.status_code == 422 and "metadata.labels" in reply.json()["message"]
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "Not_Valid"}})
    assert err.value.status == 422 and "RFC 1123" in status_of(err.value)["message"]


def test_python_api_reaches_the_store(sim) -> None:
    nodes = sim.call(lambda: sorted(sim.api.table(sim.api.rtype("", "nodes")).objects))
    assert nodes[:2] == ["gpu-0001", "gpu-0002"] and len(nodes) == 6
