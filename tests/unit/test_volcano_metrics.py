"""Volcano's metrics: the numbers a session records (hand-computed), and the series they become.

The scenarios are small enough to work out on paper; each test says how.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any

import pytest
from evict_builders import node as enode
from evict_builders import pod as epod
from evict_builders import podgroup as epodgroup
from evict_builders import queue as equeue
from evict_builders import res
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from test_preempt import HIGH, LOW, NOT_PREEMPTABLE, PREEMPTABLE, preempt_conf
from test_reclaim import DEFAULT, LEVELS, reclaim_conf

from builders import make_conf, node, pod, podgroup, queue, run, snapshot
from lahar.api.resource import Resource
from lahar_controller.shell.metrics import JobPhaseCounts, PodGroupCounts
from lahar_scheduler.core import load_conf, run_session
from lahar_scheduler.framework.session import SessionResult
from lahar_scheduler.framework.stats import QueueNumbers, SessionStats
from lahar_scheduler.volcano import VolcanoMetrics, exponential_range
from lahar_scheduler.volcano_series import queue_samples

GI = 2.0**30
PROPORTION = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "drf"}], [{"name": "proportion"}])
CAPACITY = make_conf("enqueue, allocate", [{"name": "gang"}], [{"name": "capacity"}])


CREATED = "1970-01-01T00:01:00Z"  # 60 s after the epoch


def job(queue_name: str, tasks: int, namespace: str = "default", cpu: str = "1", min_member: int = 1) -> list[Any]:
    name = f"{queue_name}-job"
    out: list[Any] = [podgroup(name, namespace, queue=queue_name, min_member=min_member, creation=CREATED)]
    return out + [pod(f"{name}-t-{i}", namespace, group=name, cpu=cpu) for i in range(tasks)]


def weighted() -> list[Any]:
    """8 cpu; qa (weight 1) and qb (3) each ask 10 × 1 cpu, qc (2) asks 1 cpu, qempty (5) nothing."""
    return [
        node("n1", cpu="8", memory="16Gi"),
        queue("qa", 1),
        queue("qb", 3),
        queue("qc", 2),
        queue("qempty", 5),
        *job("qa", 10, "ns-a"),
        *job("qb", 10),
        *job("qc", 1),
    ]


# -- the session's numbers ---------------------------------------------------------------------------
def test_proportion_queue_numbers_are_the_water_filled_shares() -> None:
    """Round 1 splits 8 cpu 1:3:2 over 6: qa 1333, qb 4000, qc 2667 capped at its request of 1000
    (met).  Round 2 splits the 1667 left 1:3: qa 1750, qb 5250.  Allocatable then lets qa take
    1 task (2 > 1.75), qb 5 (6 > 5.25), qc 1.  Share = allocated/deserved in the dominant
    dimension: qa 1/1.75, qb 5/5.25, qc 1.  Only qc holds its whole deserved share (overused)."""
    stats = run(weighted(), PROPORTION).stats
    deserved = {name: q.deserved.milli_cpu for name, q in stats.queues.items()}
    assert deserved == pytest.approx({"qa": 1750, "qb": 5250, "qc": 1000, "qempty": 0})
    allocated = {name: q.allocated.milli_cpu for name, q in stats.queues.items()}
    assert allocated == {"qa": 1000, "qb": 5000, "qc": 1000, "qempty": 0}
    assert {name: q.request.milli_cpu for name, q in stats.queues.items()} == {
        "qa": 10000,
        "qb": 10000,
        "qc": 1000,
        "qempty": 0,
    }
    shares = {name: q.share for name, q in stats.queues.items()}
    assert shares == pytest.approx({"qa": 1 / 1.75, "qb": 5 / 5.25, "qc": 1.0, "qempty": 0.0})
    assert {name for name, q in stats.queues.items() if q.overused} == {"qc"}
    assert {name: q.weight for name, q in stats.queues.items()} == {"qa": 1, "qb": 3, "qc": 2, "qempty": 5}
    # No guarantees and no capabilities: every queue may grow to the whole cluster.
    assert all(
        q.real_capability.milli_cpu == 8000 and q.real_capability.memory == 16 * GI for q in stats.queues.values()
    )
    assert all(q.capability is None for q in stats.queues.values())


def test_drf_job_and_namespace_shares() -> None:
    """A job's share is its dominant share of the cluster: qa's 1 cpu of 8 = 0.125, qb's 5 of 8,
    qc's 1 of 8; namespace default holds qb's and qc's, 6 of 8."""
    stats = run(weighted(), PROPORTION).stats
    assert {j.name: j.share for j in stats.jobs.values()} == pytest.approx(
        {"qa-job": 0.125, "qb-job": 0.625, "qc-job": 0.125}
    )
    assert stats.namespace_shares == pytest.approx({"ns-a": 0.125, "default": 0.75})
    assert {j.name: j.namespace for j in stats.jobs.values()}["qa-job"] == "ns-a"


