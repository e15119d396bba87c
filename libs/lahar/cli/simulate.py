"""``lahar simulate``: run the scheduler offline over Kubernetes objects and print its decisions.

What it had to add or leave out of the files (a ``default`` Queue, kinds it does not read,
references to missing objects, plugins not supported yet) is printed on stderr, one
``warning:`` line each, and listed under ``warnings`` in ``--output json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lahar.api.files import FileError, Skipped, load_file


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="what-if: schedule objects from files and print the decisions")
    p.add_argument("files", nargs="+", metavar="FILE", help="YAML/JSON objects, a List, or a conformance case")
    p.add_argument("--conf", help="a volcano-scheduler.conf file (default: the built-in configuration)")
    p.add_argument("--cycles", type=int, default=None, help="sessions to run (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed for tie-breaking between equal nodes")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from lahar.cli._dump import prepare
    from lahar_scheduler.core import load_conf
    from lahar_scheduler.framework.conf import ConfError
    from lahar_scheduler.simulation import simulate

    objects: list[Any] = []
    skipped: list[Skipped] = []
    case: dict[str, Any] | None = None
    try:
        for f in args.files:
            loaded = load_file(f)
            objects.extend(loaded.objects)
            skipped.extend(loaded.skipped)
            case = case or loaded.case
    except FileError as exc:
        print(f"lahar simulate: {exc}", file=sys.stderr)
        return 2
    try:
        text = case["schedulerConf"] if case else None
        if args.conf:
            text = Path(args.conf).read_text()
        # A what-if run goes on without plugins Lahar lacks, and says so below.
        conf = load_conf(text, leave_out_unsupported=True)
    except OSError as exc:
        print(f"lahar simulate: {args.conf}: cannot read: {exc.strerror}", file=sys.stderr)
        return 2
    except ConfError as exc:
        print(f"lahar simulate: {args.conf or 'schedulerConf'}: {exc}", file=sys.stderr)
        return 2
    cycles = args.cycles if args.cycles is not None else int((case or {}).get("cycles", 1))
    if cycles < 1:
        print("lahar simulate: --cycles: must be at least 1", file=sys.stderr)
        return 2
    dump = prepare(
        objects,
        skipped,
        cluster=case is None,
        quotas_read=conf.plugin("resourcequota") is not None,
        pdbs_read=conf.plugin("pdb") is not None,
    )
    where = args.conf or "schedulerConf"
    warnings = [f"{where}: {line}; left out of this run" for line in conf.left_out] + dump.warnings
    for line in warnings:
        print(f"lahar simulate: warning: {line}", file=sys.stderr)
    outcome = simulate(dump.objects, conf, cycles=cycles, seed=args.seed)
    if args.output == "json":
        print(json.dumps({**outcome.to_json(), "warnings": warnings}, indent=2))
    else:
        print_table(outcome)
    return 0


def print_table(outcome: Any) -> None:
    data = outcome.to_json()
    rows = [("BIND", pod, node) for pod, node in data["binds"].items()]
    rows += [("EVICT", pod, "") for pod in data["evictions"]]
    rows += [("PIPELINE", pod, node) for pod, node in data["pipelined"].items()]
    if rows:
        width = max(len(r[1]) for r in rows)
        print(f"{'DECISION':<9} {'POD':<{width}}  NODE")
        for kind, pod, node in rows:
            print(f"{kind:<9} {pod:<{width}}  {node}")
    else:
        print("no binds, evictions or pipelined tasks")
    if data["podGroupPhases"]:
        print()
        width = max(len(k) for k in data["podGroupPhases"])
        print(f"{'PODGROUP':<{width}}  PHASE      CONDITION")
        for pg, phase in data["podGroupPhases"].items():
            print(f"{pg:<{width}}  {phase:<9}  {data['conditions'].get(pg, '')}")
