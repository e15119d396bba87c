"""Two processes appending spans to one JSON-lines file at once leave only whole lines."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from lahar.adapters.otel import load_traces

SPANS_PER_PROCESS = 400
ATTRIBUTE_BYTES = 10_000  # lines well over PIPE_BUF (4096): atomicity must not rest on it

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from lahar.adapters.otel import setup_tracing

    path, go, name, count, size = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    provider = setup_tracing(name, f"jsonl:{path}")
    (go.parent / f"ready-{name}").touch()
    tracer = provider.get_tracer("writer")
    deadline = time.monotonic() + 30
    while not go.exists() and time.monotonic() < deadline:  # both start writing together
        time.sleep(0.001)
    for i in range(count):
        with tracer.start_as_current_span(f"{name}-{i}", attributes={"blob": name[0] * size, "i": i}):
            pass
        if i % 50 == 0:
            provider.force_flush()  # many export batches, so the two processes interleave
    provider.shutdown()
    """
)


def test_two_processes_appending_to_one_file_write_whole_lines(tmp_path: Path) -> None:
    path, go = tmp_path / "spans.jsonl", tmp_path / "go"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(go), name, str(SPANS_PER_PROCESS), str(ATTRIBUTE_BYTES)]
        )
        for name in ("cache", "binder")
    ]
    try:
        _wait_until(lambda: all((tmp_path / f"ready-{n}").exists() for n in ("cache", "binder")), timeout=30)
        go.touch()
        assert [w.wait(timeout=60) for w in writers] == [0, 0]
    finally:
        for w in writers:
            w.kill()

    spans = load_traces(path)  # raises on any torn or interleaved line
    assert len(spans) == 2 * SPANS_PER_PROCESS
    for span in spans:
        assert span["attributes"]["blob"] == span["service"][0] * ATTRIBUTE_BYTES
    for service in ("cache", "binder"):
        assert sorted(s["attributes"]["i"] for s in spans if s["service"] == service) == list(range(SPANS_PER_PROCESS))


def _wait_until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
