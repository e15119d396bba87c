"""gangpreempt and gangreclaim: victim bundles, domain picking, arguments, the unified_evictable
point and whole actions.  Expectations come from Volcano's pkg/scheduler/actions/utils
bundle_test.go, gangpreempt/gangpreempt_test.go, gangreclaim/gangreclaim_test.go and
../shared/conformance/SKIPPED.md §2.5; the action-level scenarios are derived by hand from
gangpreempt.go / gangreclaim.go / utils/simulate.go.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from builders import (
    make_conf,
    node,
    only,
    open_session,
    pod,
    podgroup,
    priority_class,
    queue,
    run,
    task,
)
from lahar.api.objects import KubeObject, PodGroup
from lahar.api.resource import Resource
from lahar_scheduler.actions.bundles import (
    Bundle,
    BundleType,
    apply_allowed,
    job_bundles,
    select,
    sort_for_preempt,
    sort_for_reclaim,
)
from lahar_scheduler.actions.gangevict import CLUSTER_TOP, nomination_plan, parse_args, pick_domains, worksheet
from lahar_scheduler.actions.gangpreempt import GangPreemptAction
from lahar_scheduler.actions.gangreclaim import GangReclaimAction
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.conf import ConfError
from lahar_scheduler.framework.eviction import EvictionContext, EvictionKind
from lahar_scheduler.framework.jobs import JobInfo, QueueInfo


def cpu(millis: float) -> Resource:
    return Resource(millis)


def fake_task(uid: str, millis: float = 1000, priority: int = 0) -> Any:
    """Bundles read only uid, resreq, priority and role of a task."""
    return SimpleNamespace(uid=uid, resreq=cpu(millis), priority=priority, role="worker")


def fake_job(uid: str = "ns/j", priority: int = 0, queue_name: str = "q") -> JobInfo:
    job = JobInfo(uid, None)
    job.priority, job.queue = priority, queue_name
    return job


def ids(bundles: list[Bundle]) -> list[list[str]]:
    return [[t.uid for t in b.tasks] for b in bundles]


# -- bundles (utils/bundle_test.go) -------------------------------------------------------------


def running_job(count: int, min_member: int, min_task: dict[str, int] | None = None) -> Any:
    objs: list[KubeObject] = [
        node("n1", "16", "32Gi"),
        queue("q"),
        podgroup("j", queue="q", min_member=min_member, min_task_member=min_task, phase="Running"),
    ]
    objs += [
        pod(
            f"t{i}",
            group="j",
            cpu="1",
            memory="1Gi",
            node_name="n1",
            phase="Running",
            priority=i,
            labels={"volcano.sh/task-spec": "worker"},
        )
        for i in range(count)
    ]
    ssn = open_session(objs, make_conf("gangpreempt", [only("gang")]))
    return ssn, ssn.jobs["default/j"], [task(ssn, f"default/t{i}") for i in range(count)]


def test_bundles_split_safe_and_whole() -> None:
    # bundle_test.go TestCreateJobBundles_SafeAndWhole: minMember 3, worker minTaskMember 3, five
    # running workers: surplus 2, so the two lowest-priority go safe, three whole.
    _, job, tasks = running_job(5, 3, {"worker": 3})
    got = job_bundles(job, list(reversed(tasks)))
    assert [b.type for b in got] == [BundleType.SAFE, BundleType.WHOLE]
    assert ids(got) == [["default-t0", "default-t1"], ["default-t2", "default-t3", "default-t4"]]
    assert got[1].global_.milli_cpu == 5000  # evicting any whole task costs the job all it holds


def test_bundles_without_role_minimums() -> None:
    # bundle_test.go TestCreateJobBundles_NoTaskMinAvailableTreatsAllRolesAsUnconstrained.
    _, job, tasks = running_job(4, 2)
    got = job_bundles(job, tasks)
    assert [(b.type, len(b.tasks)) for b in got] == [(BundleType.SAFE, 2), (BundleType.WHOLE, 2)]


def test_bundles_of_a_job_already_short_of_its_gang_are_all_safe() -> None:
    # bundle_test.go TestCreateJobBundles_JobNotReadyShortCircuitsAllSafe (minMember 10, two running).
    _, job, tasks = running_job(2, 10)
    got = job_bundles(job, tasks)
    assert [(b.type, len(b.tasks)) for b in got] == [(BundleType.SAFE, 2)]


def test_roles_bind_only_when_minmember_covers_them() -> None:
    # bundle.go enforceRoles: minMember 2 < Σ minTaskMember 4 bypasses the role check, so two
    # of four go safe although the role minimum is 4.
    _, job, tasks = running_job(4, 2, {"worker": 4})
    got = job_bundles(job, tasks)
    assert [(b.type, len(b.tasks)) for b in got] == [(BundleType.SAFE, 2), (BundleType.WHOLE, 2)]


def test_apply_allowed_keeps_whole_bundles_atomic_and_shrinks_safe_ones() -> None:
    # bundle_test.go TestApplyAllowedTasks_WholeAtomicAndSafeShrink.
    t1, t2, t3 = fake_task("t1"), fake_task("t2"), fake_task("t3")
    job = fake_job()
    bundles = [
        Bundle(BundleType.SAFE, job, [t1, t2], cpu(2000)),
        Bundle(BundleType.WHOLE, job, [t3], cpu(1000), cpu(3000)),
    ]
    valid = apply_allowed(bundles, {"t1", "t3x"})
    assert [(b.type, [t.uid for t in b.tasks]) for b in valid] == [(BundleType.SAFE, ["t1"])]
    assert valid[0].local.milli_cpu == 1000


def test_select_respects_allow_whole() -> None:
    # bundle_test.go TestSelectBundles_RespectsAllowWhole: need 1.5 cpu, safe holds 1, whole 2.
    job = fake_job()
    safe = Bundle(BundleType.SAFE, job, [fake_task("t1")], cpu(1000))
    whole = Bundle(BundleType.WHOLE, job, [fake_task("t2", 2000)], cpu(2000))
    assert select([safe, whole], cpu(1500), False) == [safe]
    assert select([safe, whole], cpu(1500), True) == [safe, whole]


def test_sort_for_preempt_type_then_victim_order_then_roi() -> None:
    # bundle_test.go TestSortBundlesForPreempt_TypePriorityAndROI: s1, w2, w1.
    low, high = fake_job("ns/low", 1), fake_job("ns/high", 10)
    safe = Bundle(BundleType.SAFE, high, [fake_task("s1")], cpu(1000))
    whole_low_roi = Bundle(BundleType.WHOLE, low, [fake_task("w1")], cpu(1000), cpu(4000))
    whole_high_roi = Bundle(BundleType.WHOLE, low, [fake_task("w2")], cpu(1000), cpu(2000))
    bundles = [whole_low_roi, safe, whole_high_roi]
    sort_for_preempt(bundles, cpu(1000), lambda left, right: left.priority < right.priority)
    assert ids(bundles) == [["s1"], ["w2"], ["w1"]]


def test_sort_for_preempt_uses_victim_job_order() -> None:
    # bundle_test.go TestSortBundlesForPreempt_UsesVictimJobOrder.
    a = Bundle(BundleType.WHOLE, fake_job("ja"), [fake_task("a")], cpu(1000), cpu(2000))
    b = Bundle(BundleType.WHOLE, fake_job("jb"), [fake_task("b")], cpu(1000), cpu(2000))
    bundles = [a, b]
    sort_for_preempt(bundles, cpu(1000), lambda left, right: left.uid > right.uid)
    assert ids(bundles)[0] == ["b"]


def qinfo(name: str) -> QueueInfo:
    return QueueInfo(queue(name))


def test_sort_for_reclaim_queue_order_then_roi_then_stable() -> None:
    # bundle_test.go TestSortBundlesForReclaim_UsesQueueOrderThenROI and _DeterministicTieBreaker.
    queues = {n: qinfo(n) for n in ("qa", "qb", "qc", "qd", "q")}
    b_a = Bundle(BundleType.WHOLE, fake_job("ns/a", queue_name="qa"), [fake_task("a")], cpu(1000), cpu(4000))
    b_b = Bundle(BundleType.WHOLE, fake_job("ns/b", queue_name="qb"), [fake_task("b")], cpu(1000), cpu(2000))
    bundles = [b_b, b_a]
    sort_for_reclaim(bundles, cpu(1000), lambda left, right: left.name < right.name, queues)
    assert ids(bundles)[0] == ["a"]
    b_c = Bundle(BundleType.WHOLE, fake_job("ns/c", queue_name="qc"), [fake_task("c")], cpu(1000), cpu(4000))
    b_d = Bundle(BundleType.WHOLE, fake_job("ns/d", queue_name="qd"), [fake_task("d")], cpu(1000), cpu(2000))
    bundles = [b_c, b_d]
    sort_for_reclaim(bundles, cpu(1000), None, queues)
    assert ids(bundles)[0] == ["d"]  # ROI: .5 beats .25
    tie_a = Bundle(BundleType.WHOLE, fake_job("ja", queue_name="q"), [fake_task("a")], cpu(1000), cpu(2000))
    tie_b = Bundle(BundleType.WHOLE, fake_job("jb", queue_name="q"), [fake_task("b")], cpu(1000), cpu(2000))
    bundles = [tie_b, tie_a]
    sort_for_reclaim(bundles, cpu(1000), None, queues)
    assert ids(bundles) == [["a"], ["b"]]


# -- domains and arguments (gangpreempt_test.go, gangreclaim_test.go) ---------------------------


def test_pick_domains_dedups_and_caps() -> None:
    # gangpreempt_test.go TestPickDomainsFromGradients_MaxDomainsAndDedup (2) and gangreclaim's (3).
    gradients = [["d1", "d2"], ["d2", "d3"]]
    assert pick_domains(gradients, 2, "") == ["d1", "d2"]
    assert pick_domains(gradients, 3, "") == ["d1", "d2", "d3"]


def test_pick_domains_falls_back() -> None:
    # TestPickDomainsFromGradients_Fallback (both actions).
    assert pick_domains([], 8, CLUSTER_TOP) == [CLUSTER_TOP]
    assert pick_domains([], 8, "") == []


@pytest.mark.parametrize("action", ["gangpreempt", "gangreclaim"])
def test_arguments(action: str) -> None:
    # TestParseArguments and TestParseArguments_InvalidMaxDomainsFallsBackToDefault (both actions).
    args = parse_args({"maxDomains": 3, "allowWholeBundle": False})
    assert (args.max_domains, args.allow_whole_bundle) == (3, False)
    for bad in (0, -1):
        assert parse_args({"maxDomains": bad}).max_domains == 8
    conf = load_conf(
        f'actions: "{action}"\ntiers: []\nconfigurations:\n- name: {action}\n  arguments: {{maxDomains: 5}}\n'
    )
    assert conf.action_arguments(action) == {"maxDomains": 5}


def test_unknown_argument_is_named() -> None:
    with pytest.raises(ConfError, match="maxDomain"):
        load_conf(
            'actions: "gangpreempt"\ntiers: []\nconfigurations:\n- name: gangpreempt\n  arguments: {maxDomain: 5}\n'
        )


# -- which tasks are candidates (selectDomainBundles) -------------------------------------------

HIGH, LOW = priority_class("high", 100), priority_class("low", 10)
GANG_TIER = [only("priority", "enableJobOrder", "enableTaskOrder", "enableJobStarving"), only("gang")]


def preempt_objects(victim_pg: dict[str, Any] | None = None, victim_min: int = 1) -> list[KubeObject]:
    return [
        HIGH,
        LOW,
        node("n1", "1", "4Gi"),
        queue("q1"),
        podgroup("preemptor", queue="q1", min_member=1, priority_class="high", phase="Running"),
        pod("preemptor-0", group="preemptor", cpu="1", memory="1Gi", priority=100),
        podgroup(
            "victim", queue="q1", min_member=victim_min, priority_class="low", phase="Running", **(victim_pg or {})
        ),
        pod("victim-0", group="victim", cpu="1", memory="1Gi", node_name="n1", phase="Running", priority=10),
    ]


def candidates(action: Any, objs: list[KubeObject], preemptor: str = "default/preemptor") -> list[str]:
    ssn = open_session(objs, make_conf(action.name, GANG_TIER))
    action.args = parse_args(action.arguments)
    job = ssn.jobs[preemptor]
    need = Resource(1000, 1024**3)
    bundles = action.domain_bundles(ssn, job, need, CLUSTER_TOP, ssn.candidate_nodes())
    return [t.name for b in bundles for t in b.tasks]


def test_gangpreempt_whole_bundles_only_when_allowed() -> None:
    # gangpreempt_test.go TestSelectDomainVictims_RespectAllowWholeBundle: the victim job has one
    # running task and minAvailable 1, so that task is a whole bundle.
    assert candidates(GangPreemptAction({"allowWholeBundle": False}), preempt_objects()) == []
    assert candidates(GangPreemptAction({"allowWholeBundle": True}), preempt_objects()) == ["victim-0"]


def test_gangpreempt_respects_the_victim_podgroup_preemptable_mark() -> None:
    # gangpreempt_test.go TestSelectDomainVictims_RespectVictimJobPreemptable and
    # _AllowVictimJobWhenPreemptableUnset.
    refused = preempt_objects({"annotations": {"volcano.sh/preemptable": "false"}})
    assert candidates(GangPreemptAction(), refused) == []
    assert candidates(GangPreemptAction(), preempt_objects()) == ["victim-0"]


def reclaim_objects(**victim_pg: Any) -> list[KubeObject]:
    return [
        node("n1", "2", "4Gi"),
        queue("q1"),
        queue("q2", reclaimable=True),
        queue("q3", reclaimable=False),
        podgroup("reclaimer", queue="q1", min_member=1, phase="Running"),
        pod("reclaimer-0", group="reclaimer", cpu="1", memory="1Gi"),
        podgroup("victim", queue="q2", min_member=1, phase="Running", **victim_pg),
        pod("victim-0", group="victim", cpu="1", memory="1Gi", node_name="n1", phase="Running"),
        podgroup("other", queue="q3", min_member=1, phase="Running"),
        pod("other-0", group="other", cpu="1", memory="1Gi", node_name="n1", phase="Running"),
    ]


def test_gangreclaim_takes_only_from_reclaimable_other_queues() -> None:
    # gangreclaim_test.go TestSelectDomainVictims_ReclaimableCrossQueueOnly.
    assert candidates(GangReclaimAction(), reclaim_objects(), "default/reclaimer") == ["victim-0"]


def test_gangreclaim_respects_the_victim_podgroup_preemptable_mark() -> None:
    # gangreclaim_test.go TestSelectDomainVictims_RespectVictimJobPreemptable / _WhenPreemptableUnset.
    refused = reclaim_objects(annotations={"volcano.sh/preemptable": "false"})
    assert candidates(GangReclaimAction(), refused, "default/reclaimer") == []


# -- unified_evictable (SKIPPED.md §2.5) --------------------------------------------------------


def test_priority_unified_evictable() -> None:
    # plugins/priority TestUnifiedEvictableFn_GangReclaimPermitsAll and the gang-preempt rule:
    # preemptor job priority 500 against victims of 100 and 1000: only the priority-100 task.
    objs: list[KubeObject] = [
        priority_class("p100", 100),
        priority_class("p500", 500),
        priority_class("p1000", 1000),
        node("n1", "4", "8Gi"),
        queue("q"),
        podgroup("me", queue="q", priority_class="p500"),
        podgroup("lo", queue="q", priority_class="p100"),
        podgroup("hi", queue="q", priority_class="p1000"),
        pod("lo-0", group="lo", cpu="1", node_name="n1", phase="Running"),
        pod("hi-0", group="hi", cpu="1", node_name="n1", phase="Running"),
    ]
    ssn = open_session(objs, make_conf("gangpreempt", [only("priority")]))
    me = ssn.jobs["default/me"]
    cands = [task(ssn, "default/lo-0"), task(ssn, "default/hi-0")]
    preempt = ssn.call(P.UNIFIED_EVICTABLE, EvictionContext(EvictionKind.GANG_PREEMPT, me, CLUSTER_TOP), cands)
    assert [t.name for t in preempt] == ["lo-0"]
    reclaim = ssn.call(P.UNIFIED_EVICTABLE, EvictionContext(EvictionKind.GANG_RECLAIM, me, CLUSTER_TOP), cands)
    assert [t.name for t in reclaim] == ["lo-0", "hi-0"]


def test_conformance_unified_evictable_spares_kube_system() -> None:
    # plugins/conformance TestConformancePlugin (SKIPPED.md §2.5), through the gang-aware point.
    objs: list[KubeObject] = [
        node("n1", "4", "8Gi"),
        queue("q"),
        podgroup("me", queue="q"),
        podgroup("sys", "kube-system", queue="q"),
        podgroup("usr", queue="q"),
        pod("sys-0", "kube-system", group="sys", cpu="1", node_name="n1", phase="Running"),
        pod("usr-0", group="usr", cpu="1", node_name="n1", phase="Running"),
    ]
    ssn = open_session(objs, make_conf("gangpreempt", [only("conformance")]))
    ctx = EvictionContext(EvictionKind.GANG_PREEMPT, ssn.jobs["default/me"], CLUSTER_TOP)
    got = ssn.call(P.UNIFIED_EVICTABLE, ctx, [task(ssn, "kube-system/sys-0"), task(ssn, "default/usr-0")])
    assert [t.name for t in got] == ["usr-0"]


# -- whole actions ------------------------------------------------------------------------------

PREEMPT_TIER = [
    only("priority", "enableJobOrder", "enableTaskOrder", "enableJobStarving"),
    only("gang", "enableJobReady", "enableJobPipelined", "enableJobStarving", "enablePreemptable"),
    only("conformance", "enablePreemptable"),
]


def gang_cluster(victim_min: int) -> list[KubeObject]:
    """A 4-cpu node full with a low-priority gang of four; a high-priority gang of two waits."""
    objs: list[KubeObject] = [
        HIGH,
        LOW,
        node("n1", "4", "8Gi"),
        queue("q1"),
        podgroup("low", queue="q1", min_member=victim_min, priority_class="low", phase="Running"),
        podgroup("high", queue="q1", min_member=2, priority_class="high", phase="Inqueue"),
    ]
    objs += [
        pod(f"low-{i}", group="low", cpu="1", memory="1Gi", node_name="n1", phase="Running", priority=10 + i)
        for i in range(4)
    ]
    objs += [pod(f"high-{i}", group="high", cpu="1", memory="1Gi", priority=100) for i in range(2)]
    return objs


def test_gangpreempt_evicts_a_whole_gang_legacy_preempt_cannot_touch() -> None:
    # The low gang sits at its minMember (4 of 4), so preempt's gang filter offers nothing; gang
    # preempt may take it as one whole bundle: all four go, both high pods are pipelined.
    objs = gang_cluster(victim_min=4)
    legacy = run(objs, make_conf("preempt", PREEMPT_TIER))
    assert legacy.evictions == []
    result = run(objs, make_conf("gangpreempt", PREEMPT_TIER))
    assert sorted(t.name for t, _ in result.evictions) == ["low-0", "low-1", "low-2", "low-3"]
    assert {r for _, r in result.evictions} == {"gangpreempt"}
    assert sorted(result.pipelined) == ["default/high-0", "default/high-1"]
    assert result.stats.eviction_transactions == {"gangpreempt": 1}


def test_gangpreempt_without_whole_bundles_evicts_nothing() -> None:
    conf = make_conf(
        "gangpreempt", PREEMPT_TIER, configurations=[{"name": "gangpreempt", "arguments": {"allowWholeBundle": False}}]
    )
    result = run(gang_cluster(victim_min=4), conf)
    assert result.evictions == [] and result.pipelined == {}


def test_gangpreempt_takes_the_safe_surplus_first() -> None:
    # minMember 2 of four running: the two lowest-priority tasks are a safe bundle and free
    # exactly the two cpus needed; the gang keeps its other two.
    result = run(gang_cluster(victim_min=2), make_conf("gangpreempt", PREEMPT_TIER))
    assert sorted(t.name for t, _ in result.evictions) == ["low-0", "low-1"]
    assert sorted(result.pipelined) == ["default/high-0", "default/high-1"]


def test_gangpreempt_leaves_higher_priority_jobs() -> None:
    objs = [o for o in gang_cluster(victim_min=2) if not (isinstance(o, PodGroup) and o.metadata.name == "low")]
    objs.append(podgroup("low", queue="q1", min_member=2, priority_class="high", phase="Running"))
    result = run(objs, make_conf("gangpreempt", PREEMPT_TIER))
    assert result.evictions == []


RECLAIM_TIER = [
    only("priority", "enableJobOrder", "enableTaskOrder", "enableJobStarving"),
    only("gang", "enableJobReady", "enableJobPipelined", "enableJobStarving", "enableReclaimable"),
    only("conformance", "enableReclaimable"),
    only("proportion", "enableQueueOrder", "enableReclaimable", "enablePreemptive", "enabledOverused"),
]


def reclaim_cluster(reclaimable: bool) -> list[KubeObject]:
    """q2's gang of four fills the 4-cpu node; q1 (same weight, deserved 2 cpu) has a gang of two."""
    objs: list[KubeObject] = [
        node("n1", "4", "8Gi"),
        queue("q1"),
        queue("q2", reclaimable=reclaimable),
        podgroup("busy", queue="q2", min_member=4, phase="Running"),
        podgroup("starved", queue="q1", min_member=2, phase="Inqueue"),
    ]
    objs += [pod(f"busy-{i}", group="busy", cpu="1", memory="1Gi", node_name="n1", phase="Running") for i in range(4)]
    objs += [pod(f"starved-{i}", group="starved", cpu="1", memory="1Gi") for i in range(2)]
    return objs


