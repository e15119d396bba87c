"""Why a job waits, the reasons test_why.py does not cover: queue guarantees, namespace
ResourceQuotas, sla waiting time and reservation, starving jobs preempt cannot help, pre-filter
refusals and pods without their PodGroup — each through the PodGroup's Unschedulable condition
and ``lahar explain``."""

from __future__ import annotations

import json

import msgspec

from builders import make_conf, node, pod, podgroup, queue
from lahar.api.codec import decode_object
from lahar.api.objects import KubeObject, OwnerReference
from lahar.cli._dump import prepare
from lahar.wire.messages import Delta
from lahar_scheduler.decisions import Sent, missing_queues, pod_conditions
from lahar_scheduler.deltas import apply_delta, decode
from lahar_scheduler.explain import explain
from lahar_scheduler.framework.conf import SchedulerConf
from lahar_scheduler.simulation import Cluster, simulate


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


# -- sla: waiting time and reservation --------------------------------------------------------
CREATED = "2026-01-01T00:00:00Z"
T0 = 1767225600.0  # CREATED in epoch seconds


def sla_conf(*plugins: str) -> SchedulerConf:
    # sla in a tier before gang's: its permit decides before gang's refusal is read (Volcano's
    # tier rule), as Volcano's sla documentation configures it.
    return make_conf("enqueue, allocate", [{"name": "sla"}], [{"name": "gang"}, *({"name": p} for p in plugins)])


def test_sla_before_its_waiting_time_says_when_it_will_be_admitted() -> None:
    objs = [
        node("n1", cpu="100", memory="1Ti"),
        queue("ml", capability={"cpu": "10"}),
        *gang(
            "big",
            2,
            "10",
            phase="Pending",
            min_resources={"cpu": "20"},
            creation=CREATED,
            annotations={"volcano.sh/sla-waiting-time": "1h"},
        ),
    ]
    conf = sla_conf("proportion")
    now = T0 + 600
    cond = simulate(objs, conf, now=now).conditions["default/big"]
    out = "\n".join(explain(objs, conf, "podgroup", "default/big", now=now))
    assert "proportion: queue ml: cpu 20 requested, 10 of capability 10 left; " in cond
    note = "sla: waited 10m of its sla-waiting-time 1h: in 50m sla votes to admit it whatever its queue's quota"
    assert note in cond
    assert "stopped by: action enqueue, plugin proportion" in out
    assert f"  note: {note}" in out


def test_sla_past_its_waiting_time_admits_and_reserves_the_places_of_a_partial_gang() -> None:
    objs = [
        node("n1", cpu="16", memory="1Ti"),
        queue("ml"),
        *gang(
            "big",
            3,
            "8",
            phase="Pending",
            min_resources={"cpu": "24"},
            creation=CREATED,
            annotations={"volcano.sh/sla-waiting-time": "1h"},
        ),
    ]
    conf = sla_conf("proportion")
    now = T0 + 7200
    outcome = simulate(objs, conf, now=now)
    assert outcome.binds == {}  # a reservation binds nothing
    assert outcome.phases["default/big"] == "Inqueue"  # admitted although proportion would refuse 24 > 16
    cond = outcome.conditions["default/big"]
    out = "\n".join(explain(objs, conf, "podgroup", "default/big", now=now))
    reserve = (
        "sla: waited 2h, past its sla-waiting-time 1h: its 2 placed task(s) keep their nodes this session "
        "(reserved, not bound) while it waits for 1 more of minMember 3"
    )
    assert reserve in cond
    assert (
        "sla: waited 2h of its sla-waiting-time 1h: past it, so sla votes to admit it whatever its queue's quota" in out
    )
    assert f"  note: {reserve}" in out


# -- starving: preempt finds nothing to evict --------------------------------------------------
def test_starving_job_says_what_preempt_tried() -> None:
    objs = [
        node("n1", cpu="8", memory="64Gi"),
        queue("ml"),
        podgroup("low", queue="ml", min_member=1, phase="Running"),
        pod("low-0", group="low", cpu="8", memory="1Gi", node_name="n1", phase="Running", priority=10),
        podgroup("hi", queue="ml", min_member=1),
        pod("hi-0", group="hi", cpu="4", memory="1Gi", priority=10),
    ]
    conf = make_conf(
        "enqueue, allocate, preempt",
        [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}],
        [{"name": "predicates"}],
    )
    cond, out = waits(objs, conf, "default/hi")
    assert cond.startswith("1/1 tasks in gang unschedulable: 1/1 nodes are unavailable: 1 Insufficient cpu; ")
    note = (
        "preempt: starving (0 of minMember 1 placed), task hi-0 (asks cpu 4, memory 1Gi, pods 1): "
        "no node where evicting lower-priority pods the plugins let it take makes room"
    )
    assert note in cond
    assert "stopped by: action allocate, plugin predicates" in out
    assert "why: task hi-0 fits none of 1 node(s): 1 Insufficient cpu" in out
    assert "to run: free cpu on a node or add nodes (the task asks cpu 4, memory 1Gi, pods 1)" in out
    assert f"  note: {note}" in out


