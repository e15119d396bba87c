"""The chaos scenarios: each row of issue 8's table, and the code findings that can be provoked.

A scenario injects one fault into a busy system (see ``harness``); the harness then checks the
invariants.  Scenarios that hold a fault for a while (binders paused, a leader stopped) do so
with a fixed hold time: that is the fault's length, not a wait for something to happen.
"""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
from typing import Any

import httpx
import msgspec
import redis.asyncio as aioredis

from lahar.adapters.bus import stream_messages
from lahar.adapters.kube import KubeError
from lahar.adapters.leader import read_lease
from lahar.chaos.harness import Env, Scenario, orphans
from lahar.e2e.workload import GROUP
from lahar.wire.messages import BindItem, Binds, Delta, encode

TAKEOVER_LIMIT = 3.0  # seconds for a standby to lead after the leader dies
RESUME_LIMIT = 5.0  # seconds for binding to resume after NATS or Valkey restarts


# -- helpers -------------------------------------------------------------------------------------
async def _lease(env: Env, role: str) -> tuple[str, int]:
    nc = await env.nats()
    try:
        kv = await nc.jetstream().key_value(env.stack.names.leader_bucket)
        lease = await read_lease(kv, role)
        return (lease.holder, lease.epoch) if lease is not None else ("", 0)
    except Exception:  # no bucket (being made again) or no leader yet
        return ("", 0)
    finally:
        await nc.close()


async def _new_epoch(env: Env, role: str, after: int, timeout: float = 30.0) -> tuple[str, float]:
    """Wait for a leader of ``role`` in an epoch above ``after``: (holder, seconds)."""
    got: list[tuple[str, int]] = []

    async def newer() -> bool:
        got.append(await _lease(env, role))
        return got[-1][1] > after

    took = await env.until(f"a new {role} epoch", newer, timeout)
    return got[-1][0], took


async def _decisions_queued(env: Env) -> int:
    nc = await env.nats()
    try:
        return await stream_messages(nc.jetstream(), env.stack.names.decisions_stream)
    finally:
        await nc.close()


async def _publish(env: Env, subject: str, data: bytes) -> None:
    nc = await env.nats()
    try:
        await nc.jetstream().publish(subject, data)
    finally:
        await nc.close()


def _redis(env: Env) -> aioredis.Redis:
    return aioredis.from_url(env.redis_url())


def _pod(ns: str, name: str, group: str, requests: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": {GROUP: group}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
            **spec,
        },
    }


async def _condition(env: Env, ns: str, name: str) -> str:
    raw = json.loads(await env.kube.get("pods", ns, name))
    conds = (raw.get("status") or {}).get("conditions") or []
    return next((c.get("message", "") for c in conds if c.get("type") == "PodScheduled"), "")


# -- scheduler leadership --------------------------------------------------------------------------
async def leader_change(env: Env) -> None:
    """Rolling update of the scheduler while decisions are queued behind 10 s binds."""
    await env.sim_faults({"latency": {"binding": 10}})
    await env.until("decisions queued behind slow binds", lambda: _queued_at_least(env, 20), 30)
    holder, epoch = await _lease(env, "scheduler")
    env.signal(holder, signal.SIGKILL)
    _, took = await _new_epoch(env, "scheduler", epoch)
    env.figures["takeover_s"] = round(took, 2)
    await env.sim_faults({})


async def _queued_at_least(env: Env, n: int) -> bool:
    return await _decisions_queued(env) >= n


async def leader_change_binders_down(env: Env) -> None:
    """The scheduler leader changes while every binder is stopped; binders come back later."""
    binders = [c.log_path.stem for c in env.stack.binders()]
    for b in binders:
        env.stack.pause(b)
    await env.until("decisions queued for the stopped binders", lambda: _queued_at_least(env, 10), 30)
    holder, epoch = await _lease(env, "scheduler")
    env.signal(holder, signal.SIGKILL)
    await _new_epoch(env, "scheduler", epoch)
    await asyncio.sleep(3.0)  # the fault's length: binders stay stopped for 3 s after the change
    for b in binders:
        env.stack.resume(b)


