"""A real uvicorn HTTPS server running the admission app in a background thread.

Used by the tests (real AdmissionReview requests over TLS) and by the benchmark.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from lahar_admission.server import AppConfig, create_app
from lahar_admission.tls import CertFiles, make_certs
from lahar_admission.types import AdmissionConfig, Namespace, PodGroup, Queue
from lahar_admission.view import ClusterView, InMemoryView


class ProxyView:
    """A view whose target a test swaps (each conformance case brings its own cluster)."""

    def __init__(self) -> None:
        self.target: ClusterView = InMemoryView()

    def queue(self, name: str) -> Queue | None:
        return self.target.queue(name)

    def queues(self) -> Iterable[Queue]:
        return self.target.queues()

    def children(self, parent: str) -> list[Queue]:
        return self.target.children(parent)

    def namespace(self, name: str) -> Namespace | None:
        return self.target.namespace(name)

    def podgroup(self, namespace: str, name: str) -> PodGroup | None:
        return self.target.podgroup(namespace, name)

    def admission_config(self) -> AdmissionConfig | None:
        return self.target.admission_config()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    url: str
    certs: CertFiles
    config: uvicorn.Config
    server: uvicorn.Server
    thread: threading.Thread
    app: Any

    def client(self, **kw: Any) -> httpx.Client:
        ctx = ssl.create_default_context(cafile=str(self.certs.ca))
        return httpx.Client(base_url=self.url, verify=ctx, timeout=10.0, **kw)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def start_live(app_config: AppConfig, cert_dir: Path) -> LiveServer:
    certs = make_certs(["localhost", "127.0.0.1"], cert_dir)
    app = create_app(app_config)
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        ssl_certfile=str(certs.cert),
        ssl_keyfile=str(certs.key),
        log_level="warning",
        lifespan="off",
        access_log=False,
        loop="auto",
        http="auto",
    )
    config.load()
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the admission server did not start")
        time.sleep(0.01)
    return LiveServer(f"https://127.0.0.1:{port}", certs, config, server, thread, app)
