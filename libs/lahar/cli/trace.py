"""``lahar trace POD``: how one pod got bound, from a span file (``DIR/traces.jsonl`` of
``lahar up``): the cache delta that showed the pod, the scheduling session, the job decision
(verdict per plugin, nodes considered and chosen) and the binder's API call, with the time of
each step from the first one.  What `jq` took three steps to follow."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

Span = Mapping[str, Any]
STEPS = {
    "cache.delta": "cache delta",
    "scheduler.session": "session",
    "scheduler.job": "job decision",
    "binder.bind": "bind",
    "binder.evict": "evict",
}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "trace",
        help="follow a pod's bind back to its decision, session and cache delta (from a span file)",
        description="Reads the JSON-lines span file the services write with LAHAR_OTEL_EXPORTER=jsonl:PATH "
        "(lahar up: STATE_DIR/traces.jsonl) and prints the chain that bound POD.",
    )
    p.add_argument("pod", metavar="NAMESPACE/POD", help="the pod, as namespace/name (default namespace: default)")
    p.add_argument("-f", "--file", default=".lahar/traces.jsonl", help="the span file (default: .lahar/traces.jsonl)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from lahar.adapters.otel import load_traces, trace_path

    pod = args.pod if "/" in args.pod else f"default/{args.pod}"
    path = Path(args.file)
    if not path.exists():
        print(f"lahar trace: {path}: no such span file (lahar up writes STATE_DIR/traces.jsonl)", file=sys.stderr)
        return 2
    spans = load_traces(str(path))
    binds = [s for s in spans if s["name"] == "binder.bind" and s["attributes"].get("lahar.pod") == pod]
    if not binds:
        print(f"lahar trace: no bind of {pod} in {path} ({len(spans)} spans)", file=sys.stderr)
        return 1
    bind = max(binds, key=lambda s: s["start"])  # the last bind (a pod is bound once; retries aside)
    print(chain_text(pod, trace_path(spans, bind["span_id"])), end="")
    return 0


def chain_text(pod: str, path: list[Span]) -> str:
    """The steps of ``path`` (from lahar.adapters.otel.trace_path) in time order, one per line."""
    steps = [s for s in path if s["name"] in STEPS and _about(s, pod)]
    steps.sort(key=lambda s: s["start"])
    if not steps:
        return f"{pod}: no steps found\n"
    first = steps[0]["start"]
    lines = [f"{pod}:"]
    for span in steps:
        offset = (span["start"] - first) / 1e6
        took = (span["end"] - span["start"]) / 1e6
        head = f"  +{offset:9.1f} ms  {STEPS[span['name']]:<13} {span['service']:<10} ({took:.1f} ms)"
        lines.append(head + _detail(span))
    return "\n".join(lines) + "\n"


def _about(span: Span, pod: str) -> bool:
    """A delta is shown only when it is about this pod (a session links to many)."""
    if span["name"] != "cache.delta":
        return True
    attrs = span["attributes"]
    return bool(attrs.get("lahar.pod") == pod or attrs.get("lahar.key") == pod)


def _detail(span: Span) -> str:
    attrs = span["attributes"]
    if span["name"] == "cache.delta":
        return f"  {attrs.get('lahar.op', '')} {attrs.get('lahar.kind', 'pod')} rv {attrs.get('lahar.rv', '?')}"
    if span["name"] == "scheduler.job":
        prefix = "lahar.verdict."
        verdicts = ", ".join(f"{k.removeprefix(prefix)}={v}" for k, v in sorted(attrs.items()) if k.startswith(prefix))
        return (
            f"  job {attrs.get('lahar.job', '?')} in queue {attrs.get('lahar.queue', '?')}: "
            f"{attrs.get('lahar.outcome', '?')}; nodes considered {attrs.get('lahar.nodes_considered', '?')}, "
            f"chosen {attrs.get('lahar.nodes_chosen', '?')}" + (f"; {verdicts}" if verdicts else "")
        )
    if span["name"] == "scheduler.session":
        return f"  session {attrs.get('lahar.session', '')}".rstrip()
    return f"  node {attrs.get('lahar.node', '?')}: {attrs.get('lahar.outcome', '?')}"
