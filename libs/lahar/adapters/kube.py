"""The Kubernetes API, asynchronously: list, watch, bind, evict, patch, events.

Configuration (kubeconfig or in-cluster) is read with the official ``kubernetes`` client's
loader; requests go through ``aiohttp`` and bodies are decoded with ``msgspec``.  Why not the
official client for the calls themselves: it is synchronous, it fails to decode the 201 Status
that ``pods/binding`` returns, and decoding 50,000 pods into its models is slow.  Why aiohttp
rather than httpx: with a hundred requests in flight, httpx's connection pool spends most of its
time scanning its own connections (measured with py-spy: binds and creates capped near 50/s),
while aiohttp's pool stays flat.  Errors are classified here into transient ones (retry or
redeliver) and permanent ones (report, go on).
"""

from __future__ import annotations

import math
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec

# --- resources -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Resource:
    kind: str  # our name for it, as mirrored: "pods" (the plural, unless two groups share one)
    group_version: str  # "v1" or "scheduling.volcano.sh/v1beta1"
    namespaced: bool
    plural: str = ""  # the API's plural when it differs from ``kind`` (batch/v1 "jobs": "batchjobs")

    @property
    def resource(self) -> str:
        """The API's name for it (RBAC's ``resources``, the URL's path segment)."""
        return self.plural or self.kind

    @property
    def group(self) -> str:
        return "" if self.group_version == "v1" else self.group_version.split("/")[0]

    def path(self, namespace: str = "", name: str = "", sub: str = "") -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.resource)
        if name:
            parts.append(name)
        if sub:
            parts.append(sub)
        return "/".join(parts)


RESOURCES: dict[str, Resource] = {
    r.kind: r
    for r in (
        Resource("nodes", "v1", False),
        Resource("pods", "v1", True),
        Resource("namespaces", "v1", False),
        Resource("serviceaccounts", "v1", True),
        Resource("resourcequotas", "v1", True),
        Resource("poddisruptionbudgets", "policy/v1", True),
        Resource("events", "v1", True),
        Resource("services", "v1", True),
        Resource("configmaps", "v1", True),
        Resource("secrets", "v1", True),
        Resource("persistentvolumeclaims", "v1", True),
        Resource("networkpolicies", "networking.k8s.io/v1", True),
        Resource("replicasets", "apps/v1", True),
        Resource("statefulsets", "apps/v1", True),
        Resource("daemonsets", "apps/v1", True),
        Resource("batchjobs", "batch/v1", True, plural="jobs"),
        Resource("priorityclasses", "scheduling.k8s.io/v1", False),
        Resource("podgroups", "scheduling.volcano.sh/v1beta1", True),
        Resource("queues", "scheduling.volcano.sh/v1beta1", False),
        Resource("jobs", "batch.volcano.sh/v1alpha1", True),
        Resource("commands", "bus.volcano.sh/v1alpha1", True),
        Resource("cronjobs", "batch.volcano.sh/v1alpha1", True),
        Resource("jobflows", "flow.volcano.sh/v1alpha1", True),
        Resource("hypernodes", "topology.volcano.sh/v1alpha1", False),
        Resource("jobtemplates", "flow.volcano.sh/v1alpha1", True),
        Resource("numatopologies", "nodeinfo.volcano.sh/v1alpha1", False),
        Resource("validatingwebhookconfigurations", "admissionregistration.k8s.io/v1", False),
        Resource("mutatingwebhookconfigurations", "admissionregistration.k8s.io/v1", False),
    )
}

# --- errors ------------------------------------------------------------------------------------


class KubeError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class TransientKubeError(KubeError):
    """Worth retrying: 429, 5xx, timeouts, connection failures."""


class PermanentKubeError(KubeError):
    """Not worth retrying as is: 4xx other than 409/410/429."""


class Conflict(PermanentKubeError):
    pass


class NotFound(PermanentKubeError):
    pass


class Gone(KubeError):
    """410: the resourceVersion is older than the server's history; list again."""


class _Status(msgspec.Struct):
    reason: str = ""
    message: str = ""
    code: int = 0


def _error(status: int, body: bytes) -> KubeError:
    try:
        st = msgspec.json.decode(body, type=_Status)
        reason, message = st.reason, st.message
    except (msgspec.DecodeError, msgspec.ValidationError):
        reason, message = "", body[:200].decode(errors="replace")
    if status == 409:
        return Conflict(status, reason or "Conflict", message)
    if status == 404:
        return NotFound(status, reason or "NotFound", message)
    if status == 410:
        return Gone(status, reason or "Expired", message)
    if status == 429 or status >= 500:
        return TransientKubeError(status, reason or "ServerError", message)
    return PermanentKubeError(status, reason or "Invalid", message)


# --- wire types ----------------------------------------------------------------------------------


class Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    resourceVersion: str = ""
    uid: str = ""


class _Obj(msgspec.Struct):
    metadata: Meta = msgspec.field(default_factory=Meta)


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    # "continue" is a Python keyword; msgspec maps it through ``name``.
    cont: str = msgspec.field(default="", name="continue")


