"""``lahar explain pod|podgroup NAME -f DUMP``: why it waits, which action and plugin stopped it,
with the numbers, and what would let it run (offline, on the objects of a dump)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lahar.api.files import FileError, load_file


def register(sub: Any) -> None:
    p = sub.add_parser("explain", help="why a pod or PodGroup waits, from a dump of the cluster's objects")
    p.add_argument("kind", choices=("pod", "podgroup"))
    p.add_argument("name", help="NAME or NAMESPACE/NAME")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-f", "--file", action="append", required=True, metavar="FILE", help="objects, as lahar simulate")
    p.add_argument("--conf", help="a volcano-scheduler.conf file (default: the dump's or the built-in one)")
    p.add_argument("--cycles", type=int, default=1, help="sessions to run first (default 1)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from lahar_scheduler.core import load_conf
    from lahar_scheduler.explain import NotFound, explain
    from lahar_scheduler.framework.conf import ConfError

    objects: list[Any] = []
    case: dict[str, Any] | None = None
    try:
        for f in args.file:
            loaded = load_file(f)
            objects.extend(loaded.objects)
            case = case or loaded.case
        text = Path(args.conf).read_text() if args.conf else (case or {}).get("schedulerConf")
        conf = load_conf(text)
    except (FileError, OSError, ConfError) as exc:
        print(f"lahar explain: {exc}", file=sys.stderr)
        return 2
    key = args.name if "/" in args.name else f"{args.namespace}/{args.name}"
    try:
        lines = explain(objects, conf, args.kind, key, cycles=max(1, args.cycles))
    except NotFound as exc:
        print(f"lahar explain: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0
