"""Job -> PodGroup, Job -> pod rendering and the job plugins: behaviour the Volcano corpus does
not exercise (tests/conformance/controller/SKIPPED.md §2.12 and the rules of §2.2, §2.5, §2.6)."""

from __future__ import annotations

import base64
import subprocess
import sys
from fractions import Fraction
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from lahar_controller.job import names, plugins, render
from lahar_controller.job.plugins import PluginError
from lahar_controller.job.plugins.flags import parse_flags
from lahar_controller.job.resources import parse_resource_list, pod_quota_usage

UID = "0f0e0d0c-0000-4000-8000-00000000000a"


def _task(name: str, replicas: int, cpu: str = "100m", **extra: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    return {"name": name, "replicas": replicas, "template": {"spec": {"containers": [container]}}, **extra}


def _job(*tasks: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": UID},
        "spec": {"queue": "q1", "schedulerName": "volcano", "tasks": list(tasks), **spec},
    }


def _cpu(pg: dict[str, Any]) -> Fraction:
    return parse_resource_list(pg["spec"]["minResources"])["cpu"]


# --- PodGroup -----------------------------------------------------------------------------------


def test_new_podgroup_carries_gang_queue_owner_and_job_metadata() -> None:
    job = _job(_task("master", 1, minAvailable=1), _task("worker", 3, minAvailable=2), minAvailable=3)
    job["metadata"]["labels"] = {"team": "a"}
    job["metadata"]["annotations"] = {"volcano.sh/preemptable": "true"}
    job["spec"]["priorityClassName"] = "high"
    pg = render.podgroup_for(job, None, {})
    assert pg is not None
    assert pg["metadata"]["name"] == f"train-{UID}"
    assert pg["metadata"]["labels"] == {"team": "a"}
    assert pg["metadata"]["annotations"] == {"volcano.sh/preemptable": "true"}
    (owner,) = pg["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Job", UID, True)
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minTaskMember"] == {"master": 1, "worker": 2}
    assert (pg["spec"]["queue"], pg["spec"]["priorityClassName"]) == ("q1", "high")
    assert _cpu(pg) == Fraction(3, 10)
    assert "subGroupPolicy" not in pg["spec"] and "networkTopology" not in pg["spec"]


@pytest.mark.parametrize(
    ("topology", "expected"),
    [
        (
            {"mode": "hard", "highestTierAllowed": 2, "highestTierName": "rack"},
            {"mode": "hard", "highestTierAllowed": 2},
        ),
        ({"mode": "soft", "highestTierName": "rack"}, {"mode": "soft", "highestTierName": "rack"}),
        ({"mode": "hard"}, {"mode": "hard"}),
    ],
)
def test_job_network_topology_on_the_podgroup(topology: dict[str, Any], expected: dict[str, Any]) -> None:
    """The job's tier limit wins over a tier name (SKIPPED.md: only partition-level is tested)."""
    pg = render.podgroup_for(_job(_task("t", 2), minAvailable=2, networkTopology=topology), None, {})
    assert pg is not None and pg["spec"]["networkTopology"] == expected


def test_min_resources_below_task_minimums_takes_the_first_replicas_by_priority() -> None:
    """minAvailable 2 < 1 + 3: the first two replicas in priority order, whole tasks first."""
    low = _task("low", 3, cpu="1", minAvailable=3)
    high = _task("high", 1, cpu="100m", minAvailable=1)
    high["template"]["spec"]["priorityClassName"] = "urgent"
    pg = render.podgroup_for(_job(low, high, minAvailable=2), None, {"urgent": 10})
    assert pg is not None
    assert _cpu(pg) == Fraction(11, 10)  # high (0.1) then one replica of low (1)
    assert parse_resource_list(pg["spec"]["minResources"])["pods"] == 2


def test_min_resources_unknown_priority_class_counts_as_zero() -> None:
    first = _task("a", 1, cpu="1", minAvailable=1)
    second = _task("b", 1, cpu="2", minAvailable=1)
    second["template"]["spec"]["priorityClassName"] = "missing"
    pg = render.podgroup_for(_job(first, second, minAvailable=1), None, {})
    assert pg is not None and _cpu(pg) == 1  # spec order kept: a first


def test_quota_usage_counts_init_containers_sidecars_overhead_and_extended_resources() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}, "limits": {"cpu": "2"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "hugepages-2Mi": "4Mi"}}},
        ],
        "initContainers": [
            {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
            {"name": "setup", "resources": {"requests": {"cpu": "3", "memory": "512Mi"}}},
        ],
        "overhead": {"cpu": "10m"},
    }
    usage = pod_quota_usage(spec)
    # regular 1.5 + sidecar 0.25 = 1.75 < setup 3 + sidecar 0.25 = 3.25; plus 10m overhead
    assert usage["cpu"] == usage["requests.cpu"] == Fraction(326, 100)
    assert usage["memory"] == 2**30
    assert usage["limits.cpu"] == Fraction(201, 100)  # overhead joins the limits that are set
    assert usage["nvidia.com/gpu"] == usage["requests.nvidia.com/gpu"] == 2
    assert usage["hugepages-2Mi"] == usage["requests.hugepages-2Mi"] == 4 * 2**20
    assert usage["pods"] == usage["count/pods"] == 1


