"""``lahar demo`` (``make demo``): schedule the bundled example cluster and show what happened."""

from __future__ import annotations

import argparse
from importlib import resources
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the main job on the embedded default (the bundled example cluster)")
    p.add_argument("--cycles", type=int, default=2, help="sessions to run (default 2)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from lahar.api.files import load_file
    from lahar.cli.simulate import print_table
    from lahar_scheduler.core import load_conf
    from lahar_scheduler.simulation import simulate

    path = resources.files("lahar.examples") / "cluster.yaml"
    with resources.as_file(path) as real:
        loaded = load_file(real)
    pods = sum(1 for o in loaded.objects if o.kind == "Pod")
    nodes = sum(1 for o in loaded.objects if o.kind == "Node")
    print(f"Scheduling the example cluster ({nodes} nodes, {pods} pods) with Volcano's default configuration.\n")
    outcome = simulate(loaded.objects, load_conf(None), cycles=args.cycles)
    print_table(outcome)
    print(f"\n{len(outcome.binds)}/{pods} pods bound; gangs that could not fit carry a reason above.")
    return 0
