"""A tiny service run as ``python -m``: SIGTERM stops it gracefully, within its deadline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from lahar.adapters.otel import load_traces
from lahar.service import EXIT_USAGE, ServiceContext, Settings, run_service

TINY_SERVICE = textwrap.dedent(
    """
    import asyncio
    from pathlib import Path
    from lahar.service import ServiceContext, Settings, run_service

    class TinySettings(Settings):
        state: str                      # a folder where the test watches progress
        cleanup_seconds: float = 0.2    # how long finishing the work in flight takes

    async def main(ctx: ServiceContext[TinySettings]) -> None:
        state = Path(ctx.settings.state)
        with ctx.tracer.start_as_current_span("tiny.run"):
            ctx.health.set_ready(True)
            (state / "port.tmp").write_text(str(ctx.http_port))
            (state / "port.tmp").rename(state / "port")  # whole, or not there: the test polls for it
            try:
                await ctx.stopping.wait()
                (state / "stopping").touch()
                await asyncio.sleep(ctx.settings.cleanup_seconds)  # finish the work in flight
                (state / "finished").touch()
            finally:
                (state / "cleaned-up").touch()  # also runs when cancelled at the deadline

    if __name__ == "__main__":
        raise SystemExit(run_service("tiny", main, TinySettings))
    """
)


@pytest.fixture
def start_tiny(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    (tmp_path / "tiny_service.py").write_text(TINY_SERVICE)
    started: list[subprocess.Popen[str]] = []

    def start(*flags: str) -> subprocess.Popen[str]:
        path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "PYTHONPATH": path, "LAHAR_OTEL_EXPORTER": f"jsonl:{tmp_path / 'spans.jsonl'}"}
        args = [sys.executable, "-m", "tiny_service", "--state", str(tmp_path), "--http-port", "0", *flags]
        proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        wait_until(lambda: (tmp_path / "port").exists() or proc.poll() is not None, 30, "the service to start")
        assert proc.poll() is None, proc.communicate()[1]
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.communicate()


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, f"timed out waiting for {what}"
        time.sleep(0.01)
    return time.monotonic() - start


def log_lines(stderr: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stderr.splitlines()]


def test_sigterm_finishes_the_work_and_exits_0(
    start_tiny: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    proc = start_tiny("--shutdown-timeout", "5")
    port = int((tmp_path / "port").read_text())
    assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200

    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0, stderr
    assert time.monotonic() - sent < 5, "must stop well within its 5 s deadline"
    assert {"stopping", "finished", "cleaned-up"} <= {p.name for p in tmp_path.iterdir()}

    lines = log_lines(stderr)  # stderr is a pipe, so the log is JSON lines
    assert all(line["service"] == "tiny" for line in lines)
    assert any(line["msg"] == "shutting down: SIGTERM" for line in lines)
    assert [(s["service"], s["name"]) for s in load_traces(tmp_path / "spans.jsonl")] == [("tiny", "tiny.run")]


def test_work_past_the_deadline_is_cancelled_and_cleaned_up(
    start_tiny: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    proc = start_tiny("--shutdown-timeout", "0.5", "--cleanup-seconds", "60")
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 1, stderr
    assert time.monotonic() - sent < 4, "the deadline (0.5 s) plus the grace (2 s) bound the stop"
    assert (tmp_path / "cleaned-up").exists() and not (tmp_path / "finished").exists()
    assert any("did not finish within 0.5s" in str(line["msg"]) for line in log_lines(stderr))


def test_a_second_signal_stops_at_once(start_tiny: Callable[..., subprocess.Popen[str]], tmp_path: Path) -> None:
    proc = start_tiny("--shutdown-timeout", "60", "--cleanup-seconds", "60")
    proc.send_signal(signal.SIGTERM)
    wait_until((tmp_path / "stopping").exists, 10, "the service to start stopping")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 1, stderr
    assert (tmp_path / "cleaned-up").exists() and not (tmp_path / "finished").exists()


def test_invalid_settings_stop_the_service_listing_every_error(capsys: pytest.CaptureFixture[str]) -> None:
    async def main(ctx: ServiceContext[Settings]) -> None:
        raise AssertionError("must not run")

    code = run_service("tiny", main, Settings, argv=["--http-port", "x"], environ={"LAHAR_LOG_LEVEL": "loud"})
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("tiny: invalid settings:\n")
    assert "log_level (--log-level / LAHAR_LOG_LEVEL)" in err and "http_port (--http-port / LAHAR_HTTP_PORT)" in err