async def _takeover(env: Env, sig: signal.Signals, what: str) -> None:
    """Signal the leading scheduler; a new epoch must lead within the limit."""
    holder, epoch = await _lease(env, "scheduler")
    env.signal(holder, sig)
    _, took = await _new_epoch(env, "scheduler", epoch)
    env.figures["takeover_s"] = round(took, 2)
    if took > TAKEOVER_LIMIT:
        env.problem(f"{what} took {took:.1f} s (limit {TAKEOVER_LIMIT:g} s)")


async def standby_takeover(env: Env) -> None:
    """The leading scheduler dies; a standby must lead within the limit."""
    await _takeover(env, signal.SIGKILL, "takeover")


async def graceful_handover(env: Env) -> None:
    """SIGTERM of the leading scheduler (a rolling update): the lease is handed over at once."""
    await _takeover(env, signal.SIGTERM, "handover")


async def cache_leader_paused(env: Env) -> None:
    """The cache leader is paused past its lease; a standby takes over; the old one resumes and
    must not overwrite the mirror (its writes carry an older epoch)."""
    holder, epoch = await _lease(env, "cache")
    env.stack.pause(holder)
    await _new_epoch(env, "cache", epoch)
    await asyncio.sleep(2.0)  # the fault's length: the new leader works while the old one sleeps
    env.stack.resume(holder)


# -- lost state ------------------------------------------------------------------------------------
async def nats_storage_lost(env: Env) -> None:
    """NATS restarts with its JetStream storage gone: streams, the lease bucket and the mirror's
    stream are all new; fences must not go backwards."""
    _, before = await _lease(env, "scheduler")
    await asyncio.get_running_loop().run_in_executor(None, lambda: env.stack.restart_infra("nats", wipe=True))
    try:
        await _new_epoch(env, "scheduler", before, timeout=60)
    except TimeoutError:
        _, now = await _lease(env, "scheduler")
        env.problem(f"no scheduler epoch above {before} after the loss (now {now}): fences went back")
    env.figures["epoch_before"], env.figures["epoch_after"] = before, (await _lease(env, "scheduler"))[1]


async def _restart_and_time(env: Env, server: str, label: str) -> None:
    """Restart ``server`` (its data kept) and check binding resumes within the limit."""
    fault = env.now()
    await asyncio.get_running_loop().run_in_executor(None, lambda: env.stack.restart_infra(server, wipe=False))
    await env.until("a bind after the restart", lambda: env.recovery(fault) is not None, 60)
    took = env.recovery(fault) or 0.0
    env.figures["resume_s"] = round(took, 2)
    if took > RESUME_LIMIT:
        env.problem(f"binding resumed {took:.1f} s after the {label} restart (limit {RESUME_LIMIT:g} s)")


async def nats_restart(env: Env) -> None:
    await _restart_and_time(env, "nats", "NATS")


async def valkey_restart(env: Env) -> None:
    await _restart_and_time(env, "redis", "Valkey")


async def valkey_flushall(env: Env) -> None:
    """Valkey loses everything (FLUSHALL), then the leading scheduler restarts and must load a
    rebuilt mirror, never an empty one."""
    rc = _redis(env)
    try:
        await rc.flushall()
    finally:
        await rc.aclose()
    holder, epoch = await _lease(env, "scheduler")
    env.signal(holder, signal.SIGKILL)
    await _new_epoch(env, "scheduler", epoch)


# -- poison ----------------------------------------------------------------------------------------
async def poison_quantities(env: Env) -> None:
    """Pods with cpu requests of 400 and 5,000 digits, and negative requests: refused by the API
    or ignored with a condition, never bound; a poisoned mirror entry never stops a load."""
    ns = env.load.namespace
    for name, requests in (
        ("digits-400", {"cpu": "9" * 400}),
        ("digits-5000", {"cpu": "9" * 5000}),
        ("negative-cpu", {"cpu": "-1"}),
        ("negative-memory", {"memory": "-5Gi"}),
    ):
        try:
            await env.kube.create("pods", ns, _pod(ns, name, "poison", requests))
            env.figures[f"{name}"] = "accepted"
        except KubeError as exc:
            env.figures[f"{name}"] = f"refused {exc.status}" if hasattr(exc, "status") else "refused"
    # A mirror entry no reader can decode, then a restart that must still load the rest.
    rc = _redis(env)
    try:
        await rc.hset(f"{env.stack.names.redis_prefix}:mirror:pods", f"{ns}/mirror-poison", b'{"spec": [1, 2]')
    finally:
        await rc.aclose()
    holder, epoch = await _lease(env, "scheduler")
    env.signal(holder, signal.SIGKILL)
    await _new_epoch(env, "scheduler", epoch)


