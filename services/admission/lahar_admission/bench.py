"""``lahar bench admission``: one service process answering from a real Redis mirror.

Starts Valkey (``lahar.infra``), writes ``queues`` Open queues into the mirror, starts the HTTPS
service in this process (mirror refreshed in the background as in production), then drives it
from a load generator in a separate process: first flat out (throughput), then at a fixed 500
reviews/s (latency).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from lahar.wire import keys
from lahar_admission.live import start_live
from lahar_admission.mirror import MirrorView
from lahar_admission.server import AppConfig
from lahar_admission.settings import RuleSettings, load_time_zones

PREFIX = "bench"


class BenchError(RuntimeError):
    pass


def _queue(name: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": True, "capability": {"cpu": "100"}},
            "status": {"state": "Open"},
        }
    ).encode()


async def _populate(url: str, count: int) -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(url)
    try:
        mapping = {f"q-{i}": _queue(f"q-{i}") for i in range(count)}
        mapping["default"] = _queue("default")
        await client.delete(keys.objects_key(PREFIX, "queues"))
        await client.hset(keys.objects_key(PREFIX, "queues"), mapping=mapping)  # type: ignore[arg-type]
        await client.set(keys.seq_key(PREFIX), 1)
        await client.set(keys.stream_id_key(PREFIX), "bench")  # an identified mirror, as the cache seals it
    finally:
        await client.aclose()


class _MirrorThread:
    """Refreshes the mirror view from its own event loop and Redis client."""

    def __init__(self, url: str) -> None:
        import redis.asyncio as aioredis

        self.url = url
        self.ready = threading.Event()
        self.view: MirrorView | None = None
        self._aioredis = aioredis
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        client = self._aioredis.from_url(self.url)
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self.view = MirrorView(client, PREFIX, refresh=0.5, max_staleness=5.0)
        await self.view.refresh_once()
        self.ready.set()
        await self.view.run(self._stop)
        await client.aclose()

    def start(self) -> MirrorView:
        self.thread.start()
        if not self.ready.wait(15) or self.view is None:
            raise BenchError("the mirror view did not load")
        return self.view

    def stop(self) -> None:
        if self._loop and self._stop:
            self._loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(5)


def _load(port: int, ca: Path, mode: str, duration: float, connections: int, rate: float, queues: int) -> Any:
    cmd = [
        sys.executable,
        "-m",
        "lahar_admission.loadgen",
        "--port",
        str(port),
        "--ca",
        str(ca),
        "--mode",
        mode,
        "--duration",
        str(duration),
        "--connections",
        str(connections),
        "--rate",
        str(rate),
        "--queues",
        str(queues),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration * 4 + 60)
    if out.returncode != 0:
        raise BenchError(f"load generator failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout)


def run(queues: int = 1000, duration: float = 5.0, connections: int = 32, rate: float = 500.0) -> dict[str, Any]:
    from lahar.infra import InfraError, start_redis

    try:
        redis_server = start_redis()
    except InfraError as exc:
        raise BenchError(f"cannot start Valkey: {exc}") from exc
    try:
        asyncio.run(_populate(redis_server.url, queues))
        mirror = _MirrorThread(redis_server.url)
        view = mirror.start()
        if view.queue_count != queues + 1:
            raise BenchError(f"the mirror holds {view.queue_count} queues, expected {queues + 1}")
        rules = RuleSettings(time_zones=load_time_zones())
        with tempfile.TemporaryDirectory() as tmp:
            live = start_live(AppConfig(rules=rules, view=view), Path(tmp))
            port = int(live.url.rsplit(":", 1)[1])
            try:
                peak = _load(port, live.certs.ca, "max", duration, connections, rate, queues)
                steady = _load(port, live.certs.ca, "rate", duration, min(connections, 16), rate, queues)
            finally:
                live.stop()
                mirror.stop()
    finally:
        redis_server.stop()
    if peak["denied"]:
        raise BenchError(f"{peak['denied']} of {peak['reviews']} benchmark reviews were denied")
    return {
        "reviews_per_second": round(peak["reviews"] / peak["seconds"], 1),
        "p99_ms_at_500rps": round(steady["p99_ms"], 2),
        "p50_ms_at_500rps": round(steady["p50_ms"], 2),
        "max_ms_at_500rps": round(steady["max_ms"], 2),
        "queues_in_mirror": queues,
        "connections": connections,
    }
