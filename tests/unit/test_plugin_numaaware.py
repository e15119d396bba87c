"""numa-aware: topology-manager hints and policies, the filter, the score, and cpus held across
sessions until the exporter lists the pod.

Policy expectations cite Volcano's policy tests (one provider, cpu, as the plugin has); plugin
expectations are computed by hand from numaaware.go (cited per test).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from builders import _decode, make_conf, open_session, pod, podgroup, queue, run, task
from builders import node as make_node
from lahar.api.codec import to_builtins
from lahar.api.objects import Numatopology, Pod
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.numa import Hint, admit, cpu_hints, numa_info
from lahar_scheduler.framework.session import Session
from lahar_scheduler.simulation import Cluster

F = frozenset


def topo(
    name: str, policy: str, allocatable: str, numa_nodes: int = 2, per_node: int = 4, static: bool = True
) -> Numatopology:
    cpus = {str(c): {"numa": c // per_node, "socket": c // per_node, "core": c} for c in range(numa_nodes * per_node)}
    raw = {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {"CPUManagerPolicy": "static" if static else "none", "TopologyManagerPolicy": policy},
            "numares": {"cpu": {"allocatable": allocatable, "capacity": numa_nodes * per_node}},
            "cpuDetail": cpus,
        },
    }
    return _decode(raw)  # type: ignore[no-any-return]


def guaranteed(name: str, cpus: str, policy: str = "", group: str = "pg") -> Pod:
    ann = {"volcano.sh/numa-topology-policy": policy} if policy else {}
    p = pod(name, group=group, cpu=cpus, memory="1Gi", annotations=ann)
    raw = to_builtins(p)
    raw["spec"]["containers"][0]["resources"]["limits"] = {"cpu": cpus, "memory": "1Gi"}
    return _decode(raw)  # type: ignore[no-any-return]


CONF = make_conf("allocate", [{"name": "gang"}], [{"name": "predicates"}, {"name": "numa-aware"}])


def objects(*extra: Any) -> list[Any]:
    return [queue("q"), podgroup("pg", queue="q", min_member=1), *extra]


def session(*extra: Any) -> Session:
    return open_session(objects(*extra), CONF)


# -- hints and policies --------------------------------------------------------------------------------
def test_cpu_hints_prefer_the_narrowest_sets() -> None:
    # cpumanager generateCPUTopologyHints (kubelet's algorithm): 2 cpus on 2×4 cpus, all free:
    # {0}, {1} and {0,1} hold it; only the one-node sets are preferred.
    info = numa_info(topo("n", "best-effort", "0-7"))
    assert cpu_hints(info, F(range(8)), 2) == [Hint(F({0}), True), Hint(F({1}), True), Hint(F({0, 1}), False)]
    # 3 free on node 0 and 4 on node 1: 4 cpus fit on {1} and {0,1}; {1} is preferred.
    assert cpu_hints(info, F({1, 2, 3, 4, 5, 6, 7}), 4) == [Hint(F({1}), True), Hint(F({0, 1}), False)]


def test_single_numa_node_takes_the_preferred_single_node() -> None:
    # volcano policy/policy_single_numa_node_test.go TestPolicySingleNumaNode "test-1" (cpu hints)
    hints = [Hint(F({0, 1}), False), Hint(F({0}), True)]
    assert admit("single-numa-node", [0, 1], hints) == (Hint(F({0}), True), True)
    # nothing preferred on one node: the default (all nodes, not preferred) is refused
    assert admit("single-numa-node", [0, 1], [Hint(F({0, 1}), False)]) == (Hint(F({0, 1}), False), False)


def test_restricted_refuses_and_best_effort_admits_unpreferred() -> None:
    # policy_restricted.go canAdmitPodResult = Preferred; policy_best_effort.go admits always
    hints = [Hint(F({0, 1}), False)]
    assert admit("restricted", [0, 1], hints)[1] is False
    assert admit("best-effort", [0, 1], hints) == (Hint(F({0, 1}), False), True)
    # no preference at all (a container without cpus) is preferred any-node
    assert admit("restricted", [0, 1], [Hint(None, True)]) == (Hint(F({0, 1}), True), True)


# -- the filter ---------------------------------------------------------------------------------------
def test_single_numa_node_fits_the_node_with_room() -> None:
    # cpu 0 is taken: 4 cpus fit on NUMA node 1 alone; 5 fit on no single node.
    objs = [make_node("n1", cpu="8", memory="16Gi"), topo("n1", "single-numa-node", "1-7")]
    ssn = session(*objs, guaranteed("four", "4", "single-numa-node"), guaranteed("five", "5", "single-numa-node"))
    assert list(ssn.call(P.PREDICATE, task(ssn, "default/four"), np.arange(1)).passed) == [0]
    got = ssn.call(P.PREDICATE, task(ssn, "default/five"), np.arange(1))
    assert dict(got.errors.reasons) == {
        "container c cannot be assigned by numa (free cpus per NUMA node 0: 3, 1: 4)": 1
    }


def test_policy_must_match_the_node() -> None:
    # numaaware.go filterNodeByPolicy: the task's policy differs from the node's
    objs = [
        make_node("n1", cpu="8", memory="16Gi"),
        topo("n1", "best-effort", "0-7"),
        make_node("plain", cpu="8", memory="16Gi"),
    ]
    ssn = session(*objs, guaranteed("p", "2", "single-numa-node"))
    got = ssn.call(P.PREDICATE, task(ssn, "default/p"), np.arange(2))
    assert dict(got.errors.reasons) == {
        "task topology policy[single-numa-node] is different with node[best-effort]": 1,
        "numa info is empty": 1,
    }


def test_pods_that_are_not_guaranteed_or_ask_nothing_pass() -> None:
    # numaaware.go predicateFn: only Guaranteed pods are checked; without a task policy a node
    # whose topology policy is none passes.
    objs = [make_node("n1", cpu="8", memory="16Gi"), topo("n1", "single-numa-node", "0")]
    ssn = session(*objs, pod("burst", group="pg", cpu="5", memory="1Gi"), guaranteed("g", "5"))
    assert list(ssn.call(P.PREDICATE, task(ssn, "default/burst"), np.arange(1)).passed) == [0]
    # no task policy, but the node's policy applies: 5 cpus do not fit cpu 0 alone
    assert list(ssn.call(P.PREDICATE, task(ssn, "default/g"), np.arange(1)).passed) == []


# -- the score ------------------------------------------------------------------------------------------
def test_fewer_numa_nodes_score_higher() -> None:
    # numaaware.go batchNodeOrderFn: NUMA nodes spanned per node, NormalizeScore(100, reverse):
    # n1 fits 4 cpus on one NUMA node, n2 (2 free on each) needs two → 100 − 100·1/2 = 50, and 0.
    objs = [
        make_node("n1", cpu="8", memory="16Gi"),
        topo("n1", "best-effort", "4-7"),
        make_node("n2", cpu="8", memory="16Gi"),
        topo("n2", "best-effort", "2-5"),
    ]
    ssn = session(*objs, guaranteed("p", "4", "best-effort"))
    t = task(ssn, "default/p")
    ssn.call(P.PREDICATE, t, np.arange(2))
    assert list(ssn.call(P.NODE_ORDER, t, np.arange(2))) == [50.0, 0.0]


# -- across sessions -------------------------------------------------------------------------------------
def test_cpus_stay_taken_until_the_exporter_lists_the_pod() -> None:
    # numaaware.go OnSessionClose → AddUnassignedNumaPods; NodeInfo.RefreshNumaSchedulerInfoByCrd
    # keeps them off until the Numatopology's podAllocations name the pod.
    objs = [
        queue("q"),
        podgroup("a", queue="q", min_member=1),
        podgroup("b", queue="q", min_member=1),
        make_node("n1", cpu="8", memory="16Gi"),
        topo("n1", "single-numa-node", "0-3"),
        guaranteed("a-0", "4", "single-numa-node", group="a"),
    ]
    cluster = Cluster(objs)
    snap = cluster.snapshot()
    from lahar_scheduler.core import run_session

    first = run_session(snap, CONF)
    assert [(t.key, n) for t, n in first.binds] == [("default/a-0", "n1")]
    assert snap.numa_unassigned == {"n1": {"default/a-0": F({0, 1, 2, 3})}}
    snap.upsert_pod(guaranteed("b-0", "4", "single-numa-node", group="b"))
    assert run_session(snap, CONF).binds == []  # the exporter still reports 0-3 free
    listed = to_builtins(topo("n1", "single-numa-node", "0-3"))
    listed["spec"]["podAllocations"] = [{"name": "a-0", "namespace": "default"}]
    snap.upsert_numatopology(_decode(listed))  # ...but says a-0 has them: the node is as reported
    assert [t.key for t, _ in run_session(snap, CONF).binds] == ["default/b-0"]


def test_a_plain_cluster_pays_nothing() -> None:
    # Without any Numatopology the plugin registers no callback.
    ssn = session(make_node("n1"), pod("p", group="pg", cpu="1"))
    assert all(
        getattr(fn, "__self__", None).__class__.__name__ != "NumaAwarePlugin" for fn in ssn.callbacks(P.PREDICATE)
    )
    assert run(objects(make_node("n1"), pod("p", group="pg", cpu="1")), CONF).binds