def test_podgroup_update_is_none_when_nothing_changed_and_follows_a_scale_up() -> None:
    job = _job(_task("t", 2, minAvailable=2), minAvailable=2)
    pg = render.podgroup_for(job, None, {})
    assert pg is not None
    stored = render.copy_json(pg)
    stored["spec"]["minResources"] = {"cpu": "0.2", "requests.cpu": "200m", "pods": "2", "count/pods": "2"}
    assert render.podgroup_for(job, stored, {}) is None  # same quantities, other spelling
    job["spec"]["tasks"][0].update(replicas=4, minAvailable=4)
    job["spec"]["minAvailable"] = 4
    updated = render.podgroup_for(job, stored, {})
    assert updated is not None
    assert (updated["spec"]["minMember"], updated["spec"]["minTaskMember"]) == (4, {"t": 4})
    assert _cpu(updated) == Fraction(4, 10)
    assert stored["spec"]["minMember"] == 2  # the input is not edited


def test_podgroup_update_drops_the_subgroup_of_a_task_that_lost_its_partition_policy() -> None:
    job = _job(
        _task("t", 4, minAvailable=4, partitionPolicy={"totalPartitions": 2, "partitionSize": 2}), minAvailable=4
    )
    pg = render.podgroup_for(job, None, {})
    assert pg is not None and [p["name"] for p in pg["spec"]["subGroupPolicy"]] == ["t"]
    del job["spec"]["tasks"][0]["partitionPolicy"]
    updated = render.podgroup_for(job, pg, {})
    assert updated is not None and updated["spec"]["subGroupPolicy"] == []


def test_find_podgroup_prefers_the_uid_name_over_the_legacy_one() -> None:
    job = _job(_task("t", 1))
    new, legacy = {"metadata": {"name": f"train-{UID}"}}, {"metadata": {"name": "train"}}
    assert render.find_podgroup(job, {"train": legacy, f"train-{UID}": new}) is new
    assert render.find_podgroup(job, {"train": legacy}) is legacy
    assert render.find_podgroup(job, {}) is None


def test_podgroup_event_needs_a_true_condition_that_is_not_scheduled() -> None:
    job = _job(_task("t", 1))
    cond = {"type": "Unschedulable", "status": "False", "message": "m", "lastTransitionTime": "2024-01-01T00:00:00Z"}
    assert render.podgroup_event(job, {"status": {"conditions": [cond]}}) is None
    cond["status"] = "True"
    assert render.podgroup_event(job, {"status": {"conditions": [cond]}}) == (
        "Warning",
        "PodGroupPending",
        "PodGroup ml:train unschedulable, reason: m",
    )


