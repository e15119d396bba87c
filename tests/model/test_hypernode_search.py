"""allocate's HyperNode search stops early (best score bound first, one dry run per HyperNode):
on random trees and jobs it decides exactly what the exhaustive search decides — binds,
pipelines, the chosen HyperNode, refusals with every HyperNode tried, task reasons.

The exhaustive search is Volcano's allocateForJob / allocateForSubJob (every eligible HyperNode
of a gradient dry-run, the best by hypernode_order kept); the cases it is checked on are shaped
like pkg/scheduler/actions/allocate/allocate_test.go TestAllocateWithNetWorkTopologies (hard and
soft jobs, partly running jobs with an allocated HyperNode, jobs without a topology beside them).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import hypernode, make_conf, node, only, pod, podgroup, queue, snapshot
from lahar_scheduler.actions import allocate_hypernode
from lahar_scheduler.core import run_session
from lahar_scheduler.framework.jobs import JOB_ALLOCATED_HYPERNODE

GANG = only("gang", "enableJobOrder", "enableJobReady", "enableJobPipelined", "enableJobStarving")
CONF = make_conf(
    "allocate",
    [GANG, {"name": "priority"}, {"name": "conformance"}],
    [
        {"name": "drf"},
        {"name": "predicates"},
        {"name": "proportion"},
        {"name": "nodeorder"},
        {"name": "binpack"},
        {"name": "network-topology-aware"},
    ],
)


@st.composite
def clusters(draw: st.DrawFn) -> list[Any]:
    """A 2- or 3-tier tree of 1-3 nodes per leaf, some running pods, pending jobs of every kind."""
    objs: list[Any] = [queue("qa", draw(st.integers(1, 3))), queue("qb", draw(st.integers(1, 3)))]
    three = draw(st.booleans())
    mids = draw(st.integers(1, 3)) if three else 1
    leaves: list[str] = []
    nodes: list[str] = []
    for m in range(mids):
        mine = []
        for leaf in range(draw(st.integers(1, 3))):
            name = f"l{m}{leaf}"
            members = [f"{name}-n{i}" for i in range(draw(st.integers(1, 3)))]
            for n in members:
                objs.append(node(n, cpu=str(draw(st.sampled_from([2, 4, 8]))), memory="16Gi"))
            objs.append(hypernode(name, 1, nodes=members))
            mine.append(name)
            nodes += members
        leaves += mine
        if three:
            objs.append(hypernode(f"m{m}", 2, hypernodes=mine))
    top = [f"m{m}" for m in range(mids)] if three else leaves
    objs.append(hypernode("top", 3 if three else 2, hypernodes=top))
    for j in range(draw(st.integers(0, 3))):
        at = draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=3))
        objs.append(podgroup(f"r{j}", queue=draw(st.sampled_from(["qa", "qb"])), min_member=1, phase="Running"))
        for t, where in enumerate(at):
            cpu = str(draw(st.integers(1, 3)))
            objs.append(pod(f"r{j}-{t}", group=f"r{j}", cpu=cpu, node_name=where, phase="Running"))
    for j in range(draw(st.integers(1, 6))):
        objs += pending_job(draw, j, leaves, nodes)
    return objs


def pending_job(draw: st.DrawFn, j: int, leaves: list[str], nodes: list[str]) -> list[Any]:
    size = draw(st.integers(1, 5))
    kind = draw(st.sampled_from(["hard1", "hard2", "soft", "none", "running"]))
    spec: dict[str, Any] | None = None
    if kind.startswith("hard") or kind == "running":
        spec = {"mode": "hard", "highestTierAllowed": 2 if kind == "hard2" else 1}
    elif kind == "soft":
        spec = {"mode": "soft", "highestTierAllowed": 1}
    annotations = None
    objs: list[Any] = []
    cpu = str(draw(st.integers(1, 3)))
    if kind == "running":
        leaf = draw(st.sampled_from(leaves))
        annotations = {JOB_ALLOCATED_HYPERNODE: leaf}
        where = draw(st.sampled_from([n for n in nodes if n.startswith(leaf + "-")]))
        objs.append(pod(f"p{j}-run", group=f"p{j}", cpu=cpu, node_name=where, phase="Running"))
    queue_name = draw(st.sampled_from(["qa", "qb"]))
    objs.append(
        podgroup(
            f"p{j}",
            queue=queue_name,
            min_member=draw(st.integers(1, size)),
            network_topology=spec,
            annotations=annotations,
        )
    )
    objs += [pod(f"p{j}-{t}", group=f"p{j}", cpu=cpu, memory="1Gi") for t in range(size)]
    return objs


def outcome(objs: list[Any], seed: int) -> tuple[Any, ...]:
    result = run_session(snapshot(objs), CONF, seed=seed)
    whys = {
        uid: (d.outcome, d.chosen, d.verdicts, d.why and (d.why.summary, d.why.details), d.nodes_considered)
        for uid, d in sorted(result.decisions.items())
    }
    return (
        sorted((t.key, n) for t, n in result.binds),
        sorted(result.pipelined.items()),
        sorted((k, vars(r)) for k, r in result.task_reasons.items()),
        whys,
    )


@settings(max_examples=200, deadline=None, derandomize=True)
@given(clusters(), st.integers(0, 3))
def test_the_search_decides_as_the_exhaustive_one(objs: list[Any], seed: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        # Every doomed HyperNode dry-run for a refusal (its cap is tested below), so that the
        # refusals' details compare too.
        mp.setattr(allocate_hypernode, "REFUSAL_DRY_RUNS", 100)
        pruned = outcome(objs, seed)
        mp.setattr(allocate_hypernode, "PRUNE", False)
        exhaustive = outcome(objs, seed)
    for name, a, b in zip(("binds", "pipelined", "task reasons", "decisions"), pruned, exhaustive, strict=True):
        assert a == b, name


def test_the_search_stops_after_the_best_leaf() -> None:
    # Volcano allocate_test.go TestAllocateWithNetWorkTopologies case "hard network topology
    # constrain, can allocate job when multi hyperNodes are available": both leaves hold the
    # gang; the fuller one (binpack across HyperNodes) is chosen, and the other need not be tried.
    objs: list[Any] = [queue("qa", 1)]
    for leaf, cpu in (("s0", "4"), ("s1", "8")):
        names = [f"{leaf}-n1", f"{leaf}-n2"]
        objs += [node(n, cpu=cpu, memory="16Gi") for n in names]
        objs.append(hypernode(leaf, 1, nodes=names))
    objs.append(hypernode("s2", 2, hypernodes=["s0", "s1"]))
    objs.append(podgroup("g", queue="qa", min_member=2, network_topology={"mode": "hard", "highestTierAllowed": 1}))
    objs += [pod(f"g-{t}", group="g", cpu="2", memory="1Gi") for t in range(2)]
    tried: list[str] = []
    real = allocate_hypernode._dry_run

    def spy(ssn: Any, search: Any, hn: str, *rest: Any) -> Any:
        tried.append(hn)
        return real(ssn, search, hn, *rest)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(allocate_hypernode, "_dry_run", spy)
        result = run_session(snapshot(objs), CONF)
    assert len(result.binds) == 2 and {n.split("-")[0] for _, n in result.binds} == {"s0"}
    assert tried == ["s0"]


def test_a_leaf_too_small_for_the_gang_is_not_dry_run_unless_the_job_is_refused() -> None:
    # Volcano allocate_test.go TestAllocateWithNetWorkTopologies case "hard network topology
    # constrain, can allocate job when multi hyperNodes are available", with s0 fragmented: the
    # HyperNode binpack prefers s0 (its 6 cpu would be full), but its two 3-cpu nodes take one
    # 2-cpu gang member each, not 3, so only s1 is dry-run.  Refused (a gang of 9), both are
    # dry-run and both are listed.
    def cluster(members: int) -> list[Any]:
        objs: list[Any] = [queue("qa", 1)]
        for leaf, cpu in (("s0", "3"), ("s1", "8")):
            names = [f"{leaf}-n1", f"{leaf}-n2"]
            objs += [node(n, cpu=cpu, memory="16Gi") for n in names]
            objs.append(hypernode(leaf, 1, nodes=names))
        objs.append(hypernode("s2", 2, hypernodes=["s0", "s1"]))
        spec = {"mode": "hard", "highestTierAllowed": 1}
        objs.append(podgroup("g", queue="qa", min_member=members, network_topology=spec))
        objs += [pod(f"g-{t}", group="g", cpu="2", memory="1Gi") for t in range(members)]
        return objs

    tried: list[str] = []
    real = allocate_hypernode._dry_run

    def spy(ssn: Any, search: Any, hn: str, *rest: Any) -> Any:
        tried.append(hn)
        return real(ssn, search, hn, *rest)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(allocate_hypernode, "_dry_run", spy)
        placed = run_session(snapshot(cluster(3)), CONF)
        assert {n.split("-")[0] for _, n in placed.binds} == {"s1"} and tried == ["s1"]
        tried.clear()
        refused = run_session(snapshot(cluster(9)), CONF)
    assert not refused.binds and sorted(tried) == ["s0", "s1"]
    why = refused.decisions["default/g"].why
    assert why is not None
    assert [d.split(" (")[0] for d in why.details] == [
        "tier 1 hypernode s0: 2 of 9 pending tasks fit, 9 needed",
        "tier 1 hypernode s1: 8 of 9 pending tasks fit, 9 needed",
    ]


def test_a_refusal_dry_runs_only_the_first_doomed_hypernodes() -> None:
    # Volcano allocate_test.go TestAllocateWithNetWorkTopologies case "hard network topology
    # constrain, can not allocate job when cross highestTierAllowed tier", on 20 one-node leaves:
    # refused either way; the first REFUSAL_DRY_RUNS leaves (by name) are dry-run for the
    # refusal's details, the others are listed with the room bound that doomed them.
    names = [f"s{i:02d}" for i in range(20)]
    objs: list[Any] = [queue("qa", 1)]
    for leaf in names:
        objs += [node(f"{leaf}-n1", cpu="2", memory="16Gi"), hypernode(leaf, 1, nodes=[f"{leaf}-n1"])]
    objs.append(hypernode("top", 2, hypernodes=names))
    objs.append(podgroup("g", queue="qa", min_member=3, network_topology={"mode": "hard", "highestTierAllowed": 1}))
    objs += [pod(f"g-{t}", group="g", cpu="2", memory="1Gi") for t in range(3)]
    result = run_session(snapshot(objs), CONF)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(allocate_hypernode, "PRUNE", False)
        exhaustive = run_session(snapshot(objs), CONF)
    assert not result.binds and not exhaustive.binds and not result.pipelined
    why = result.decisions["default/g"].why
    assert why is not None and "tried 20 hypernodes in tier 1" in why.summary
    details = [d.split(" (")[0] for d in why.details]
    k = allocate_hypernode.REFUSAL_DRY_RUNS
    assert 0 < k < 20
    assert details[:k] == [f"tier 1 hypernode {leaf}: 1 of 3 pending tasks fit, 3 needed" for leaf in names[:k]]
    bounded = [f"tier 1 hypernode {leaf}: at most 1 of 3 pending tasks fit, 3 needed" for leaf in names[k:]]
    assert details[k:] == bounded
    full = exhaustive.decisions["default/g"].why
    assert full is not None and full.details[:k] == why.details[:k] and full.summary == why.summary
