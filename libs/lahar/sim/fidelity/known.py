"""Differences between the emulator and kube-apiserver that we accept, each with its reason.

Every entry names a step of ``sequence.STEPS`` and the paths of its record that differ
(fnmatch patterns).  tests/kube/test_fidelity.py fails on any difference not listed here and on
any entry that no longer matches a difference (the emulator was fixed: remove the entry).  The
same reasons are in the emulator's README, section "What it does not emulate".
"""

from __future__ import annotations

from lahar.sim.fidelity.compare import Known

KNOWN: list[Known] = [
    Known(
        "patch: apply (server-side apply)",
        ("code", "body.*"),
        "no server-side apply (no managedFields to merge by): application/apply-patch+yaml gets 415",
    ),
    Known(
        "pod: update of an immutable spec field (422)",
        ("causes[[]0[]].message",),
        "the server appends a diff of its internal Go struct to this message; the emulator gives the first line",
    ),
    Known(
        "dra: claim spec is immutable (422)",
        ("body.message", "body.details.causes[[]0[]].message"),
        "the server puts a dump of its internal Go struct in this message; the emulator says 'field is immutable'",
    ),
    Known(
        "dra: an allocation cannot change (422)",
        ("body.message", "body.details.causes[[]0[]].message"),
        "the server puts a dump of its internal Go struct in this message; the emulator says 'field is immutable'",
    ),
    Known(
        "pod: status once running (simulated kubelet vs KWOK)",
        ("conditions.PodReadyToStartContainers", "containers[[]0[]].started", "fields.hostIPs"),
        "not the API server but the simulated kubelets: the emulator's reports what kubelet 1.34 does "
        "(PodReadyToStartContainers, containerStatuses[].started, hostIPs), KWOK 0.7 does not",
    ),
]