# --- pods ---------------------------------------------------------------------------------------


def test_pod_copies_the_jobs_scheduling_marks() -> None:
    job = _job(_task("t", 2, topologyPolicy="single-numa-node"))
    job["metadata"]["annotations"] = {
        names.PREEMPTABLE: "true",
        names.COOLDOWN_TIME: "60s",
        names.REVOCABLE_ZONE: "*",
        names.JDB_MIN_AVAILABLE: "1",
        names.JDB_MAX_UNAVAILABLE: "2",
        "other": "no",
    }
    job["metadata"]["labels"] = {names.PREEMPTABLE: "false", names.COOLDOWN_TIME: "30s", "team": "a"}
    job["status"] = {"version": 3, "retryCount": 2}
    pod = render.render_pod(job, job["spec"]["tasks"][0], 1)
    ann, labels = pod["metadata"]["annotations"], pod["metadata"]["labels"]
    assert ann[names.PREEMPTABLE] == "true" and ann[names.COOLDOWN_TIME] == "60s" and ann[names.REVOCABLE_ZONE] == "*"
    assert ann[names.JDB_MIN_AVAILABLE] == "1" and names.JDB_MAX_UNAVAILABLE not in ann  # min wins
    assert "other" not in ann and "team" not in labels
    assert labels[names.PREEMPTABLE] == "false" and labels[names.COOLDOWN_TIME] == "30s"
    assert ann[names.NUMA_POLICY] == "single-numa-node"
    assert (ann[names.JOB_VERSION], ann[names.JOB_RETRY_COUNT]) == ("3", "2")
    assert names.PARTITION_ID not in labels


def test_pod_keeps_template_metadata_and_scheduler_name() -> None:
    task = _task("t", 1)
    task["template"]["metadata"] = {"labels": {"app": "x"}, "annotations": {"note": "y"}}
    task["template"]["spec"]["schedulerName"] = "other"
    pod = render.render_pod(_job(task), task, 0)
    assert pod["metadata"]["labels"]["app"] == "x" and pod["metadata"]["annotations"]["note"] == "y"
    assert pod["spec"]["schedulerName"] == "other"
    assert task["template"]["metadata"]["labels"] == {"app": "x"}  # the job is not edited


def test_unnamed_task_pods_carry_the_default_task_key() -> None:
    task = _task("", 1)
    pod = render.render_pod(_job(task), task, 0)
    assert pod["metadata"]["labels"][names.TASK_SPEC] == "default"
    assert pod["metadata"]["annotations"][names.TASK_SPEC] == "default"


def test_duplicate_job_volumes_are_mounted_once_with_a_stable_name() -> None:
    vols = [{"volumeClaimName": "data", "mountPath": "/a"}, {"volumeClaimName": "data", "mountPath": "/b"}]
    job = _job(_task("t", 2), volumes=vols)
    first = render.render_pod(job, job["spec"]["tasks"][0], 0)
    second = render.render_pod(job, job["spec"]["tasks"][0], 1)
    assert len(first["spec"]["volumes"]) == 1
    assert first["spec"]["containers"][0]["volumeMounts"] == [
        {"mountPath": "/a", "name": first["spec"]["volumes"][0]["name"]}
    ]
    assert first["spec"]["volumes"] == second["spec"]["volumes"]
    name = first["spec"]["volumes"][0]["name"]
    assert name.startswith("train-") and len(name) == len("train-") + 12


def test_build_pod_runs_the_plugins_and_an_unknown_one_fails() -> None:
    job = _job(_task("t", 2), plugins={"env": []})
    pod = render.build_pod(job, job["spec"]["tasks"][0], 1)
    assert pod["spec"]["containers"][0]["env"] == [
        {"name": "VK_TASK_INDEX", "value": "1"},
        {"name": "VC_TASK_INDEX", "value": "1"},
    ]
    job["spec"]["plugins"]["nope"] = []
    with pytest.raises(PluginError, match="failed to get plugin nope"):
        render.build_pod(job, job["spec"]["tasks"][0], 0)


