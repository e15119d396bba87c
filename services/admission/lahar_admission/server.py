"""The HTTPS admission service.

Stack: Starlette on uvicorn.  Both are already dependencies of the project; Starlette is a thin
ASGI router (no second schema system, unlike FastAPI's pydantic — requests are decoded with
msgspec), and uvicorn lets us reach its live ``SSLContext`` to reload certificates in place
(ecosystem.md §3.6).  The rules are synchronous and pure; each review runs them in a small
thread pool under ``asyncio.wait_for`` so that the answer always comes back within the API
server's ``?timeout=`` budget, whatever the request holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import msgspec
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lahar_admission.config import DEFAULT_ON_UNAVAILABLE, parse_duration
from lahar_admission.depth import MAX_DEPTH, too_deep
from lahar_admission.readthrough import Found, Missed, ReviewView
from lahar_admission.review import AdmissionRequest, Verdict, decode_review, encode_review
from lahar_admission.rules import WEBHOOKS, admit, is_known_resource
from lahar_admission.settings import RuleSettings
from lahar_admission.view import ClusterView, ViewUnavailable

log = logging.getLogger("lahar.admission")
# Leave the API server a little of its budget for the network and our own encoding.
TIMEOUT_MARGIN = 0.9
# Read-your-writes: how long a review may wait for objects it missed to reach the mirror, and
# how many rounds of lookups (a queue's parent is only known once the queue is found).
READ_THROUGH_WAIT = 1.0
READ_THROUGH_ROUNDS = 4


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.reviews = Counter(
            "lahar_admission_reviews_total",
            "Admission reviews answered",
            ["path", "allowed"],
            registry=registry,
        )
        self.latency = Histogram(
            "lahar_admission_review_seconds",
            "Time to decide one review",
            ["path"],
            registry=registry,
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1, 5),
        )
        self.bad = Counter(
            "lahar_admission_bad_requests_total",
            "Requests refused before any rule ran",
            ["reason"],
            registry=registry,
        )
        self.unavailable = Counter(
            "lahar_admission_unavailable_total",
            "Reviews answered by the --on-unavailable policy",
            ["path", "reason"],
            registry=registry,
        )
        self.internal = Counter(
            "lahar_admission_internal_errors_total", "Rule failures (bugs)", ["path"], registry=registry
        )
        self.read_through = Counter(
            "lahar_admission_read_through_total",
            "Lookups that missed the snapshot and were read from the mirror directly",
            ["outcome"],
            registry=registry,
        )
        self.mirror_age = Gauge("lahar_admission_mirror_age_seconds", "Age of the cluster snapshot", registry=registry)


@dataclass
class AppConfig:
    rules: RuleSettings
    view: ClusterView
    enabled: tuple[str, ...] = tuple(WEBHOOKS)
    on_unavailable: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ON_UNAVAILABLE))
    default_timeout: float = 10.0
    max_body_bytes: int = 3 * 1024 * 1024
    ready: Callable[[], tuple[bool, str]] = lambda: (True, "")
    # Reads objects the snapshot missed, waiting up to the given seconds (MirrorView.read_through).
    read_through: Callable[[Missed, float], Awaitable[Found]] | None = None
    # Reads the mirror again now if the snapshot is not ready (MirrorView.catch_up): the seal a
    # moment ago must not be answered "not ready" until the next periodic refresh.
    catch_up: Callable[[], Awaitable[object]] | None = None
    mirror_age: Callable[[], float] = lambda: 0.0
    workers: int = 4
    # Reviews up to this size are decided on the event loop (see _timed_decision).
    inline_max_bytes: int = 16 * 1024


class BadRequest(Exception):
    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status, self.message, self.reason = status, message, reason


class AdmissionService:
    def __init__(self, config: AppConfig, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.registry = registry or CollectorRegistry()
        self.metrics = _Metrics(self.registry)
        self.pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="admit")

    # -- request handling -----------------------------------------------------------
    async def _body(self, request: Request) -> bytes:
        ctype = request.headers.get("content-type", "")
        if ctype.split(";")[0].strip().lower() != "application/json":
            raise BadRequest(415, f"Content-Type must be application/json, got {ctype or 'nothing'!r}", "content-type")
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise BadRequest(413, f"request body too large: {declared} bytes, the limit is {limit}", "too-large")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BadRequest(413, f"request body too large: more than {limit} bytes", "too-large")
            chunks.append(chunk)
        return b"".join(chunks)

    def _parse(self, body: bytes, path: str) -> AdmissionRequest:
        if too_deep(body):
            raise BadRequest(400, f"malformed AdmissionReview: nested deeper than {MAX_DEPTH} levels", "too-deep")
        try:
            review = decode_review(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise BadRequest(400, f"malformed AdmissionReview: {exc}", "malformed") from None
        except RecursionError:  # not expected below MAX_DEPTH; never a 500 if it happens anyway
            raise BadRequest(400, "malformed AdmissionReview: nested too deeply", "too-deep") from None
        if review.request is None:
            raise BadRequest(400, "malformed AdmissionReview: it has no request", "malformed")
        if not is_known_resource(review.request):
            r = review.request.resource
            raise BadRequest(
                404, f"{path} does not handle {r.group or 'core'}/{r.version} {r.resource}", "unknown-kind"
            )
        return review.request

    def _budget(self, request: Request) -> float:
        budget = self.config.default_timeout
        text = request.query_params.get("timeout")
        if text:
            # A malformed hint is ignored, not an error: the default still bounds us.
            with contextlib.suppress(ValueError):
                budget = min(budget, parse_duration(text))
        return max(budget * TIMEOUT_MARGIN, 0.001)

    def _fallback(self, path: str, req: AdmissionRequest, why: str) -> Verdict:
        kind = req.resource.resource
        policy = self.config.on_unavailable.get(kind, "deny")
        self.metrics.unavailable.labels(path, why.split(":")[0]).inc()
        word = "allowed" if policy == "allow" else "denied"
        message = f"lahar admission: {why}; {word} by --on-unavailable {kind}={policy}"
        return Verdict(True, warnings=[message]) if policy == "allow" else Verdict.deny(message)

    def _decide(self, path: str, req: AdmissionRequest, view: ReviewView) -> Verdict:
        try:
            return admit(path, req, view, self.config.rules)
        except ViewUnavailable as exc:
            return self._fallback(path, req, f"the cluster mirror is unavailable: {exc}")
        except Exception as exc:  # a rule bug must not take the service down
            log.exception("rule failure on %s", path)
            self.metrics.internal.labels(path).inc()
            return Verdict.deny(f"lahar admission: internal error in {path}: {type(exc).__name__}")

    async def _verdict(self, request: Request, path: str, req: AdmissionRequest, size: int) -> Verdict:
        """The decision, made again with what a direct read finds when the snapshot missed a
        lookup (an object created a moment ago)."""
        deadline = time.monotonic() + min(READ_THROUGH_WAIT, self._budget(request) / 2)
        if self.config.catch_up is not None:
            await self.config.catch_up()
        found, tried = Found(), Missed()
        for _ in range(READ_THROUGH_ROUNDS):
            view = ReviewView(self.config.view, found)
            verdict = await self._timed_decision(request, path, req, size, view)
            new = view.missed.without(tried)  # a name already waited for is not waited for again
            left = deadline - time.monotonic()
            if not new or self.config.read_through is None or left <= 0:
                return verdict
            more = await self.config.read_through(new, left)
            self.metrics.read_through.labels("found" if more else "missing").inc()
            if not more:
                return verdict
            tried.add(new)
            found.add(more)
        return verdict

    async def _timed_decision(
        self, request: Request, path: str, req: AdmissionRequest, size: int, view: ReviewView
    ) -> Verdict:
        """The verdict, always within the request's time budget.

        The rules are pure CPU work that grows with the object's size, and nothing in them
        waits (the view is a local snapshot).  Small reviews, the common case, are decided on
        the event loop: handing them to a thread costs more than deciding them.  Large ones go
        to the pool under ``wait_for`` so that no object can hold an answer past the deadline.
        """
        if size <= self.config.inline_max_bytes:
            return self._decide(path, req, view)
        budget = self._budget(request)
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(self.pool, self._decide, path, req, view), budget)
        except TimeoutError:
            return self._fallback(path, req, f"no decision within {budget:.3f}s")

    async def review(self, request: Request) -> Response:
        path = request.url.path
        started = time.perf_counter()
        try:
            body = await self._body(request)
            req = self._parse(body, path)
        except BadRequest as exc:
            self.metrics.bad.labels(exc.reason).inc()
            return JSONResponse({"message": exc.message}, status_code=exc.status)
        verdict = await self._verdict(request, path, req, len(body))
        self.metrics.reviews.labels(path, str(verdict.allowed).lower()).inc()
        self.metrics.latency.labels(path).observe(time.perf_counter() - started)
        return Response(encode_review(req.uid, verdict), media_type="application/json")

    # -- probes -----------------------------------------------------------------------
    async def healthz(self, request: Request) -> Response:
        return Response("ok", media_type="text/plain")

    async def readyz(self, request: Request) -> Response:
        ok, why = self.config.ready()
        return Response("ok" if ok else f"not ready: {why}", status_code=200 if ok else 503, media_type="text/plain")

    async def metrics_endpoint(self, request: Request) -> Response:
        self.metrics.mirror_age.set(self.config.mirror_age())
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    async def not_found(self, request: Request) -> Response:
        self.metrics.bad.labels("unknown-path").inc()
        return JSONResponse({"message": f"no webhook at {request.url.path}"}, status_code=404)


def create_app(config: AppConfig, registry: CollectorRegistry | None = None) -> Starlette:
    service = AdmissionService(config, registry)
    routes = [Route(p, service.review, methods=["POST"]) for p in config.enabled]
    routes += [
        Route("/healthz", service.healthz, methods=["GET"]),
        Route("/readyz", service.readyz, methods=["GET"]),
        Route("/metrics", service.metrics_endpoint, methods=["GET"]),
        Route("/{rest:path}", service.not_found, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
    ]
    app = Starlette(routes=routes)
    app.state.service = service
    return app


def rule_settings_of(s: Any, time_zones: frozenset[str]) -> RuleSettings:
    return RuleSettings(
        scheduler_names=tuple(s.scheduler_names),
        max_queue_depth=s.max_queue_depth,
        enable_queue_allocated_pods_check=s.enable_queue_allocated_pods_check,
        enable_root_queue_protection=s.enable_root_queue_protection,
        pod_level_resources=s.pod_level_resources,
        scheduling_gates_queue_admission=s.scheduling_gates_queue_admission,
        schema_checks=s.schema_checks,
        time_zones=time_zones,
    )