class _List(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[msgspec.Raw] = []


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


_obj_decoder = msgspec.json.Decoder(_Obj)
_list_decoder = msgspec.json.Decoder(_List)
_event_decoder = msgspec.json.Decoder(_Event)
_status_decoder = msgspec.json.Decoder(_Status)


@dataclass(frozen=True, slots=True)
class Item:
    """An object from a list or watch: its raw JSON and the metadata the cache needs."""

    raw: bytes
    meta: Meta

    @property
    def key(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}" if self.meta.namespace else self.meta.name


def item(raw: bytes) -> Item:
    return Item(bytes(raw), _obj_decoder.decode(raw).metadata)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    item: Item


_PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}

# --- the client ---------------------------------------------------------------------------------


@dataclass
class KubeConfig:
    host: str
    verify: ssl.SSLContext | bool
    cert: tuple[str, str] | None
    headers: dict[str, str]
    # The current ``Authorization`` header when the token can change (a projected service-account
    # token is rotated by the kubelet; exec and OIDC credentials expire); None when it cannot.
    authorization: Callable[[], str | None] | None = None

    @classmethod
    def load(cls, path: str | None = None) -> KubeConfig:
        """A kubeconfig file (or KUBECONFIG / ~/.kube/config), else the in-cluster service account."""
        from kubernetes import client, config  # the official loader understands every kubeconfig form

        cfg = client.Configuration()
        try:
            config.load_kube_config(config_file=path, client_configuration=cfg)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            if path:
                raise
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        verify: ssl.SSLContext | bool = bool(cfg.verify_ssl)
        if cfg.host.startswith("https") and cfg.verify_ssl:
            verify = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if cfg.ssl_ca_cert else True
        cert = (cfg.cert_file, cfg.key_file) if cfg.cert_file and cfg.key_file else None
        headers = {}
        token = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
        if token:
            headers["Authorization"] = _bearer(token)
        return cls(cfg.host.rstrip("/"), verify, cert, headers, _refreshing(cfg))


TOKEN_RECHECK_SECONDS = 5.0


def _refreshing(cfg: Any) -> Callable[[], str | None] | None:
    """The official loader's refresh hook, which re-reads a rotated token file (at most once a
    minute in cluster) or renews expiring credentials, as the header it yields."""
    hook = getattr(cfg, "refresh_api_key_hook", None)
    if hook is None:
        return None

    # The hook costs ~0.2 ms (it re-applies the whole configuration): run it at most every few
    # seconds, far inside any token's lifetime, rather than on every request.
    state: dict[str, Any] = {"at": -math.inf, "header": None}

    def current() -> str | None:
        now = time.monotonic()
        if now - state["at"] >= TOKEN_RECHECK_SECONDS:
            hook(cfg)
            token = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
            state["at"], state["header"] = now, _bearer(token) if token else None
        header: str | None = state["header"]
        return header

    return current


def _bearer(token: str) -> str:
    """``Bearer <token>`` whatever the loader gave: a bare token, ``Bearer x``, or the in-cluster
    loader's lower-case ``bearer x`` (the API server reads the second word as the token, so
    ``Bearer bearer x`` would be refused with 401)."""
    scheme, _, rest = token.strip().partition(" ")
    if scheme.lower() == "bearer" and rest.strip():
        return f"Bearer {rest.strip()}"
    return f"Bearer {token.strip()}"