def test_desired_pod_names() -> None:
    assert render.desired_pod_names(_job(_task("a", 2), _task("b", 0))) == {"a": ["train-a-0", "train-a-1"], "b": []}


# --- plugins ------------------------------------------------------------------------------------


def _kinds(effects: plugins.Effects) -> list[str]:
    return [w.object["kind"] for w in effects.writes]


def test_svc_hosts_use_template_hostname_and_subdomain_and_dashes_become_underscores() -> None:
    fixed = _task("ps-main", 3)
    fixed["template"]["spec"].update(hostname="ps", subdomain="grid")
    job = _job(fixed, _task("worker", 2), plugins={"svc": []})
    effects = plugins.on_job_add(job)
    cm = next(w for w in effects.writes if w.object["kind"] == "ConfigMap")
    assert cm.replace and cm.object["metadata"]["name"] == "train-svc"
    assert cm.object["data"] == {
        "ps_main.host": "ps.grid",
        "VC_PS_MAIN_HOSTS": "ps.grid",
        "VC_PS_MAIN_NUM": "1",
        "worker.host": "train-worker-0.train\ntrain-worker-1.train",
        "VC_WORKER_HOSTS": "train-worker-0.train,train-worker-1.train",
        "VC_WORKER_NUM": "2",
    }


def test_svc_arguments_publish_not_ready_disable_network_policy_and_no_hosts_env() -> None:
    args = ["--publish-not-ready-addresses", "--disable-network-policy=true", "--inject-hosts-env=false"]
    job = _job(_task("t", 1), plugins={"svc": args})
    effects = plugins.on_job_add(job)
    assert _kinds(effects) == ["ConfigMap", "Service"]
    service = effects.writes[1].object
    assert service["spec"]["publishNotReadyAddresses"] is True and service["spec"]["clusterIP"] == "None"
    pod = render.build_pod(job, job["spec"]["tasks"][0], 0)
    assert "env" not in pod["spec"]["containers"][0]
    assert pod["spec"]["containers"][0]["volumeMounts"] == [{"mountPath": "/etc/volcano", "name": "train-svc"}]
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("train-t-0", "train")
    job["status"] = {"controlledResources": effects.controlled}
    cleanup = plugins.on_job_delete(job)
    assert {(r.kind, r.name) for r in cleanup.deletes} == {("ConfigMap", "train-svc"), ("Service", "train")}
    assert cleanup.controlled == {}


def test_job_add_is_idempotent_once_marked_and_update_rewrites_hosts() -> None:
    job = _job(_task("t", 1), plugins={"svc": [], "ssh": [], "env": []})
    first = plugins.on_job_add(job, keygen=lambda: (b"k", b"p"))
    assert _kinds(first) == ["ConfigMap", "Service", "NetworkPolicy", "Secret"]
    job["status"] = {"controlledResources": first.controlled}
    assert plugins.on_job_add(job).writes == []
    job["spec"]["tasks"][0]["replicas"] = 2
    (write,) = plugins.on_job_update(job).writes
    assert write.replace and write.object["data"]["VC_T_NUM"] == "2"


def test_ssh_generates_a_real_key_pair_and_lists_every_pod() -> None:
    job = _job(_task("a", 2), plugins={"ssh": ["--ssh-port=70000"]})
    (write,) = plugins.on_job_add(job).writes
    data = {k: base64.b64decode(v) for k, v in write.object["data"].items()}
    private = serialization.load_pem_private_key(data["id_rsa"], password=None)
    public = serialization.load_ssh_public_key(data["id_rsa.pub"])
    assert private.public_key().public_numbers() == public.public_numbers()  # type: ignore[union-attr]
    assert data["authorized_keys"] == data["id_rsa.pub"]
    assert data["id_rsa"].startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    config = data["config"].decode()
    assert "Host train-a-1\n  HostName train-a-1.train\n  Port 22\n" in config  # 70000 is no port: 22


