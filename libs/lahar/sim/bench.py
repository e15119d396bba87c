"""``lahar bench sim``: how fast the emulator binds and lists.

The emulator runs as a child process (``SimProcess``); this process is the load generator.
It speaks HTTP/1.1 itself over keep-alive connections (asyncio streams and the httptools
response parser) because a general client (httpx, the official client) would be slower than
the server and the figure would measure the client.  Measured:

* ``bindings_per_second``: POST pods/NAME/binding for ``binds`` pods from ``concurrency``
  connections, while ``watchers`` watch streams on the pods are attached and must each
  receive every binding event (the simulated kubelet's Running updates flow too);
* ``list_50k_seconds``: GET of all ``list_pods`` pods until the whole body is received (median
  of 3); ``list_50k_with_decode_seconds`` adds decoding it into Python dicts with msgspec, which
  is the client's cost, not the server's.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import httptools
import msgspec

from lahar.sim.process import SimProcess

_NS = "bench"


@dataclass
class BenchConfig:
    list_pods: int = 50_000
    binds: int = 10_000
    watchers: int = 5
    concurrency: int = 32
    nodes: int = 1000


class _Reply:
    def __init__(self) -> None:
        self.body: list[bytes] = []
        self.done = False

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.done = True


class Conn:
    """One keep-alive HTTP/1.1 connection; one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, host: str, port: int) -> Conn:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
        return cls(reader, writer, f"{host}:{port}")

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        reply = _Reply()
        parser = httptools.HttpResponseParser(reply)
        while not reply.done:
            data = await self.reader.read(1 << 20)
            if not data:
                raise ConnectionError("the server closed the connection")
            parser.feed_data(data)
        return parser.get_status_code(), b"".join(reply.body)

    def close(self) -> None:
        self.writer.close()


def pod_body(i: int) -> bytes:
    """A pod as a Volcano job creates it (about 1 KB of JSON)."""
    return msgspec.json.encode(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"pod-{i:06d}",
                "labels": {"volcano.sh/job-name": f"job-{i // 10}", "app": "bench"},
                "annotations": {
                    "scheduling.k8s.io/group-name": f"job-{i // 10}",
                    "volcano.sh/task-spec": "worker",
                    "volcano.sh/job-version": "0",
                },
            },
            "spec": {
                "schedulerName": "volcano",
                "restartPolicy": "OnFailure",
                "containers": [
                    {
                        "name": "worker",
                        "image": "registry.example/train:1.0",
                        "command": ["python", "train.py"],
                        "env": [{"name": "VC_TASK_INDEX", "value": str(i % 10)}],
                        "resources": {
                            "requests": {"cpu": "1", "memory": "1Gi"},
                            "limits": {"cpu": "1", "memory": "1Gi"},
                        },
                    }
                ],
            },
        }
    )


async def _run_all(conns: list[Conn], jobs: list[tuple[str, str, bytes]]) -> tuple[int, int]:
    """Send every job over the connections; returns (successes, failures)."""
    queue = list(reversed(jobs))
    ok = failed = 0

    async def worker(conn: Conn) -> None:
        nonlocal ok, failed
        while queue:
            method, path, body = queue.pop()
            status, _ = await conn.request(method, path, body)
            if status in (200, 201):
                ok += 1
            else:
                failed += 1

    await asyncio.gather(*(worker(c) for c in conns))
    return ok, failed


class Watch:
    """A watch stream that counts binding events (lines carrying a nodeName) without decoding."""

    def __init__(self) -> None:
        self.lines = 0
        self.bound = 0
        self.task: asyncio.Task[None] | None = None

    async def run(self, host: str, port: int, rv: str) -> None:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
        writer.write(
            f"GET /api/v1/namespaces/{_NS}/pods?watch=true&resourceVersion={rv}&allowWatchBookmarks=true "
            f"HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
        )
        buffer = b""
        try:
            while True:
                data = await reader.read(1 << 20)
                if not data:
                    return
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self.lines += 1
                    if b'"PodScheduled","status":"True"' in line and b'"phase":"Pending"' in line:
                        self.bound += 1
        finally:
            writer.close()


async def measure(url: str, cfg: BenchConfig) -> dict[str, Any]:
    parsed = urlparse(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    conns = [await Conn.open(host, port) for _ in range(cfg.concurrency)]
    began = time.perf_counter()
    created, create_errors = await _run_all(
        conns, [("POST", f"/api/v1/namespaces/{_NS}/pods", pod_body(i)) for i in range(cfg.list_pods)]
    )
    create_rate = created / (time.perf_counter() - began)

    list_times, decode_times = [], []
    for _ in range(3):
        began = time.perf_counter()
        status, body = await conns[0].request("GET", f"/api/v1/namespaces/{_NS}/pods")
        list_times.append(time.perf_counter() - began)
        items = msgspec.json.decode(body)["items"]
        decode_times.append(time.perf_counter() - began)
        if status != 200 or len(items) != cfg.list_pods:
            raise RuntimeError(f"list returned {status} with {len(items)} pods")
    list_bytes = len(body)
    _, body = await conns[0].request("GET", f"/api/v1/namespaces/{_NS}/pods?limit=1")
    rv = msgspec.json.decode(body)["metadata"]["resourceVersion"]

    watches = [Watch() for _ in range(cfg.watchers)]
    for w in watches:
        w.task = asyncio.ensure_future(w.run(host, port, rv))
    await asyncio.sleep(0.2)
    binds = min(cfg.binds, cfg.list_pods)
    jobs = [
        (
            "POST",
            f"/api/v1/namespaces/{_NS}/pods/pod-{i:06d}/binding",
            msgspec.json.encode(
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": f"pod-{i:06d}"},
                    "target": {"kind": "Node", "name": f"node-{1 + i % cfg.nodes:04d}"},
                }
            ),
        )
        for i in range(binds)
    ]
    began = time.perf_counter()
    bound, bind_errors = await _run_all(conns, jobs)
    bind_seconds = time.perf_counter() - began
    deadline = time.monotonic() + 60
    while any(w.bound < bound for w in watches) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    watcher_lag = time.perf_counter() - began - bind_seconds
    for w in watches:
        assert w.task is not None
        w.task.cancel()
    for c in conns:
        c.close()
    return {
        "bindings_per_second": round(bound / bind_seconds, 1),
        "bindings": bound,
        "binding_errors": bind_errors,
        "watchers": cfg.watchers,
        "watchers_saw_every_binding": all(w.bound >= bound for w in watches),
        "watcher_catch_up_seconds": round(watcher_lag, 3),
        "list_50k_seconds": round(statistics.median(list_times), 3),
        "list_50k_with_decode_seconds": round(statistics.median(decode_times), 3),
        "list_bytes": list_bytes,
        "list_pods": cfg.list_pods,
        "creates_per_second": round(create_rate, 1),
        "create_errors": create_errors,
        "concurrency": cfg.concurrency,
    }


def run(cfg: BenchConfig) -> dict[str, Any]:
    args = ["--nodes", f"{cfg.nodes}:cpu=1000,memory=4Ti,pods=1000", "--watch-cache-size", "100000"]
    with SimProcess(args) as sim:
        import uvloop

        return uvloop.run(measure(sim.url, cfg))
