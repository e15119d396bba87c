"""Same snapshot, configuration and seed → the same SessionResult; seeds only break ties."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from builders import node, pod, podgroup, priority_class, queue, snapshot
from lahar.api.codec import to_builtins
from lahar_scheduler.core import load_conf, run_session
from lahar_scheduler.framework.session import SessionResult


def scenario() -> list[Any]:
    """Symmetric nodes (so placement ties happen), several queues, gangs, priorities, BestEffort
    pods, a releasing pod (pipelining) and a gang too big to fit."""
    objs: list[Any] = [priority_class("high", 100)]
    objs += [
        node(f"n{i}", cpu="4", memory="8Gi", pods="6", labels={"zone": "ab"[i % 2], "name": f"n{i}"}) for i in range(6)
    ]
    objs += [queue("qa", 1), queue("qb", 2), queue("qc", 1, capability={"cpu": "3"})]
    objs += [
        podgroup("old", queue="qa", min_member=1, phase="Running"),
        pod("old-t-0", group="old", cpu="3", memory="1Gi", node_name="n0", phase="Running", deleting=True),
    ]
    specs = [
        ("a", "qa", 3, 3, "1", ""),
        ("b", "qb", 2, 4, "500m", "high"),
        ("c", "qc", 1, 4, "1", ""),
        ("huge", "qb", 4, 4, "4", ""),
        ("be", "qa", 0, 3, "", ""),
        ("late", "qa", 2, 2, "2", ""),
    ]
    for name, q, min_member, n, cpu, pc in specs:
        objs.append(podgroup(name, queue=q, min_member=min_member, priority_class=pc, phase="Inqueue"))
        for i in range(n):
            objs.append(pod(f"{name}-t-{i}", group=name, cpu=cpu or None, memory="512Mi" if cpu else None))
    # Only n0 may take it, and only once old-t-0 has left: pipelined.
    objs += [
        podgroup("pin", queue="qb", min_member=1),
        pod("pin-t-0", group="pin", cpu="3", node_selector={"name": "n0"}),
    ]
    return objs


def normalise(res: SessionResult) -> dict[str, Any]:
    """Everything a session decides, in the order it was decided."""
    return {
        "binds": [(t.key, n) for t, n in res.binds],
        "evictions": [(t.key, r) for t, r in res.evictions],
        "pipelined": sorted(res.pipelined.items()),
        "podgroups": {
            k: (
                u.phase,
                [(c.type, c.status, c.reason, c.message, c.transition_id) for c in u.conditions],
                u.running,
            )
            for k, u in sorted(res.podgroups.items())
        },
        "queues": {k: str(v) for k, v in sorted(res.queues.items())},
        "reasons": {k: (r.reason, r.message, r.nominated_node) for k, r in sorted(res.task_reasons.items())},
        "decisions": {k: (d.outcome, sorted(d.chosen.items()), d.reason) for k, d in sorted(res.decisions.items())},
    }


def run_once(seed: int) -> dict[str, Any]:
    return normalise(run_session(snapshot(scenario()), load_conf(None), seed=seed))


def test_same_input_and_seed_give_the_same_result() -> None:
    for seed in (0, 1, 7):
        first = run_once(seed)
        assert first["binds"], "the scenario must decide something"
        assert first["pipelined"], "and pipeline something"
        for _ in range(2):
            assert run_once(seed) == first


def test_seeds_only_break_ties() -> None:
    """Across seeds the same pods are bound, pipelined and refused, with the same phases; only
    which of the equally good nodes they land on may change, and with these symmetric nodes it
    does for some seed (the seed is really used)."""
    results = [run_once(seed) for seed in range(8)]

    def node_free(r: dict[str, Any]) -> Any:
        return (
            sorted(k for k, _ in r["binds"]),
            [k for k, _ in r["pipelined"]],
            {k: v[0] for k, v in r["podgroups"].items()},
            {k: v[0] for k, v in r["decisions"].items()},
        )

    assert all(node_free(r) == node_free(results[0]) for r in results)
    placements = {tuple(sorted(r["binds"])) for r in results}
    assert len(placements) > 1


def test_run_does_not_change_its_inputs() -> None:
    objs = scenario()
    before = [to_builtins(o) for o in objs]
    run_session(snapshot(objs), load_conf(None), seed=3)
    assert [to_builtins(o) for o in objs] == before


def test_determinism_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    """String hashing differs per process; a decision that depended on set or dict-of-set order would
    show up here."""
    f = tmp_path / "objs.yaml"
    f.write_text(yaml.safe_dump_all([to_builtins(o) for o in scenario()]))
    outs = []
    for hash_seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        cmd = [
            sys.executable,
            "-m",
            "lahar",
            "simulate",
            str(f),
            "--cycles",
            "2",
            "--seed",
            "5",
            "--output",
            "json",
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        outs.append(json.loads(out.stdout))
    assert outs[0]["binds"]
    assert outs[0] == outs[1] == outs[2]