def test_gangreclaim_takes_the_whole_gang_of_an_over_share_queue() -> None:
    result = run(reclaim_cluster(True), make_conf("gangreclaim", RECLAIM_TIER))
    assert sorted(t.name for t, _ in result.evictions) == ["busy-0", "busy-1", "busy-2", "busy-3"]
    assert sorted(result.pipelined) == ["default/starved-0", "default/starved-1"]


def test_gangreclaim_leaves_a_queue_that_is_not_reclaimable() -> None:
    result = run(reclaim_cluster(False), make_conf("gangreclaim", RECLAIM_TIER))
    assert result.evictions == [] and result.pipelined == {}


# -- the dry run (utils/simulate_test.go) -------------------------------------------------------


def plan_session(*objs: KubeObject) -> Any:
    base: list[KubeObject] = [queue("q"), podgroup("job", queue="q", min_member=1, phase="Inqueue")]
    return open_session([*base, *objs], make_conf("gangpreempt", [only("gang", "enableJobPipelined")]))


def test_plan_pipelines_the_pending_task() -> None:
    # simulate_test.go TestBuildNominationPlanInDomain_Success: one operation.
    ssn = plan_session(node("n1", "2", "4Gi"), pod("t1", group="job", cpu="1"))
    plan = nomination_plan(ssn, None, ssn.jobs["default/job"], ssn.candidate_nodes(), [], "test")
    assert plan is not None and len(plan) == 1
    assert task(ssn, "default/t1").node_name == "n1"


