"""Calling the registered admission webhooks, as the API server does.

The stored Mutating/ValidatingWebhookConfiguration objects are read on every admitted
request (they are few), matched against the request by ``rules``, ``namespaceSelector`` and
``objectSelector``, and called with an AdmissionReview v1 over HTTPS (aiohttp, verifying the
server certificate against ``caBundle``).  Mutating webhooks run one after another in
configuration-name order and their JSONPatch is applied with ``jsonpatch``; validating
webhooks then run concurrently.  ``failurePolicy`` and ``timeoutSeconds`` decide what a
failed or slow call does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import jsonpatch
import msgspec

from lahar.sim.errors import ApiError, internal
from lahar.sim.resources import ResourceType
from lahar.sim.selectors import selector_from_object
from lahar.sim.store import Store

Obj = dict[str, Any]

MUTATING = ("admissionregistration.k8s.io", "mutatingwebhookconfigurations")
VALIDATING = ("admissionregistration.k8s.io", "validatingwebhookconfigurations")
_EXEMPT = frozenset({MUTATING[1], VALIDATING[1]})  # never admitted by webhooks, as on the real server


@dataclass(slots=True)
class Attributes:
    """What a webhook is told about one request."""

    rtype: ResourceType
    subresource: str
    operation: str  # CREATE, UPDATE, DELETE
    namespace: str | None
    name: str
    obj: Obj | None
    old: Obj | None
    dry_run: bool = False
    options: Obj | None = None
    kind: tuple[str, str, str] | None = None  # group, version, kind of obj when it is not rtype's (Binding)


class WebhookFailure(Exception):
    pass


class Admission:
    def __init__(
        self,
        store: Store,
        service_hosts: dict[str, str] | None = None,
        namespace_labels: Callable[[str], dict[str, str]] | None = None,
    ) -> None:
        self.store = store
        self.service_hosts = service_hosts or {}
        self.namespace_labels = namespace_labels or (lambda ns: {"kubernetes.io/metadata.name": ns})
        self._clients: dict[str, aiohttp.ClientSession] = {}

    def active(self, attrs_rtype: ResourceType) -> bool:
        """Cheap test for the hot path: are there any webhook configurations at all?"""
        if attrs_rtype.plural in _EXEMPT:
            return False
        return any((t := self.store.tables.get(key)) is not None and t.objects for key in (MUTATING, VALIDATING))

    def _hooks(self, key: tuple[str, str], attrs: Attributes) -> list[tuple[str, Obj]]:
        table = self.store.tables.get(key)
        if table is None:
            return []
        out: list[tuple[str, Obj]] = []
        for cfg_key in sorted(table.objects):
            config = table.objects[cfg_key].obj
            for hook in config.get("webhooks") or []:
                if self._matches(hook, attrs):
                    out.append((config["metadata"]["name"], hook))
        return out

    async def mutate(self, attrs: Attributes) -> Obj | None:
        obj = attrs.obj
        for _, hook in self._hooks(MUTATING, attrs):
            attrs.obj = obj
            response = await self._call(hook, attrs)
            if response is None:
                continue
            patch = response.get("patch")
            if patch and obj is not None:
                obj = _apply(hook, patch, response.get("patchType"), obj)
        return obj

    async def validate(self, attrs: Attributes) -> None:
        hooks = self._hooks(VALIDATING, attrs)
        if hooks:
            await asyncio.gather(*(self._call(hook, attrs) for _, hook in hooks))

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    # --- matching -------------------------------------------------------------------------------------

    def _matches(self, hook: Obj, attrs: Attributes) -> bool:
        if not any(_rule_matches(rule, attrs) for rule in hook.get("rules") or []):
            return False
        labels_new = ((attrs.obj or {}).get("metadata") or {}).get("labels") or {}
        labels_old = ((attrs.old or {}).get("metadata") or {}).get("labels") or {}
        try:
            obj_sel = selector_from_object(hook.get("objectSelector"), "objectSelector")
            ns_sel = selector_from_object(hook.get("namespaceSelector"), "namespaceSelector")
        except ApiError:
            return True  # a broken selector must not let requests bypass the webhook
        if not (obj_sel(labels_new) or (attrs.old is not None and obj_sel(labels_old))):
            return False
        if attrs.rtype.plural == "namespaces" and not attrs.rtype.group:
            return ns_sel(labels_new or labels_old)
        if attrs.namespace:
            return ns_sel(self.namespace_labels(attrs.namespace))
        return True

    # --- calling --------------------------------------------------------------------------------------

    async def _call(self, hook: Obj, attrs: Attributes) -> Obj | None:
        """The webhook's ``response``; None when it failed and failurePolicy is Ignore."""
        name = hook.get("name", "")
        try:
            response = await self._post(hook, attrs)
        except WebhookFailure as exc:
            if hook.get("failurePolicy", "Fail") == "Ignore":
                return None
            raise internal(f'failed calling webhook "{name}": {exc}') from None
        if not response.get("allowed"):
            raise denied(name, response.get("status") or {})
        return response

    async def _post(self, hook: Obj, attrs: Attributes) -> Obj:
        timeout = float(hook.get("timeoutSeconds") or 10)
        url = self._url(hook.get("clientConfig") or {})
        # The API server tells the webhook its deadline in the URL.
        url += ("&" if "?" in url else "?") + f"timeout={int(timeout)}s"
        request = _request(attrs)
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        client = self._client(hook.get("clientConfig", {}).get("caBundle") or "")
        try:
            async with client.post(
                url,
                data=msgspec.json.encode(review),
                timeout=aiohttp.ClientTimeout(total=timeout),
                headers={"Content-Type": "application/json"},
            ) as reply:
                status, content = reply.status, await reply.read()
        except TimeoutError:
            raise WebhookFailure(f'failed to call webhook: Post "{url}": context deadline exceeded') from None
        except aiohttp.ClientConnectorError as exc:
            raise WebhookFailure(f'failed to call webhook: Post "{url}": {_dial_error(exc)}') from None
        except (aiohttp.ClientError, ssl.SSLError, OSError, ValueError) as exc:
            raise WebhookFailure(f'failed to call webhook: Post "{url}": {exc}') from None
        if status != 200:
            raise WebhookFailure(f"received invalid webhook response: status code {status}")
        try:
            body = msgspec.json.decode(content)
            response = body["response"]
        except (msgspec.DecodeError, KeyError, TypeError):
            raise WebhookFailure("received invalid webhook response: not an AdmissionReview") from None
        if not isinstance(response, dict) or response.get("uid") != request["uid"]:
            raise WebhookFailure("received invalid webhook response: expected response.uid to match the request")
        return response

    def _url(self, config: Obj) -> str:
        if config.get("url"):
            return str(config["url"])
        svc = config.get("service") or {}
        ref = f"{svc.get('namespace', 'default')}/{svc.get('name', '')}"
        host = (
            self.service_hosts.get(ref)
            or f"{svc.get('name')}.{svc.get('namespace', 'default')}.svc:{svc.get('port', 443)}"
        )
        path = svc.get("path") or "/"
        return f"https://{host}{path}"

    def _client(self, ca_bundle: str) -> aiohttp.ClientSession:
        # aiohttp rather than httpx: httpx's per-request overhead was a fifth of the emulator's
        # CPU when every pod creation went through a webhook.
        client = self._clients.get(ca_bundle)
        if client is None:
            verify = ssl.create_default_context()
            if ca_bundle:
                # An unusable bundle trusts nothing extra.
                with contextlib.suppress(ValueError, ssl.SSLError):
                    verify = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
            connector = aiohttp.TCPConnector(ssl=verify, limit=256)
            client = self._clients[ca_bundle] = aiohttp.ClientSession(connector=connector)
        return client


