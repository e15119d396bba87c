"""``lahar bench preempt``'s clusters do what the benchmark claims: every pending pod gets room by
evicting exactly one low-priority (or over-share) task, in each of the three sessions."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lahar_scheduler.bench_preempt import cluster, measure


@pytest.mark.parametrize("kind", ["preempt", "reclaim", "topology"])
def test_each_pending_pod_evicts_one_task(kind: str) -> None:
    m = measure(kind, nodes=20, pending=20)
    assert m.evictions == 20  # 4-cpu pods on full nodes of 4-cpu tasks: one victim each
    assert m.seconds > 0


def test_the_cluster_is_full_and_the_reclaim_queues_are_over_and_under_their_share() -> None:
    snap = cluster(4, 10, reclaim=True)
    assert len(snap.nodes) == 4 and set(snap.queues) == {"queue-0", "queue-1", "queue-2", "queue-3"}
    running = [t for j in snap.jobs.values() for t in j.tasks.values() if t.node_name]
    assert len(running) == 4 * 8  # 8 tasks of 4 cpu fill each 32-cpu node


def test_the_cli_reports_json() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lahar", "bench", "preempt", "--nodes", "10", "--pending", "10", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    assert {"preempt_session_seconds", "reclaim_session_seconds", "topology_preempt_session_seconds"} <= set(report)
    assert report["evictions"] == {"preempt": 10, "reclaim": 10, "topology_preempt": 10}