def test_capacity_queue_numbers_and_overused_past_share_one() -> None:
    """qcap deserves 2 cpu and may hold 3 (capability): it takes 3 of its 4 tasks, share 3/2 = 1.5
    > 1, so it is overused (capacity's rule).  qidle has no jobs: its spec's deserved, nothing
    held, no capability series, and the whole cluster as real capacity."""
    objs = [
        node("n1", cpu="8", memory="16Gi"),
        queue("qcap", deserved={"cpu": "2"}, capability={"cpu": "3"}),
        queue("qidle", deserved={"cpu": "1"}),
        *job("qcap", 4),
    ]
    stats = run(objs, CAPACITY).stats
    qcap, qidle = stats.queues["qcap"], stats.queues["qidle"]
    assert (qcap.deserved.milli_cpu, qcap.allocated.milli_cpu, qcap.request.milli_cpu) == (2000, 3000, 4000)
    assert qcap.share == pytest.approx(1.5) and qcap.overused
    assert qcap.capability is not None and qcap.capability.milli_cpu == 3000
    assert qcap.real_capability.milli_cpu == 3000
    assert (qidle.deserved.milli_cpu, qidle.allocated.milli_cpu, qidle.share, qidle.overused) == (1000, 0, 0.0, False)
    assert qidle.capability is None and qidle.real_capability.milli_cpu == 8000


def test_gang_counts_unschedulable_tasks_jobs_and_retries() -> None:
    """3 tasks of 4 cpu with minMember 3 on 8 cpu: allocate places 2, the third finds no room, the
    gang is discarded: 3 − 2 = 1 task short, one unschedulable job, one retry."""
    objs = [node("n1", cpu="8", memory="16Gi"), queue("q"), *job("q", 3, cpu="4", min_member=3)]
    stats = run(objs, make_conf("enqueue, allocate", [{"name": "gang"}], [{"name": "proportion"}])).stats
    numbers = stats.jobs["default/q-job"]
    assert (numbers.unschedulable_tasks, numbers.retried, stats.unschedulable_jobs) == (1, True, 1)


def test_a_ready_job_counts_zero_unschedulable_tasks() -> None:
    stats = run(weighted(), PROPORTION).stats
    assert stats.unschedulable_jobs == 0
    assert {j.unschedulable_tasks for j in stats.jobs.values()} == {0}
    assert not any(j.retried for j in stats.jobs.values())


