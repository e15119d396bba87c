"""Emulator fidelity, measured: the scripted sequence of lahar.sim.fidelity.sequence on the emulator
and on kube-apiserver 1.34 (with its controller manager), step by step.  Every step must answer
the same (codes, errors, object shapes; not uids, timestamps or resourceVersions) or differ only
as lahar.sim.fidelity.known lists, with its reason; an entry that no longer matches is stale."""

from __future__ import annotations

import time

from lahar.kube.control_plane import ControlPlane
from lahar.kube.pytest_plugin import SESSION_NODES
from lahar.sim import Emulator, SimConfig
from lahar.sim.fidelity.client import Client
from lahar.sim.fidelity.compare import report_lines, stale
from lahar.sim.fidelity.known import KNOWN
from lahar.sim.fidelity.sequence import STEPS, run


def test_emulator_answers_as_kube_apiserver(kube_control_plane: ControlPlane) -> None:
    # The nodes of the kube_control_plane fixture: the steps that read or bind to a node see the same.
    with Emulator(SimConfig(nodes=list(SESSION_NODES), start_delay=0.05)) as sim:
        emulator = Client("emulator", sim.url)
        kube = Client.from_kubeconfig("kube", str(kube_control_plane.kubeconfig))
        started = time.monotonic()
        try:
            verdicts = run(emulator, kube, KNOWN)
        finally:
            emulator.close()
            kube.close()
        elapsed = time.monotonic() - started
    report = "\n".join(report_lines(verdicts))
    assert len(verdicts) == len(STEPS)
    assert not [v.step for v in verdicts if v.new or v.error], report
    assert not stale(verdicts, KNOWN), "allow-list entries that no longer differ:\n" + "\n".join(stale(verdicts, KNOWN))
    assert elapsed < 60, f"the sequence took {elapsed:.0f} s"