def test_plan_with_a_victim_evicts_then_pipelines() -> None:
    # TestBuildNominationPlanInDomain_WithVictimIncludesEvictAndPipeline: two operations.
    ssn = plan_session(
        node("n1", "3", "4Gi"),
        pod("t1", group="job", cpu="1"),
        podgroup("victim", queue="q", phase="Running"),
        pod("v1", group="victim", cpu="1", node_name="n1", phase="Running"),
    )
    victim = task(ssn, "default/v1")
    plan = nomination_plan(ssn, None, ssn.jobs["default/job"], ssn.candidate_nodes(), [victim], "test")
    assert plan is not None and len(plan) == 2
    assert str(victim.status) == "Releasing"
    assert task(ssn, "default/t1").eviction_occurred


def test_plan_without_a_feasible_node_rolls_everything_back() -> None:
    # TestBuildNominationPlanInDomain_NoFeasibleNode and _PipelineFailureRollsBackEviction: the
    # victim frees 1 cpu but the task needs 3, so nothing is kept.
    ssn = plan_session(
        node("n1", "2", "4Gi"),
        pod("t1", group="job", cpu="3"),
        podgroup("victim", queue="q", phase="Running"),
        pod("v1", group="victim", cpu="1", node_name="n1", phase="Running"),
    )
    victim, t1 = task(ssn, "default/v1"), task(ssn, "default/t1")
    assert nomination_plan(ssn, None, ssn.jobs["default/job"], ssn.candidate_nodes(), [victim], "test") is None
    assert (str(victim.status), victim.node_name) == ("Running", "n1")
    assert (str(t1.status), t1.node_name) == ("Pending", "")