class KubeClient:
    def __init__(self, config: KubeConfig, *, max_connections: int = 128, timeout: float = 30.0) -> None:
        self.config = config
        self.max_connections = max_connections
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    @property
    def http(self) -> aiohttp.ClientSession:
        """Made on first use, inside the event loop that will run the requests."""
        if self._session is None or self._session.closed:
            ssl_ctx: ssl.SSLContext | bool = False
            if isinstance(self.config.verify, ssl.SSLContext):
                ssl_ctx = self.config.verify
            elif self.config.verify:
                ssl_ctx = ssl.create_default_context()
            if self.config.cert is not None:
                if not isinstance(ssl_ctx, ssl.SSLContext):
                    ssl_ctx = ssl.create_default_context()
                    if not self.config.verify:
                        ssl_ctx.check_hostname = False
                        ssl_ctx.verify_mode = ssl.CERT_NONE
                ssl_ctx.load_cert_chain(*self.config.cert)
            connector = aiohttp.TCPConnector(limit=self.max_connections, ssl=ssl_ctx)
            self._session = aiohttp.ClientSession(
                base_url=self.config.host.rstrip("/") + "/",
                connector=connector,
                headers=self.config.headers,
                timeout=self.timeout,
                read_bufsize=1 << 20,  # watch lines can be as long as an object
            )
        return self._session

    def _authorize(self, kw: dict[str, Any]) -> None:
        """Put the current token on a request whose credentials can change."""
        if self.config.authorization is None:
            return
        header = self.config.authorization()
        if header:
            kw["headers"] = {**(kw.get("headers") or {}), "Authorization": header}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _request(self, method: str, url: str, **kw: Any) -> bytes:
        try:
            self._authorize(kw)
            async with self.http.request(method, url.lstrip("/"), **kw) as resp:
                body = await resp.read()
                if resp.status >= 400:
                    raise _error(resp.status, body)
                return body
        except TimeoutError:
            raise TransientKubeError(0, "Timeout", "timed out") from None
        except aiohttp.ClientError as exc:
            raise TransientKubeError(0, "Unreachable", str(exc) or type(exc).__name__) from None

    # -- reads ---------------------------------------------------------------------------
    async def list(self, kind: str, page: int = 5000) -> tuple[list[Item], str]:
        """Every object of a kind and the collection's resourceVersion (pages followed)."""
        res = RESOURCES[kind]
        items: list[Item] = []
        cont = ""
        while True:
            params: dict[str, Any] = {"limit": page}
            if cont:
                params["continue"] = cont
            body = _list_decoder.decode(await self._request("GET", res.path(), params=params))
            items.extend(item(raw) for raw in body.items)
            cont = body.metadata.cont
            if not cont:
                return items, body.metadata.resourceVersion

    async def get(self, kind: str, namespace: str, name: str) -> bytes:
        return await self._request("GET", RESOURCES[kind].path(namespace, name))

    async def watch(self, kind: str, resource_version: str, timeout: int = 300) -> AsyncIterator[WatchEvent]:
        """Events after ``resource_version``; raises ``Gone`` when it is too old (relist then)."""
        res = RESOURCES[kind]
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout),
        }
        no_timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout.total)
        try:
            kw: dict[str, Any] = {}
            self._authorize(kw)
            async with self.http.get(res.path().lstrip("/"), params=params, timeout=no_timeout, **kw) as resp:
                if resp.status >= 400:
                    raise _error(resp.status, await resp.read())
                while True:
                    line = await resp.content.readline()
                    if not line:
                        return
                    if line == b"\n":
                        continue
                    ev = _event_decoder.decode(line)
                    if ev.type == "ERROR":
                        st = _status_decoder.decode(ev.object)
                        raise _error(st.code or 500, bytes(ev.object))
                    yield WatchEvent(ev.type, item(ev.object))
        except (aiohttp.ClientError, ValueError) as exc:
            raise TransientKubeError(0, "WatchClosed", str(exc) or type(exc).__name__) from None

    # -- writes --------------------------------------------------------------------------
    async def bind(
        self, namespace: str, name: str, node: str, uid: str = "", annotations: dict[str, str] | None = None
    ) -> None:
        """POST pods/binding.  The 201 reply is a Status, not a Binding, so it is not decoded.
        ``annotations`` go on the Binding: the API server copies them onto the pod in the same
        write as the node (how Volcano records the GPU cards it chose)."""
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        if uid:
            body["metadata"]["uid"] = uid
        if annotations:
            body["metadata"]["annotations"] = dict(annotations)
        await self._request(
            "POST",
            RESOURCES["pods"].path(namespace, name, "binding"),
            data=msgspec.json.encode(body),
            headers={"Content-Type": "application/json"},
        )

    async def evict(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if grace_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_seconds}
        await self._request(
            "POST",
            RESOURCES["pods"].path(namespace, name, "eviction"),
            data=msgspec.json.encode(body),
            headers={"Content-Type": "application/json"},
        )

    async def patch(self, kind: str, namespace: str, name: str, patch: Any, sub: str = "", how: str = "merge") -> bytes:
        """PATCH with a merge patch (default), a JSON patch (``json``) or a strategic merge patch
        (``strategic``: lists such as pod conditions merge by key instead of being replaced)."""
        return await self._request(
            "PATCH",
            RESOURCES[kind].path(namespace, name, sub),
            data=msgspec.json.encode(patch),
            headers={"Content-Type": _PATCH_TYPES[how]},
        )

    async def create(self, kind: str, namespace: str, obj: dict[str, Any]) -> bytes:
        return await self._request(
            "POST",
            RESOURCES[kind].path(namespace),
            data=msgspec.json.encode(obj),
            headers={"Content-Type": "application/json"},
        )

    async def replace(self, kind: str, namespace: str, name: str, obj: dict[str, Any], sub: str = "") -> bytes:
        """PUT: the whole object (or its ``status`` with ``sub``); its resourceVersion, when set,
        makes a stale write fail with ``Conflict``."""
        return await self._request(
            "PUT",
            RESOURCES[kind].path(namespace, name, sub),
            data=msgspec.json.encode(obj),
            headers={"Content-Type": "application/json"},
        )

    async def delete(self, kind: str, namespace: str, name: str, *, uid: str = "", propagation: str = "") -> None:
        """DELETE; ``uid`` makes it apply only to that incarnation of the object, ``propagation``
        (Foreground, Background, Orphan) says what happens to what it owns."""
        options: dict[str, Any] = {}
        if uid:
            options["preconditions"] = {"uid": uid}
        if propagation:
            options["propagationPolicy"] = propagation
        if not options:
            await self._request("DELETE", RESOURCES[kind].path(namespace, name))
            return
        body = {"apiVersion": "v1", "kind": "DeleteOptions", **options}
        await self._request(
            "DELETE",
            RESOURCES[kind].path(namespace, name),
            data=msgspec.json.encode(body),
            headers={"Content-Type": "application/json"},
        )