async def poison_deltas(env: Env) -> None:
    """Malformed and schema-valid-but-wrong deltas on the bus: dead-lettered, never fatal."""
    names = env.stack.names
    await _publish(env, names.delta_subject("pods"), b"{not json")
    await _publish(env, names.delta_subject("pods"), encode(Delta(kind="pods", op="ADDED", key="x/y", rv="1")))
    queue = Delta(kind="queues", op="MODIFIED", key="q", rv="1", obj=msgspec.Raw(b"[1,2]"))
    await _publish(env, names.delta_subject("queues"), encode(queue))


async def poison_webhook(env: Env) -> None:
    """Bodies the webhook cannot parse (JSON nested 100,000 deep, not JSON at all): answered 400,
    and the webhook goes on admitting."""
    verify = ssl.create_default_context(cafile=str(env.stack.admission_ca))
    bodies = {"deep": b"[" * 100_000 + b"]" * 100_000, "garbage": b"\xff{not json"}
    async with httpx.AsyncClient(verify=verify, timeout=10.0) as client:
        for what, body in bodies.items():
            url = f"{env.stack.admission_url}/podgroups/validate"
            reply = await client.post(url, content=body, headers={"content-type": "application/json"})
            env.figures[f"{what}_status"] = reply.status_code
            if reply.status_code != 400:
                env.problem(f"a {what} body was answered {reply.status_code}, not 400")
    ns = env.load.namespace
    await env.kube.create("podgroups", ns, _podgroup(ns, "after-poison", 1))  # still admitting


async def forged_decision(env: Env) -> None:
    """A decision with fence 2^63-1 on the bus: dropped; real decisions go on being executed."""
    ns = env.load.namespace
    # A pod no node fits (its selector matches none): only the forged decision could bind it.
    await env.kube.create("podgroups", ns, _podgroup(ns, "forged", 1))
    await env.kube.create("pods", ns, _pod(ns, "forged-0", "forged", {"cpu": "1"}, nodeSelector={"nowhere": "x"}))
    node = sorted(env.monitor.ledger.allocatable)[0]
    forged = Binds(id="forged", fence=2**63 - 1, items=[BindItem(namespace=ns, name="forged-0", node=node)])
    await _publish(env, env.stack.names.decision_subject("bind"), encode(forged))
    fault = env.now()
    await env.until("a real bind after the forged decision", lambda: env.recovery(fault) is not None, 30)
    if f"{ns}/forged-0" in env.monitor.ledger.ever_bound:
        env.problem("the forged decision was executed")


def _podgroup(ns: str, name: str, members: int, queue: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": members, "queue": queue},
    }


async def podgroup_never_created(env: Env) -> None:
    """Pods whose PodGroup is never created (its create failed) get a condition saying so."""
    ns = env.load.namespace
    await env.kube.create("pods", ns, _pod(ns, "orphan-0", "never-made", {"cpu": "1"}))

    async def explained() -> bool:
        return "does not exist" in await _condition(env, ns, "orphan-0")

    env.figures["explained_s"] = round(await env.until("the orphan's condition", explained, 30), 2)


# -- the supervisor and the webhook -------------------------------------------------------------------
async def scheduler_restart(env: Env) -> None:
    """SIGKILL of the only scheduler: ``lahar up`` restarts it with the same identity, and it takes
    its own lease back at once instead of waiting for it to expire."""
    holder, epoch = await _lease(env, "scheduler")
    env.signal(holder, signal.SIGKILL)
    _, took = await _new_epoch(env, "scheduler", epoch)
    env.figures["lead_again_s"] = round(took, 2)
    env.figures["restarts"] = env.stack.restarts(holder)
    if env.stack.restarts(holder) < 1:
        env.problem(f"{holder} was not restarted")
    if took > RESUME_LIMIT:
        env.problem(f"the restarted scheduler led again after {took:.1f} s (limit {RESUME_LIMIT:g} s)")


