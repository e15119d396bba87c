"""Custom resources (the Volcano groups and new CRDs), their status subresource, discovery."""

from __future__ import annotations

import pytest
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException


def test_volcano_groups_are_served(custom: client.CustomObjectsApi, ns: str) -> None:
    pg = custom.create_namespaced_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        ns,
        "podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg"},
            "spec": {"minMember": 2, "queue": "default"},
            "status": {"phase": "Pending"},
        },
    )
    # podgroups have no status subresource in Volcano's CRD: status is kept and is writable
    assert pg["status"] == {"phase": "Pending"}
    pg = custom.patch_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups", "pg", {"status": {"phase": "Inqueue"}}
    )
    assert pg["status"]["phase"] == "Inqueue"
    job = custom.create_namespaced_custom_object(
        "batch.volcano.sh",
        "v1alpha1",
        ns,
        "jobs",
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"minAvailable": 1},
        },
    )
    assert job["metadata"]["generation"] == 1
    cmd = custom.create_namespaced_custom_object(
        "bus.volcano.sh",
        "v1alpha1",
        ns,
        "commands",
        {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"name": "c"},
            "action": "AbortJob",
        },
    )
    assert cmd["action"] == "AbortJob"


def test_queue_status_subresource(custom: client.CustomObjectsApi) -> None:
    args = ("scheduling.volcano.sh", "v1beta1", "queues")
    q = custom.create_cluster_custom_object(
        *args,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q-crd"},
            "spec": {"weight": 1},
            "status": {"state": "Open"},
        },
    )
    assert "status" not in q  # dropped on create, as for any CRD with a status subresource
    q = custom.patch_cluster_custom_object(*args, "q-crd", {"spec": {"weight": 2}, "status": {"state": "Closed"}})
    assert q["spec"]["weight"] == 2 and "status" not in q and q["metadata"]["generation"] == 2
    q = custom.patch_cluster_custom_object_status(*args, "q-crd", {"status": {"state": "Open"}, "spec": {"weight": 9}})
    assert q["status"] == {"state": "Open"} and q["spec"]["weight"] == 2 and q["metadata"]["generation"] == 2
    stale = dict(q, status={"state": "Closed"})
    custom.replace_cluster_custom_object_status(*args, "q-crd", stale)
    with pytest.raises(ApiException) as err:
        custom.replace_cluster_custom_object_status(*args, "q-crd", stale)
    assert err.value.status == 409
    custom.delete_cluster_custom_object(*args, "q-crd")


def test_podgroups_have_no_status_subresource(custom: client.CustomObjectsApi, ns: str) -> None:
    with pytest.raises(ApiException) as err:
        custom.get_namespaced_custom_object_status("scheduling.volcano.sh", "v1beta1", ns, "podgroups", "x")
    assert err.value.status == 404


def test_new_crd_is_served_and_removed(api_client: client.ApiClient, custom: client.CustomObjectsApi) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    crd = ext.create_custom_resource_definition(
        {
            "metadata": {"name": "widgets.example.lahar.io"},
            "spec": {
                "group": "example.lahar.io",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": {"type": "object"}},
                    }
                ],
            },
        }
    )
    assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
    w = custom.create_namespaced_custom_object(
        "example.lahar.io",
        "v1",
        "default",
        "widgets",
        {
            "apiVersion": "example.lahar.io/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 3},
        },
    )
    assert w["spec"]["size"] == 3
    ext.delete_custom_resource_definition("widgets.example.lahar.io")
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object("example.lahar.io", "v1", "default", "widgets")
    assert err.value.status == 404


def test_invalid_crd_names_the_field(api_client: client.ApiClient) -> None:
    with pytest.raises(ApiException) as err:
        client.ApiextensionsV1Api(api_client).create_custom_resource_definition(
            {
                "metadata": {"name": "wrong"},
                "spec": {
                    "group": "g.io",
                    "scope": "Namespaced",
                    "names": {"plural": "xs", "kind": "X"},
                    "versions": [{"name": "v1", "served": True, "storage": True}],
                },
            }
        )
    assert err.value.status == 422 and "metadata.name" in err.value.body


def test_discovery_and_dynamic_client(api_client: client.ApiClient, ns: str) -> None:
    versions = client.CoreApi(api_client).get_api_versions()
    assert versions.versions == ["v1"]
    groups = {g.name for g in client.ApisApi(api_client).get_api_versions().groups}
    assert {
        "scheduling.volcano.sh",
        "batch.volcano.sh",
        "bus.volcano.sh",
        "scheduling.k8s.io",
        "coordination.k8s.io",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
    } <= groups
    resources = {r.name: r for r in client.CoreV1Api(api_client).get_api_resources().resources}
    assert {"pods/binding", "pods/status", "pods/eviction"} <= set(resources)
    assert resources["pods"].namespaced and "watch" in resources["pods"].verbs
    assert client.VersionApi(api_client).get_code().major == "1"

    dyn = dynamic.DynamicClient(api_client)
    pg_api = dyn.resources.get(api_version="scheduling.volcano.sh/v1beta1", kind="PodGroup")
    pg_api.create(
        body={
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "dyn"},
            "spec": {"minMember": 1},
        },
        namespace=ns,
    )
    assert [p.metadata.name for p in pg_api.get(namespace=ns).items] == ["dyn"]
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    assert pods.get(namespace=ns).items == []
