"""Why a job waits, the reasons test_why.py does not cover: queue guarantees, namespace
ResourceQuotas, sla waiting time and reservation, starving jobs preempt cannot help, pre-filter
refusals and pods without their PodGroup — each through the PodGroup's Unschedulable condition
and ``lahar explain``."""

from __future__ import annotations

from builders import make_conf, node, pod, podgroup, queue
from lahar.api.codec import decode_object
from lahar.api.objects import KubeObject
from lahar_scheduler.explain import explain
from lahar_scheduler.framework.conf import SchedulerConf
from lahar_scheduler.simulation import simulate


def gang(name: str, n: int, cpu: str, *, q: str = "ml", ns: str = "default", **pg):  # type: ignore[no-untyped-def]
    return [podgroup(name, ns, queue=q, min_member=n, **pg)] + [
        pod(f"{name}-{i}", ns, group=name, cpu=cpu, memory="1Gi") for i in range(n)
    ]


def running(name: str, n: int, cpu: str, *, q: str = "ml", on: str = "n1", **pg):  # type: ignore[no-untyped-def]
    return [podgroup(name, queue=q, min_member=n, phase="Running", **pg)] + [
        pod(f"{name}-{i}", group=name, cpu=cpu, memory="1Gi", node_name=on, phase="Running", **_prio(pg))
        for i in range(n)
    ]


def _prio(pg: dict) -> dict:  # type: ignore[type-arg]
    return {}


def waits(objs: list[KubeObject], conf: SchedulerConf, key: str, **kw) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """The PodGroup's condition text and ``lahar explain podgroup``'s output."""
    cond = simulate(objs, conf, **kw).conditions[key]
    return cond, "\n".join(explain(objs, conf, "podgroup", key))


# -- guarantees -------------------------------------------------------------------------------
def test_proportion_real_capability_names_the_other_queues_guarantees() -> None:
    objs = [
        node("n1", cpu="100", memory="1Ti"),
        queue("ml", guarantee={"cpu": "10"}),
        queue("infra", guarantee={"cpu": "60"}),
        *running("old", 1, "30", min_resources={"cpu": "30"}),
        *gang("big", 2, "15", phase="Pending", min_resources={"cpu": "30"}),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "proportion"}])
    cond, out = waits(objs, conf, "default/big")
    # real capability = 100 − (10 + 60) + 10 = 40; 30 used, 10 left for a request of 30.
    assert (
        "proportion: queue ml: cpu 30 requested, 10 of real capability 40 left "
        "(other queues' guarantees hold 60 cpu); "
        "lower other queues' guarantees (60 cpu), add nodes or free 20 cpu in queue ml" in cond
    )
    assert "stopped by: action enqueue, plugin proportion" in out
    assert (
        "cpu: real capability 40 = the cluster 100 − 70 guaranteed to its queues + its own guarantee 10; "
        "the queue uses 30" in out
    )


def test_capacity_hierarchy_child_limited_by_its_siblings_guarantee() -> None:
    objs = [
        node("n1", cpu="100", memory="1Ti"),
        queue("root"),
        _child("eng", "root", capability={"cpu": "50"}),
        _child("ml", "eng"),
        _child("web", "eng", guarantee={"cpu": "35"}),
        *running("old", 1, "10", min_resources={"cpu": "10"}),
        *gang("big", 1, "10", phase="Pending", min_resources={"cpu": "10"}),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "capacity", "enableHierarchy": True}])
    cond, out = waits(objs, conf, "default/big")
    # eng: real capability 50; ml = 50 − 35 + 0 = 15; 10 used, 5 left for 10.
    assert (
        "capacity: queue ml: cpu 10 requested, 5 of real capability 15 left (other queues' guarantees hold 35 cpu)"
        in cond
    )
    assert "cpu: real capability 15 = parent queue eng's real capability 50 − 35 guaranteed to its queues" in out


def _child(name: str, parent: str, **kw):  # type: ignore[no-untyped-def]
    q = queue(name, **kw)
    q.spec.parent = parent
    return q


# -- namespace ResourceQuotas ----------------------------------------------------------------
def quota(name: str, ns: str, hard: dict[str, str], used: dict[str, str]) -> KubeObject:
    raw = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"hard": hard},
        "status": {"hard": hard, "used": used},
    }
    obj = decode_object(raw)
    assert obj is not None
    return obj


QUOTA_CONF = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "resourcequota"}, {"name": "proportion"}])


def test_resourcequota_refuses_at_enqueue_with_used_and_hard() -> None:
    objs = [
        node("n1", cpu="100", memory="1Ti"),
        queue("ml"),
        quota("rq", "team", {"requests.cpu": "30", "pods": "10"}, {"requests.cpu": "18", "pods": "3"}),
        *gang("big", 2, "8", ns="team", phase="Pending", min_resources={"requests.cpu": "16", "pods": "2"}),
    ]
    cond, out = waits(objs, QUOTA_CONF, "team/big")
    # Volcano's condition text first (it only records an event), then ours.
    assert cond.startswith("2/2 tasks in gang unschedulable: 2 Pending, 2 minAvailable, pod group is not ready; ")
    assert (
        "resourcequota: namespace team: resource quota rq insufficient: "
        "requests.cpu 16 requested, 12 of hard 30 left; "
        "raise quota rq's hard requests.cpu to 34, or free 4 requests.cpu in namespace team" in cond
    )
    assert "stopped by: action enqueue, plugin resourcequota" in out
    assert "requests.cpu: quota rq has used 18 (status.used)" in out
    assert "pods" not in out.split("condition")[0].split("why:")[1]  # 3 + 2 ≤ 10: not short


def test_resourcequota_counts_jobs_admitted_earlier_in_the_session() -> None:
    objs = [
        node("n1", cpu="100", memory="1Ti"),
        queue("ml"),
        quota("rq", "team", {"cpu": "10"}, {"cpu": "2"}),
        *gang("first", 1, "6", ns="team", phase="Pending", min_resources={"cpu": "6"}, creation="2026-01-01T00:00:00Z"),
        *gang(
            "second", 1, "4", ns="team", phase="Pending", min_resources={"cpu": "4"}, creation="2026-01-01T00:01:00Z"
        ),
    ]
    outcome = simulate(objs, QUOTA_CONF)
    assert outcome.phases["team/first"] in ("Inqueue", "Running")
    cond, out = waits(objs, QUOTA_CONF, "team/second")
    # 2 used + 6 admitted this session + 4 > 10.
    assert "resource quota rq insufficient: cpu 4 requested, 2 of hard 10 left" in cond
    assert "cpu: quota rq has used 2 (status.used); 6 more by jobs admitted this session" in out


def test_resourcequota_without_quotas_in_the_namespace_admits() -> None:
    objs = [
        node("n1", cpu="100", memory="1Ti"),
        queue("ml"),
        quota("rq", "other", {"cpu": "1"}, {"cpu": "1"}),
        *gang("big", 1, "8", ns="team", phase="Pending", min_resources={"cpu": "8"}),
    ]
    assert simulate(objs, QUOTA_CONF).binds == {"team/big-0": "n1"}