def test_preemption_attempts_and_victims() -> None:
    """pg2 (high priority, starving) preempts on n1, where preemptee1 is the only preemptable
    task: one node tried (one attempt) with one victim."""
    objs = [
        HIGH,
        LOW,
        equeue("q1"),
        enode("n1", "2", "2G"),
        epodgroup("pg1", "q1", 1, priority_class="low-priority"),
        epodgroup("pg2", "q1", 1, priority_class="high-priority"),
        epod("preemptee1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        epod("preemptee2", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        epod("preemptor1", "pg2", res("1", "1G")),
        epod("preemptor2", "pg2", res("1", "1G")),
    ]
    for topology in (False, True):
        result = run_session(snapshot(objs), preempt_conf(topology))
        assert [t.key for t, _ in result.evictions] == ["c1/preemptee1"]
        assert (result.stats.preemption_attempts, result.stats.preemption_victims) == (1, 1)
        assert result.stats.eviction_transactions == {"preempt": 1}  # pg2's statement, committed


def test_reclaim_counts_its_evicting_commit() -> None:
    """q1 holds all 3 cpu, q2's preemptor reclaims preemptee2 (the only preemptable task): one
    committed statement that evicts."""
    objs = [
        *LEVELS,
        equeue("q1"),
        equeue("q2"),
        enode("n1", "3", "3Gi"),
        epodgroup("pg1", "q1", 1, priority_class="low-priority"),
        epodgroup("pg2", "q2", 1, priority_class="high-priority"),
        epod("preemptee1", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        epod("preemptee2", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        epod("preemptee3", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        epod("preemptor1", "pg2", res("1", "1G")),
    ]
    result = run_session(snapshot(objs), reclaim_conf(*DEFAULT))
    assert [t.key for t, _ in result.evictions] == ["c1/preemptee2"]
    assert result.stats.eviction_transactions == {"reclaim": 1}
    registry = CollectorRegistry()
    VolcanoMetrics(registry).session(result, {}, 0.0, now=0.0)
    got = scrape(registry)
    assert got[("volcano_eviction_transactions_total", (("action", "reclaim"),))] == 1
    assert got[("volcano_eviction_transactions_total", (("action", "preempt"),))] == 0


def test_timings_come_from_the_callers_clock_and_change_nothing() -> None:
    """A clock that ticks 1 s per reading: each timed part spans exactly one tick; open spans
    every plugin's open (2 readings each) plus one.  Without a clock nothing is timed and the
    decisions are the same."""
    ticks = itertools.count()
    timed = run_session(snapshot(weighted()), PROPORTION, clock=lambda: float(next(ticks)))
    plain = run_session(snapshot(weighted()), PROPORTION)
    assert [(t.key, n) for t, n in timed.binds] == [(t.key, n) for t, n in plain.binds]
    plugins = ["gang", "drf", "proportion"]
    assert set(timed.stats.plugin_seconds) == {(p, h) for p in plugins for h in ("OnSessionOpen", "OnSessionClose")}
    assert set(timed.stats.plugin_seconds.values()) == {1.0}
    assert timed.stats.action_seconds.keys() == {"enqueue", "allocate"}
    assert timed.stats.open_seconds == 2 * len(plugins) + 1
    assert plain.stats.open_seconds is None and not plain.stats.plugin_seconds and not plain.stats.action_seconds


# -- the series ---------------------------------------------------------------------------------------
def test_queue_samples_units_and_scalars() -> None:
    """cpu in millicores, memory in bytes, GPUs by name; pods are no scalar series; a queue
    without a capability has no capacity series; overused is 0 or 1."""
    r = Resource(1500, 2 * GI, {"nvidia.com/gpu": 2, "pods": 3})
    q = QueueNumbers("q", 4, r, r, r, Resource(), r, None, 0.25, True)
    got = {(name, tuple(sorted(labels.items()))): value for name, labels, value in queue_samples(q)}
    assert got[("volcano_queue_allocated_milli_cpu", (("queue_name", "q"),))] == 1500
    assert got[("volcano_queue_deserved_memory_bytes", (("queue_name", "q"),))] == 2 * GI
    gpu = (("queue_name", "q"), ("resource", "nvidia.com/gpu"))
    assert got[("volcano_queue_request_scalar_resources", gpu)] == 2
    assert not any(dict(labels).get("resource") == "pods" for _, labels in got)
    assert not any(name.startswith("volcano_queue_capacity_") for name, _ in got)
    assert got[("volcano_queue_real_capacity_milli_cpu", (("queue_name", "q"),))] == 1500
    assert got[("volcano_queue_overused", (("queue_name", "q"),))] == 1
    assert got[("volcano_queue_weight", (("queue_name", "q"),))] == 4
    assert got[("volcano_queue_share", (("queue_name", "q"),))] == 0.25


def test_exponential_buckets_match_gos_range() -> None:
    """ExponentialBucketsRange(1, 5000, 20): first 1, last 5000, a constant ratio."""
    b = exponential_range(1, 5000, 20)
    assert len(b) == 20 and b[0] == 1 and b[-1] == pytest.approx(5000)
    assert b[1] / b[0] == pytest.approx(b[-1] / b[-2])


def scrape(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def names(samples: Iterable[tuple[str, Any]]) -> set[str]:
    return {name for name, _ in samples}


def test_series_follow_the_last_session_and_vanish_with_their_objects() -> None:
    registry = CollectorRegistry()
    metrics = VolcanoMetrics(registry)
    objs = weighted()
    snap = snapshot(objs)
    for task in snap.tasks.values():
        task.creation = "1970-01-01T00:01:30Z"  # the builders' pods have none: 90 s
    result = run_session(snap, PROPORTION, clock=iter(itertools.count()).__next__)
    metrics.session(result, snap.jobs, 0.25, now=100.0)
    got = scrape(registry)
    assert got[("volcano_queue_deserved_milli_cpu", (("queue_name", "qa"),))] == pytest.approx(1750)
    assert got[("volcano_queue_overused", (("queue_name", "qc"),))] == 1
    assert got[("volcano_job_share", (("job_id", "qb-job"), ("job_ns", "default")))] == pytest.approx(0.625)
    assert got[("volcano_namespace_share", (("namespace_name", "default"),))] == pytest.approx(0.75)
    assert got[("volcano_unschedule_job_count", ())] == 0
    assert got[("volcano_e2e_scheduling_latency_milliseconds_count", ())] == 1
    assert got[("volcano_e2e_scheduling_latency_milliseconds_sum", ())] == 250
    assert got[("volcano_schedule_attempts_total", (("result", "scheduled"),))] == 7
    assert got[("volcano_action_scheduling_latency_milliseconds_count", (("action", "allocate"),))] == 1
    assert (
        got[
            ("volcano_plugin_scheduling_latency_microseconds_sum", (("OnSession", "OnSessionOpen"), ("plugin", "gang")))
        ]
        == 1e6
    )
    labels = (("job_name", "qa-job"), ("job_namespace", "ns-a"), ("queue", "qa"))
    assert got[("volcano_e2e_job_scheduling_start_time", labels)] == 60  # its creation, epoch seconds
    assert got[("volcano_e2e_job_scheduling_duration", labels)] == 40_000  # placed at 100 s: 40 s later, in ms
    assert got[("volcano_e2e_job_scheduling_last_time", labels)] == 100
    assert got[("volcano_e2e_job_scheduling_latency_milliseconds_count", ())] == 3  # three jobs placed
    assert got[("volcano_task_scheduling_latency_milliseconds_count", (("stage", "Assumed"),))] == 7
    assert got[("volcano_task_scheduling_latency_milliseconds_sum", (("stage", "Assumed"),))] == 7 * 10_000
    assert got[("volcano_total_preemption_attempts", ())] == 0  # Volcano's exact name, no _total

    # qa and its job are deleted: the next session has neither, and neither have their series.
    rest = [o for o in objs if "qa" not in o.metadata.name]
    snap2 = snapshot(rest)
    metrics.session(run_session(snap2, PROPORTION), snap2.jobs, 0.1, now=101.0)
    got = scrape(registry)
    assert not [
        k for k in got if ("queue_name", "qa") in k[1] or ("queue", "qa") in k[1] or ("job_id", "qa-job") in k[1]
    ]
    assert ("volcano_queue_deserved_milli_cpu", (("queue_name", "qb"),)) in got

    metrics.clear()  # no longer leading: the gauges go, the histograms (history) stay
    gauges = ("volcano_queue_", "volcano_job_share", "volcano_e2e_job_scheduling_start", "volcano_unschedule")
    assert not any(name.startswith(gauges) for name, _ in scrape(registry))


def test_retry_counts_accumulate_per_job_and_go_with_it() -> None:
    registry = CollectorRegistry()
    metrics = VolcanoMetrics(registry)
    stuck = [node("n1", cpu="8", memory="16Gi"), queue("q"), *job("q", 3, cpu="4", min_member=3)]
    conf = load_conf(None)
    for _ in range(3):
        snap = snapshot(stuck)
        metrics.session(run_session(snap, conf), snap.jobs, 0.01, now=1.0)
    got = scrape(registry)
    assert got[("volcano_job_retry_counts", (("job_id", "q-job"),))] == 3
    assert got[("volcano_unschedule_task_count", (("job_id", "q-job"),))] == 1
    assert got[("volcano_unschedule_job_count", ())] == 1
    empty = snapshot([node("n1"), queue("q")])
    metrics.session(run_session(empty, conf), empty.jobs, 0.01, now=2.0)
    got = scrape(registry)
    assert not any(("job_id", "q-job") in labels for _, labels in got)


def test_controller_podgroup_counts_follow_its_source() -> None:
    registry = CollectorRegistry()
    counts = PodGroupCounts()
    registry.register(counts)
    assert not [k for k in scrape(registry) if k[0].startswith("volcano_queue_pod_group")]
    counts.source = lambda: {"q1": {"pending": 2, "running": 1}, "q2": {}}
    got = scrape(registry)
    assert got[("volcano_queue_pod_group_pending_count", (("queue_name", "q1"),))] == 2
    assert got[("volcano_queue_pod_group_running_count", (("queue_name", "q1"),))] == 1
    assert got[("volcano_queue_pod_group_completed_count", (("queue_name", "q2"),))] == 0
    assert {k[0] for k in got if k[0].startswith("volcano_queue_pod_group")} == {
        f"volcano_queue_pod_group_{p}_count" for p in ("inqueue", "pending", "running", "unknown", "completed")
    }


def test_infinite_capability_is_exported_as_inf() -> None:
    stats = SessionStats(
        queues={
            "q": QueueNumbers(
                "q", 1, Resource(), Resource(), Resource(), Resource(), Resource(), Resource(1, math.inf), 0, False
            )
        }
    )
    registry = CollectorRegistry()
    metrics = VolcanoMetrics(registry)
    metrics.session(SessionResult(stats=stats), {}, 0.0, now=0.0)
    assert scrape(registry)[("volcano_queue_capacity_memory_bytes", (("queue_name", "q"),))] == math.inf


def test_controller_job_phase_counts_exact_names_and_only_final_phases() -> None:
    registry = CollectorRegistry()
    phases = JobPhaseCounts()
    registry.register(phases)
    phases.source = lambda: [("ns/a", "q", "Completed"), ("ns/b", "q", "Failed"), ("ns/c", "q", "Running")]
    text = generate_latest(registry).decode()
    got = scrape(registry)
    assert got[("volcano_job_completed_phase_count", (("job_name", "ns/a"), ("queue_name", "q")))] == 1
    assert got[("volcano_job_failed_phase_count", (("job_name", "ns/b"), ("queue_name", "q")))] == 1
    assert not [k for k in got if ("job_name", "ns/c") in k[1]]
    assert "_phase_count_total" not in text  # Volcano's names, not prometheus_client's counter names
    phases.source = None  # a standby
    assert not [k for k in scrape(registry) if k[0].startswith("volcano_job_")]
