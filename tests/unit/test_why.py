"""Why a job waits: the PodGroup's Unschedulable condition names the plugin, the resource and
the numbers after Volcano's text, and ``lahar explain`` prints the whole chain."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import make_conf, node, pod, podgroup, queue
from lahar.api.objects import KubeObject
from lahar.cli.main import main
from lahar_scheduler.explain import explain
from lahar_scheduler.framework.conf import SchedulerConf
from lahar_scheduler.simulation import simulate


def gang(name: str, n: int, cpu: str, *, q: str = "ml", **pg):  # type: ignore[no-untyped-def]
    return [podgroup(name, queue=q, min_member=n, **pg)] + [
        pod(f"{name}-{i}", group=name, cpu=cpu, memory="1Gi") for i in range(n)
    ]


def running(name: str, n: int, cpu: str, *, q: str = "ml", **pg):  # type: ignore[no-untyped-def]
    return [podgroup(name, queue=q, min_member=n, phase="Running", **pg)] + [
        pod(f"{name}-{i}", group=name, cpu=cpu, memory="1Gi", node_name="n1", phase="Running") for i in range(n)
    ]


def waits(objs: list[KubeObject], conf: SchedulerConf, key: str) -> tuple[str, str]:
    """The PodGroup's condition text and ``lahar explain podgroup``'s output."""
    cond = simulate(objs, conf).conditions[key]
    return cond, "\n".join(explain(objs, conf, "podgroup", key))


def test_enqueue_refused_by_proportion_names_queue_resource_and_numbers() -> None:
    objs = [
        node("n1", cpu="400", memory="1Ti"),
        queue("ml", capability={"cpu": "100"}),
        *running("old", 2, "44", min_resources={"cpu": "88"}),
        *gang("big", 3, "100", phase="Pending", min_resources={"cpu": "300"}),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "proportion"}])
    cond, out = waits(objs, conf, "default/big")
    assert cond.startswith("3/3 tasks in gang unschedulable: queue resource quota insufficient: insufficient cpu; ")
    assert (
        "proportion: queue ml: cpu 300 requested, 12 of capability 100 left; "
        "raise its capability or free 288 cpu in queue ml" in cond
    )
    assert "stopped by: action enqueue, plugin proportion" in out
    assert "why: queue ml: cpu 300 requested, 12 of capability 100 left" in out
    assert "cpu: the queue uses 88 of its capability 100" in out
    assert "to run: raise its capability or free 288 cpu in queue ml" in out


def test_enqueue_refused_by_capacity_names_the_ancestor_that_is_full() -> None:
    objs = [
        node("n1", cpu="400", memory="1Ti"),
        queue("ml", capability={"cpu": "50"}),
        *running("old", 1, "40", min_resources={"cpu": "40"}),
        *gang("big", 2, "10", phase="Pending", min_resources={"cpu": "20"}),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "capacity"}])
    cond, out = waits(objs, conf, "default/big")
    assert "capacity: queue ml: cpu 20 requested, 10 of capability 50 left; " in cond
    assert "stopped by: action enqueue, plugin capacity" in out
    assert "to run: raise its capability or free 10 cpu in queue ml" in out


def test_enqueue_refused_by_overcommit_names_the_cluster_numbers() -> None:
    objs = [
        node("n1", cpu="40", memory="1Ti"),
        queue("ml"),
        *running("old", 1, "30"),
        *gang("big", 2, "10", phase="Pending", min_resources={"cpu": "20"}),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "overcommit"}])
    cond, out = waits(objs, conf, "default/big")
    # 40 × 1.2 = 48 cpu, 30 in use on the node: 18 left for a request of 20.
    assert cond.startswith("2/2 tasks in gang unschedulable: resource in cluster is overused: overused cpu; ")
    assert (
        "overcommit: cluster: cpu 20 requested, 18 of overcommit capacity 48 left; "
        "add nodes, raise overcommit-factor, or wait until running or admitted jobs free 2 cpu" in cond
    )
    assert "stopped by: action enqueue, plugin overcommit" in out
    assert "nodes hold 40 × overcommit-factor 1.2 = 48; 30 in use on nodes" in out
    assert "to run: add nodes, raise overcommit-factor, or wait until running or admitted jobs free" in out


def test_allocate_refused_by_deserved_share_says_it_can_never_fit() -> None:
    """The new user's case: a gang of 3 pods of 100,000 cpu, no minResources."""
    objs = [node("n1", cpu="8", memory="16Gi"), queue("ml"), *gang("big", 3, "100000")]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "proportion"}])
    cond, out = waits(objs, conf, "default/big")
    assert cond.startswith("3/3 tasks in gang unschedulable: 3 Pending, 3 minAvailable, pod group is not ready; ")
    assert (
        "proportion: queue ml: cpu 100000 requested, 8 of deserved 8 left; "
        "it can never fit: the queue may hold at most 8 cpu; add nodes or request less" in cond
    )
    assert "stopped by: action allocate, plugin proportion" in out


def test_allocate_refused_by_deserved_share_that_others_hold() -> None:
    objs = [
        node("n1", cpu="8", memory="64Gi"),
        queue("ml"),
        queue("other"),
        *running("old", 1, "4"),
        *running("theirs", 1, "4", q="other"),
        *gang("next", 1, "2"),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "proportion"}])
    cond, out = waits(objs, conf, "default/next")
    assert "proportion: queue ml: cpu 2 requested, 0 of deserved 4 left; " in cond
    assert "or free 2 cpu in queue ml" in cond
    assert "stopped by: action allocate, plugin proportion" in out


