"""``lahar bench restart``: its cluster is what it claims, and at a tiny size it reports the JSON
issue 14 names (a real NATS and Valkey, a real scheduler service, a real first decision)."""

from __future__ import annotations

import json
import subprocess
import sys

from lahar.api.codec import decode_json_as
from lahar.api.objects import Pod, PodGroup
from lahar_scheduler.restart_cluster import build


def test_most_pods_run_bound_and_the_rest_wait_in_pending_gangs() -> None:
    cluster = build(nodes=7, pods=95, pending=25)
    pods = [decode_json_as(raw, Pod) for _, raw in cluster.objects["pods"]]
    bound = [p for p in pods if p.spec.node_name]
    assert len(pods) == 95 and len(bound) == 70
    assert {p.status.phase for p in bound} == {"Running"}
    assert {p.status.phase for p in pods if not p.spec.node_name} == {"Pending"}
    assert len({p.spec.node_name for p in bound}) == 7  # spread over every node
    groups = [decode_json_as(raw, PodGroup) for _, raw in cluster.objects["podgroups"]]
    waiting = [g for g in groups if g.status.phase == "Pending"]
    assert [g.spec.min_member for g in waiting] == [10, 10, 5]  # 25 pending pods in gangs of 10
    assert cluster.count("nodes") == 7 and cluster.count("queues") == 4


def test_the_cluster_is_the_same_for_a_seed() -> None:
    assert build(5, 40, 10, seed=3).objects == build(5, 40, 10, seed=3).objects


LAHAR = [sys.executable, "-m", "lahar"]


def test_the_cli_reports_json() -> None:
    done = subprocess.run(
        [*LAHAR, "bench", "restart", "--nodes", "20", "--pods", "200", "--pending", "20", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert {"seconds_to_first_decision", "snapshot_load_seconds", "first_session_seconds"} <= set(report)
    assert report["nodes"] == 20 and report["pods"] == 200 and report["pending_pods"] == 20
    # the snapshot loads before the first session, which comes before its decision is seen
    assert 0 < report["mirror_read_seconds"] <= report["snapshot_load_seconds"]
    assert report["snapshot_load_seconds"] < report["seconds_to_first_decision"]
    assert report["first_session_seconds"] > 0
    assert report["load_cpu_seconds"] > 0 and report["first_session_cpu_seconds"] > 0
    assert report["binds_first_session"] == 20  # two gangs of 10 on 20 nodes with room
    assert report["first_decision_subject"].startswith("decision.")
    assert report["peak_rss_bytes"] > 0
    # the standby took over from its warm snapshot: no reload, its own first decision
    assert report["takeover_reloads"] == 0
    assert 0 < report["takeover_first_session_seconds"] < report["takeover_seconds_to_first_decision"]
