"""Enqueue-gate plugins: overcommit (SKIPPED.md §2.2) and sla (§2.3)."""

from __future__ import annotations

from typing import Any

import pytest

from builders import make_conf, node, only, open_session, pod, podgroup, queue, snapshot
from lahar_scheduler.core import load_conf, run_session
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.conf import ConfError
from lahar_scheduler.plugins.sla import parse_go_duration

# -- overcommit ------------------------------------------------------------------------------------


def overcommit_case(min_resources: dict[str, str] | None, factor: float, capability: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """overcommit_test.go: nodes 2 cpu/4Gi and 4 cpu/16Gi without ``pods``, one Inqueue PodGroup
    with minMember 2; the test calls JobEnqueued, then JobEnqueueable."""
    objs = [
        node("n1", cpu="2", memory="4Gi", pods=None),
        node("n2", cpu="4", memory="16Gi", pods=None),
        queue("c1", capability=capability),
        podgroup("pg1", "test-namespace", queue="c1", min_member=2, phase="Inqueue", min_resources=min_resources),
    ]
    conf = make_conf("enqueue", [only("overcommit", "enableJobEnqueued", **{"overcommit-factor": factor})])
    ssn = open_session(objs, conf)
    job = ssn.jobs["test-namespace/pg1"]
    ssn.call(P.JOB_ENQUEUED, job)
    return ssn, job


@pytest.mark.parametrize(
    ("name", "min_resources", "factor", "capability", "expected"),
    [
        # idle = 1.2 × (6 cpu, 20Gi) = 7.2 cpu; inqueue 2 (at open) + 2 (JobEnqueued) + 2 asked = 6.
        ("factor 1.2", {"cpu": "2000m", "memory": "2G"}, 1.2, None, True),
        ("factor below 1 falls back to 1.2", {"cpu": "2000m", "memory": "2G"}, 0.8, None, True),
        ("huge request", {"cpu": "20000m", "memory": "20G"}, 1.2, None, False),
        ("no minResources", None, 1.2, {"cpu": "200m", "memory": "0.5G"}, True),
    ],
)
def test_overcommit_table(
    name: str, min_resources: dict[str, str] | None, factor: float, capability: Any, expected: bool
) -> None:
    ssn, job = overcommit_case(min_resources, factor, capability)
    assert ssn.call(P.JOB_ENQUEUEABLE, job) is expected, name


def test_overcommit_factor_is_applied() -> None:
    """11 cpu asked of a 10-cpu cluster: admitted with the factor 1.2 (12 cpu), not with 1.0."""
    objs = [node("n1", cpu="10", memory="10Gi"), queue("q")]
    objs += [podgroup("a", queue="q", phase="Pending", min_resources={"cpu": "11"})]
    for factor, admitted in [(1.0, False), (1.2, True)]:
        conf = make_conf("enqueue", [only("overcommit", "enableJobEnqueued", **{"overcommit-factor": factor})])
        ssn = open_session(objs, conf)
        assert ssn.call(P.JOB_ENQUEUEABLE, ssn.jobs["default/a"]) is admitted, factor


def test_overcommit_idle_subtracts_used_and_running_reservations() -> None:
    objs = [
        node("n1", cpu="10", memory="100Gi"),
        queue("q"),
        # 4 cpu used on the node; a Running job with minResources 6 cpu holds 4 → still reserves 2.
        podgroup("r", queue="q", phase="Running", min_member=1, min_resources={"cpu": "6"}),
        pod("r-t-0", group="r", cpu="4", node_name="n1", phase="Running"),
        podgroup("new", queue="q", phase="Pending", min_resources={"cpu": "7"}),
        podgroup("fits", queue="q", phase="Pending", min_resources={"cpu": "6"}),
    ]
    ssn = open_session(objs, make_conf("enqueue", [{"name": "overcommit"}]))
    # idle = 12 − 4 = 8; inqueue 2: 7 + 2 > 8, 6 + 2 ≤ 8 (equal is enough).
    assert not ssn.call(P.JOB_ENQUEUEABLE, ssn.jobs["default/new"])
    assert ssn.jobs["default/new"].job_fit_error == "resource in cluster is overused: overused cpu"
    assert ssn.call(P.JOB_ENQUEUEABLE, ssn.jobs["default/fits"])


def test_overcommit_rejects_bad_factor_types() -> None:
    with pytest.raises(ConfError) as info:
        load_conf("actions: enqueue\ntiers:\n- plugins:\n  - name: overcommit\n    arguments: {overcommit-factor: x}\n")
    assert info.value.errors == ["tiers[0].plugins[0].arguments.overcommit-factor: expected float, got str"]


# -- sla -------------------------------------------------------------------------------------------

HOUR = 3600.0
# A session clock a day after the (zero) creation time of both jobs.
NOW = 24 * HOUR


def sla_objects() -> list[Any]:
    """sla_test.go: job1 has no waiting time, job2 one hour; both created at time zero."""
    return [
        queue("q"),
        podgroup("job1", queue="q", phase="Pending", min_member=1),
        podgroup("job2", queue="q", phase="Pending", min_member=1, annotations={"sla-waiting-time": "1h"}),
    ]


def sla_session(arguments: dict[str, Any] | None):  # type: ignore[no-untyped-def]
    """As the Volcano test: only sla, enabled for JobOrder and JobEnqueued."""
    opt = only("sla", "enableJobOrder", "enableJobEnqueued")
    if arguments:
        opt["arguments"] = arguments
    ssn = open_session(sla_objects(), make_conf("enqueue", [opt]), now=NOW)
    return ssn, ssn.jobs["default/job1"], ssn.jobs["default/job2"]


def sla_permits(objs: list[Any], job: str, now: float, arguments: dict[str, Any] | None = None) -> bool:
    """Whether sla votes Permit (not Abstain) for a job: sla in tier 1, gang in tier 2 on the
    pipelined vote.  The job has no task, so gang rejects; only a Permit from tier 1 makes the
    session's answer true."""
    opt: dict[str, Any] = {"name": "sla"}
    if arguments:
        opt["arguments"] = arguments
    ssn = open_session(objs, make_conf("allocate", [opt], [{"name": "gang"}]), now=now)
    return ssn.call(P.JOB_PIPELINED, ssn.jobs[job])


def test_sla_waiting_time_argument() -> None:
    """Row 1: with ``sla-waiting-time: 3m`` job1 inherits 3m, so 0+3m sorts before job2's 0+1h, and
    job1 has waited a day ≥ 3m: Permit."""
    ssn, job1, job2 = sla_session({"sla-waiting-time": "3m"})
    assert ssn.job_order(job1, job2) is True
    assert ssn.call(P.JOB_ENQUEUEABLE, job1) is True
    assert sla_permits(sla_objects(), "default/job1", NOW, {"sla-waiting-time": "3m"})


def test_sla_without_argument() -> None:
    """Row 3: no argument: job2 (the one with a waiting time) goes first; job1 only abstains,
    which lets it in."""
    ssn, job1, job2 = sla_session(None)
    assert ssn.job_order(job1, job2) is False
    assert ssn.job_order(job2, job1) is True
    assert ssn.call(P.JOB_ENQUEUEABLE, job1) is True
    assert not sla_permits(sla_objects(), "default/job1", NOW)  # it abstained
    assert sla_permits(sla_objects(), "default/job2", NOW)  # waited a day ≥ 1h


def test_sla_non_string_argument_is_a_configuration_error() -> None:
    """Row 2 of the table (``sla-waiting-time: 1``): Volcano logs the bad type, ignores the argument
    and behaves as row 3.  Lahar validates the configuration whole and rejects it with the path
    instead, so a running scheduler keeps its last good configuration rather than silently losing
    the SLA; the behaviour without the argument is row 3, tested above."""
    for bad in ("1", "true"):
        with pytest.raises(ConfError) as info:
            load_conf(
                f"actions: enqueue\ntiers:\n- plugins:\n  - name: sla\n    arguments: {{sla-waiting-time: {bad}}}\n"
            )
        assert info.value.errors[0].startswith("tiers[0].plugins[0].arguments.sla-waiting-time: expected str")
    with pytest.raises(ConfError) as info:
        load_conf("actions: enqueue\ntiers:\n- plugins:\n  - name: sla\n    arguments: {sla-waiting-time: 3 minutes}\n")
    assert "is not a duration" in info.value.errors[0]


def test_sla_permit_waits_for_the_waiting_time() -> None:
    objs = [
        queue("q"),
        podgroup("j", queue="q", phase="Pending", min_member=1, creation="1970-01-01T00:00:00Z"),
    ]
    args = {"sla-waiting-time": "2h"}
    assert not sla_permits(objs, "default/j", HOUR, args)
    assert sla_permits(objs, "default/j", 2 * HOUR, args)
    # The job's own annotation wins over the plugin argument.
    objs[1] = podgroup("j", queue="q", phase="Pending", min_member=1, annotations={"sla-waiting-time": "30m"})
    assert sla_permits(objs, "default/j", HOUR, args)


def test_sla_permit_in_an_earlier_tier_overrides_later_rejects() -> None:
    """A job that has waited past its SLA is admitted although overcommit (tier 2) rejects it."""
    objs = [
        node("n1", cpu="1", memory="1Gi"),
        queue("q"),
        podgroup(
            "big",
            queue="q",
            phase="Pending",
            min_member=1,
            min_resources={"cpu": "50"},
            annotations={"volcano.sh/sla-waiting-time": "10m"},
        ),
    ]
    conf = make_conf("enqueue", [{"name": "sla"}], [{"name": "overcommit"}])
    early = run_session(snapshot(objs, now=60), conf)
    assert early.podgroups["default/big"].phase == "Pending"
    late = run_session(snapshot(objs, now=3600), conf)
    assert late.podgroups["default/big"].phase == "Inqueue"


def test_sla_pipelined_vote_lets_a_waiting_gang_keep_its_reservation() -> None:
    """Past its waiting time, sla (tier 1) permits pipelining; gang's reject in tier 2 is not
    consulted, so the partial gang keeps its reservation (neither committed nor discarded)."""
    objs = [
        node("n1", cpu="1", memory="4Gi"),
        queue("q"),
        podgroup("g", queue="q", min_member=2, annotations={"volcano.sh/sla-waiting-time": "1s"}),
        pod("g-t-0", group="g", cpu="1"),
        pod("g-t-1", group="g", cpu="1"),
    ]
    conf = make_conf("allocate", [{"name": "sla"}], [{"name": "gang"}, {"name": "predicates"}])
    waited = run_session(snapshot(objs, now=10), conf)
    assert not waited.binds
    assert waited.decisions["default/g"].outcome == "pipelined"
    fresh = run_session(snapshot(objs, now=0), conf)
    assert fresh.decisions["default/g"].outcome == "discarded"
    # In the same tier as gang, gang's reject wins (any reject in a tier loses).
    same_tier = make_conf("allocate", [{"name": "gang"}, {"name": "sla"}, {"name": "predicates"}])
    assert run_session(snapshot(objs, now=10), same_tier).decisions["default/g"].outcome == "discarded"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("3m", 180), ("1h30m", 5400), ("1.5h", 5400), ("250ms", 0.25), ("2us", 2e-6), ("0", 0), ("-1m", -60)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "3", "m", "1x", "3 m", "1h-2m"])
def test_bad_go_durations(text: str) -> None:
    assert parse_go_duration(text) is None
