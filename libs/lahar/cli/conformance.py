"""``lahar conformance``: run conformance case files (scheduler, admission and controller) and
report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lahar.api import safeyaml


def register(sub: Any) -> None:
    p = sub.add_parser("conformance", help="run conformance cases; prints failures, then 'N passed, M failed'")
    p.add_argument("paths", nargs="+", metavar="PATH", help="case files or folders of them")
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=run)


def case_files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*.yaml") if f.is_file()))
            out.extend(sorted(f for f in p.rglob("*.yml") if f.is_file()))
        else:
            out.append(p)
    return out


def run_file(path: Path, seed: int) -> tuple[str, bool, list[str]]:
    """(name, passed, differences) for one case file."""
    from lahar_scheduler.conformance import is_scheduler_case, run_case

    try:
        text = path.read_text()
        doc = safeyaml.load(text, str(path))
    except (OSError, safeyaml.YamlError) as exc:
        return path.stem, False, [f"cannot read case: {exc}"]
    if is_scheduler_case(doc):
        r = run_case(doc, seed=seed)
        return r.name, r.passed, r.differences
    if isinstance(doc, dict) and "request" in doc and "expect" in doc:
        from lahar_admission.conformance import run_case as run_admission

        a = run_admission(doc, text)
        return a.name, a.passed, a.differences
    from lahar_controller.conformance import is_controller_case, run_doc

    if is_controller_case(doc):
        c = run_doc(doc, path.stem)
        return c.name, c.passed, c.differences
    return path.stem, False, ["not a conformance case (no schedulerConf/objects, request/expect or area/step/expect)"]


def run(args: argparse.Namespace) -> int:
    files = case_files(args.paths)
    missing = [str(p) for p in files if not p.exists()]
    if missing:
        print(f"lahar conformance: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    results = [run_file(p, args.seed) for p in files]
    passed = sum(1 for _, ok, _ in results if ok)
    failed = len(results) - passed
    if args.output == "json":
        print(
            json.dumps(
                {
                    "passed": passed,
                    "failed": failed,
                    "failures": {name: diffs for name, ok, diffs in results if not ok},
                },
                indent=2,
            )
        )
    else:
        for name, ok, diffs in results:
            if not ok:
                print(f"FAIL {name}: {'; '.join(diffs)}")
        print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1