def test_closed_queue_is_named_in_enqueue_and_in_allocate() -> None:
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "proportion"}])
    objs = [
        node("n1"),
        queue("ml", state="Closed"),
        *gang("a", 1, "1", phase="Pending", min_resources={"cpu": "1"}),
        *gang("b", 1, "1"),
    ]
    cond_a, out_a = waits(objs, conf, "default/a")
    assert cond_a.startswith("1/1 tasks in gang unschedulable: queue ml is Closed; ")
    assert "proportion: queue ml is Closed: it admits and allocates nothing; open queue ml" in cond_a
    assert "stopped by: action enqueue, plugin proportion" in out_a
    assert "to run: open queue ml (lahar queue operate ml --action open)" in out_a
    cond_b, out_b = waits(objs, conf, "default/b")
    assert "proportion: queue ml is Closed" in cond_b
    assert "stopped by: action allocate, plugin proportion" in out_b


def test_podgroup_in_a_missing_queue() -> None:
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "proportion"}])
    objs = [node("n1"), queue("ml"), *gang("lost", 1, "1", q="nope")]
    out = "\n".join(explain(objs, conf, "podgroup", "default/lost"))
    assert "why: queue 'nope' does not exist" in out
    assert "to run: create queue nope, or move the PodGroup to an existing queue" in out
    out_pod = "\n".join(explain(objs, conf, "pod", "default/lost-0"))
    assert out_pod.startswith("pod default/lost-0: Pending, in PodGroup default/lost\n")
    assert "why: queue 'nope' does not exist" in out_pod


def test_pod_without_its_podgroup() -> None:
    conf = make_conf("allocate", [{"name": "gang"}])
    objs = [node("n1"), queue("ml"), pod("orphan", group="gone", cpu="1"), pod("bare", cpu="1")]
    out = "\n".join(explain(objs, conf, "pod", "default/orphan"))
    assert "why: PodGroup default/gone does not exist; the pod waits until it is created" in out
    out = "\n".join(explain(objs, conf, "pod", "default/bare"))
    assert "why: no PodGroup: the pod has no scheduling.k8s.io/group-name annotation" in out


def test_job_not_valid_fewer_pods_than_min_member() -> None:
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "proportion"}])
    objs = [node("n1"), queue("ml"), podgroup("g", queue="ml", min_member=4), pod("g-0", group="g", cpu="1")]
    cond, out = waits(objs, conf, "default/g")
    volcano = "4/1 tasks in gang unschedulable: Not enough valid tasks for gang-scheduling, valid: 1, min: 4"
    assert cond.startswith(volcano)
    assert "gang: job not valid: 1 of minMember 4 pods exist (pending or placed); " in cond
    assert "create 3 more pod(s) in the group, or lower minMember to 1" in cond
    assert "stopped by: action allocate, plugin gang" in out


def test_job_not_valid_min_task_member_not_met() -> None:
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "proportion"}])
    objs = [
        node("n1"),
        queue("ml"),
        podgroup("g", queue="ml", min_member=3, min_task_member={"ps": 1, "worker": 2}),
        pod("g-ps-0", group="g", cpu="1", annotations={"volcano.sh/task-spec": "ps"}),
        pod("g-worker-0", group="g", cpu="1", annotations={"volcano.sh/task-spec": "worker"}),
    ]
    cond, out = waits(objs, conf, "default/g")
    assert "gang: job not valid: role worker: 1 of minTaskMember 2 pods exist; " in cond
    assert "create 1 more worker pod(s), or lower minTaskMember" in cond
    assert "stopped by: action allocate, plugin gang" in out


def test_allocate_refused_by_capacity_names_the_queue_and_its_capability() -> None:
    objs = [
        node("n1", cpu="400", memory="1Ti"),
        queue("ml", capability={"cpu": "50"}),
        *running("old", 1, "40"),
        *gang("next", 2, "10"),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "capacity"}])
    cond, out = waits(objs, conf, "default/next")
    # The first task fits (40 + 10 ≤ 50); the second finds nothing left.
    assert cond.startswith("1/2 tasks in gang unschedulable: 2 Pending, 2 minAvailable, pod group is not ready; ")
    assert "capacity: queue ml: cpu 10 requested, 0 of capability 50 left; raise its capability or free 10 cpu" in cond
    assert "stopped by: action allocate, plugin capacity" in out


def test_lahar_explain_command_reads_a_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "dump.yaml"
    pods = "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata: {{name: big-{i}, namespace: default, annotations: {{scheduling.k8s.io/group-name: big}}}}
spec: {{schedulerName: volcano, containers: [{{name: c, resources: {{requests: {{cpu: "100000"}}}}}}]}}
"""
        for i in range(3)
    )
    dump.write_text(
        """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {weight: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: big, namespace: default}
spec: {minMember: 3, queue: default}
"""
        + pods
    )
    with pytest.raises(SystemExit) as done:
        main(["explain", "pod", "big-1", "-f", str(dump)])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("pod default/big-1: Pending, in PodGroup default/big\n")
    assert "stopped by: action allocate, plugin proportion" in out
    assert "why: queue default: cpu 100000 requested, 8 of deserved 8 left" in out
    with pytest.raises(SystemExit) as done:
        main(["explain", "podgroup", "nope", "-f", str(dump)])
    assert done.value.code == 1
    assert "PodGroup default/nope not found" in capsys.readouterr().err
