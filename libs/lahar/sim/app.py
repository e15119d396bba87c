"""The HTTP face of the emulator: a raw ASGI application.

Raw ASGI (no framework router) because every request of the scheduler's hot path (binding,
watch fan-out, list) should cost little more than the store operation itself: the URL is
split once and routed by hand, and responses are pre-encoded bytes.  It runs on uvicorn with
uvloop and httptools (see ``server.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

import msgspec

from lahar.sim import openapi, pods, resources, tables, watch
from lahar.sim.api import Api, Target
from lahar.sim.errors import ApiError, bad_request, internal, method_not_allowed, no_such_resource, not_found
from lahar.sim.faults import Faults, FaultSpecError

log = logging.getLogger("lahar.sim")
_encode = msgspec.json.Encoder().encode
_JSON = [(b"content-type", b"application/json"), (b"cache-control", b"no-cache, private")]
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
_VERB = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_NAMESPACE_SUBS = frozenset({"status", "finalize"})
ADMIN = "/lahar-sim/v1/faults"


class App:
    def __init__(
        self, api: Api, faults: Faults, server_address: str = "127.0.0.1:0", bookmark_interval: float = 5.0
    ) -> None:
        self.api = api
        self.faults = faults
        self.server_address = server_address
        self.bookmark_interval = bookmark_interval
        self.streams: set[asyncio.Event] = set()  # one per open watch; set to end it
        self.requests = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.requests += 1
        method, path = scope["method"], scope["path"]
        query = dict(parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True))
        try:
            body = await _read_body(receive) if method in ("POST", "PUT", "PATCH", "DELETE") else b""
            if method == "GET" and (query.get("watch") in ("true", "1") or _is_watch_path(path)):
                await self._watch(path, query, receive, send)
                return
            status, payload, headers = await self._dispatch(method, path, query, body, scope)
        except ApiError as exc:
            status, payload, headers = exc.code, exc.body(), exc.headers
        except Exception as exc:  # one bad request must never take the server down
            log.exception("internal error on %s %s", method, path)
            error = internal(f"{type(exc).__name__}: {exc}")
            status, payload, headers = error.code, error.body(), []
        await _respond(send, status, payload, headers)

    # --- routing ----------------------------------------------------------------------------------

    async def _dispatch(
        self, method: str, path: str, query: dict[str, str], body: bytes, scope: Scope
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        parts = [p for p in path.split("/") if p]
        if parts and parts[0] in ("api", "apis") and method in _VERB:
            discovery = self._discovery(parts)
            if discovery is not None:
                if method != "GET":
                    raise method_not_allowed()
                return 200, _encode(discovery), []
            t = self._target(parts)
            verb = self._verb(method, t)
            if self.faults.active():
                await self.faults.apply(verb)
            status, payload = await self._resource(method, t, query, body, _header(scope, b"content-type"))
            if method == "GET" and status == 200 and tables.wants_table(_header(scope, b"accept")):
                payload = _as_table(t, payload, query)
            return status, payload, []
        return self._misc(method, path, body)

    def _misc(self, method: str, path: str, body: bytes) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        path = path.rstrip("/") or "/"
        if path == "/version":
            return 200, _encode(resources.VERSION_INFO), []
        if path.startswith("/openapi/") and method == "GET":
            return 200, _encode(self._openapi(path)), []
        if path in ("/healthz", "/readyz", "/livez"):
            return 200, b"ok", [(b"content-type", b"text/plain")]
        if path == ADMIN:
            if method == "PUT":
                self._set_faults(body)
            return 200, _encode(self.faults.to_json()), []
        raise no_such_resource()

    def _openapi(self, path: str) -> Any:
        registry = self.api.registry
        if path == "/openapi/v2":
            return openapi.swagger_v2()
        if path == "/openapi/v3":
            return openapi.root(registry)
        parts = path.split("/")[3:]  # after /openapi/v3/
        if len(parts) == 2 and parts[0] == "api":
            doc = openapi.group_version(registry, "", parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = openapi.group_version(registry, parts[1], parts[2])
        else:
            doc = None
        if doc is None:
            raise no_such_resource()
        return doc

    def _set_faults(self, body: bytes) -> None:
        try:
            spec = msgspec.json.decode(body) if body else {}
            self.faults.clear()
            for verb, seconds in (spec.get("latency") or {}).items():
                self.faults.set_latency(verb, float(seconds))
            for verb, rate in (spec.get("errorRate") or {}).items():
                codes = tuple((spec.get("errorCodes") or {}).get(verb) or (500, 429))
                self.faults.set_error_rate(verb, float(rate), codes)
        except (msgspec.DecodeError, FaultSpecError, AttributeError, TypeError, ValueError) as exc:
            raise bad_request(f"faults: {exc}") from None

    def _discovery(self, parts: list[str]) -> dict[str, Any] | None:
        registry = self.api.registry
        if parts == ["api"]:
            return resources.api_versions(self.server_address)
        if parts == ["api", "v1"]:
            return resources.resource_list("", "v1", registry.in_group_version("", "v1"))
        if parts == ["apis"]:
            return resources.api_group_list(registry)
        if len(parts) == 2 and parts[0] == "apis":
            versions = registry.group_versions().get(parts[1])
            if not versions:
                raise no_such_resource()
            return resources.api_group(parts[1], versions)
        if len(parts) == 3 and parts[0] == "apis":
            types = registry.in_group_version(parts[1], parts[2])
            if not types:
                raise no_such_resource()
            return resources.resource_list(parts[1], parts[2], types)
        return None

    def _target(self, parts: list[str]) -> Target:
        """Split ``/api/v1/...`` or ``/apis/G/V/...`` into a Target."""
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            if len(parts) < 4:
                raise no_such_resource()
            group, version, rest = parts[1], parts[2], parts[3:]
        if rest and rest[0] == "watch":
            rest = rest[1:]
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBS:
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise no_such_resource()
        rtype = self.api.registry.get(group, version, rest[0])
        if rtype is None:
            raise no_such_resource()
        if (namespace is not None and not rtype.namespaced) or (
            rtype.namespaced and namespace is None and len(rest) > 1
        ):
            raise no_such_resource()
        sub = rest[2] if len(rest) == 3 else ""
        if sub == "status" and not rtype.status and rtype.custom:
            # The server routes CUSTOM/NAME/status to the object and finds no such subresource.
            raise not_found(rtype.plural, rtype.group, rest[1])
        if (sub and sub != "status" and sub not in rtype.extra_subresources) or (sub == "status" and not rtype.status):
            raise no_such_resource()
        return Target(rtype, namespace, rest[1] if len(rest) >= 2 else None, sub)

    @staticmethod
    def _verb(method: str, t: Target) -> str:
        if t.subresource:
            return t.subresource
        if t.name is None:
            return {"GET": "list", "DELETE": "deletecollection"}.get(method, _VERB[method])
        return _VERB[method]

    async def _resource(
        self, method: str, t: Target, query: dict[str, str], body: bytes, content_type: str
    ) -> tuple[int, bytes]:
        api, rtype = self.api, t.rtype
        if "create" not in rtype.verbs or rtype.verbs == ("create",):
            return await self._create_only(method, t, query, body)
        if t.name is None:
            if method == "GET":
                return api.list_objects(t, query)
            if rtype.namespaced and t.namespace is None:
                raise method_not_allowed()  # writes to a namespaced collection need its namespace
            if method == "POST":
                return await api.create(t, body, query)
            if method == "DELETE":
                if "deletecollection" not in rtype.verbs:
                    raise method_not_allowed()
                return await api.delete_collection(t, body, query)
            raise method_not_allowed()
        if t.subresource in ("binding", "eviction"):
            if method != "POST":
                raise method_not_allowed()
            handler = pods.bind if t.subresource == "binding" else pods.evict
            return await handler(api, t, body, query)
        if method == "GET":
            return api.get(t)
        if method == "PUT":
            return await api.update(t, body, query)
        if method == "PATCH":
            return await api.patch(t, body, content_type.split(";")[0].strip(), query)
        if method == "DELETE" and not t.subresource:
            return await api.delete(t, body, query)
        raise method_not_allowed()

    async def _create_only(self, method: str, t: Target, query: dict[str, str], body: bytes) -> tuple[int, bytes]:
        # The legacy ``bindings`` resource: POST /api/v1/namespaces/NS/bindings.
        if method != "POST" or t.name is not None:
            raise method_not_allowed()
        return await pods.bind(self.api, t, body, query)

    # --- watch ------------------------------------------------------------------------------------

    async def _watch(self, path: str, query: dict[str, str], receive: Receive, send: Send) -> None:
        parts = [p for p in path.split("/") if p]
        t = self._target(parts)
        if t.subresource:
            raise method_not_allowed()
        if self.faults.active():
            await self.faults.apply("watch")
        table, watcher = watch.open_watch(self.api, t, query)
        ended = asyncio.Event()
        self.streams.add(ended)

        async def write(chunk: bytes) -> None:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

        async def wait_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            ended.set()
            watcher.close()

        await send({"type": "http.response.start", "status": 200, "headers": _JSON})
        waiter = asyncio.ensure_future(wait_disconnect())
        closer = asyncio.ensure_future(_close_on(ended, watcher))
        try:
            await watch.stream(self.api, t, query, table, watcher, write, ended, self.bookmark_interval)
        finally:
            waiter.cancel()
            closer.cancel()
            self.streams.discard(ended)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def end_watches(self) -> None:
        for ended in list(self.streams):
            ended.set()


async def _close_on(ended: asyncio.Event, watcher: Any) -> None:
    await ended.wait()
    watcher.close()


async def _read_body(receive: Receive) -> bytes:
    message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body"):
        return body
    chunks = [body]
    while message.get("more_body"):
        message = await receive()
        chunks.append(message.get("body", b""))
    return b"".join(chunks)


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return ""


async def _respond(send: Send, status: int, payload: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    out = list(headers) if headers and any(k == b"content-type" for k, _ in headers) else [*_JSON, *headers]
    out.append((b"content-length", str(len(payload)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": payload})


def _as_table(t: Target, payload: bytes, query: dict[str, str]) -> bytes:
    """A list or object reply as the Table kubectl asks for (decoded again: kubectl's path is not hot)."""
    decoded = msgspec.json.decode(payload)
    objects = decoded["items"] if t.name is None else [decoded]
    include = query.get("includeObject") or "Metadata"
    if include not in ("None", "Metadata", "Object"):
        raise bad_request(
            f'includeObject: Unsupported value: "{include}": supported values: "None", "Metadata", "Object"'
        )
    return _encode(tables.to_table(t.rtype, objects, decoded["metadata"].get("resourceVersion", ""), include))


def _is_watch_path(path: str) -> bool:
    """The legacy ``/api/v1/watch/...`` and ``/apis/G/V/watch/...`` forms."""
    parts = path.split("/")
    return (len(parts) > 3 and parts[1] == "api" and parts[3] == "watch") or (
        len(parts) > 4 and parts[1] == "apis" and parts[4] == "watch"
    )
