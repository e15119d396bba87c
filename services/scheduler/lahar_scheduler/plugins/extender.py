"""extender: Volcano's HTTP scheduler extender, consulted at the extension points it names.

Each configured verb is a POST of JSON to ``<extender.urlPrefix>/<verb>`` (the request and reply
shapes are in ``extender_wire``).  The plugin does no I/O: it calls the session's
``ExtenderTransport``, which the scheduler service fills with an HTTP adapter.  A failed call
(unreachable, timed out, non-200, undecodable) is skipped when ``extender.ignorable`` is true;
otherwise it counts against the task or job as Volcano's plugin does (the node fails with a reason
naming the extender, the job is not enqueued, the queue counts as overused...).  Unlike Volcano,
after one failed call the extender is taken as down for the rest of the session, so a session
does not wait one timeout per node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
from lahar_scheduler.framework.ports import TransportError
from lahar_scheduler.framework.predicate import Failure
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.types import Code, Vote
from lahar_scheduler.framework.why import Why
from lahar_scheduler.plugins import extender_wire as wire
from lahar_scheduler.plugins.base import Plugin
from lahar_scheduler.plugins.sla import parse_go_duration

if TYPE_CHECKING:
    from lahar_scheduler.framework.nodes import FloatArray, IntArray

R = TypeVar("R")
MAX_BODY = 10 << 20  # Volcano reads at most 10 MB of a reply


def _verb(name: str) -> Any:
    return msgspec.field(default="", name=f"extender.{name}")


class ExtenderArgs(msgspec.Struct, forbid_unknown_fields=True):
    url_prefix: str = _verb("urlPrefix")
    http_timeout: str = _verb("httpTimeout")
    on_session_open_verb: str = _verb("onSessionOpenVerb")
    on_session_close_verb: str = _verb("onSessionCloseVerb")
    predicate_verb: str = _verb("predicateVerb")
    prioritize_verb: str = _verb("prioritizeVerb")
    preemptable_verb: str = _verb("preemptableVerb")
    reclaimable_verb: str = _verb("reclaimableVerb")
    queue_overused_verb: str = _verb("queueOverusedVerb")
    job_enqueueable_verb: str = _verb("jobEnqueueableVerb")
    job_enqueued_verb: str = _verb("jobEnqueuedVerb")
    job_ready_verb: str = _verb("jobReadyVerb")
    allocate_func_verb: str = _verb("allocateFuncVerb")
    deallocate_func_verb: str = _verb("deallocateFuncVerb")
    ignorable: bool = msgspec.field(default=False, name="extender.ignorable")
    managed_resources: list[str] = msgspec.field(default_factory=list, name="extender.managedResources")

    def __post_init__(self) -> None:
        if self.http_timeout and parse_go_duration(self.http_timeout) is None:
            raise ValueError(f"extender.httpTimeout: {self.http_timeout!r} is not a duration such as 100ms")

    @property
    def timeout(self) -> float:
        """Seconds; Volcano's default is 1s and an unparsable value keeps it."""
        parsed = parse_go_duration(self.http_timeout) if self.http_timeout else None
        return parsed if parsed is not None else 1.0


