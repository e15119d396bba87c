"""Running one chaos scenario on the whole system, and judging it.

Each scenario starts its own ``LocalStack`` (its own NATS and Valkey, so they can be restarted or
wiped; the emulator with simulated nodes; every service, with standbys), runs a steady gang
workload, injects its fault once the cluster is busy, and then checks:

* at no event was a node over-committed (``Ledger.violations``);
* at settle no gang is bound below its minMember;
* every pod submitted is bound by the end (the workload fits the cluster);
* the recovery time: from the fault to the first bind of a pod created after it;
* whatever the scenario itself asserts (``env.problem``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.chaos.load import Load
from lahar.chaos.monitor import Monitor
from lahar.e2e.workload import ensure_namespace
from lahar.up.stack import Child, LocalStack, StackConfig

log = logging.getLogger("lahar.chaos")
NAMESPACE_TIMEOUT = 60.0


@dataclass(frozen=True)
class Shape:
    """The cluster and the workload of a run."""

    nodes: int = 200
    cpu: int = 8
    pod_cpu: int = 1
    rate: float = 3.0  # gangs per second
    gang: int = 10
    run_seconds: float = 30.0
    warmup_binds: int = 150
    after: float = 8.0  # seconds the load goes on after recovery
    settle_timeout: float = 90.0


# Small but full: 12 pods of 2 cpu a second on 160 cpu, each running 10 s, so nodes fill up and
# a pod placed twice over-commits its node.
FAST = Shape(nodes=20, pod_cpu=2, rate=2.0, gang=6, run_seconds=10.0, warmup_binds=40, after=4.0, settle_timeout=60.0)


@dataclass
class Outcome:
    name: str
    passed: bool
    seconds: float
    figures: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        figs = ", ".join(f"{k} {_fmt(v)}" for k, v in self.figures.items())
        head = f"{'PASS' if self.passed else 'FAIL'} {self.name} ({self.seconds:.0f} s): {figs}"
        return head + "".join(f"\n     - {p}" for p in self.problems)


def _fmt(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


@dataclass
class Env:
    stack: LocalStack
    kube: KubeClient
    monitor: Monitor
    load: Load
    shape: Shape
    problems: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def now(self) -> float:
        return self.monitor.now()

    # -- processes -----------------------------------------------------------------------------
    def child(self, identity: str) -> Child:
        return self.stack.replica(identity)

    async def nats(self) -> Any:
        """A NATS connection with the rights of an operator's tools (the chaos suite is one)."""
        assert self.stack.infra is not None
        return await self.stack.infra.connect_nats(max_reconnect_attempts=0)

    def redis_url(self) -> str:
        return self.stack.env()["LAHAR_REDIS_URL"]

    async def leader(self, role: str) -> str:
        from lahar.adapters.leader import read_lease

        nc = await self.nats()
        try:
            kv = await nc.jetstream().key_value(self.stack.names.leader_bucket)
            lease = await read_lease(kv, role)
            return lease.holder if lease is not None else ""
        except Exception:  # no bucket or no leader yet
            return ""
        finally:
            await nc.close()

    async def wait_leader(self, role: str, other_than: str = "", timeout: float = 30.0) -> tuple[str, float]:
        """The new leader of ``role`` and how long it took to appear."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            now = await self.leader(role)
            if now and now != other_than:
                return now, time.monotonic() - started
            await asyncio.sleep(0.05)  # polling interval of a deadline-bounded wait
        raise TimeoutError(f"no new {role} leader within {timeout} s")

    def signal(self, identity: str, sig: signal.Signals) -> None:
        self.stack.kill(identity, sig)

    async def sim_faults(self, spec: dict[str, Any]) -> None:
        """Set the emulator's injected latency and errors (``{"latency": {"binding": 10}}``)."""
        cfg = KubeConfig.load(self.stack.kubeconfig)
        async with httpx.AsyncClient(verify=False) as client:
            reply = await client.put(f"{cfg.host}/lahar-sim/v1/faults", content=json.dumps(spec))
            reply.raise_for_status()

    # -- waiting -------------------------------------------------------------------------------
    async def until(self, what: str, check: Callable[[], bool | Awaitable[bool]], timeout: float) -> float:
        started = time.monotonic()
        while True:
            got = check()
            if await got if isinstance(got, Awaitable) else got:
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"{what}: not within {timeout} s")
            await asyncio.sleep(0.05)  # polling interval of a deadline-bounded wait

    def recovery(self, fault_at: float) -> float | None:
        """Seconds from the fault to the first bind of a pod created after it."""
        created = self.load.tracker.created
        start_abs = self.monitor.started + fault_at
        times = [t for k, t in self.monitor.bound_at.items() if created.get(k, 0.0) > start_abs]
        return min(times) - fault_at if times else None


