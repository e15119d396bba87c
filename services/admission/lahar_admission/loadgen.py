"""The benchmark's load generator, run as its own process: ``python -m lahar_admission.loadgen``.

A minimal HTTP/1.1 keep-alive client over TLS on asyncio streams (httpx would cost more CPU
than the server it measures).  Two modes: ``max`` (N connections send back to back; the rate
achieved) and ``rate`` (open loop: request i is due at t0 + i/rate, latency counts from when it
was due, so a slow server cannot hide queueing).  Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import ssl
import sys
import time
from typing import Any

_job = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "bench-job", "namespace": "bench"},
    "spec": {
        "minAvailable": 1,
        "schedulerName": "volcano",
        "maxRetry": 3,
        "queue": "QUEUE",
        "tasks": [
            {
                "name": "worker",
                "replicas": 2,
                "minAvailable": 1,
                "maxRetry": 3,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox:1.36",
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                            }
                        ],
                    }
                },
            }
        ],
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
    },
}


def _body(queue: str, uid: int) -> bytes:
    obj = json.loads(json.dumps(_job))
    obj["spec"]["queue"] = queue
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": f"u{uid}",
                "operation": "CREATE",
                "namespace": "bench",
                "name": "bench-job",
                "kind": {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
                "resource": {"group": "batch.volcano.sh", "version": "v1alpha1", "resource": "jobs"},
                "object": obj,
            },
        }
    ).encode()


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    async def post(self, path: str, body: bytes) -> bytes:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        header = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in header.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        data = await self.reader.readexactly(length)
        if not header.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"unexpected reply {header[:40]!r}")
        return data


async def _connect(host: str, port: int, ctx: ssl.SSLContext) -> Conn:
    reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
    return Conn(reader, writer, host)


async def run_max(conns: list[Conn], queues: list[str], duration: float) -> dict[str, Any]:
    done = 0
    denied = 0
    end = time.perf_counter() + duration

    async def worker(c: Conn) -> None:
        nonlocal done, denied
        while time.perf_counter() < end:
            reply = await c.post("/jobs/validate?timeout=10s", _body(random.choice(queues), done))
            done += 1
            denied += b'"allowed":false' in reply

    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    return {"reviews": done, "seconds": time.perf_counter() - start, "denied": denied}


async def run_rate(conns: list[Conn], queues: list[str], duration: float, rate: float) -> dict[str, Any]:
    total = int(duration * rate)
    pool: asyncio.Queue[Conn] = asyncio.Queue()
    for c in conns:
        pool.put_nowait(c)
    latencies: list[float] = []
    t0 = time.perf_counter() + 0.05

    async def one(i: int) -> None:
        due = t0 + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        c = await pool.get()
        try:
            await c.post("/jobs/validate?timeout=10s", _body(random.choice(queues), i))
        finally:
            pool.put_nowait(c)
        latencies.append(time.perf_counter() - due)

    await asyncio.gather(*(one(i) for i in range(total)))
    latencies.sort()

    def pick(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000

    return {"reviews": total, "p50_ms": pick(0.50), "p99_ms": pick(0.99), "max_ms": latencies[-1] * 1000}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    ctx = ssl.create_default_context(cafile=args.ca)
    queues = [f"q-{i}" for i in range(args.queues)]
    conns = [await _connect(args.host, args.port, ctx) for _ in range(args.connections)]
    try:
        # Warm up the server (and our connections) before measuring.
        await run_max(conns, queues, 0.5)
        if args.mode == "max":
            return await run_max(conns, queues, args.duration)
        return await run_rate(conns, queues, args.duration, args.rate)
    finally:
        for c in conns:
            c.writer.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--mode", choices=("max", "rate"), default="max")
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--rate", type=float, default=500.0)
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--queues", type=int, default=1000)
    result = asyncio.run(main(p.parse_args()))
    json.dump(result, sys.stdout)
