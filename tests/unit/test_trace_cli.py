"""``lahar trace``: its errors, and the order and filtering of the chain it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lahar.cli.trace import chain_text


def _span(name: str, service: str, start: int, **attrs: object) -> dict[str, object]:
    return {"name": name, "service": service, "start": start, "end": start + 1_000_000, "attributes": attrs}


def test_the_chain_is_in_time_order_and_keeps_only_this_pods_deltas() -> None:
    path = [
        _span("binder.bind", "binder", 9_000_000, **{"lahar.node": "n1", "lahar.outcome": "done"}),
        _span("scheduler.job", "scheduler", 5_000_000, **{"lahar.job": "ns/j", "lahar.verdict.gang": "ok"}),
        _span("scheduler.session", "scheduler", 4_000_000),
        _span("cache.delta", "cache", 1_000_000, **{"lahar.pod": "ns/p", "lahar.op": "ADDED"}),
        _span("cache.delta", "cache", 2_000_000, **{"lahar.pod": "ns/other", "lahar.op": "ADDED"}),
    ]
    lines = chain_text("ns/p", path).splitlines()
    assert lines[0] == "ns/p:"
    assert [line.split("ms", 1)[1].split()[0] for line in lines[1:]] == ["cache", "session", "job", "bind"]
    assert "+      3.0 ms  session" in lines[2] and "gang=ok" in lines[3] and "node n1: done" in lines[4]


def _trace(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lahar", "trace", *argv], capture_output=True, text=True, timeout=60)


def test_a_missing_file_and_an_unknown_pod_are_said(tmp_path: Path) -> None:
    missing = _trace("ns/p", "-f", str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 2 and "no such span file" in missing.stderr
    spans = tmp_path / "t.jsonl"
    spans.write_text(
        json.dumps(
            {
                "trace_id": "1" * 32,
                "span_id": "2" * 16,
                "parent_span_id": None,
                "name": "x",
                "service": "s",
                "attributes": {},
                "links": [],
                "start": 1,
                "end": 2,
            }
        )
        + "\n"
    )
    unknown = _trace("ns/p", "-f", str(spans))
    assert unknown.returncode == 1 and "no bind of ns/p" in unknown.stderr and "(1 spans)" in unknown.stderr
