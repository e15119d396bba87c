"""cdp (cooldown protection) and pdb (PodDisruptionBudgets): victim filters of preempt, reclaim
and shuffle, with the expectations of Volcano's tests (SKIPPED.md §2.5 for pdb)."""

from __future__ import annotations

from typing import Any

import msgspec

from builders import _decode, make_conf, node, only, open_session, pod, podgroup, queue, task
from lahar.api.objects import Condition, PodDisruptionBudget
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.session import Session
from lahar_scheduler.plugins.cdp import cooldown_time

NOW = 1_700_000_000.0


def _stamp(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cdp_pod(name: str, cooldown: str, scheduled_ago: float | None) -> Any:
    """cdp_test.go makePod: Running with PodScheduled=True since ``scheduled_ago`` seconds, or
    Pending without conditions when None; the cooldown as an annotation."""
    p = pod(
        name,
        group="pg",
        cpu="1",
        node_name="n1" if scheduled_ago is not None else "",
        phase="Running" if scheduled_ago is not None else "Pending",
        labels={"volcano.sh/preemptable": "true"},
        annotations={"volcano.sh/cooldown-time": cooldown},
    )
    if scheduled_ago is None:
        return p
    cond = Condition(type="PodScheduled", status="True", last_transition_time=_stamp(NOW - scheduled_ago))
    return msgspec.structs.replace(p, status=msgspec.structs.replace(p.status, conditions=[cond]))


def session(objs: list[Any], plugin: str, *flags: str, now: float = NOW) -> Session:
    base = [node("n1", cpu="16", memory="32Gi"), queue("default"), podgroup("pg", min_member=1, phase="Running")]
    return open_session(base + objs, make_conf("preempt, reclaim, shuffle", [only(plugin, *flags)]), now=now)


# -- cdp -------------------------------------------------------------------------------------------


def test_cdp_cooldown_time_parsing() -> None:
    # volcano pkg/scheduler/plugins/cdp/cdp_test.go Test_CooldownTimePlugin_podPreemptStableTime
    # cases "normal" (600s → enabled, 600 s) and "not-enabled" ("600abcde" → disabled).
    assert cooldown_time(cdp_pod("a", "600s", 100)) == 600.0
    assert cooldown_time(cdp_pod("b", "600abcde", 100)) is None


def test_cdp_keeps_pods_within_their_cooldown_out_of_the_victims() -> None:
    # volcano cdp_test.go TestPreemptableFn: task1 600s scheduled 100 s ago is filtered; task2 with
    # an invalid cooldown and task3 scheduled 800 s ago are victims.
    objs = [cdp_pod("t1", "600s", 100), cdp_pod("t2", "600abcde", 100), cdp_pod("t3", "600s", 800)]
    ssn = session(objs, "cdp", "enablePreemptable", "enableReclaimable")
    cands = [task(ssn, f"default/{n}") for n in ("t1", "t2", "t3")]
    preemptor = cands[0]
    assert [t.name for t in ssn.call(P.PREEMPTABLE, preemptor, cands)] == ["t2", "t3"]
    assert [t.name for t in ssn.call(P.RECLAIMABLE, preemptor, cands)] == ["t2", "t3"]


def test_cdp_uses_the_session_clock() -> None:
    """The same pod is protected at NOW and a victim 600 s later: the clock is the snapshot's."""
    objs = [cdp_pod("t1", "600s", 100)]
    early = session(objs, "cdp", "enablePreemptable")
    late = session(objs, "cdp", "enablePreemptable", now=NOW + 600)
    assert early.call(P.PREEMPTABLE, task(early, "default/t1"), [task(early, "default/t1")]) == []
    assert [t.name for t in late.call(P.PREEMPTABLE, task(late, "default/t1"), [task(late, "default/t1")])] == ["t1"]


def test_cdp_label_wins_over_annotation_and_pending_pods_are_victims() -> None:
    p = cdp_pod("t1", "1s", 100)
    p = msgspec.structs.replace(
        p, metadata=msgspec.structs.replace(p.metadata, labels={"volcano.sh/cooldown-time": "1h"})
    )
    ssn = session([p, cdp_pod("t2", "1h", None)], "cdp", "enablePreemptable")
    t1, t2 = task(ssn, "default/t1"), task(ssn, "default/t2")
    # the label's 1h still runs (100 s ago); a pending pod has nothing to protect
    assert [t.name for t in ssn.call(P.PREEMPTABLE, t1, [t1, t2])] == ["t2"]


# -- pdb -------------------------------------------------------------------------------------------


def pdb(name: str, selector: dict[str, Any] | None, allowed: int, disrupted: tuple[str, ...] = ()) -> Any:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["selector"] = selector
    obj = _decode(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
            "status": {"disruptionsAllowed": allowed, "disruptedPods": {p: "2024-01-01T00:00:00Z" for p in disrupted}},
        }
    )
    assert isinstance(obj, PodDisruptionBudget)
    return obj


def pdb_pods() -> list[Any]:
    # pdb_test.go: two pods labelled volcano.sh/job-name=job-1
    return [
        pod(
            f"test-pod{i}",
            group="pg",
            cpu="1",
            node_name="n1",
            phase="Running",
            labels={"volcano.sh/job-name": "job-1"},
        )
        for i in (1, 2)
    ]