def test_starving_job_with_preemption_policy_never() -> None:
    objs = [
        node("n1", cpu="8", memory="64Gi"),
        queue("ml"),
        podgroup("low", queue="ml", min_member=1, phase="Running"),
        pod("low-0", group="low", cpu="8", memory="1Gi", node_name="n1", phase="Running", priority=1),
        podgroup("hi", queue="ml", min_member=1),
        pod("hi-0", group="hi", cpu="4", memory="1Gi", priority=100),
    ]
    objs[-1].spec.preemption_policy = "Never"
    conf = make_conf("enqueue, allocate, preempt", [{"name": "priority"}, {"name": "gang"}], [{"name": "predicates"}])
    cond, _ = waits(objs, conf, "default/hi")
    assert "task hi-0 (asks cpu 4, memory 1Gi, pods 1): its preemptionPolicy is Never, so it evicts nothing" in cond


# -- pre-filter refusals and node predicates --------------------------------------------------
def test_node_affinity_prefilter_conflict_refuses_before_any_node() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["n1"]},
                            {"key": "metadata.name", "operator": "In", "values": ["n2"]},
                        ]
                    },
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["n2"]},
                            {"key": "metadata.name", "operator": "In", "values": ["n3"]},
                        ]
                    },
                ]
            }
        }
    }
    objs = [
        node("n2", cpu="8", memory="64Gi"),
        node("n3", cpu="8", memory="64Gi"),
        queue("ml"),
        podgroup("g", queue="ml", min_member=1),
        pod("g-0", group="g", cpu="1", memory="1Gi", affinity=affinity),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}], [{"name": "predicates"}])
    cond, out = waits(objs, conf, "default/g")
    # n1 ∩ n2 and n2 ∩ n3 are empty: kube's PreFilter finds the terms name no node at all.
    volcano = "plugin NodeAffinity pre-predicates failed pod affinity terms conflict"
    assert cond.startswith(f"1/1 tasks in gang unschedulable: {volcano}")
    assert f"predicates: task g-0 refused before any node was tried: {volcano}; " in cond
    assert "stopped by: action allocate, plugin predicates" in out
    assert "to run: each required node affinity term names nodes by metadata.name and together they name none" in out


def test_node_affinity_terms_naming_a_node_do_not_conflict() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]
            }
        }
    }
    objs = [
        node("n2", cpu="8", memory="64Gi"),
        queue("ml"),
        podgroup("g", queue="ml", min_member=1),
        pod("g-0", group="g", cpu="1", memory="1Gi", affinity=affinity),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}], [{"name": "predicates"}])
    assert simulate(objs, conf).binds == {"default/g-0": "n2"}


def test_host_port_taken_on_every_node_names_the_port() -> None:
    objs = [
        node("n1", cpu="8", memory="64Gi"),
        node("n2", cpu="8", memory="64Gi"),
        queue("ml"),
        podgroup("web", queue="ml", min_member=2, phase="Running"),
        pod("web-0", group="web", cpu="1", node_name="n1", phase="Running", host_ports=[8080]),
        pod("web-1", group="web", cpu="1", node_name="n2", phase="Running", host_ports=[8080]),
        podgroup("g", queue="ml", min_member=1),
        pod("g-0", group="g", cpu="1", memory="1Gi", host_ports=[8080]),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}], [{"name": "predicates"}])
    cond, out = waits(objs, conf, "default/g")
    reason = "node(s) didn't have free ports for the requested pod ports"
    assert cond.startswith(f"1/1 tasks in gang unschedulable: 2/2 nodes are unavailable: 2 {reason}")
    assert f"predicates: task g-0 fits none of 2 node(s): 2 {reason}; free host port(s) 8080/TCP on a node" in cond
    assert "stopped by: action allocate, plugin predicates" in out
    assert "to run: free host port(s) 8080/TCP on a node, or drop hostPort" in out