async def binder_killed(env: Env) -> None:
    """SIGKILL of a binder: its unacknowledged decisions are redelivered to the other, and it is
    replaced."""
    victim = env.stack.binders()[0].identity
    env.signal(victim, signal.SIGKILL)
    await env.until(f"{victim} restarted", lambda: env.stack.restarts(victim) >= 1 and _alive(env, victim), 30)
    env.figures["restarts"] = env.stack.restarts(victim)


def _alive(env: Env, identity: str) -> bool:
    return env.stack.replica(identity).alive()


async def admission_restart(env: Env) -> None:
    """The admission webhook restarts under load: PodGroup creates are refused meanwhile. Every
    pod whose PodGroup was never made must say so in its condition; the rest must run."""
    fault = env.now()
    env.signal("admission", signal.SIGKILL)
    await env.until("admission restarted", lambda: env.stack.restarts("admission") >= 1, 30)
    env.figures["admission_back_s"] = round(env.now() - fault, 2)


async def orphans_explained(env: Env) -> None:
    """Every pod whose PodGroup was never created carries a condition that says so."""
    lost = sorted(orphans(env))

    async def all_explained() -> bool:
        for key in lost:
            ns, name = key.split("/")
            if "does not exist" not in await _condition(env, ns, name):
                return False
        return True

    try:
        await env.until("a condition on every pod without its PodGroup", all_explained, 30)
    except TimeoutError:
        env.problem(f"pods without a PodGroup and without a condition saying so, among {lost[:3]}")


async def queue_with_podgroup(env: Env) -> None:
    """A Queue and a PodGroup naming it, created back to back (one ``kubectl apply -f``): the
    PodGroup is admitted (admission reads its own writes)."""
    ns = env.load.namespace
    denied = 0
    for i in range(10):
        queue = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": f"fresh-{i}"},
            "spec": {"weight": 1},
        }
        await env.kube.create("queues", "", queue)
        try:
            await env.kube.create("podgroups", ns, _podgroup(ns, f"fresh-{i}", 1, queue=f"fresh-{i}"))
        except KubeError as exc:
            denied += 1
            env.problem(f"PodGroup fresh-{i} denied right after its queue was created: {exc}")
    env.figures["denied"] = denied


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("leader-change", "scheduler leader change with decisions queued (10 s binds)", leader_change, fast=True),
    Scenario(
        "leader-change-binders-down", "scheduler leader change while binders are stopped", leader_change_binders_down
    ),
    Scenario("standby-takeover", "the leading scheduler is killed; a standby leads", standby_takeover, fast=True),
    Scenario("graceful-handover", "SIGTERM of the leading scheduler (rolling update)", graceful_handover),
    Scenario("cache-leader-paused", "the cache leader pauses past its lease, then resumes", cache_leader_paused),
    Scenario("nats-storage-lost", "NATS restarts with its JetStream storage lost", nats_storage_lost),
    Scenario("nats-restart", "NATS restarts", nats_restart),
    Scenario("valkey-restart", "Valkey restarts", valkey_restart),
    Scenario("valkey-flushall", "Valkey FLUSHALL, then a scheduler restart", valkey_flushall, fast=True),
    Scenario("poison-quantities", "huge and negative quantities; a poisoned mirror entry", poison_quantities),
    Scenario("poison-deltas", "malformed and object-less deltas on the bus", poison_deltas, fast=True),
    Scenario("poison-webhook", "bodies nested 100,000 deep, and garbage, to the webhook", poison_webhook),
    Scenario("forged-decision", "a decision with fence 2^63-1", forged_decision, fast=True),
    Scenario("podgroup-never-created", "pods whose PodGroup is never created", podgroup_never_created),
    Scenario(
        "scheduler-restart",
        "SIGKILL of the only scheduler: restarted, leads again at once",
        scheduler_restart,
        fast=True,
        config={"replicas": 1},
    ),
    Scenario("binder-killed", "SIGKILL of a binder: replaced, its decisions redelivered", binder_killed),
    Scenario(
        "admission-restart",
        "the admission webhook restarts under load",
        admission_restart,
        verify=orphans_explained,
    ),
    Scenario("queue-with-podgroup", "a Queue and its PodGroup created back to back", queue_with_podgroup, fast=True),
)
