"""Running the emulator: in the foreground (``lahar sim``), in a background thread (tests), or
in a child process (benchmarks).

HTTP stack: uvicorn with uvloop and httptools serving the raw ASGI app of ``app.py``.  Chosen
because uvicorn's httptools protocol is the fastest maintained Python HTTP/1.1 server we can
use (about 13,000 trivial requests/s on one core of this 2-core machine, measured with the load
generator on the other core), it streams chunked responses with flow control (watch), and
it is already a dependency; aiohttp was slower per request and a framework router (Starlette)
adds work to every call for no benefit here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import uvicorn
import yaml

from lahar.sim.api import Api
from lahar.sim.app import App
from lahar.sim.crds import volcano_crds
from lahar.sim.faults import Faults, apply_specs
from lahar.sim.kubelet import Kubelet
from lahar.sim.nodes import build_nodes, load_nodes_file, parse_spec
from lahar.sim.strategies import SYSTEM_PRIORITY_CLASSES

log = logging.getLogger("lahar.sim")
_DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass
class SimConfig:
    host: str = "127.0.0.1"
    port: int = 0  # 0: any free port
    nodes: list[str] = field(default_factory=list)  # one-line specs, see nodes.py
    nodes_files: list[str] = field(default_factory=list)
    watch_cache_size: int = 10_000
    start_delay: float = 0.1
    bookmark_interval: float = 5.0
    latency: list[str] = field(default_factory=list)  # VERB=DURATION
    error_rate: list[str] = field(default_factory=list)  # VERB=RATE[:CODES]
    webhook_services: dict[str, str] = field(default_factory=dict)  # "ns/name" -> "host:port"
    log_level: str = "warning"


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the emulator decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Emulator:
    """One emulated cluster.  ``start()`` serves from a background thread; ``serve()`` in the
    caller's event loop.  ``url`` and ``kubeconfig()`` tell clients where it is."""

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.faults = Faults()
        apply_specs(self.faults, self.config.latency, self.config.error_rate)
        node_objects = build_nodes(parse_spec(spec) for spec in self.config.nodes)
        for path in self.config.nodes_files:
            node_objects += load_nodes_file(path)
        self._initial_nodes = node_objects
        self.api = Api(self.config.watch_cache_size, self.config.webhook_services)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((self.config.host, self.config.port))
        self.port: int = self._sock.getsockname()[1]
        self.app = App(self.api, self.faults, f"{self.config.host}:{self.port}", self.config.bookmark_interval)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.kubelet: Kubelet | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    # --- lifecycle --------------------------------------------------------------------------------

    async def serve(self, ready: Any = None) -> None:
        """Serve until ``stop()``; ``ready()`` is called once requests are accepted."""
        self.loop = asyncio.get_running_loop()
        self.kubelet = Kubelet(self.api, self.loop, self.config.start_delay)
        self.bootstrap()
        config = uvicorn.Config(
            self.app,
            http="httptools",
            lifespan="off",
            log_level=self.config.log_level,
            access_log=False,
            timeout_keep_alive=30,
            timeout_graceful_shutdown=2,
            backlog=4096,
            proxy_headers=False,
            server_header=False,
        )
        self._server = _Server(config)
        serving = asyncio.ensure_future(self._server.serve(sockets=[self._sock]))
        while not self._server.started and not serving.done():
            await asyncio.sleep(0.005)
        if self._server.started:
            self._ready.set()
            if ready is not None:
                ready()
        try:
            await serving
        finally:
            self.kubelet.stop()
            await self.api.admission.close()
            self._ready.set()

    def request_stop(self) -> None:
        """Stop serving; safe to call from the loop thread (e.g. a signal handler)."""
        self.app.end_watches()
        if self._server is not None:
            self._server.should_exit = True

    def start(self, timeout: float = 10.0) -> Emulator:
        """Serve from a daemon thread; returns once requests are accepted."""
        self._thread = threading.Thread(target=self._run_thread, name="lahar-sim", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the emulator did not start in time")
        if self._error is not None:
            raise RuntimeError(f"the emulator failed to start: {self._error}") from self._error
        return self

    def _run_thread(self) -> None:
        try:
            import uvloop

            uvloop.run(self.serve())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()

    def stop(self, timeout: float = 10.0) -> None:
        if self.loop is not None and self._thread is not None:
            self.loop.call_soon_threadsafe(self.request_stop)
            self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def call(self, fn: Any, *args: Any, timeout: float = 10.0) -> Any:
        """Run ``fn(*args)`` on the emulator's loop thread and return its result (for tests)."""
        assert self.loop is not None
        future = asyncio.run_coroutine_threadsafe(_call(fn, *args), self.loop)
        return future.result(timeout)

    # --- state ------------------------------------------------------------------------------------

    def bootstrap(self) -> None:
        """What a fresh cluster has: namespaces, system priority classes, Volcano CRDs, nodes."""
        api = self.api
        for name in _DEFAULT_NAMESPACES:
            self.seed("", "namespaces", {"metadata": {"name": name}})
        for name, value in SYSTEM_PRIORITY_CLASSES:
            self.seed(
                "scheduling.k8s.io",
                "priorityclasses",
                {"metadata": {"name": name}, "value": value, "description": "system priority class"},
            )
        for crd in volcano_crds():
            self.seed("apiextensions.k8s.io", "customresourcedefinitions", crd)
        for node in self._initial_nodes:
            self.seed("", "nodes", node)
        del api

    def seed(self, group: str, plural: str, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Create an object directly (no webhooks); on the loop thread only."""
        from lahar.sim.api import Target

        rtype = self.api.rtype(group, plural)
        body = msgspec.json.encode({"apiVersion": rtype.api_version, "kind": rtype.kind, **obj})
        coro = self.api.create(Target(rtype, namespace), body, {})
        try:
            coro.send(None)
        except StopIteration as done:
            result: dict[str, Any] = msgspec.json.decode(done.value[1])
            return result
        raise RuntimeError("seeding awaited: webhooks must not gate bootstrap objects")

    # --- kubeconfig ---------------------------------------------------------------------------------

    def kubeconfig(self) -> dict[str, Any]:
        return kubeconfig_for(self.url)

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> Path:
        return write_kubeconfig(self.url, path)

    def api_client(self) -> Any:
        """An official ``kubernetes.client.ApiClient`` pointed at this emulator."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        return client.ApiClient(configuration)


async def _call(fn: Any, *args: Any) -> Any:
    result = fn(*args)
    if asyncio.iscoroutine(result):
        result = await result
    return result


def kubeconfig_for(url: str, name: str = "lahar-sim") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
    }


def write_kubeconfig(url: str, path: str | os.PathLike[str]) -> Path:
    """Write atomically, so a reader polling for the file never sees half of it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(yaml.safe_dump(kubeconfig_for(url), sort_keys=False))
    tmp.replace(target)
    return target
