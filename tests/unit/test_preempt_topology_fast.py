"""Topology-aware preemption's fast path (actions/preempt_topology_fast.py) against the exact
per-node dry run: random small clusters through both must evict the same pods, in the same
order, pipeline the same preemptors on the same nodes and count the same statistics."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml
from evict_builders import _decode, node, podgroup, priority_class, queue
from hypothesis import given, settings
from hypothesis import strategies as st

from lahar_scheduler.actions import preempt_topology_fast
from lahar_scheduler.actions.preempt_topology_cache import Row, View, rows_for
from lahar_scheduler.bench_preempt import cluster
from lahar_scheduler.core import load_conf, run_session
from lahar_scheduler.framework.conf import SchedulerConf
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.victims import in_victim_order
from lahar_scheduler.plugins import PLUGINS
from lahar_scheduler.simulation import Cluster

GROUP = "scheduling.k8s.io/group-name"
BENCH_TIERS = [
    ["priority", "gang", "conformance"],
    ["drf", "predicates", "proportion", "nodeorder"],
]
ONE_TIER = [["conformance", "gang", "priority", "drf", "proportion", "predicates"]]
# No queue test: preemptors of one shape share dry-run results between preemptions.
NO_QUEUE = [["priority", "gang", "conformance"], ["drf", "predicates", "nodeorder"]]


def topology_conf(tiers: list[list[str]], percentage: int, affinity: bool) -> SchedulerConf:
    plugins: list[list[dict[str, Any]]] = []
    for tier in tiers:
        opts: list[dict[str, Any]] = []
        for name in tier:
            opt: dict[str, Any] = {"name": name}
            if name == "predicates":
                opt["arguments"] = {"predicate.PodAffinityEnable": affinity}
            opts.append(opt)
        plugins.append(opts)
    doc = {
        "actions": "enqueue, allocate, preempt",
        "tiers": [{"plugins": p} for p in plugins],
        "configurations": [
            {
                "name": "preempt",
                "arguments": {"enableTopologyAwarePreemption": True, "minCandidateNodesPercentage": percentage},
            }
        ],
    }
    return load_conf(yaml.safe_dump(doc))


def pod(
    name: str,
    group: str,
    cpu: str | None,
    node_name: str = "",
    *,
    priority: int | None = None,
    started: int | None = None,
    labels: dict[str, str] | None = None,
    anti: bool = False,
) -> Any:
    requests = {"cpu": cpu, "memory": "1G"} if cpu else {}
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": requests}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if anti:
        term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    status: dict[str, Any] = {"phase": "Running" if node_name else "Pending"}
    if started is not None:
        status["startTime"] = f"2024-01-01T00:{started:02d}:00Z"
    return _decode(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "c1",
                "uid": f"c1-{name}",
                "labels": dict(labels or {}),
                "annotations": {GROUP: group},
            },
            "spec": spec,
            "status": status,
        }
    )


@st.composite
def contended(draw: Any) -> list[Any]:
    """Full-ish nodes of running jobs of several priorities (equal ones make the first tier
    name nobody, so drf's tier speaks), pending jobs some of whose tasks already run (their
    nodes take the exact path), BestEffort pods, start times, sometimes anti-affinity."""
    objs: list[Any] = [priority_class("p1", 10), priority_class("p2", 50), priority_class("p3", 100)]
    queues = draw(st.integers(1, 2))
    for q in range(queues):
        cap = draw(st.sampled_from([None, "6", "12"]))
        objs.append(queue(f"q{q}", draw(st.integers(1, 3)), capability={"cpu": cap} if cap else None))
    nodes = draw(st.integers(1, 7))
    for n in range(nodes):
        objs.append(node(f"n{n}", str(draw(st.integers(2, 6))), "16G", pods=str(draw(st.integers(3, 8)))))
    anti = draw(st.booleans()) and draw(st.booleans())
    for j in range(draw(st.integers(nodes, 2 * nodes + 2))):
        name = f"run{j}"
        tasks = draw(st.integers(1, 5))
        objs.append(
            podgroup(
                name,
                f"q{draw(st.integers(0, queues - 1))}",
                draw(st.integers(0, tasks)),
                phase="Running",
                priority_class=draw(st.sampled_from(["p1", "p2", "p3"])),
            )
        )
        for t in range(tasks):
            objs.append(
                pod(
                    f"{name}-{t}",
                    name,
                    draw(st.sampled_from([None, "1", "1", "2"])),
                    f"n{draw(st.integers(0, nodes - 1))}",
                    priority=draw(st.integers(0, 3)),
                    started=draw(st.integers(0, 9)),
                    labels={"app": "web"} if anti and t == 0 else None,
                )
            )
    for j in range(draw(st.integers(1, 5))):
        name = f"want{j}"
        tasks = draw(st.integers(1, 4))
        running = draw(st.integers(0, tasks - 1))
        objs.append(
            podgroup(
                name,
                f"q{draw(st.integers(0, queues - 1))}",
                draw(st.integers(1, tasks)),
                priority_class=draw(st.sampled_from(["p2", "p3"])),
            )
        )
        for t in range(tasks):
            placed = f"n{draw(st.integers(0, nodes - 1))}" if t < running else ""
            objs.append(
                pod(
                    f"{name}-{t}",
                    name,
                    draw(st.sampled_from([None, "1", "2", "3"])),
                    placed,
                    priority=draw(st.integers(1, 4)),
                    started=0 if placed else None,
                    anti=anti and draw(st.booleans()),
                )
            )
    return objs


def outcome(objs: list[Any], cfg: SchedulerConf, fast: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    monkeypatch.setattr(preempt_topology_fast, "ENABLED", fast)
    result = run_session(Cluster(objs).snapshot(), cfg, seed=5)
    stats = result.stats
    return (
        [(t.key, why) for t, why in result.evictions],
        result.pipelined,
        [(t.key, n) for t, n in result.binds],
        stats.preemption_victims,
        stats.preemption_attempts,
    )


@settings(max_examples=200, deadline=None)
@given(
    contended(),
    st.sampled_from([BENCH_TIERS, ONE_TIER, NO_QUEUE]),
    st.sampled_from([10, 50, 100]),
    st.booleans(),
)
def test_fast_path_matches_the_exact_dry_runs(
    objs: list[Any], tiers: list[list[str]], percentage: int, affinity: bool
) -> None:
    cfg = topology_conf(tiers, percentage, affinity)
    with pytest.MonkeyPatch.context() as mp:
        assert outcome(objs, cfg, True, mp) == outcome(objs, cfg, False, mp)


def test_the_bench_cluster_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's preemptors all qualify (else the figures would measure the exact path), and
    the outcome is the exact path's."""
    from lahar_scheduler.bench_preempt import TOPOLOGY_CONF

    plans: list[bool] = []
    real = preempt_topology_fast.plan

    def counting(*args: Any) -> Any:
        got = real(*args)
        plans.append(got is not None)
        return got

    monkeypatch.setattr(preempt_topology_fast, "plan", counting)
    cfg = load_conf(TOPOLOGY_CONF)
    fast = run_session(cluster(60, 60), cfg, uid="t")
    assert plans and all(plans)
    monkeypatch.setattr(preempt_topology_fast, "ENABLED", False)
    slow = run_session(cluster(60, 60), cfg, uid="t")
    assert [t.key for t, _ in fast.evictions] == [t.key for t, _ in slow.evictions]
    assert fast.pipelined == slow.pipelined
    assert len(fast.evictions) == 60


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "exact"])
def test_ties_go_to_the_node_whose_oldest_victim_started_last(fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same priorities, sums and counts on both nodes: kube's last criterion picks the node whose
    earliest-started most important victim started latest (n1: minute 1 against n0: minute 0)."""
    objs = [
        priority_class("p1", 10),
        priority_class("p3", 100),
        queue("q0"),
        node("n0", "2", "16G"),
        node("n1", "2", "16G"),
        podgroup("run0", "q0", 0, phase="Running", priority_class="p1"),
        pod("a", "run0", "1", "n0", priority=1, started=0),
        pod("b", "run0", "1", "n0", priority=1, started=3),
        pod("c", "run0", "1", "n1", priority=1, started=1),
        pod("d", "run0", "1", "n1", priority=1, started=2),
        podgroup("want0", "q0", 1, priority_class="p3"),
        pod("w", "want0", "2", priority=5),
    ]
    cfg = topology_conf(BENCH_TIERS, 100, False)
    evictions, pipelined, *_ = outcome(objs, cfg, fast, monkeypatch)
    assert pipelined == {"c1/w": "n1"}
    assert sorted(k for k, _ in evictions) == ["c1/c", "c1/d"]


@settings(max_examples=100, deadline=None)
@given(contended(), st.sampled_from([BENCH_TIERS, ONE_TIER, NO_QUEUE]), st.data())
def test_cached_rows_order_victims_as_the_victim_heap(objs: list[Any], tiers: list[list[str]], data: Any) -> None:
    """The rows sort victims by the orders' keys; that is the order the victim heap pops them in,
    for tasks of several jobs, priorities and start times on one node."""
    ssn = Session(Cluster(objs).snapshot(), topology_conf(tiers, 100, False), dict(PLUGINS)).open()
    rows = rows_for(ssn)
    pending = [t for job in ssn.jobs.values() for t in job.tasks.values() if not t.node_name]
    preemptor = data.draw(st.sampled_from(pending))
    for info in ssn.nodes.infos:
        by_queue: dict[str, list[Any]] = {}
        for t in info.tasks.values():
            by_queue.setdefault(ssn.jobs[t.job].queue, []).append(t)
        for tasks in by_queue.values():
            keyed = rows._in_victim_order(tasks, preemptor)
            assert [t.uid for t in keyed] == [t.uid for t in in_victim_order(ssn, tasks, preemptor)]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_row_alone_dry_runs_as_the_rows_together(data: Any) -> None:
    """A few stale rows are dry-run one by one in Python floats: the same victims, candidates
    and criteria as the numpy dry run of all rows at once."""
    rows, depth, width = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5)), 3
    floats = st.sampled_from([0.0, 0.5, 1.0, 1.95, 2.0, 3.0, 4.05, 1e-3, 1000.0])
    arrays = st.lists(floats, min_size=rows * depth * width, max_size=rows * depth * width)
    view = View(0, rows, width, 0, 0)
    view.deepen(depth)
    view.count[:] = data.draw(st.lists(st.integers(0, depth), min_size=rows, max_size=rows))
    res = np.reshape(data.draw(arrays), (rows, depth, width))
    queue_vec = res[:, :, :2] * data.draw(st.sampled_from([1.0, 0.5]))
    prio = np.reshape(
        data.draw(st.lists(st.integers(-3, 3), min_size=rows * depth, max_size=rows * depth)), (rows, depth)
    )
    start = np.reshape(
        data.draw(st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=rows * depth, max_size=rows * depth)),
        (rows, depth),
    )
    for r, m in enumerate(view.count.tolist()):
        view.data[r] = Row(res[r, :m].tolist(), queue_vec[r, :m].tolist(), prio[r, :m].tolist(), start[r, :m].tolist())
    view.filled[:] = 1
    future = np.reshape(data.draw(st.lists(floats, min_size=rows * width, max_size=rows * width)), (rows, width))
    cols = np.array(data.draw(st.sampled_from([[0, 1], [0, 1, 2], [1]])), dtype=np.intp)
    need = np.array(data.draw(st.lists(floats, min_size=len(cols), max_size=len(cols))))
    if data.draw(st.booleans()):
        qcols = np.array(data.draw(st.sampled_from([[0, 1], [0], [1]])), dtype=np.intp)
        allocated, request, deserved = (
            np.array(data.draw(st.lists(floats, min_size=len(qcols), max_size=len(qcols)))) for _ in range(3)
        )
        limits = preempt_topology_fast.Limits(cols, need, qcols, allocated, request, deserved, b"")
    else:
        empty = np.zeros(0)
        limits = preempt_topology_fast.Limits(cols, need, None, empty, empty, empty, b"")
    ssn: Any = SimpleNamespace(nodes=SimpleNamespace(future=future))
    got = []
    for scalar in (0, rows):
        out = preempt_topology_fast.Outcome(rows, view.depth)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(preempt_topology_fast, "SCALAR_ROWS", scalar)
            preempt_topology_fast._dry_run_rows(ssn, limits, view, out, np.arange(rows))
        cand = out.cand.tolist()
        criteria = [[c[r] for r in range(rows) if cand[r]] for c in out.criteria]
        got.append((out.at.tolist(), cand, out.chosen.tolist(), [np.asarray(c).tolist() for c in criteria]))
    assert got[0] == got[1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=60), st.integers(0, 59), st.integers(1, 40))
def test_the_scan_head_is_the_start_of_the_scan(possible: list[bool], offset: int, k: int) -> None:
    nodes = np.arange(len(possible), dtype=np.intp)[::-1].copy()
    scan = preempt_topology_fast.ScanOrder(nodes, np.array(possible), offset % len(possible))
    head, whole = scan.head(k)
    full = scan.full()
    assert head.tolist() == full[:k].tolist()
    assert not whole or len(full) <= k


def test_the_fast_path_leaves_the_victim_ceiling_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ceiling only spares the exact path's dry runs: when the fast path decides every
    preemptor (the bench's cluster, enough candidates each time), it is never computed."""
    from lahar_scheduler.bench_preempt import TOPOLOGY_CONF
    from lahar_scheduler.framework.ceiling import VictimCeiling

    asked: list[str] = []
    real = VictimCeiling.fits

    def counting(self: VictimCeiling, preemptor: Any, queue: str) -> Any:
        asked.append(preemptor.name)
        return real(self, preemptor, queue)

    monkeypatch.setattr(VictimCeiling, "fits", counting)
    result = run_session(cluster(60, 60), load_conf(TOPOLOGY_CONF), uid="t")
    assert len(result.evictions) == 60
    assert asked == []
