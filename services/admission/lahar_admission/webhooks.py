"""Validating/MutatingWebhookConfiguration objects for this service (for ``lahar up``)."""

from __future__ import annotations

import base64
from typing import Any

from lahar_admission.rules import WEBHOOKS, Webhook

EXCLUDED_NAMESPACES = ("volcano-system", "kube-system")


def _name(path: str) -> str:
    return "volcano-admission-service" + path.replace("/", "-")


def _hook(w: Webhook, url_base: str, ca_bundle: str, timeout: int, failure_policy: str) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": f"{w.path.strip('/').replace('/', '-')}.lahar.volcano.sh",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": url_base.rstrip("/") + w.path, "caBundle": ca_bundle},
        "rules": [
            {
                "operations": list(w.operations),
                "apiGroups": [w.group],
                "apiVersions": [w.version],
                "resources": [w.resource],
                "scope": "*",
            }
        ],
        "failurePolicy": failure_policy,
        "matchPolicy": "Equivalent",
        # The rules have no side effects, so dry-run requests are safe to send.
        "sideEffects": "None",
        "timeoutSeconds": timeout,
    }
    if w.resource != "hypernodes":
        hook["namespaceSelector"] = {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": list(EXCLUDED_NAMESPACES),
                }
            ]
        }
    if w.mutating:
        hook["reinvocationPolicy"] = "Never"
    return hook


def webhook_configurations(
    url_base: str,
    ca_bundle: bytes | str,
    paths: tuple[str, ...] | None = None,
    timeout_seconds: int = 5,
    pod_failure_policy: str = "Ignore",
) -> list[dict[str, Any]]:
    """One configuration object per webhook path, named as Volcano's Helm chart names them.

    ``ca_bundle`` is PEM (bytes or text) and is base64-encoded here.  Volcano CRDs get
    ``failurePolicy: Fail``; pods get ``pod_failure_policy`` (Ignore by default), because a
    webhook outage must not stop every pod in the cluster (Volcano issues #3734, #3358).
    """
    if not 1 <= timeout_seconds <= 30:
        raise ValueError("timeout_seconds must be between 1 and 30 (the API server's limit)")
    pem = ca_bundle.encode() if isinstance(ca_bundle, str) else ca_bundle
    bundle = base64.b64encode(pem).decode()
    out = []
    for path in paths or tuple(WEBHOOKS):
        w = WEBHOOKS[path]
        policy = pod_failure_policy if w.resource == "pods" else "Fail"
        kind = "MutatingWebhookConfiguration" if w.mutating else "ValidatingWebhookConfiguration"
        out.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": _name(path)},
                "webhooks": [_hook(w, url_base, bundle, timeout_seconds, policy)],
            }
        )
    return out