def pdb_victims(pdbs: list[Any]) -> tuple[list[str], list[str], list[str]]:
    ssn = session(pdb_pods() + pdbs, "pdb", "enablePreemptable", "enableReclaimable", "enabledVictim")
    cands = [task(ssn, "default/test-pod1"), task(ssn, "default/test-pod2")]
    names = lambda ts: sorted(t.name for t in ts)  # noqa: E731
    return (
        names(ssn.call(P.PREEMPTABLE, cands[0], cands)),
        names(ssn.call(P.RECLAIMABLE, cands[0], cands)),
        names(ssn.call(P.VICTIM_TASKS, cands)),
    )


def test_pdb_without_budgets_every_candidate_is_a_victim() -> None:
    # volcano pkg/scheduler/plugins/pdb/pdb_test.go TestPreemptableAndReclaimableFn "test without pdbs"
    both = ["test-pod1", "test-pod2"]
    assert pdb_victims([]) == (both, both, both)


def test_pdb_zero_disruptions_allowed_keeps_every_matching_pod() -> None:
    # pdb_test.go "test with pdbs(can evict 0 pod)"
    assert pdb_victims([pdb("test-pdb", {"matchLabels": {"volcano.sh/job-name": "job-1"}}, 0)]) == ([], [], [])


def test_pdb_one_disruption_allowed_lets_only_the_first_go() -> None:
    # pdb_test.go "test with pdbs(can evict 1 pod)"
    one = ["test-pod1"]
    assert pdb_victims([pdb("test-pdb", {"matchLabels": {"volcano.sh/job-name": "job-1"}}, 1)]) == (one, one, one)


def test_pdb_disrupted_pods_spend_nothing_and_empty_selectors_match_nothing() -> None:
    """pdb.go: a pod in status.disruptedPods is not counted; a nil or empty selector matches no
    pod (so a budget with 0 allowed and no selector protects nothing)."""
    sel = {"matchLabels": {"volcano.sh/job-name": "job-1"}}
    both = ["test-pod1", "test-pod2"]
    assert pdb_victims([pdb("a", sel, 1, disrupted=("test-pod1",))])[0] == both
    assert pdb_victims([pdb("a", None, 0), pdb("b", {}, 0)])[0] == both


def test_pdb_pods_without_labels_are_never_victims() -> None:
    """pdb.go skips a pod with no labels before it would add it to the victims."""
    ssn = session([pod("bare", group="pg", cpu="1", node_name="n1", phase="Running")], "pdb", "enablePreemptable")
    bare = task(ssn, "default/bare")
    assert ssn.call(P.PREEMPTABLE, bare, [bare]) == []


def test_pdb_budgets_reach_the_snapshot_from_deltas() -> None:
    """A PodDisruptionBudget delta lands in the snapshot the plugin reads, and its deletion removes it."""
    from lahar.wire.messages import Delta
    from lahar_scheduler.deltas import apply_delta, decode

    ssn = session([], "pdb", "enablePreemptable")
    snap = ssn.snapshot
    raw = msgspec.json.encode(msgspec.to_builtins(pdb("web", {"matchLabels": {"a": "b"}}, 2)))
    delta = Delta(kind="poddisruptionbudgets", op="ADDED", key="default/web", rv="1", obj=msgspec.Raw(raw))
    apply_delta(snap, delta, decode(delta))
    assert snap.pdbs["default/web"].status.disruptions_allowed == 2
    gone = Delta(kind="poddisruptionbudgets", op="DELETED", key="default/web", rv="2", obj=msgspec.Raw(raw))
    apply_delta(snap, gone, decode(gone))
    assert "default/web" not in snap.pdbs


# -- in the preempt action ---------------------------------------------------------------------------


def preempt_objs(extra: list[Any]) -> list[Any]:
    """test_preempt's "only as many as needed" cluster: 3 low-priority preemptable pods on a 6-cpu
    node, a 5-cpu high-priority preemptor that needs two of them gone."""
    from evict_builders import node as enode
    from evict_builders import pod as epod
    from evict_builders import podgroup as epg
    from evict_builders import priority_class, res
    from evict_builders import queue as equeue

    labels = {"volcano.sh/preemptable": "true", "app": "low"}
    return [
        priority_class("high-priority", 100000),
        priority_class("low-priority", 10),
        equeue("q1"),
        enode("n1", "6", "6G"),
        epg("pg1", "q1", 0, priority_class="low-priority"),
        epg("pg2", "q1", 1, priority_class="high-priority"),
        *[epod(f"preemptee{i}", "pg1", res("1", "1G"), "n1", labels=labels) for i in (1, 2, 3)],
        epod("preemptor1", "pg2", res("5", "5G")),
        *extra,
    ]


def preempt_with(plugin_name: str, extra: list[Any]) -> list[str]:
    from evict_builders import conf, evicted, plugin, run

    tier = [
        plugin("conformance", "enablePreemptable"),
        plugin("gang", "enablePreemptable", "enableJobPipelined", "enableJobStarving"),
        plugin(
            "priority",
            "enableTaskOrder",
            "enableJobOrder",
            "enablePreemptable",
            "enableJobPipelined",
            "enableJobStarving",
        ),
        plugin(plugin_name, "enablePreemptable", "enableReclaimable"),
    ]
    return evicted(run(preempt_objs(extra), conf("preempt", tier)))


def c1_pdb(allowed: int) -> Any:
    obj = pdb("low", {"matchLabels": {"app": "low"}}, allowed)
    return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, namespace="c1"))


def test_pdb_bounds_what_preempt_evicts() -> None:
    """Two victims are needed: a budget allowing 2 lets preempt take them; one allowing 1 lets it
    take one (not enough, so nothing is evicted: preempt keeps only statements that fit)."""
    assert len(preempt_with("pdb", [c1_pdb(2)])) == 2
    assert preempt_with("pdb", [c1_pdb(1)]) == []
