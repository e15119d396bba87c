"""Watching a running stack: metrics scraped from the services, and binder autoscaling."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx
from nats.js.client import JetStreamContext
from prometheus_client.parser import text_string_to_metric_families

from lahar.up.stack import LocalStack

log = logging.getLogger("lahar.up")


@dataclass
class Status:
    nodes: int = 0
    pending: int = 0
    bound: int = 0
    binds_done: float = 0.0
    binders: int = 0
    queued: int = 0


async def scrape(client: httpx.AsyncClient, port: int) -> dict[str, float]:
    """Prometheus samples of one service, summed over labels: ``name -> value``."""
    out: dict[str, float] = {}
    try:
        text = (await client.get(f"http://127.0.0.1:{port}/metrics", timeout=2.0)).text
    except httpx.HTTPError:
        return out
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            key = sample.name
            if sample.labels.get("kind") == "bind" and sample.labels.get("outcome") == "done":
                key = "binds_done"
            out[key] = out.get(key, 0.0) + sample.value
    return out


async def pending_decisions(js: JetStreamContext, stack: LocalStack) -> int:
    try:
        info = await js.consumer_info(stack.names.decisions_stream, stack.names.binder_consumer)
    except Exception:
        return 0
    return int(info.num_pending or 0) + int(info.num_ack_pending or 0)


async def status(client: httpx.AsyncClient, js: JetStreamContext, stack: LocalStack) -> Status:
    leader = stack.service("scheduler")
    sched = await scrape(client, leader.port) if leader is not None else {}
    st = Status(
        nodes=int(sched.get("lahar_scheduler_nodes", 0)),
        pending=int(sched.get("lahar_scheduler_pending_tasks", 0)),
        bound=int(sched.get("lahar_scheduler_placed_tasks", 0)),
    )
    for b in stack.binders():
        st.binds_done += (await scrape(client, b.port)).get("binds_done", 0.0)
    st.binders = len(stack.binders())
    st.queued = await pending_decisions(js, stack)
    return st


class Autoscaler:
    """Adds a binder when decisions queue up beyond what the replicas absorb; removes one after
    the queue has stayed empty for a while.  Between ``min`` and ``max`` replicas."""

    def __init__(self, stack: LocalStack, per_binder: int = 256, idle_seconds: float = 30.0) -> None:
        self.stack = stack
        self.per_binder = per_binder
        self.idle_seconds = idle_seconds
        self.idle_since: float | None = None

    def step(self, queued: int, now: float) -> str:
        live = len(self.stack.binders())
        if queued > self.per_binder * live and live < self.stack.config.max_binders:
            self.stack.add_binder()
            self.idle_since = None
            return f"scaled binders up to {live + 1} ({queued} decisions queued)"
        if queued == 0:
            self.idle_since = self.idle_since if self.idle_since is not None else now
            if now - self.idle_since > self.idle_seconds and live > self.stack.config.binders:
                self.stack.stop_binder()
                self.idle_since = now
                return f"scaled binders down to {live - 1}"
        else:
            self.idle_since = None
        return ""