class ExtenderPlugin(Plugin):
    name = "extender"
    Args = ExtenderArgs

    def on_session_open(self, ssn: Session) -> None:
        self.cfg: ExtenderArgs = self.args or ExtenderArgs()
        self.ssn = ssn
        self.down: str | None = None  # why the extender failed this session, once it has
        self.managed = set(self.cfg.managed_resources)
        cfg = self.cfg
        if cfg.on_session_open_verb:
            _, err = self._send(cfg.on_session_open_verb, self._session_open_request(), None)
            if err is not None and not cfg.ignorable:
                return  # Volcano registers nothing then: the extender is left out of the session
        if cfg.predicate_verb:
            ssn.add(P.PREDICATE, self.predicate)
        if cfg.prioritize_verb:
            ssn.add(P.NODE_ORDER, self.node_order)
        if cfg.preemptable_verb:
            ssn.add(P.PREEMPTABLE, self.preemptable)
        if cfg.reclaimable_verb:
            ssn.add(P.RECLAIMABLE, self.reclaimable)
        if cfg.job_enqueueable_verb:
            ssn.add(P.JOB_ENQUEUEABLE, self.job_enqueueable)
        if cfg.job_enqueued_verb:
            ssn.add(P.JOB_ENQUEUED, self.job_enqueued)
        if cfg.queue_overused_verb:
            ssn.add(P.OVERUSED, self.overused)
        if cfg.job_ready_verb:
            ssn.add(P.JOB_READY, self.job_ready)
        allocate = self._event(cfg.allocate_func_verb) if cfg.allocate_func_verb else None
        deallocate = self._event(cfg.deallocate_func_verb) if cfg.deallocate_func_verb else None
        ssn.add_event_handler(EventHandler(allocate, deallocate))

    def on_session_close(self, ssn: Session) -> None:
        if self.cfg.on_session_close_verb and not (self.down and self.cfg.ignorable):
            self._send(self.cfg.on_session_close_verb, {}, None)

    # -- the call -------------------------------------------------------------------------------
    def url(self, verb: str) -> str:
        return self.cfg.url_prefix.rstrip("/") + "/" + verb

    def _send(self, verb: str, request: Any, reply: type[R] | None) -> tuple[R | None, str | None]:
        """(decoded reply, None) or (None, why it failed, naming the extender)."""
        url = self.url(verb)
        if self.down is not None:
            return None, self.down
        try:
            body = self.ssn.transport.post(url, msgspec.json.encode(request), self.cfg.timeout)
            if len(body) > MAX_BODY:
                raise TransportError(f"reply larger than {MAX_BODY} bytes")
            return (msgspec.json.decode(body, type=reply) if reply is not None else None), None
        except TransportError as exc:
            if exc.status is not None:
                why = f"failed {verb} with extender at URL {url}, code {exc.status}"
            else:
                why = f"extender at URL {url} unreachable: {exc}"
        except msgspec.DecodeError as exc:
            why = f"extender at URL {url}: bad {verb} reply: {exc}"
        self.down = why
        return None, why

    def interested(self, task: TaskInfo) -> bool:
        """Volcano's IsInterested: a task requesting or limiting a managed resource, or any task
        when no resource is managed."""
        if not self.managed:
            return True
        spec = task.pod.spec
        for c in (*spec.containers, *spec.init_containers):
            if self.managed.intersection(c.resources.requests) or self.managed.intersection(c.resources.limits):
                return True
        return False

    def _session_open_request(self) -> dict[str, Any]:
        ssn = self.ssn
        nodes = {n.name: wire.node(n) for n in ssn.node_list}
        revocable = {n.name: nodes[n.name] for n in ssn.node_list if n.labels.get("volcano.sh/revocable-zone")}
        namespaces = {j.namespace for j in ssn.jobs.values()}
        return {
            "Jobs": {uid: wire.job(j) for uid, j in ssn.jobs.items()},
            "Nodes": nodes,
            "Queues": {name: wire.queue(q) for name, q in ssn.queues.items()},
            "NamespaceInfo": {ns: {"Name": ns} for ns in sorted(namespaces)},
            "RevocableNodes": revocable,
            "NodeList": None,
        }

    # -- nodes ----------------------------------------------------------------------------------
    def predicate(self, task: TaskInfo, idx: IntArray) -> list[Failure]:
        """One call per node, as Volcano's PredicateFn is per node."""
        if not self.interested(task):
            return []
        failed: dict[tuple[str, Code], list[int]] = {}
        request_task = wire.task(task)
        for pos, i in enumerate(idx):
            node = self.ssn.node_list[int(i)]
            resp, err = self._send(
                self.cfg.predicate_verb, {"task": request_task, "node": wire.node(node)}, wire.PredicateResponse
            )
            if err is not None:
                if not self.cfg.ignorable:
                    failed.setdefault((err, Code.ERROR), []).append(pos)
                continue
            if resp is None or not resp.error_message:
                continue
            code = Code(resp.code) if resp.code in Code._value2member_map_ else Code.ERROR
            failed.setdefault((resp.error_message, Code.ERROR if code == Code.SUCCESS else code), []).append(pos)
        out = []
        for (reason, code), rows in failed.items():
            mask = np.zeros(len(idx), dtype=bool)
            mask[rows] = True
            out.append(Failure(mask, reason, code))
        return out

    def node_order(self, task: TaskInfo, idx: IntArray) -> FloatArray:
        """Volcano's batch node order: one call for all nodes; nodes the reply omits score 0.  A
        failed call scores 0 everywhere (Volcano then scores no node for the task)."""
        scores = np.zeros(len(idx))
        if not self.interested(task):
            return scores
        nodes = [self.ssn.node_list[int(i)] for i in idx]
        request = {"task": wire.task(task), "nodes": [wire.node(n) for n in nodes]}
        resp, err = self._send(self.cfg.prioritize_verb, request, wire.PrioritizeResponse)
        if err is not None or resp is None or resp.error_message or resp.node_score is None:
            job = self.ssn.jobs.get(task.job)
            if job is not None and not self.cfg.ignorable:
                self.ssn.note(job, f"extender: prioritize failed: {err or (resp.error_message if resp else '')}")
            return scores
        for pos, n in enumerate(nodes):
            scores[pos] = resp.node_score.get(n.name, 0.0)
        return scores

    # -- victims --------------------------------------------------------------------------------
    def preemptable(self, evictor: TaskInfo, evictees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        return self._victims(self.cfg.preemptable_verb, evictor, evictees)

    def reclaimable(self, evictor: TaskInfo, evictees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        return self._victims(self.cfg.reclaimable_verb, evictor, evictees)

    def _victims(self, verb: str, evictor: TaskInfo, evictees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        if not self.interested(evictor):
            return [], Vote.ABSTAIN
        request = {"evictor": wire.task(evictor), "evictees": [wire.task(t) for t in evictees]}
        resp, err = self._send(verb, request, wire.PreemptableResponse)
        if err is not None or resp is None:
            return [], Vote.PERMIT if self.cfg.ignorable else Vote.REJECT
        by_uid = {t.uid: t for t in evictees}
        victims = [by_uid[v.uid] for v in resp.victims or [] if v.uid in by_uid]
        return victims, _vote(resp.status)

    # -- jobs and queues ------------------------------------------------------------------------
    def job_enqueueable(self, job: JobInfo) -> Vote:
        resp, err = self._send(self.cfg.job_enqueueable_verb, {"job": wire.job(job)}, wire.StatusResponse)
        if err is not None or resp is None:
            if self.cfg.ignorable:
                return Vote.PERMIT
            self.ssn.explain(
                job, Why("enqueue", "extender", str(err), "make the extender reachable, or set extender.ignorable")
            )
            return Vote.REJECT
        vote = _vote(resp.status)
        if vote == Vote.REJECT:
            self.ssn.explain(
                job,
                Why(
                    "enqueue",
                    "extender",
                    f"extender at URL {self.url(self.cfg.job_enqueueable_verb)} refused to enqueue it",
                ),
            )
        return vote

    def job_enqueued(self, job: JobInfo) -> None:
        self._send(self.cfg.job_enqueued_verb, {"job": wire.job(job)}, None)

    def overused(self, queue: QueueInfo) -> bool:
        resp, err = self._send(self.cfg.queue_overused_verb, {"queue": wire.queue(queue)}, wire.OverusedResponse)
        if err is not None or resp is None:
            return not self.cfg.ignorable
        return resp.overused

    def job_ready(self, job: JobInfo) -> bool:
        resp, err = self._send(self.cfg.job_ready_verb, {"job": wire.job(job)}, wire.ReadyResponse)
        if err is not None or resp is None:
            return not self.cfg.ignorable
        return resp.status

    def _event(self, verb: str) -> Callable[[TaskInfo], None]:
        def handler(task: TaskInfo) -> None:
            # Volcano rolls the allocation back when this fails; Lahar's event handlers cannot
            # refuse (the Statement has no failing allocate), so a failure is not acted on.
            if self.interested(task):
                self._send(verb, {"task": wire.task(task)}, wire.EventHandlerResponse)

        return handler


def _vote(status: int) -> Vote:
    return Vote.PERMIT if status > 0 else (Vote.REJECT if status < 0 else Vote.ABSTAIN)