Inject = Callable[[Env], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    inject: Inject
    fast: bool = False
    config: dict[str, Any] = field(default_factory=dict)  # StackConfig overrides
    load: bool = True  # run the gang workload around the fault
    verify: Inject | None = None  # more checks, after the cluster settled


def run(scenario: Scenario, shape: Shape, base: Path | None = None, keep: bool = False) -> Outcome:
    """Run one scenario on a stack of its own.  The stack starts and stops on this thread, outside
    the scenario's event loop: its children die with the thread that forked them."""
    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix=f"lahar-chaos-{scenario.name}-", dir=base))
    stack = LocalStack(_config(scenario, shape, folder))
    outcome = Outcome(scenario.name, False, 0.0)
    try:
        stack.start()
        asyncio.run(_drive(scenario, shape, stack, outcome))
    except Exception as exc:  # a scenario that cannot even run is a failure to report, not a crash
        log.exception("scenario %s", scenario.name)
        outcome.problems.append(f"the scenario could not run: {exc!r}")
    finally:
        stack.stop()
        if outcome.problems or keep:
            outcome.figures["logs"] = str(folder / "logs")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    outcome.seconds = time.monotonic() - started
    outcome.passed = not outcome.problems
    return outcome


def _config(scenario: Scenario, shape: Shape, folder: Path) -> StackConfig:
    nodes = (f"{shape.nodes}:cpu={shape.cpu},memory={shape.cpu * 8}Gi,pods=110",)
    defaults: dict[str, Any] = {
        "state_dir": folder,
        "nodes": nodes,
        "replicas": 2,
        "binders": 2,
        "max_binders": 2,
        "leader_ttl": 2.0,
        "period": 0.5,
        "traces": False,
    }
    return StackConfig(**{**defaults, **scenario.config})


async def _drive(scenario: Scenario, shape: Shape, stack: LocalStack, outcome: Outcome) -> None:
    kube = KubeClient(KubeConfig.load(stack.kubeconfig))
    try:
        await _drive_with(scenario, shape, stack, kube, outcome)
    finally:
        await kube.close()


async def _drive_with(scenario: Scenario, shape: Shape, stack: LocalStack, kube: KubeClient, outcome: Outcome) -> None:
    async with Monitor(kube) as monitor:
        load = Load(kube, gang=shape.gang, cpu=str(shape.pod_cpu), rate=shape.rate, run_seconds=shape.run_seconds)
        env = Env(stack, kube, monitor, load, shape)
        if scenario.load:
            # On a real control plane a namespace takes pods once kube-controller-manager has
            # given it its default ServiceAccount; the emulator needs neither.
            real = stack.kube is not None
            await ensure_namespace(kube, load.namespace, account_timeout=NAMESPACE_TIMEOUT if real else 0.0)
            await load.start()
            await env.until("warm-up binds", lambda: len(monitor.bind_times) >= shape.warmup_binds, 90)
        fault_at = env.now()
        await scenario.inject(env)
        if scenario.load:
            await env.until("a bind after the fault", lambda: env.recovery(fault_at) is not None, 90)
            env.figures.setdefault("recovery_s", round(env.recovery(fault_at) or 0.0, 2))
            await asyncio.sleep(shape.after)  # the load goes on for a while after recovery
            await load.stop()
            await _settle(env)
        if scenario.verify is not None:
            await scenario.verify(env)
        _judge(env)
        outcome.figures.update(env.figures)
        outcome.problems.extend(env.problems)


def _gang_of(key: str, group: str) -> str:
    return f"{key.rpartition('/')[0]}/{group}"


def orphans(env: Env) -> set[str]:
    """Submitted pods whose PodGroup does not exist (its create was refused): they cannot run."""
    led = env.monitor.ledger
    return {k for k in env.load.submitted if k in led.pods and _gang_of(k, led.pods[k].group) not in led.min_member}


async def _settle(env: Env) -> None:
    lost = orphans(env)
    env.figures["orphans"] = len(lost)
    submitted = env.load.submitted - lost
    try:
        took = await env.until(
            "every submitted pod bound",
            lambda: not env.monitor.ledger.unbound(submitted & set(env.monitor.ledger.pods)),
            env.shape.settle_timeout,
        )
        env.figures["settle_s"] = round(took, 2)
    except TimeoutError:
        missing = env.monitor.ledger.unbound(submitted & set(env.monitor.ledger.pods))
        env.problem(f"{len(missing)} pods never bound (e.g. {', '.join(missing[:3])})")


def _judge(env: Env) -> None:
    led = env.monitor.ledger
    env.figures["binds"] = len(env.monitor.bind_times)
    env.figures["overcommits"] = len(led.violations)
    env.figures["worst_cpu"] = f"{led.worst.get('cpu', 0.0) * env.shape.cpu:.0f}/{env.shape.cpu}"
    if led.violations:
        nodes = sorted({v.node for v in led.violations})
        worst = max(led.violations, key=lambda v: v.used / max(v.allocatable, 1))
        env.problem(
            f"over-commit: {len(nodes)} nodes at some moment, worst {worst.node} "
            f"{worst.used / 1000:g}/{worst.allocatable / 1000:g} {worst.resource} at {worst.at:.1f} s"
        )
    partial = led.partial_gangs()
    if partial:
        env.problem(f"{len(partial)} gangs bound below minMember, e.g. {partial[0]}")