def test_ssh_mount_mode_depends_on_the_key_path() -> None:
    job = _job(_task("a", 1), plugins={"ssh": ["--ssh-key-file-path", "/home/u/.ssh"]})
    job["spec"]["tasks"][0]["template"]["spec"]["initContainers"] = [{"name": "init"}]
    pod = render.build_pod(job, job["spec"]["tasks"][0], 0)
    (volume,) = pod["spec"]["volumes"]
    assert volume["secret"]["defaultMode"] == 0o644
    assert [i["path"] for i in volume["secret"]["items"]] == [
        ".ssh/id_rsa",
        ".ssh/id_rsa.pub",
        ".ssh/authorized_keys",
        ".ssh/config",
    ]
    for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        assert c["volumeMounts"] == [{"mountPath": "/home/u/.ssh", "subPath": ".ssh", "name": "train-ssh"}]


def test_env_reaches_init_containers() -> None:
    job = _job(_task("t", 3), plugins={"env": []})
    job["spec"]["tasks"][0]["template"]["spec"]["initContainers"] = [{"name": "init"}]
    pod = render.build_pod(job, job["spec"]["tasks"][0], 2)
    assert pod["spec"]["initContainers"][0]["env"][1] == {"name": "VC_TASK_INDEX", "value": "2"}


def test_mpi_with_renamed_roles_and_a_fixed_worker_hostname() -> None:
    worker = _task("mpiworker", 3)
    worker["template"]["spec"]["hostname"] = "w"
    job = _job(
        _task("mpimaster", 1), worker, plugins={"mpi": ["--master=mpimaster", "--worker=mpiworker", "--port=2222"]}
    )
    master = render.build_pod(job, job["spec"]["tasks"][0], 0)
    (c,) = master["spec"]["containers"]
    assert c["env"] == [{"name": "MPI_HOST", "value": "w.train"}]
    assert c["ports"] == [{"name": "mpijob-port", "containerPort": 2222}]
    pod = render.build_pod(job, worker, 1)
    assert "env" not in pod["spec"]["containers"][0]
    assert pod["spec"]["containers"][0]["ports"] == [{"name": "mpijob-port", "containerPort": 2222}]


def test_pytorch_roles_rank_and_no_duplicate_wait_container() -> None:
    worker = _task("worker", 2)
    worker["template"]["spec"]["initContainers"] = [{"name": "wait-for-master", "image": "mine"}]
    job = _job(_task("master", 1), worker, plugins={"pytorch": ["--wait-master-enabled", "--port=29500"]})
    pod = render.build_pod(job, worker, 1)
    assert pod["spec"]["initContainers"] == [{"name": "wait-for-master", "image": "mine"}]
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env == {"MASTER_ADDR": "train-master-0.train", "MASTER_PORT": "29500", "WORLD_SIZE": "3", "RANK": "2"}


def test_tensorflow_single_trainer_gets_nothing_and_evaluator_is_listed() -> None:
    solo = _job(_task("worker", 1), plugins={"tensorflow": []})
    assert "env" not in render.build_pod(solo, solo["spec"]["tasks"][0], 0)["spec"]["containers"][0]
    job = _job(_task("worker", 1), _task("evaluator", 1), _task("other", 1), plugins={"tensorflow": []})
    pod = render.build_pod(job, job["spec"]["tasks"][1], 0)
    assert pod["spec"]["containers"][0]["env"][0]["value"] == (
        '{"cluster":{"worker":["train-worker-0.train:2222"],"evaluator":["train-evaluator-0.train:2222"]},'
        '"task":{"type":"evaluator","index":0}}'
    )


