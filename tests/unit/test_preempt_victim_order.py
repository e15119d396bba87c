"""Normal preemption sorts one job's victims by the task key instead of popping the victim heap:
the same order, for tasks of several priorities, indices and start times."""

from __future__ import annotations

from typing import Any

from evict_builders import node, podgroup, priority_class, queue
from hypothesis import given, settings
from hypothesis import strategies as st
from test_preempt_topology_fast import BENCH_TIERS, ONE_TIER, contended, pod, topology_conf

from lahar_scheduler.actions.preempt import PreemptAction
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.victims import in_victim_order
from lahar_scheduler.plugins import PLUGINS
from lahar_scheduler.simulation import Cluster


@settings(max_examples=100, deadline=None)
@given(contended(), st.sampled_from([BENCH_TIERS, ONE_TIER]), st.data())
def test_one_jobs_victims_come_in_the_heaps_order(objs: list[Any], tiers: list[list[str]], data: Any) -> None:
    ssn = Session(Cluster(objs).snapshot(), topology_conf(tiers, 100, False), dict(PLUGINS)).open()
    action = PreemptAction({})
    action._task_keys, action._victim_keys = {}, {}
    pending = [t for job in ssn.jobs.values() for t in job.tasks.values() if not t.node_name]
    preemptor = data.draw(st.sampled_from(pending))
    for info in ssn.nodes.infos:
        by_job: dict[str, list[Any]] = {}
        for t in info.tasks.values():
            by_job.setdefault(t.job, []).append(t)
        groups = [*by_job.values(), list(info.tasks.values())]  # and all of a node's, jobs mixed
        for tasks in groups:
            got = [t.uid for t in action._victim_order(ssn, tasks, preemptor)]
            assert got == [t.uid for t in in_victim_order(ssn, tasks, preemptor)]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(1, 3)), min_size=2, max_size=8, unique_by=lambda x: x[0]),
    st.booleans(),
)
def test_indexed_victims_of_one_job_are_sorted_by_key(tasks: list[tuple[int, int]], started: bool) -> None:
    """Pod names with an index give the tasks a sort key: the keyed path is taken, and it
    evicts in the heap's order (reverse task order: lower priority first, then higher index)."""
    objs: list[Any] = [priority_class("p1", 10), priority_class("p3", 100), queue("q0"), node("n0", "64", "64G")]
    objs.append(podgroup("run", "q0", 0, phase="Running", priority_class="p1"))
    for index, priority in tasks:
        objs.append(pod(f"run-w-{index}", "run", "1", "n0", priority=priority, started=index % 3 if started else None))
    objs += [podgroup("want", "q0", 1, priority_class="p3"), pod("want-w-0", "want", "2", priority=5)]
    ssn = Session(Cluster(objs).snapshot(), topology_conf(BENCH_TIERS, 100, False), dict(PLUGINS)).open()
    action = PreemptAction({})
    action._task_keys, action._victim_keys = {}, {}
    preemptor = next(t for j in ssn.jobs.values() for t in j.tasks.values() if not t.node_name)
    victims = list(ssn.nodes.infos[0].tasks.values())
    got = [t.uid for t in action._victim_order(ssn, victims, preemptor)]
    assert action._task_keys[victims[0].job] is not None  # the keyed path, not the heap
    assert got == [t.uid for t in in_victim_order(ssn, victims, preemptor)]
