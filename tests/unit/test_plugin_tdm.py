"""tdm: revocable zones with daily windows, on the session's clock (SKIPPED.md §2.4)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from builders import make_conf, node, only, open_session, passing, pod, podgroup, queue, scores, task
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.conf import ConfError
from lahar_scheduler.framework.types import Vote
from lahar_scheduler.plugins.tdm import WindowError, parse_window

# 12:00 UTC: "0:00-0:00" is open (all day), "0:00-0:01" is closed.
NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC).timestamp()
RZ = "volcano.sh/revocable-zone"


@pytest.mark.parametrize(
    ("raw", "delta", "err"),
    [
        # volcano pkg/scheduler/plugins/tdm/tdm_test.go Test_parseRevocableZone, every case
        ("00:00_01:00", 0, True),
        ("00:00-01:00", 3600, False),
        ("0:00-23:59", 23 * 3600 + 59 * 60, False),
        ("0:00", 0, True),
        ("1:00-0:00", 23 * 3600, False),
        ("1:0-0:0", 0, True),
        ("   1:00-0:00    ", 23 * 3600, False),
        ("23:59-23:59", 24 * 3600, False),
        ("63:59-23:59", 0, True),
    ],
)
def test_window_parsing(raw: str, delta: int, err: bool) -> None:
    if err:
        with pytest.raises(WindowError):
            parse_window(raw, NOON)
        return
    start, end = parse_window(raw, NOON)
    assert end - start == delta
    # anchored at the day of now (UTC)
    assert (
        start
        == datetime(
            2026, 12, 2, int(raw.strip().split(":")[0]), int(raw.strip().split(":")[1][:2]), tzinfo=UTC
        ).timestamp()
    )


def test_malformed_window_is_a_configuration_error_naming_the_key() -> None:
    text = (
        "actions: allocate\ntiers:\n- plugins:\n  - name: tdm\n    arguments:\n"
        "      tdm.revocable-zone.rz1: 25:00-1:00\n      tdm.evict.period: often\n"
    )
    with pytest.raises(ConfError) as exc:
        load_conf(text)
    msg = str(exc.value)
    assert "tdm.revocable-zone.rz1" in msg and "tdm.evict.period" in msg


ZONES = {"tdm.revocable-zone.rz1": "0:00-0:00", "tdm.revocable-zone.rz2": "0:00-0:01"}


def tdm_nodes() -> list[Any]:
    # Test_TDM: n1, n2 in rz1, n3, n4 ordinary, n5 in rz2; 16 cpu, 64Gi, 10 pods each
    zone = {"n1": "rz1", "n2": "rz1", "n5": "rz2"}
    return [
        node(n, cpu="16", memory="64Gi", pods="10", labels={RZ: zone[n]} if n in zone else {})
        for n in ("n1", "n2", "n3", "n4", "n5")
    ]


@pytest.mark.parametrize(
    ("case", "annotations", "passed", "expected_scores"),
    [
        # volcano tdm_test.go Test_TDM case "preemptable task rz available" (p1 with "*")
        ("p1", {RZ: "*"}, {"n1", "n2", "n3", "n4"}, {"n1": 100, "n2": 100, "n3": 0, "n4": 0}),
        # case "not preemptable task" (p2 without the annotation)
        ("p2", {}, {"n3", "n4"}, {"n3": 0, "n4": 0}),
        # case "preemptable task and multiple rz" (p3 with "*")
        ("p3", {RZ: "*"}, {"n1", "n2", "n3", "n4"}, {"n1": 100, "n2": 100, "n3": 0, "n4": 0}),
    ],
)
def test_tdm_predicate_and_node_order(
    case: str, annotations: dict[str, str], passed: set[str], expected_scores: dict[str, float]
) -> None:
    objs = [*tdm_nodes(), queue("c1"), podgroup("pg1", "c1", queue="c1", phase="Inqueue")]
    objs.append(pod(case, "c1", group="pg1", cpu="1", memory="1Gi", annotations=annotations))
    conf = make_conf("allocate", [only("tdm", "enableNodeOrder", "enablePredicate", **ZONES)])
    ssn = open_session(objs, conf, now=NOON)
    assert passing(ssn, f"c1/{case}") == passed
    got = scores(ssn, f"c1/{case}")
    assert {n: got[n] for n in passed} == expected_scores


def test_tdm_predicate_reasons_name_the_zone() -> None:
    objs = [*tdm_nodes(), queue("c1"), podgroup("pg1", "c1", queue="c1", phase="Inqueue")]
    objs.append(pod("p2", "c1", group="pg1", cpu="1", memory="1Gi"))
    ssn = open_session(objs, make_conf("allocate", [only("tdm", "enablePredicate", **ZONES)]), now=NOON)
    import numpy as np

    res = ssn.call(P.PREDICATE, task(ssn, "c1/p2"), np.arange(5, dtype=np.intp))
    text = res.errors.error(5)
    assert "current time beyond revocable zone rz2:0:00-0:01" in text
    assert "not allow to dispatch to revocable node" in text
    # both are unresolvable: preemption cannot help on those nodes
    assert sorted(ssn.node_list[i].name for i in res.unresolvable) == ["n1", "n2", "n5"]


def test_tdm_allocate_places_revocable_work_on_the_open_zone() -> None:
    """With nodeorder off, the 100 of tdm decides: the "*" pod lands on rz1, the other on n3/n4."""
    objs = [*tdm_nodes(), queue("c1"), podgroup("pg1", "c1", queue="c1", min_member=1, phase="Inqueue")]
    objs += [pod("p1", "c1", group="pg1", cpu="1", memory="1Gi", annotations={RZ: "*"})]
    objs += [
        podgroup("pg2", "c1", queue="c1", min_member=1, phase="Inqueue"),
        pod("p2", "c1", group="pg2", cpu="1", memory="1Gi"),
    ]
    tiers = [{"name": "tdm", "arguments": ZONES}], [{"name": "gang"}, {"name": "predicates"}]
    from builders import snapshot
    from lahar_scheduler.core import run_session

    result = run_session(snapshot(objs, NOON), make_conf("allocate", *tiers))
    got = {t.key: n for t, n in result.binds}
    assert got["c1/p1"] in ("n1", "n2")
    assert got["c1/p2"] in ("n3", "n4")


def victims_case(pgs: list[Any], pods: list[Any], nodes: list[str], args: dict[str, str]) -> int:
    rz = [node(n, cpu="16", memory="64Gi", pods="10", labels={RZ: "rz1"}) for n in nodes]
    objs = [*rz, queue("c1"), queue("c2"), *pgs, *pods]
    ssn = open_session(objs, make_conf("shuffle", [only("tdm", "enabledVictim", **args)]), now=NOON)
    return len(ssn.call(P.VICTIM_TASKS, []))


def run_pods(ns: str, group: str, node_name: str, names: list[str], preemptable: dict[str, str]) -> list[Any]:
    return [
        pod(
            n,
            ns,
            group=group,
            cpu="1",
            memory="1Gi",
            node_name=node_name,
            phase="Running",
            annotations={"volcano.sh/preemptable": preemptable[n]},
        )
        for n in names
    ]


P1_5 = run_pods(
    "c1",
    "pg1",
    "n1",
    ["p1", "p2", "p3", "p4", "p5"],
    {"p1": "true", "p2": "true", "p3": "true", "p4": "false", "p5": "false"},
)
P6_10 = run_pods(
    "c2", "pg2", "n2", ["p6", "p7", "p8", "p9", "p10"], dict.fromkeys(["p6", "p7", "p8", "p9", "p10"], "true")
)
CLOSED = {"tdm.revocable-zone.rz1": "0:00-0:01", "tdm.evict.period": "1s"}


def jdb(name: str, ns: str, key: str, value: str) -> Any:
    return podgroup(name, ns, queue=ns, phase="Running", annotations={f"volcano.sh/jdb-{key}": value})


@pytest.mark.parametrize(
    ("pgs", "pods", "nodes", "args", "want"),
    [
        # volcano tdm_test.go Test_TDM_victimsFn case 0: 30% of 5 → 2 of the 3 preemptable
        ([jdb("pg1", "c1", "max-unavailable", "30%")], P1_5, ["n1"], {**CLOSED, "tdm.evict.period": "100ms"}, 2),
        # case 1: the zone is open (0:00-0:00): nothing to evict
        (
            [jdb("pg1", "c1", "max-unavailable", "30%")],
            P1_5,
            ["n1"],
            {"tdm.revocable-zone.rz1": "0:00-0:00", "tdm.evict.period": "100ms"},
            0,
        ),
        # case 2: 99% → 5, capped by the 3 preemptable
        ([jdb("pg1", "c1", "max-unavailable", "99%")], P1_5, ["n1"], CLOSED, 3),
        # case 3: 50% of 5 → 3
        ([jdb("pg2", "c2", "max-unavailable", "50%")], P6_10, ["n2"], CLOSED, 3),
        # case 4: both jobs: 3 + 3
        (
            [jdb("pg2", "c2", "max-unavailable", "50%"), jdb("pg1", "c1", "max-unavailable", "90%")],
            P1_5 + P6_10,
            ["n1", "n2"],
            CLOSED,
            6,
        ),
        # case 5: max-unavailable "3"
        ([jdb("pg2", "c2", "max-unavailable", "3")], P6_10, ["n2"], CLOSED, 3),
        # case 6: min-available 3 of 5 running → 2
        ([jdb("pg2", "c2", "min-available", "3")], P6_10, ["n2"], CLOSED, 2),
    ],
)
def test_tdm_victims_within_job_budgets(
    pgs: list[Any], pods: list[Any], nodes: list[str], args: dict[str, str], want: int
) -> None:
    assert victims_case(pgs, pods, nodes, args) == want


def test_tdm_evict_period_spans_sessions_on_the_snapshot_clock() -> None:
    """The last eviction time is kept on the snapshot: a second session within the period finds
    no victims, one after it does (Volcano keeps it in a package variable, on the wall clock)."""
    from builders import snapshot
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.plugins import PLUGINS

    objs = [node("n2", labels={RZ: "rz1"}), queue("c2"), jdb("pg2", "c2", "max-unavailable", "50%"), *P6_10]
    conf = make_conf("shuffle", [only("tdm", "enabledVictim", **{**CLOSED, "tdm.evict.period": "1m"})])
    snap = snapshot(objs, NOON)
    counts = []
    for at in (NOON, NOON + 30, NOON + 61):
        snap.now = at
        ssn = Session(snap, conf, dict(PLUGINS)).open()
        counts.append(len(ssn.call(P.VICTIM_TASKS, [])))
        ssn.close()
    assert counts == [3, 0, 3]


def test_tdm_shuffle_evicts_from_a_closed_zone() -> None:
    from builders import snapshot
    from lahar_scheduler.core import run_session

    objs = [node("n2", labels={RZ: "rz1"}), queue("c2"), jdb("pg2", "c2", "max-unavailable", "50%"), *P6_10]
    result = run_session(snapshot(objs, NOON), make_conf("shuffle", [{"name": "tdm", "arguments": CLOSED}]))
    evicted = [t.name for t, _ in result.evictions]
    # Volcano takes the first 3 of a Go map (any 3); here the node's tasks in arrival order.
    assert evicted == ["p6", "p7", "p8"]


def test_tdm_preemptable_rules() -> None:
    """tdm.go preemptableFn: a preemptable or revocable preemptor rejects (no victims); otherwise
    only preemptable Running tasks on ordinary nodes, per job within its budget (default 1)."""
    objs = [node("n1", labels={RZ: "rz1"}), node("n3"), queue("c1"), queue("c2")]
    objs += [podgroup("pg1", "c1", queue="c1", phase="Running")]
    objs += run_pods("c1", "pg1", "n3", ["a1", "a2"], {"a1": "true", "a2": "true"})
    objs += run_pods("c1", "pg1", "n1", ["b1"], {"b1": "true"})
    objs += [podgroup("hp", "c2", queue="c2", phase="Inqueue")]
    objs += [pod("hi", "c2", group="hp", cpu="1", annotations={"volcano.sh/preemptable": "false"})]
    objs += [pod("soft", "c2", group="hp", cpu="1")]  # preemptable by default
    ssn = open_session(objs, make_conf("preempt", [only("tdm", "enablePreemptable", **ZONES)]), now=NOON)
    cands = [task(ssn, k) for k in ("c1/a1", "c1/a2", "c1/b1")]
    assert [t.name for t in ssn.call(P.PREEMPTABLE, task(ssn, "c2/hi"), cands)] == ["a1"]
    assert ssn.call(P.PREEMPTABLE, task(ssn, "c2/soft"), cands) == []
    fn = ssn.callbacks(P.PREEMPTABLE)[0]
    assert fn(task(ssn, "c2/soft"), cands)[1] == Vote.REJECT


def test_tdm_job_order_pipelined_and_starving() -> None:
    objs = [node("n1"), queue("q")]
    objs += [podgroup("el", queue="q", min_member=1, annotations={"volcano.sh/preemptable": "true"})]
    objs += [
        podgroup("hard", queue="q", min_member=1),
        pod("h1", group="hard", cpu="1"),
        pod("e1", group="el", cpu="1"),
    ]
    conf = make_conf("allocate", [only("tdm", "enableJobOrder", "enableJobPipelined", "enableJobStarving", **ZONES)])
    ssn = open_session(objs, conf, now=NOON)
    el, hard = ssn.jobs["default/el"], ssn.jobs["default/hard"]
    assert ssn.job_order_key(hard) < ssn.job_order_key(el)  # non-preemptable first
    assert ssn.call(P.JOB_STARVING, hard) and not ssn.call(P.JOB_STARVING, el)
    assert not ssn.call(P.JOB_PIPELINED, hard)  # 0 of minMember 1 placed: tdm rejects