def test_ray_head_worker_commands_and_head_service() -> None:
    head, worker = _task("head", 1), _task("worker", 2)
    head["template"]["spec"]["containers"][0]["name"] = "head"
    worker["template"]["spec"]["containers"][0]["name"] = "worker"
    job = _job(head, worker, plugins={"ray": []})
    head_pod = render.build_pod(job, head, 0)
    (c,) = head_pod["spec"]["containers"]
    assert [p["containerPort"] for p in c["ports"]] == [6379, 8265, 10001]
    assert c["command"][2].startswith("ray start --head --block")
    worker_pod = render.build_pod(job, worker, 1)
    assert worker_pod["spec"]["containers"][0]["command"] == [
        "sh",
        "-c",
        "ray start --block --address=train-head-0.train:6379",
    ]
    (write,) = plugins.on_job_add(job).writes
    assert write.object["metadata"]["name"] == "train-head-svc"
    assert write.object["spec"]["selector"][names.TASK_SPEC] == "head"
    headless = _job(_task("worker", 1), plugins={"ray": []})
    with pytest.raises(PluginError, match="doesn't have head task head"):
        render.build_pod(headless, headless["spec"]["tasks"][0], 0)


def test_hcclrank_numbers_workers_after_masters() -> None:
    job = _job(_task("master", 2), _task("worker", 3), plugins={"hcclrank": []})
    pod = render.build_pod(job, job["spec"]["tasks"][1], 1)
    assert pod["metadata"]["annotations"]["hccl/rankIndex"] == "3"
    master = render.build_pod(job, job["spec"]["tasks"][0], 1)
    assert master["metadata"]["annotations"]["hccl/rankIndex"] == "1"


@pytest.mark.parametrize(
    ("args", "values", "error"),
    [
        (["--flag", "-n", "7", "--s=a=b"], {"flag": True, "n": 7, "s": "a=b"}, ""),
        (["-n=0x10", "stop", "--flag"], {"flag": False, "n": 16, "s": ""}, ""),
        (["-n=010"], {"flag": False, "n": 8, "s": ""}, ""),
        (["--", "--flag"], {"flag": False, "n": 1, "s": ""}, ""),
        (["--n=5", "--unknown", "--flag"], {"flag": False, "n": 5, "s": ""}, "flag provided but not defined: -unknown"),
        (["--n=five", "--flag"], {"flag": False, "n": 1, "s": ""}, "invalid value"),
        (["--flag=maybe"], {"flag": False, "n": 1, "s": ""}, "invalid boolean value"),
        (["--s"], {"flag": False, "n": 1, "s": ""}, "flag needs an argument: -s"),
    ],
)
def test_plugin_arguments_parse_like_go_flags(args: list[str], values: dict[str, Any], error: str) -> None:
    got, err = parse_flags(args, {"flag": False, "n": 1, "s": ""})
    assert got == values
    assert (error in err) if error else err == ""


def test_podgroup_event_orders_conditions_by_time_not_text() -> None:
    """ "…:05.5Z" is later than "…:05Z" although it sorts first as text."""
    scheduled = {"type": "Scheduled", "status": "True", "message": "ok", "lastTransitionTime": "2024-01-01T00:00:05.5Z"}
    stuck = {"type": "Unschedulable", "status": "True", "message": "m", "lastTransitionTime": "2024-01-01T00:00:05Z"}
    assert render.podgroup_event(_job(_task("t", 1)), {"status": {"conditions": [stuck, scheduled]}}) is None


def test_rendering_and_plugins_load_no_io_library() -> None:
    """The job package is pure: importing it (every plugin included) pulls in no network, bus,
    cluster-client or event-loop module."""
    code = (
        "import sys, lahar_controller.job.render, lahar_controller.job.plugins\n"
        "bad = {'nats', 'redis', 'kubernetes', 'asyncio', 'socket', 'httpx', 'opentelemetry'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
