"""``lahar chaos``: fault scenarios on the whole system (real NATS, Valkey, emulator, services),
one line per scenario with its figures, ending ``N passed, M failed``."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("chaos", help="run fault scenarios and check no node is ever over-committed")
    p.add_argument("scenarios", nargs="*", help="scenario names (default: all); --list shows them")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--fast", action="store_true", help="only the fast scenarios, on a small cluster")
    p.add_argument("--nodes", type=int, help="simulated nodes (default 200; 40 with --fast)")
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.add_argument("--keep", action="store_true", help="keep every scenario's logs (failed ones are always kept)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from lahar.chaos.harness import FAST, Shape
    from lahar.chaos.scenarios import SCENARIOS

    if args.list:
        for sc in SCENARIOS:
            print(f"{sc.name:28} {'fast ' if sc.fast else '     '}{sc.title}")
        return 0
    known = {sc.name: sc for sc in SCENARIOS}
    unknown = [n for n in args.scenarios if n not in known]
    if unknown:
        print(f"lahar chaos: unknown scenario(s) {', '.join(unknown)}; --list shows them", file=sys.stderr)
        return 2
    chosen = [known[n] for n in args.scenarios] or [sc for sc in SCENARIOS if sc.fast or not args.fast]
    shape = FAST if args.fast else Shape()
    if args.nodes:
        shape = replace(shape, nodes=args.nodes)
    return _run_all(chosen, shape, args.output, args.keep)


def _run_all(chosen: list[Any], shape: Any, output: str, keep: bool) -> int:
    from lahar.chaos.harness import run as run_one

    outcomes = []
    for sc in chosen:
        outcome = run_one(sc, shape, keep=keep)
        outcomes.append(outcome)
        if output == "text":
            print(outcome.line(), flush=True)
    passed = sum(o.passed for o in outcomes)
    if output == "json":
        report = {"scenarios": [asdict(o) for o in outcomes], "passed": passed, "failed": len(outcomes) - passed}
        print(json.dumps(report))
    else:
        print(f"{passed} passed, {len(outcomes) - passed} failed")
    return 0 if passed == len(outcomes) else 1
