"""PodGroups for plain pods beyond the Volcano corpus: Deployment pods share a group, the queue
comes from the pod or its namespace, workloads scaled to 0 lose their group, and group status
counts follow the pods."""

from __future__ import annotations

from typing import Any

from lahar_controller import podgroups as pgc

OPTIONS = pgc.Options(scheduler_names=frozenset({"volcano"}), inherit_owner_annotations=True)


def pod(name: str, owner_uid: str | None = None, phase: str = "Pending") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {"app": "a"}}
    if owner_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner_uid, "controller": True}
        ]
    spec = {"schedulerName": "volcano", "containers": [{"resources": {"requests": {"cpu": "1"}}}]}
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def test_pods_of_one_replicaset_share_one_group() -> None:
    a, b = pod("a", "rs-uid"), pod("b", "rs-uid")
    first = pgc.for_pod(a, None, OPTIONS)
    assert first.create is not None and first.group == "podgroup-rs-uid"
    second = pgc.for_pod(b, first.create, OPTIONS)
    assert second.create is None and second.update is None
    assert second.annotate == {pgc.GROUP_NAME: "podgroup-rs-uid"}


def test_pods_of_other_schedulers_or_with_a_group_are_left_alone() -> None:
    other = pod("a")
    other["spec"]["schedulerName"] = "default-scheduler"
    assert pgc.for_pod(other, None, OPTIONS) == pgc.PodPlan()
    grouped = pod("b")
    grouped["metadata"]["annotations"] = {pgc.GROUP_NAME: "mine"}
    assert pgc.for_pod(grouped, None, OPTIONS) == pgc.PodPlan()


def test_queue_from_pod_else_namespace() -> None:
    ns = {"kind": "Namespace", "metadata": {"name": "ns", "annotations": {pgc.QUEUE_NAME: "team"}}}
    assert pgc.build(pod("a"), "g", OPTIONS, namespace=ns)["spec"]["queue"] == "team"
    own = pod("b")
    own["metadata"]["annotations"] = {pgc.QUEUE_NAME: "mine"}
    assert pgc.build(own, "g", OPTIONS, namespace=ns)["spec"]["queue"] == "mine"
    assert "queue" not in pgc.build(pod("c"), "g", OPTIONS)["spec"]


def test_owner_min_member_scales_min_resources_and_bad_values_fall_back_to_one() -> None:
    def owner(value: str) -> pgc.Lookup:
        rs = {"metadata": {"annotations": {pgc.GROUP_MIN_MEMBER: value}}}
        return lambda kind, ns, name: rs if (kind, ns, name) == ("ReplicaSet", "ns", "rs") else None

    built = pgc.build(pod("a", "rs-uid"), "g", OPTIONS, owner("4"))
    assert built["spec"]["minMember"] == 4 and built["spec"]["minResources"]["cpu"] == "4"
    for bad in ("-2", "two", "3_0", ""):
        assert pgc.build(pod("a", "rs-uid"), "g", OPTIONS, owner(bad))["spec"]["minMember"] == 1
    no_inherit = pgc.Options(inherit_owner_annotations=False)
    assert pgc.build(pod("a", "rs-uid"), "g", no_inherit, owner("4"))["spec"]["minMember"] == 1


def test_workload_scaled_to_zero_deletes_its_group() -> None:
    rs = {"kind": "ReplicaSet", "metadata": {"namespace": "ns", "name": "rs", "uid": "rs-uid"}, "spec": {"replicas": 0}}
    assert pgc.for_workload("ReplicaSet", rs, [pod("a", "rs-uid")], OPTIONS) == pgc.WorkloadPlan(
        delete="podgroup-rs-uid"
    )


def test_workload_refreshes_the_group_of_its_first_pod() -> None:
    rs = {
        "kind": "ReplicaSet",
        "metadata": {"namespace": "ns", "name": "rs", "uid": "rs-uid"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "a"}}},
    }
    plan = pgc.for_workload("ReplicaSet", rs, [pod("b", "rs-uid"), pod("a", "rs-uid")], OPTIONS)
    assert plan.pod is not None and plan.pod["metadata"]["name"] == "a"
    stale = pgc.build(plan.pod, "podgroup-rs-uid", OPTIONS)
    stale["spec"]["minMember"] = 7
    refreshed = pgc.for_pod(plan.pod, stale, OPTIONS, refresh=True)
    assert refreshed.update is not None and refreshed.update["spec"]["minMember"] == 1
    same = pgc.for_pod(plan.pod, pgc.build(plan.pod, "podgroup-rs-uid", OPTIONS), OPTIONS, refresh=True)
    assert same.update is None


def test_status_counts_follow_pod_phases() -> None:
    leaving = pod("d", phase="Running")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    pods = [pod("a", phase="Running"), pod("b", phase="Running"), pod("c", phase="Succeeded"), leaving]
    pods.append(pod("e", phase="Failed"))
    pods.append(pod("f"))
    assert pgc.status_counts(pods) == {"running": 2, "succeeded": 1, "failed": 1}
    grouped = pod("x")
    grouped["metadata"]["annotations"] = {pgc.GROUP_NAME: "g"}
    assert pgc.group_of(grouped) == "g" and pgc.group_of(pod("y")) == ""


def test_network_topology_soft_and_bad_tier() -> None:
    p = pod("a")
    p["metadata"]["annotations"] = {pgc.TOPOLOGY_MODE: "SOFT", pgc.TOPOLOGY_TIER: "x"}
    assert pgc.network_topology(p) == {"mode": "soft"}
