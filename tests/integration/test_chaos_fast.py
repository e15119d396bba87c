"""The fast chaos scenarios, on the whole system (real NATS, Valkey, emulator and every service,
with standbys): each injects its fault under load and the harness checks that no node was ever
over-committed, no gang is bound below minMember and every pod that fits is bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from lahar.chaos.harness import FAST, Scenario, run
from lahar.chaos.scenarios import SCENARIOS

FAST_SCENARIOS = [sc for sc in SCENARIOS if sc.fast]


def test_there_are_fast_scenarios() -> None:
    assert len(FAST_SCENARIOS) >= 5


@pytest.mark.slow
@pytest.mark.parametrize("scenario", FAST_SCENARIOS, ids=[sc.name for sc in FAST_SCENARIOS])
def test_fast_scenario(scenario: Scenario, tmp_path: Path, no_url_settings: None) -> None:
    outcome = run(scenario, FAST, base=tmp_path)
    assert outcome.passed, outcome.line()
    assert outcome.figures["overcommits"] == 0
    assert outcome.figures["binds"] > 0