def test_plan_prefers_idle_over_future_idle() -> None:
    # TestBuildNominationPlanInDomain_PrefersIdleNodeOverFutureIdle: n-future has 2 cpu only once
    # its releasing pod goes; n-idle has them now.
    ssn = plan_session(
        node("n-future", "2", "4Gi"),
        node("n-idle", "2", "4Gi"),
        pod("t1", group="job", cpu="1"),
        podgroup("gone", queue="q", phase="Running"),
        pod("r1", group="gone", cpu="2", node_name="n-future", phase="Running", deleting=True),
    )
    plan = nomination_plan(ssn, None, ssn.jobs["default/job"], ssn.candidate_nodes(), [], "test")
    assert plan is not None
    assert task(ssn, "default/t1").node_name == "n-idle"


def test_plan_needs_pending_work() -> None:
    # TestBuildNominationPlanInDomain_Guards / TestCollectPendingTasksForJobStartup_EmptyWorksheetReturnsNil.
    ssn = plan_session(node("n1", "2", "4Gi"), pod("t1", group="job", cpu="1", node_name="n1", phase="Running"))
    assert worksheet(ssn, ssn.jobs["default/job"]) == []
    assert nomination_plan(ssn, None, ssn.jobs["default/job"], ssn.candidate_nodes(), [], "test") is None


def test_worksheet_follows_task_order() -> None:
    # TestCollectPendingTasksForJobStartup_WorksheetOrder: t1 (higher priority) before t2.
    ssn = open_session(
        [
            node("n1", "2", "4Gi"),
            queue("q"),
            podgroup("job", queue="q", min_member=1),
            pod("t2", group="job", cpu="1", priority=1),
            pod("t1", group="job", cpu="1", priority=5),
        ],
        make_conf("gangpreempt", [only("priority", "enableTaskOrder")]),
    )
    assert [t.name for t in worksheet(ssn, ssn.jobs["default/job"])] == ["t1", "t2"]


def test_a_starving_job_gang_actions_cannot_help_gets_a_note() -> None:
    # What `lahar explain` shows for the job (Volcano logs it; we keep it with the decision).
    result = run(reclaim_cluster(False), make_conf("gangreclaim", RECLAIM_TIER))
    notes = result.decisions["default/starved"].notes
    assert any(n.startswith("gangreclaim: starving (0 of minMember 2 placed)") for n in notes)
