"""Normal preemption walks nodes by an argmax over all nodes when scores are local
(``Session.scores_local``): the same walk as scoring the candidate set, and local only when no
score is normalised over the candidates."""

from __future__ import annotations

from typing import Any

import numpy as np
from evict_builders import node, pod, podgroup, priority_class, queue
from hypothesis import given, settings
from hypothesis import strategies as st
from test_preempt_topology_fast import BENCH_TIERS, topology_conf

from lahar_scheduler.actions.preempt import _by_local_score, _by_score
from lahar_scheduler.framework.session import Session
from lahar_scheduler.plugins import PLUGINS
from lahar_scheduler.simulation import Cluster

PREFERRED = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
        ]
    }
}


def session(objs: list[Any]) -> Session:
    return Session(Cluster(objs).snapshot(), topology_conf(BENCH_TIERS, 100, False), dict(PLUGINS)).open()


def loaded(used: list[int]) -> list[Any]:
    objs: list[Any] = [priority_class("p1", 10), queue("q0"), podgroup("run", "q0", 0, phase="Running")]
    for i, cpu in enumerate(used):
        objs.append(node(f"n{i}", "8", "16G", labels={"zone": "ab"[i % 2]}))
        if cpu:
            objs.append(pod(f"r{i}", "run", {"cpu": str(cpu), "memory": "1G"}, f"n{i}"))
    objs.append(podgroup("want", "q0", 1))
    return objs


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=12), st.data())
def test_the_local_walk_is_the_walk_over_candidates(used: list[int], data: Any) -> None:
    ssn = session([*loaded(used), pod("w", "want", {"cpu": "1", "memory": "1G"})])
    task = next(t for j in ssn.jobs.values() for t in j.tasks.values() if not t.node_name)
    assert ssn.scores_local(task)
    n = len(used)
    possible = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    removed = data.draw(st.sets(st.integers(0, n - 1)))  # nodes the predicates ruled out
    candidates = np.array([i for i in range(n) if i not in removed], dtype=np.intp)
    mask = possible.copy()
    mask[list(removed)] = False
    assert list(_by_local_score(ssn, task, mask)) == list(_by_score(ssn, task, candidates, possible))


def test_scores_normalised_over_the_candidates_are_not_local() -> None:
    plain = pod("w", "want", {"cpu": "1", "memory": "1G"})
    preferring = pod("w", "want", {"cpu": "1", "memory": "1G"}, affinity=PREFERRED)
    for p, local in ((plain, True), (preferring, False)):
        ssn = session([*loaded([2, 4]), p])
        task = next(t for j in ssn.jobs.values() for t in j.tasks.values() if not t.node_name)
        assert ssn.scores_local(task) is local
