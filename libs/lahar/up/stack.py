"""The whole system on one machine, as separate processes: infra, emulator, services.

``LocalStack`` starts NATS and Valkey (unless URLs are given), the Kubernetes API emulator
(unless a kubeconfig is given, or ``control_plane="kube"`` asks for a real kube-apiserver with
KWOK nodes, where each service runs as its deploy/ ServiceAccount), the admission webhook
(registered with the cluster), the cache, the scheduler and N binders.  Every child is in its own
process group with a parent-death signal, so nothing outlives the stack.  Binders scale between
``binders`` and ``max_binders`` with the length of the decision queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from lahar.adapters.otel import EXPORTER_ENV
from lahar.infra import EmbeddedServer, Infra
from lahar.infra.process import free_port, signals_held, spawn, stop
from lahar.up.keeper import Keeper
from lahar.up.kube import KubeBackend
from lahar.wire.names import Names

log = logging.getLogger("lahar.up")

DEFAULT_NODES = (
    "16:cpu=32,memory=128Gi,pods=110,label.zone=a",
    "16:cpu=32,memory=128Gi,pods=110,label.zone=b",
    "4:cpu=64,memory=512Gi,pods=110,nvidia.com/gpu=8,label.accelerator=nvidia,taint.nvidia.com/gpu=present:NoSchedule,name=gpu",
)
PORT_MOVES = 3  # new ports tried for a child whose port was taken before it could bind
ADMISSION_PATHS = (
    "/jobs/mutate",
    "/jobs/validate",
    "/podgroups/validate",
    "/queues/mutate",
    "/queues/validate",
    "/hypernodes/validate",
    "/cronjobs/validate",
    "/jobflows/validate",
)


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    port: int = 0
    log_path: Path = field(default_factory=Path)
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    restarts: int = 0
    held: bool = False  # paused, or stopped on purpose: the keeper leaves it alone
    retired: bool = False  # scaled down: never restarted

    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def identity(self) -> str:
        return self.log_path.stem


@dataclass
class StackConfig:
    state_dir: Path
    kubeconfig: str | None = None
    nats_url: str | None = None
    redis_url: str | None = None
    nats_ca: str | None = None  # the CA of the server at nats_url (default $LAHAR_NATS_CA)
    nodes: tuple[str, ...] = DEFAULT_NODES
    binders: int = 2
    max_binders: int = 8
    max_in_flight: int = 64
    period: float = 1.0
    prefix: str = "lahar"
    sim_args: tuple[str, ...] = ()
    admission: bool = True
    scheduler_conf: str | None = None
    replicas: int = 1  # cache, controller and scheduler replicas (one leads, the others stand by)
    leader_ttl: float = 2.0
    ack_wait: float = 30.0
    traces: bool = True  # export spans to DIR/traces.jsonl (spans are made and propagated either way)
    control_plane: str = "sim"  # "sim": Lahar's emulator; "kube": kube-apiserver + KWOK (lahar.kube)
    kube_build_jobs: int = 1  # Go packages compiled at once if the kube binaries are not cached yet
    progress: Callable[[str], None] | None = None  # start-up news of the control plane (default: the log)
    kube_audit: bool = False  # audit the services' requests on the kube control plane (tests find 403s)


class LocalStack:
    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.dir = config.state_dir
        self.infra: Infra | None = None
        self.children: list[Child] = []
        self.kubeconfig = ""
        self.traces = self.dir / "traces.jsonl"
        self.names = Names(config.prefix)
        self._binder_seq = 0
        self.keeper = Keeper(self)
        self.kube: KubeBackend | None = None

    # -- start -----------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> LocalStack:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(exist_ok=True)
        if self.traces.exists():
            self.traces.unlink()
        if not self.config.kubeconfig:
            # A new emulator is a new, empty cluster: streams and a mirror kept from an earlier
            # run would describe another cluster, so start them fresh too.
            shutil.rmtree(self.dir / "infra", ignore_errors=True)
        try:
            self.infra = Infra(
                self.dir / "infra",
                nats_url=self.config.nats_url,
                redis_url=self.config.redis_url,
                nats_ca=self.config.nats_ca,
                prefix=self.config.prefix,
            )
            self.infra.start()
            self.kubeconfig = self.config.kubeconfig or self._start_cluster(timeout)
            if self.config.admission:
                self._start_admission(timeout)
            for i in range(1, self.config.replicas + 1):
                for role in ("cache", "controller", "scheduler"):
                    self._spawn_service(role, ["--identity", f"{role}-{i}"], log_name=f"{role}-{i}")
            for _ in range(self.config.binders):
                self.add_binder()
            self._wait_ready(timeout)
            self.keeper.start()
            if not self.config.kubeconfig and self.kube is None:
                shutil.copyfile(self.kubeconfig, self.dir / "kubeconfig")
                self.kubeconfig = str(self.dir / "kubeconfig")
        except BaseException:
            self.stop()
            raise
        return self

    def env(self, role: str = "admin") -> dict[str, str]:
        """The environment of a ``role`` child: the URLs of its own NATS and Valkey users (admin's
        for tools), the NATS CA, the cluster and the prefix."""
        assert self.infra is not None
        return {
            **os.environ,
            **self.infra.client_env(role),
            # On the real control plane each service is its own ServiceAccount; tools are admin.
            "KUBECONFIG": self.kube.kubeconfigs.get(role, self.kubeconfig) if self.kube else self.kubeconfig,
            "LAHAR_PREFIX": self.config.prefix,
            "LAHAR_OTEL_EXPORTER": self.trace_destination(),
            "LAHAR_LOG_LEVEL": os.environ.get("LAHAR_LOG_LEVEL", "info"),
        }

    def trace_destination(self) -> str:
        """Where the services export spans: none when traces are off; else the user's own
        ``LAHAR_OTEL_EXPORTER`` (e.g. otlp, with the standard ``OTEL_EXPORTER_OTLP_*``
        variables), else DIR/traces.jsonl."""
        if not self.config.traces:
            return "none"
        return os.environ.get(EXPORTER_ENV) or f"jsonl:{self.traces}"

    def _spawn(
        self, name: str, argv: list[str], port: int = 0, env: dict[str, str] | None = None, log_name: str = ""
    ) -> Child:
        log_path = self.dir / "logs" / f"{log_name or name}.log"
        env = env or self.env(name)
        with signals_held():
            proc = spawn([sys.executable, "-m", "lahar", *argv], log_path, env)
            child = Child(name, proc, port, log_path, list(argv), dict(env))
            self.children.append(child)
        return child

    def respawn(self, child: Child) -> None:
        """Start a dead child again as it was first started: same identity, port and settings."""
        child.proc = spawn([sys.executable, "-m", "lahar", *child.argv], child.log_path, child.env, append=True)
        child.restarts += 1

    def _start_cluster(self, timeout: float) -> str:
        if self.config.control_plane != "kube":
            return self._start_sim(timeout)
        say = self.config.progress or log.info
        self.kube = KubeBackend(self.dir, self.config.nodes, say, self.config.kube_build_jobs, self.config.kube_audit)
        return self.kube.start()

    def _start_sim(self, timeout: float) -> str:
        path = self.dir / "sim.kubeconfig"
        if path.exists():
            path.unlink()
        argv = ["sim", "--port", str(free_port()), "--kubeconfig-out", str(path), *self.config.sim_args]
        for spec in self.config.nodes:
            argv += ["--nodes", spec]
        child = self._spawn("sim", argv, env=dict(os.environ))
        _poll(lambda: path.exists() or not child.alive(), timeout, "the emulator")
        if not child.alive():
            raise RuntimeError(f"the emulator exited: {child.log_path.read_text(errors='replace')[-2000:]}")
        return str(path)

    def _spawn_service(self, name: str, extra: list[str] | None = None, log_name: str = "") -> Child:
        port = free_port()
        argv = [name, "--http-port", str(port), "--http-host", "127.0.0.1", *(extra or [])]
        argv += ["--leader-ttl", str(self.config.leader_ttl)]
        if name == "scheduler":
            argv += ["--schedule-period", str(self.config.period)]
            if self.config.scheduler_conf:
                argv += ["--conf", self.config.scheduler_conf]
        return self._spawn(name, argv, port, log_name=log_name)

    def add_binder(self) -> Child:
        self._binder_seq += 1
        ident = f"binder-{self._binder_seq}"
        extra = ["--max-in-flight", str(self.config.max_in_flight), "--ack-wait", str(self.config.ack_wait)]
        return self._spawn_service("binder", [*extra, "--identity", ident], log_name=ident)

    def _start_admission(self, timeout: float) -> None:
        certs = self.dir / "certs"
        port = free_port()
        self._run(["admission", "certs", "--dns", "localhost", "127.0.0.1", "--out", str(certs)])
        env = {
            **self.env("admission"),
            "LAHAR_ADMISSION_REDIS_URL": self.env("admission")["LAHAR_REDIS_URL"],
            "LAHAR_ADMISSION_PREFIX": self.config.prefix,
            "LAHAR_ADMISSION_ENABLED_ADMISSION": ",".join(ADMISSION_PATHS),
        }
        argv = [
            "admission",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--cert-file",
            str(certs / "tls.crt"),
            "--key-file",
            str(certs / "tls.key"),
        ]
        self._spawn("admission", argv, port, env=env)
        self.admission_url = f"https://127.0.0.1:{port}"
        self.admission_ca = certs / "ca.crt"

    def _run(self, argv: list[str]) -> None:
        subprocess.run([sys.executable, "-m", "lahar", *argv], check=True, capture_output=True, env=self.env())

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for child in self.children:
            if child.name == "sim":
                continue
            url, verify = _readyz(self, child)
            moves = 0
            while True:
                if not child.alive():
                    tail = child.log_path.read_text(errors="replace")[-3000:]
                    if "address already in use" in tail and moves < PORT_MOVES:
                        moves += 1
                        self._move(child)
                        url, verify = _readyz(self, child)
                        continue
                    raise RuntimeError(f"{child.name} exited with {child.proc.returncode}:\n{tail}")
                try:
                    if httpx.get(url, timeout=1.0, verify=verify).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{child.name} not ready within {timeout}s; see {child.log_path}")
                time.sleep(0.05)  # polling interval of a deadline-bounded readiness wait
        self._wait_mirror(deadline)
        if self.config.admission:
            self._register_webhooks()

    def _wait_mirror(self, deadline: float) -> None:
        """Until the cache leader has sealed the mirror: before that, readers (admission among
        them) rightly answer "not ready", and the stack is not ready either."""
        import redis

        from lahar.wire.keys import stream_id_key

        client = redis.Redis.from_url(self.env()["LAHAR_REDIS_URL"])
        try:
            while not client.exists(stream_id_key(self.names.redis_prefix)):
                if time.monotonic() > deadline:
                    raise RuntimeError("the cache did not build the mirror in time; see its logs")
                time.sleep(0.05)  # polling interval of a deadline-bounded readiness wait
        finally:
            client.close()

    def _move(self, child: Child) -> None:
        """Start a child that lost its port to another process (a free port can be taken between
        our check and its bind) again on a new one."""
        old, child.port = child.port, free_port()
        child.argv = [str(child.port) if a == str(old) else a for a in child.argv]
        if child.name == "admission":
            self.admission_url = f"https://127.0.0.1:{child.port}"
        log.info("%s: port %d was taken; starting it on %d", child.identity, old, child.port)
        self.respawn(child)

    def _register_webhooks(self) -> None:
        from lahar.adapters.kube import KubeClient, KubeConfig
        from lahar_admission.webhooks import webhook_configurations

        configs = webhook_configurations(self.admission_url, self.admission_ca.read_bytes(), ADMISSION_PATHS)

        async def register() -> None:
            kube = KubeClient(KubeConfig.load(self.kubeconfig))
            try:
                for obj in configs:
                    kind = (
                        "mutatingwebhookconfigurations"
                        if obj["kind"].startswith("Mutating")
                        else ("validatingwebhookconfigurations")
                    )
                    with contextlib.suppress(Exception):
                        await kube.delete(kind, "", obj["metadata"]["name"])
                    await kube.create(kind, "", obj)
            finally:
                await kube.close()

        asyncio.run(register())

    # -- running -------------------------------------------------------------------------------
    def binders(self) -> list[Child]:
        return [c for c in self.children if c.name == "binder" and c.alive()]

    def service(self, name: str) -> Child | None:
        """A live child of that role, or None while every replica is down (being restarted)."""
        return next((c for c in self.children if c.name == name and c.alive()), None)

    def replica(self, identity: str) -> Child:
        """The child started with ``--identity identity`` (or named ``identity``)."""
        for child in self.children:
            if child.identity == identity:
                return child
        raise LookupError(f"no child {identity!r} in this stack")

    def dead(self) -> list[Child]:
        return [c for c in self.children if not c.alive()]

    def stop_binder(self) -> None:
        live = self.binders()
        if len(live) > 1:
            live[-1].retired = True
            stop(live[-1].proc, 20.0)

    # -- faults (for the chaos suite and for operators trying things) -------------------------
    def kill(self, identity: str, sig: signal.Signals = signal.SIGKILL) -> None:
        """Signal one child's process group; the keeper restarts it if it dies."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.replica(identity).proc.pid, sig)

    def pause(self, identity: str) -> None:
        """SIGSTOP: the process is frozen, alive, holding its connections (a long GC pause, a
        stalled node)."""
        child = self.replica(identity)
        child.held = True
        self.kill(identity, signal.SIGSTOP)

    def resume(self, identity: str) -> None:
        child = self.replica(identity)
        self.kill(identity, signal.SIGCONT)
        child.held = False

    def restart_infra(self, name: str, wipe: bool = False) -> None:
        """Crash NATS (``nats``) or Valkey (``redis``) and start it again on the same port;
        ``wipe`` loses its data."""
        assert self.infra is not None
        server = self.infra.nats if name == "nats" else self.infra.redis
        if not isinstance(server, EmbeddedServer):
            raise RuntimeError(f"{name} is not ours to restart ({server.url})")
        server.restart(wipe=wipe)

    def restarts(self, identity: str) -> int:
        return self.replica(identity).restarts

    def stop(self) -> None:
        """Services first (so they finish work in flight), then the emulator and the infra."""
        self.keeper.stop()
        # In two waves, each stopped in parallel: the services and the webhook (their last API
        # calls and acks still reach the cluster and the bus), then the cluster and the infra.
        services = [c for c in self.children if c.name != "sim"]
        self._stop_children(services)
        sims = [c for c in self.children if c.name == "sim"]
        for child in sims:
            self._signal(child, signal.SIGTERM)
        if self.kube is not None:
            self.kube.stop()
            self.kube = None
        if self.infra is not None:
            self.infra.stop()
            self.infra = None
        self._stop_children(sims)

    def _stop_children(self, children: list[Child]) -> None:
        for child in children:
            self._signal(child, signal.SIGTERM)
        for child in children:
            with contextlib.suppress(Exception):
                stop(child.proc, 20.0, signalled=True)

    @staticmethod
    def _signal(child: Child, sig: signal.Signals) -> None:
        if child.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.proc.pid, sig)

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _readyz(stack: LocalStack, child: Child) -> tuple[str, bool | ssl.SSLContext]:
    if child.name == "admission":
        return f"{stack.admission_url}/readyz", ssl.create_default_context(cafile=str(stack.admission_ca))
    return f"http://127.0.0.1:{child.port}/readyz", False


def _poll(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start within {timeout}s")
        time.sleep(0.05)  # polling interval of a deadline-bounded start-up wait
