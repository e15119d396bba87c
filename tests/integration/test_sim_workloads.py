"""The apps/v1 and batch/v1 workload kinds (objects only), over real HTTP: discovery, defaults,
validation, the status subresource, selectors and watch, through the official client and
kubectl."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import httpx
import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException


def container(name: str = "c") -> dict[str, Any]:
    return {"name": name, "image": "busybox"}


def deployment(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    labels = labels or {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"schedulerName": "volcano", "containers": [container()]},
            },
            **spec,
        },
    }


def batch_job(name: str, restart: str | None = "Never") -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [container()]}
    if restart:
        pod_spec["restartPolicy"] = restart
    return {"metadata": {"name": name}, "spec": {"template": {"metadata": {"labels": {"x": "y"}}, "spec": pod_spec}}}


def causes(exc: ApiException) -> list[str]:
    body = json.loads(exc.body)
    return [c["field"] for c in body["details"]["causes"]]


def test_discovery_serves_the_workload_groups(sim) -> None:
    with httpx.Client(base_url=sim.url, trust_env=False) as http:
        groups = {g["name"]: g["preferredVersion"]["version"] for g in http.get("/apis").json()["groups"]}
        apps = {r["name"]: r for r in http.get("/apis/apps/v1").json()["resources"]}
        batch = {r["name"]: r for r in http.get("/apis/batch/v1").json()["resources"]}
        vc_batch = {r["name"] for r in http.get("/apis/batch.volcano.sh/v1alpha1").json()["resources"]}
        flow = {r["name"] for r in http.get("/apis/flow.volcano.sh/v1alpha1").json()["resources"]}
    for group in ("apps", "batch", "events.k8s.io", "networking.k8s.io", "flow.volcano.sh", "bus.volcano.sh"):
        assert groups[group] in ("v1", "v1alpha1"), group
    for plural in ("deployments", "replicasets", "statefulsets", "daemonsets"):
        assert apps[plural]["namespaced"] and f"{plural}/status" in apps
    assert apps["deployments"]["shortNames"] == ["deploy"] and apps["statefulsets"]["shortNames"] == ["sts"]
    assert batch["jobs"]["kind"] == "Job" and "jobs/status" in batch and batch["cronjobs"]["shortNames"] == ["cj"]
    assert {"jobs", "jobs/status", "cronjobs", "cronjobs/status"} <= vc_batch
    assert flow == {"jobflows", "jobflows/status", "jobtemplates", "jobtemplates/status"}


def test_deployment_defaults_status_subresource_and_generation(api_client: client.ApiClient, ns: str) -> None:
    apps = client.AppsV1Api(api_client)
    created = apps.create_namespaced_deployment(ns, {**deployment("d"), "status": {"replicas": 9}})
    assert created.spec.replicas == 1 and created.spec.revision_history_limit == 10
    assert created.spec.strategy.type == "RollingUpdate" and created.spec.strategy.rolling_update.max_surge == "25%"
    assert created.spec.template.spec.restart_policy == "Always"
    assert created.status.replicas is None  # a client's status is dropped on create
    assert created.metadata.generation == 1
    status = apps.patch_namespaced_deployment_status(ns and "d", ns, {"status": {"replicas": 3, "readyReplicas": 3}})
    assert status.status.ready_replicas == 3 and status.metadata.generation == 1
    scaled = apps.patch_namespaced_deployment("d", ns, {"spec": {"replicas": 3}, "status": {"replicas": 0}})
    assert scaled.spec.replicas == 3 and scaled.status.replicas == 3 and scaled.metadata.generation == 2
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment(
            "d",
            ns,
            {
                "spec": {
                    "selector": {"matchLabels": {"app": "other"}},
                    "template": {"metadata": {"labels": {"app": "other"}}},
                }
            },
        )
    assert err.value.status == 422 and causes(err.value) == ["spec.selector"]
    assert "field is immutable" in json.loads(err.value.body)["message"]


def test_deployment_validation_names_the_field(api_client: client.ApiClient, ns: str) -> None:
    apps = client.AppsV1Api(api_client)
    bad = deployment("bad")
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "else"}
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment(ns, bad)
    assert err.value.status == 422 and causes(err.value) == ["spec.template.metadata.labels"]
    bad = deployment("bad2")
    bad["spec"]["template"]["spec"]["containers"] = [{"name": "c"}]
    bad["spec"]["replicas"] = -1
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment(ns, bad)
    assert causes(err.value) == ["spec.replicas", "spec.template.spec.containers[0].image"]


def test_replicasets_statefulsets_daemonsets_list_by_selector_and_watch(api_client: client.ApiClient, ns: str) -> None:
    apps = client.AppsV1Api(api_client)
    start = apps.list_namespaced_replica_set(ns).metadata.resource_version
    for name, tier in (("rs-a", "web"), ("rs-b", "db")):
        rs = deployment(name, {"app": name})
        rs["kind"], rs["metadata"]["labels"] = "ReplicaSet", {"tier": tier}
        del rs["spec"]["template"]["spec"]["schedulerName"]
        apps.create_namespaced_replica_set(ns, rs)
    apps.patch_namespaced_replica_set_status("rs-b", ns, {"status": {"replicas": 2}})
    assert [r.metadata.name for r in apps.list_namespaced_replica_set(ns, label_selector="tier=db").items] == ["rs-b"]
    by_field = apps.list_namespaced_replica_set(ns, field_selector="status.replicas=2").items
    assert [r.metadata.name for r in by_field] == ["rs-b"]
    seen = []
    w = watch.Watch()
    for event in w.stream(apps.list_namespaced_replica_set, ns, resource_version=start, timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 3:
            w.stop()
    assert seen == [("ADDED", "rs-a"), ("ADDED", "rs-b"), ("MODIFIED", "rs-b")]
    sts = deployment("sts", serviceName="sts")
    sts["kind"] = "StatefulSet"
    created = apps.create_namespaced_stateful_set(ns, sts)
    assert created.spec.replicas == 1 and created.spec.pod_management_policy == "OrderedReady"
    ds = deployment("ds")
    ds["kind"] = "DaemonSet"
    assert apps.create_namespaced_daemon_set(ns, ds).spec.update_strategy.rolling_update.max_unavailable == 1
    apps.delete_namespaced_stateful_set("sts", ns)
    assert apps.list_namespaced_stateful_set(ns).items == []


def test_batch_job_gets_a_generated_selector_and_needs_a_restart_policy(api_client: client.ApiClient, ns: str) -> None:
    batch = client.BatchV1Api(api_client)
    job = batch.create_namespaced_job(ns, batch_job("j"))
    uid = job.metadata.uid
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert job.spec.template.metadata.labels["batch.kubernetes.io/job-name"] == "j"
    assert job.spec.template.metadata.labels["x"] == "y"
    assert job.metadata.labels["batch.kubernetes.io/controller-uid"] == uid
    assert (job.spec.completions, job.spec.parallelism, job.spec.backoff_limit) == (1, 1, 6)
    done = batch.patch_namespaced_job_status("j", ns, {"status": {"succeeded": 1}})
    assert done.status.succeeded == 1
    assert [j.metadata.name for j in batch.list_namespaced_job(ns, field_selector="status.successful=1").items] == ["j"]
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job(ns, batch_job("always", restart=None))
    assert err.value.status == 422 and causes(err.value) == ["spec.template.spec.restartPolicy"]


def test_batch_cronjob_defaults_and_validation(api_client: client.ApiClient, ns: str) -> None:
    batch = client.BatchV1Api(api_client)
    body = {
        "metadata": {"name": "cj"},
        "spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": batch_job("x")["spec"]}},
    }
    cj = batch.create_namespaced_cron_job(ns, body)
    assert (cj.spec.concurrency_policy, cj.spec.successful_jobs_history_limit, cj.spec.suspend) == ("Allow", 3, False)
    assert cj.spec.job_template.spec.template.spec.scheduler_name == "default-scheduler"
    patched = batch.patch_namespaced_cron_job_status("cj", ns, {"status": {"lastScheduleTime": "2026-01-01T00:00:00Z"}})
    assert patched.status.last_schedule_time is not None
    bad = {**body, "metadata": {"name": "cj2"}, "spec": {**body["spec"], "concurrencyPolicy": "Sometimes"}}
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_cron_job(ns, bad)
    assert causes(err.value) == ["spec.concurrencyPolicy"]


DEFAULTS = {  # of Volcano's CRDs, for the fields the objects below leave out
    "CronJob": {
        "concurrencyPolicy": "Allow",
        "failedJobsHistoryLimit": 1,
        "successfulJobsHistoryLimit": 3,
        "suspend": False,
    },
    "JobTemplate": {"maxRetry": 3, "queue": "default"},
    "JobFlow": {},
}


def test_volcano_crd_defaults_are_applied(custom: client.CustomObjectsApi, ns: str) -> None:
    body = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob", "metadata": {"name": "d"}}
    created = custom.create_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", ns, "cronjobs", {**body, "spec": {"schedule": "* * * * *", "jobTemplate": {}}}
    )
    assert created["spec"]["concurrencyPolicy"] == "Allow" and created["spec"]["suspend"] is False
    assert created["spec"]["jobTemplate"] == {}  # defaults go only into objects that are there
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": f"q-{ns}"}}
    created = custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {**queue, "spec": {}})
    assert created["spec"] == {"weight": 1, "dequeueStrategy": "traverse"}
    custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", f"q-{ns}")


def test_volcano_cronjob_jobflow_jobtemplate_are_served(custom: client.CustomObjectsApi, ns: str) -> None:
    for group, plural, kind, spec in (
        (
            "batch.volcano.sh",
            "cronjobs",
            "CronJob",
            {"schedule": "* * * * *", "jobTemplate": {"spec": {"queue": "q", "maxRetry": 1}}},
        ),
        ("flow.volcano.sh", "jobtemplates", "JobTemplate", {"minAvailable": 1, "tasks": []}),
        ("flow.volcano.sh", "jobflows", "JobFlow", {"flows": [{"name": "a"}], "jobRetainPolicy": "retain"}),
    ):
        body = {"apiVersion": f"{group}/v1alpha1", "kind": kind, "metadata": {"name": "x"}, "spec": spec}
        created = custom.create_namespaced_custom_object(group, "v1alpha1", ns, plural, {**body, "status": {"a": 1}})
        # The CRD's schema defaults are filled in; the status subresource: dropped on create.
        assert created["spec"] == {**DEFAULTS[kind], **spec} and "status" not in created
        custom.patch_namespaced_custom_object_status(
            group, "v1alpha1", ns, plural, "x", {"status": {"state": {"phase": "Running"}}}
        )
        listed = custom.list_namespaced_custom_object(group, "v1alpha1", ns, plural)["items"]
        assert [(o["kind"], o["status"]["state"]["phase"]) for o in listed] == [(kind, "Running")]


def test_core_and_events_k8s_io_events(sim, api_client: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api_client)
    involved = {"kind": "Job", "apiVersion": "batch.volcano.sh/v1alpha1", "name": "j", "namespace": ns}
    for name, obj_name in (("j.1", "j"), ("k.1", "k")):
        core.create_namespaced_event(
            ns,
            {
                "metadata": {"name": name},
                "involvedObject": {**involved, "name": obj_name},
                "reason": "R",
                "type": "Normal",
            },
        )
    listed = core.list_namespaced_event(ns, field_selector="involvedObject.name=j,reason=R").items
    assert [e.metadata.name for e in listed] == ["j.1"]
    base = f"/apis/events.k8s.io/v1/namespaces/{ns}/events"
    good = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e.1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "lahar.io/controller",
        "reportingInstance": "controller-0",
        "action": "Create",
        "reason": "Created",
        "type": "Normal",
        "regarding": involved,
        "note": "created pod j-a-0",
    }
    with httpx.Client(base_url=sim.url, trust_env=False) as http:
        assert http.post(base, json=good).status_code == 201
        refused = http.post(
            base, json={"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e.2"}, "type": "Odd"}
        )
        selected = http.get(base, params={"fieldSelector": "regarding.name=j,reportingController=lahar.io/controller"})
        unsupported = http.get(base, params={"fieldSelector": "involvedObject.name=j"})
    assert refused.status_code == 422
    fields = [c["field"] for c in refused.json()["details"]["causes"]]
    assert fields == ["eventTime", "reportingController", "reportingInstance", "action", "reason", "type"]
    assert [e["metadata"]["name"] for e in selected.json()["items"]] == ["e.1"]
    assert unsupported.status_code == 400
    events_v1 = client.EventsV1Api(api_client).list_namespaced_event(ns).items
    assert [(e.metadata.name, e.note) for e in events_v1] == [("e.1", "created pod j-a-0")]


def test_services_configmaps_secrets_networkpolicies(sim, api_client: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api_client)
    a = core.create_namespaced_service(ns, {"metadata": {"name": "a"}, "spec": {"ports": [{"port": 80}]}})
    b = core.create_namespaced_service(ns, {"metadata": {"name": "b"}, "spec": {"ports": [{"port": 80}]}})
    headless = core.create_namespaced_service(
        ns,
        {
            "metadata": {"name": "h"},
            "spec": {"clusterIP": "None", "selector": {"job": "j"}, "publishNotReadyAddresses": True},
        },
    )
    assert a.spec.cluster_ip != b.spec.cluster_ip and a.spec.cluster_ip.startswith("10.")
    assert a.spec.ports[0].protocol == "TCP" and a.spec.ports[0].target_port == 80 and a.spec.type == "ClusterIP"
    assert headless.spec.cluster_ip == "None" and headless.spec.publish_not_ready_addresses
    replaced = core.replace_namespaced_service(
        "a",
        ns,
        {"metadata": {"name": "a", "resourceVersion": a.metadata.resource_version}, "spec": {"ports": [{"port": 81}]}},
    )
    assert replaced.spec.cluster_ip == a.spec.cluster_ip  # omitted in an update: kept
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_service("a", ns, {"spec": {"clusterIP": "10.96.9.9", "clusterIPs": ["10.96.9.9"]}})
    assert err.value.status == 422 and causes(err.value) == ["spec.clusterIPs[0]"]
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": "j-a", "labels": {"job": "j"}}, "data": {"hosts": "j-a-0.j"}}
    )
    assert [c.data for c in core.list_namespaced_config_map(ns, label_selector="job=j").items] == [{"hosts": "j-a-0.j"}]
    secret = core.create_namespaced_secret(
        ns, {"metadata": {"name": "ssh"}, "stringData": {"id_rsa": "KEY"}, "data": {"x": "eA=="}}
    )
    assert secret.type == "Opaque" and secret.data == {"x": "eA==", "id_rsa": "S0VZ"} and secret.string_data is None
    with httpx.Client(base_url=sim.url, trust_env=False) as http:
        bad = http.post(f"/api/v1/namespaces/{ns}/secrets", json={"metadata": {"name": "bad"}, "data": {"k": "%%%"}})
    assert bad.status_code == 400 and "illegal base64 data at input byte 0" in bad.json()["message"]
    net = client.NetworkingV1Api(api_client)
    policy = {
        "metadata": {"name": "j"},
        "spec": {
            "podSelector": {"matchLabels": {"job": "j"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"job": "j"}}}]}],
        },
    }
    net.create_namespaced_network_policy(ns, policy)
    assert [p.metadata.name for p in net.list_namespaced_network_policy(ns).items] == ["j"]
    pvc = core.create_namespaced_persistent_volume_claim(
        ns,
        {
            "metadata": {"name": "v"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    assert pvc.status.phase == "Pending"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_finds_the_workload_kinds(sim, api_client: client.ApiClient, ns: str) -> None:
    client.AppsV1Api(api_client).create_namespaced_deployment(ns, deployment("web"))
    client.BatchV1Api(api_client).create_namespaced_job(ns, batch_job("batchjob"))
    run = subprocess.run(
        ["kubectl", "--server", sim.url, "-n", ns, "get", "deploy,jobs,vcjob,netpol,ev", "-o", "name"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOME": "/tmp", "KUBECONFIG": "/dev/null"},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["deployment.apps/web", "job.batch/batchjob"]