def _rule_matches(rule: Obj, attrs: Attributes) -> bool:
    def has(values: Any, value: str) -> bool:
        return isinstance(values, list) and ("*" in values or value in values)

    rtype = attrs.rtype
    if not (
        has(rule.get("operations"), attrs.operation)
        and has(rule.get("apiGroups"), rtype.group)
        and has(rule.get("apiVersions"), rtype.version)
    ):
        return False
    scope = rule.get("scope", "*")
    if scope != "*" and (scope == "Namespaced") != rtype.namespaced:
        return False
    for entry in rule.get("resources") or []:
        res, _, sub = str(entry).partition("/")
        if res not in ("*", rtype.plural):
            continue
        if (not sub and not attrs.subresource) or (sub and sub in ("*", attrs.subresource) and attrs.subresource):
            return True
    return False


def _request(attrs: Attributes) -> Obj:
    rtype = attrs.rtype
    group, version, kind = attrs.kind or (rtype.group, rtype.version, rtype.kind)
    resource = {"group": rtype.group, "version": rtype.version, "resource": rtype.plural}
    request: Obj = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": resource,
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": resource,
        "name": attrs.name,
        "operation": attrs.operation,
        "userInfo": {
            "username": "system:admin",
            "uid": "system:admin",
            "groups": ["system:masters", "system:authenticated"],
        },
        "object": attrs.obj,
        "oldObject": attrs.old,
        "dryRun": attrs.dry_run,
        "options": attrs.options,
    }
    if attrs.subresource:
        request["subResource"] = attrs.subresource
        request["requestSubResource"] = attrs.subresource
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    return request


def _apply(hook: Obj, patch: str, patch_type: Any, obj: Obj) -> Obj:
    name = hook.get("name", "")
    if patch_type != "JSONPatch":
        raise internal(f'failed calling webhook "{name}": unsupported patch type {patch_type!r}')
    try:
        ops = msgspec.json.decode(base64.b64decode(patch))
        result = jsonpatch.apply_patch(obj, ops, in_place=False)
    except (
        ValueError,
        msgspec.DecodeError,
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
    ) as exc:
        raise internal(f'failed calling webhook "{name}": failed to apply the patch: {exc}') from None
    if not isinstance(result, dict):
        raise internal(f'failed calling webhook "{name}": the patch did not produce an object')
    return result


def denied(name: str, status: Obj) -> ApiError:
    """The rejection as the API server words it: ``admission webhook "x" denied the request: why``."""
    code = status.get("code") or 400
    code = code if isinstance(code, int) and code >= 400 else 400
    prefix = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{prefix}: {status['message']}"
    elif status.get("reason"):
        message = f"{prefix}: {status['reason']}"
    else:
        message = f"{prefix} without explanation"
    return ApiError(code, str(status.get("reason") or ""), message, status.get("details"))


def _dial_error(exc: aiohttp.ClientConnectorError) -> str:
    """A refused connection in Go's words (what the API server reports), anything else as it is."""
    if isinstance(exc.os_error, ConnectionRefusedError):
        return f"dial tcp {exc.host}:{exc.port}: connect: connection refused"
    return str(exc)