def test_pod_affinity_and_spread_failures_say_what_would_help() -> None:
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    objs = [
        node("n1", cpu="8", memory="64Gi"),
        queue("ml"),
        podgroup("g", queue="ml", min_member=1),
        pod("g-0", group="g", cpu="1", memory="1Gi", affinity=affinity),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}], [{"name": "predicates"}])
    cond, out = waits(objs, conf, "default/g")
    assert "1 node(s) didn't match pod affinity rules" in cond
    assert "to run: start a pod its required pod affinity selects" in out


# -- pods without their PodGroup ----------------------------------------------------------------
def test_pod_whose_podgroup_is_missing_condition_and_explain_agree() -> None:
    objs = [node("n1"), queue("ml"), pod("orphan", group="gone", cpu="1")]
    conds = pod_conditions(Cluster(objs).snapshot(), {}, "s1", 1, Sent())
    assert [c.message for c in conds] == [
        "PodGroup default/gone does not exist; the pod waits until it is created; "
        "create PodGroup default/gone, or fix the pod's scheduling.k8s.io/group-name annotation"
    ]
    out = explain(objs, make_conf("allocate", [{"name": "gang"}]), "pod", "default/orphan")
    assert out == [
        "pod default/orphan: Pending, in PodGroup default/gone",
        "  stopped by: the scheduler's session open",
        "  why: PodGroup default/gone does not exist; the pod waits until it is created",
        "  to run: create PodGroup default/gone, or fix the pod's scheduling.k8s.io/group-name annotation",
    ]


def test_pod_with_no_podgroup_names_the_group_the_controller_makes() -> None:
    bare = pod("bare", cpu="1")
    bare.metadata.owner_references = [OwnerReference("apps/v1", "ReplicaSet", "web-1", "rs-uid", True)]
    objs = [node("n1"), queue("ml"), bare]
    conds = pod_conditions(Cluster(objs).snapshot(), {}, "s1", 1, Sent())
    assert [c.message for c in conds] == [
        "no PodGroup: the pod has no scheduling.k8s.io/group-name annotation, so no session schedules it yet; "
        "the controller creates PodGroup default/podgroup-rs-uid for it and annotates the pod: check that lahar's "
        "controller is running (or create a PodGroup and annotate the pod)"
    ]
    out = "\n".join(explain(objs, make_conf("allocate", [{"name": "gang"}]), "pod", "default/bare"))
    assert "stopped by: the scheduler's session open" in out
    assert "to run: the controller creates PodGroup default/podgroup-rs-uid for it" in out


# -- overused queue and reclaim ---------------------------------------------------------------
def test_overused_queue_is_named_with_its_deserved_share() -> None:
    objs = [
        node("n1", cpu="8", memory="8Gi"),
        queue("ml", capability={"cpu": "4", "memory": "1Gi", "pods": "1"}),
        queue("other"),
        podgroup("old", queue="ml", min_member=1, phase="Running"),
        pod("old-0", group="old", cpu="4", memory="1Gi", node_name="n1", phase="Running"),
        podgroup("theirs", queue="other", min_member=1, phase="Running"),
        pod("theirs-0", group="theirs", cpu="4", memory="1Gi", node_name="n1", phase="Running"),
        podgroup("next", queue="ml", min_member=1),
        pod("next-0", group="next", cpu="4"),
    ]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "proportion"}])
    cond, out = waits(objs, conf, "default/next")
    # ml's capability caps its deserved share at what it holds in every dimension: overused.
    assert "proportion: queue ml holds its deserved share (cpu 4 of deserved 4, memory 1Gi of deserved 1Gi" in cond
    assert "stopped by: action allocate, plugin proportion" in out
    assert "to run: wait until its running jobs finish, raise its weight or guarantee, or add nodes" in out


def test_starving_job_says_why_reclaim_found_nothing() -> None:
    objs = [
        node("n1", cpu="8", memory="64Gi"),
        queue("ml"),
        queue("other", reclaimable=False),
        podgroup("theirs", queue="other", min_member=1, phase="Running"),
        pod("theirs-0", group="theirs", cpu="8", memory="1Gi", node_name="n1", phase="Running"),
        podgroup("mine", queue="ml", min_member=1),
        pod("mine-0", group="mine", cpu="4", memory="1Gi"),
    ]
    conf = make_conf(
        "enqueue, allocate, reclaim",
        [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}],
        [{"name": "predicates"}, {"name": "proportion"}],
    )
    cond, out = waits(objs, conf, "default/mine")
    note = (
        "reclaim: starving (0 of minMember 1 placed), task mine-0 (asks cpu 4, memory 1Gi, pods 1): "
        "no node where Running pods of other reclaimable queues above their deserved share make room"
    )
    assert note in cond
    assert "stopped by: action allocate, plugin predicates" in out
    assert f"  note: {note}" in out


