"""The fast chaos scenarios, on the whole system (real NATS, Valkey, emulator and every service,
with standbys): each injects its fault under load and the harness checks that no node was ever
over-committed, no gang is bound below minMember and every pod that fits is bound.  The leader
failover (standby-takeover) runs on a real control plane too, every service with its deploy/
ServiceAccount there (``lahar up --control-plane kube``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lahar.chaos.harness import FAST, Scenario, run
from lahar.chaos.scenarios import SCENARIOS
from lahar.kube.control_plane import audit_refusals

FAST_SCENARIOS = [sc for sc in SCENARIOS if sc.fast]
# The fast scenarios that also run on the real control plane: those that inject no emulator fault.
ON_KUBE = ("standby-takeover",)
RUNS = [(sc, "sim") for sc in FAST_SCENARIOS] + [(sc, "kube") for sc in FAST_SCENARIOS if sc.name in ON_KUBE]
# KWOK's pods run until deleted (it knows nothing of the emulator's sim.lahar.io/run-seconds), so
# on kube the same nodes are four times larger: every pod of the run fits without any finishing.
KUBE_FAST = replace(FAST, cpu=FAST.cpu * 4)


def test_there_are_fast_scenarios() -> None:
    assert len(FAST_SCENARIOS) >= 5


@pytest.mark.slow
@pytest.mark.parametrize(("scenario", "backend"), RUNS, ids=[f"{sc.name}-{backend}" for sc, backend in RUNS])
def test_fast_scenario(
    scenario: Scenario, backend: str, tmp_path: Path, no_url_settings: None, request: pytest.FixtureRequest
) -> None:
    shape = FAST
    if backend == "kube":
        request.getfixturevalue("kube_binaries")  # skipped, with the whole tier, without Go
        scenario = replace(scenario, config={**scenario.config, "control_plane": "kube", "kube_audit": True})
        shape = KUBE_FAST
    outcome = run(scenario, shape, base=tmp_path, keep=backend == "kube")
    assert outcome.passed, outcome.line()
    assert outcome.figures["overcommits"] == 0
    assert outcome.figures["binds"] > 0
    if backend == "kube":  # a service refused by RBAC may only log it and retry
        logs = Path(outcome.figures["logs"])
        refused = [p.name for p in logs.glob("*.log") if "forbidden" in p.read_text(errors="replace").lower()]
        assert not refused, f"refused by RBAC (403): see {logs}/{refused[0]}"
        assert not audit_refusals(logs.parent / "kube" / "audit.log")  # also the refusals no log shows
