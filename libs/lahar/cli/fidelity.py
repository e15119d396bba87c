"""``lahar fidelity``: run the emulator-fidelity sequence on the emulator and on a real API server
and print, step by step, what is the same and what differs."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NODES = "3:cpu=8,memory=32Gi,pods=110"  # the emulator's nodes, and the control plane's it starts


def register(sub: Any) -> None:
    p = sub.add_parser(
        "fidelity",
        help="compare the Kubernetes API emulator with a real kube-apiserver, call by call",
        description="Run one scripted sequence of API calls against the emulator (started here) and a real "
        "API server, and print per step: same, or how it differs (known differences with their reason). "
        "The real server needs Volcano's CRDs; without --kubeconfig, `lahar kube up`'s control plane is "
        "started for the run (its binaries must be built: `lahar kube build`).",
    )
    p.add_argument("--kubeconfig", metavar="PATH", help="the real cluster (default: start one for the run)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from lahar.sim import Emulator, SimConfig
    from lahar.sim.fidelity.client import Client

    with Emulator(SimConfig(nodes=[NODES], start_delay=0.05)) as sim:
        emulator = Client("emulator", sim.url)
        if args.kubeconfig:
            return _compare(emulator, Client.from_kubeconfig("kube", args.kubeconfig))
        from lahar.kube import build
        from lahar.kube.control_plane import ControlPlane
        from lahar.sim.nodes import parse_spec

        if not build.cached():
            print("lahar fidelity: the Kubernetes binaries are not built: run `lahar kube build`", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory(prefix="lahar-fidelity-") as state:
            progress = lambda line: print(line, file=sys.stderr)  # noqa: E731
            with ControlPlane(Path(state), [parse_spec(NODES)], build.ensure(progress), progress) as plane:
                return _compare(emulator, Client.from_kubeconfig("kube", str(plane.kubeconfig)))


def _compare(emulator: Any, kube: Any) -> int:
    from lahar.sim.fidelity.compare import report_lines, stale
    from lahar.sim.fidelity.known import KNOWN
    from lahar.sim.fidelity.sequence import run as run_steps

    started = time.monotonic()
    try:
        verdicts = run_steps(emulator, kube, KNOWN)
    finally:
        emulator.close()
        kube.close()
    for line in report_lines(verdicts):
        print(line)
    same = sum(v.same for v in verdicts)
    known = sum(bool(v.known) and not v.new and not v.error for v in verdicts)
    bad = [v for v in verdicts if v.new or v.error]
    unused = stale(verdicts, KNOWN)
    for entry in unused:
        print(f"stale allow-list entry (no longer differs): {entry}")
    print(
        f"{len(verdicts)} steps: {same} same, {known} with known differences, {len(bad)} with new differences "
        f"or errors ({time.monotonic() - started:.1f} s)"
    )
    return 1 if bad or unused else 0