# -- queue missing or closing -------------------------------------------------------------------
def test_podgroup_in_a_missing_queue_condition_and_explain_agree() -> None:
    objs = [node("n1"), queue("ml"), *gang("lost", 1, "1", q="nope")]
    snap = Cluster(objs).snapshot()
    (status,) = missing_queues(snap, "s1", 1, Sent(), "2026-01-01T00:00:00Z")
    text = "queue 'nope' does not exist; the PodGroup waits until it is created"
    remedy = "create queue nope, or move the PodGroup to an existing queue"
    assert status.status["conditions"][0]["message"] == f"{text}; {remedy}"
    out = explain(objs, make_conf("enqueue, allocate", [{"name": "gang"}]), "podgroup", "default/lost")
    assert out == [
        "PodGroup default/lost: Inqueue, waiting",
        "  stopped by: the scheduler's session open",
        f"  why: {text}",
        f"  to run: {remedy}",
    ]


def test_closing_queue_is_named_like_a_closed_one() -> None:
    objs = [node("n1"), queue("ml", state="Closing"), *gang("a", 1, "1", phase="Pending", min_resources={"cpu": "1"})]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "proportion"}])
    cond, out = waits(objs, conf, "default/a")
    assert cond.startswith("1/1 tasks in gang unschedulable: queue ml is Closing; ")
    assert "proportion: queue ml is Closing: it admits and allocates nothing; open queue ml" in cond
    assert "stopped by: action enqueue, plugin proportion" in out


def test_resourcequota_deltas_reach_the_live_snapshot() -> None:
    snap = Cluster([node("n1")]).snapshot()
    rq = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "rq", "namespace": "team"},
        "status": {"hard": {"cpu": "10"}, "used": {"cpu": "4"}},
    }
    added = Delta(kind="resourcequotas", op="ADDED", key="team/rq", rv="1", obj=msgspec.Raw(json.dumps(rq).encode()))
    change = apply_delta(snap, added, decode(added))
    assert change.relevant and not change.pending
    assert snap.quotas["team"]["rq"].used["cpu"].amount == 4
    gone = Delta(kind="resourcequotas", op="DELETED", key="team/rq", rv="2")
    apply_delta(snap, gone, decode(gone))
    assert "team" not in snap.quotas


def test_simulate_reads_resource_quotas_only_with_the_plugin() -> None:
    objs = [queue("default"), quota("rq", "team", {"cpu": "1"}, {"cpu": "0"})]
    assert prepare(objs, quotas_read=True).warnings == []
    assert prepare(objs, quotas_read=False).warnings == [
        "ignored 1 ResourceQuota: the configuration does not enable the resourcequota plugin: team/rq"
    ]


# -- BestEffort tasks: backfill ---------------------------------------------------------------
def test_best_effort_job_without_backfill_says_so() -> None:
    objs = [node("n1"), queue("ml"), podgroup("be", queue="ml", min_member=1), pod("be-0", group="be")]
    conf = make_conf("enqueue, allocate", [{"name": "gang"}], [{"name": "predicates"}])
    # Volcano's gang counts pending BestEffort tasks as ready: no Unschedulable condition.
    assert "default/be" not in simulate(objs, conf).conditions
    out = "\n".join(explain(objs, conf, "podgroup", "default/be"))
    assert "PodGroup default/be (queue ml, minMember 1): Inqueue, ready by gang's count; some pods still wait" in out
    assert "stopped by: the scheduler's allocate" in out
    assert "why: 1 pending task(s) request no resources (BestEffort): allocate leaves them to the backfill" in out
    assert "condition Unschedulable: not set" in out
    assert "to run: add backfill to the actions of volcano-scheduler.conf, or give the tasks resource requests" in out
    conf = make_conf("enqueue, allocate, backfill", [{"name": "gang"}], [{"name": "predicates"}])
    assert simulate(objs, conf).binds == {"default/be-0": "n1"}


def test_best_effort_task_backfill_cannot_place_names_the_reason() -> None:
    taint = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}
    objs = [node("n1", taints=[taint]), queue("ml"), podgroup("be", queue="ml", min_member=1), pod("be-0", group="be")]
    conf = make_conf("enqueue, allocate, backfill", [{"name": "gang"}], [{"name": "predicates"}])
    out = "\n".join(explain(objs, conf, "podgroup", "default/be"))
    assert "why: task be-0 fits none of 1 node(s): 1 node(s) had untolerated taint {gpu: yes}" in out
    assert "stopped by: action backfill, plugin predicates" in out
    assert "to run: add a toleration for the taint ({gpu: yes}) or untaint" in out
