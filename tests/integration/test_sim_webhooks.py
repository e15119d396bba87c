"""Admission webhooks called by the emulator over HTTPS, verified against the caBundle."""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import json
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lahar.sim import bind_pod


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_certs(directory: Path) -> tuple[bytes, Path, Path]:
    """A self-signed CA and a serving certificate for 127.0.0.1 signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("lahar-test-ca"))
        .issuer_name(_name("lahar-test-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("webhook"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca.public_bytes(serialization.Encoding.PEM), cert_path, key_path


class Hook(BaseHTTPRequestHandler):
    reviews: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        Hook.reviews.append(request)
        response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
        path = self.path.partition("?")[0]  # the API server adds ?timeout=Ns
        if path == "/deny":
            response = {
                "uid": request["uid"],
                "allowed": False,
                "status": {"code": 403, "message": "queue 'gold' is closed"},
            }
        elif path == "/mutate":
            patch = [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        elif path == "/slow":
            time.sleep(2)
        body = json.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the caller gave up (the timeout test)
            self.wfile.write(body)


@pytest.fixture(scope="module")
def webhook() -> Iterator[tuple[str, str]]:
    """(base URL, base64 caBundle) of a TLS webhook server on 127.0.0.1."""
    with tempfile.TemporaryDirectory() as tmp:
        ca_pem, cert, key = make_certs(Path(tmp))
        server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"https://127.0.0.1:{server.server_address[1]}", base64.b64encode(ca_pem).decode()
        server.shutdown()


def hook_config(name: str, url: str, ca: str, resources: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": extra.pop("timeoutSeconds", 5),
        "rules": [
            {
                "operations": extra.pop("operations", ["CREATE"]),
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": resources,
            }
        ],
        **extra,
    }


@pytest.fixture
def admission(api_client: client.ApiClient) -> Iterator[client.AdmissionregistrationV1Api]:
    api = client.AdmissionregistrationV1Api(api_client)
    yield api
    for cfg in api.list_validating_webhook_configuration().items:
        api.delete_validating_webhook_configuration(cfg.metadata.name)
    for cfg in api.list_mutating_webhook_configuration().items:
        api.delete_mutating_webhook_configuration(cfg.metadata.name)


def test_validating_rejection_carries_the_message(webhook, admission, core: client.CoreV1Api, ns: str, pod) -> None:
    url, ca = webhook
    admission.create_validating_webhook_configuration(
        {
            "metadata": {"name": "deny-pods"},
            "webhooks": [
                hook_config(
                    "deny.lahar.io",
                    f"{url}/deny",
                    ca,
                    ["pods"],
                    namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": ns}},
                )
            ],
        }
    )
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("rejected"))
    assert err.value.status == 403
    body = json.loads(err.value.body)
    assert body["message"] == "admission webhook \"deny.lahar.io\" denied the request: queue 'gold' is closed"
    # other namespaces are not selected
    core.create_namespaced_pod("default", pod(f"allowed-{ns}"))
    core.delete_namespaced_pod(f"allowed-{ns}", "default")


def test_mutating_patch_is_applied_and_seen_by_validators(
    webhook, admission, core: client.CoreV1Api, ns: str, pod
) -> None:
    url, ca = webhook
    admission.create_mutating_webhook_configuration(
        {
            "metadata": {"name": "mutate"},
            "webhooks": [hook_config("mutate.lahar.io", f"{url}/mutate", ca, ["configmaps"])],
        }
    )
    admission.create_validating_webhook_configuration(
        {
            "metadata": {"name": "watcher"},
            "webhooks": [hook_config("observe.lahar.io", f"{url}/allow", ca, ["configmaps"])],
        }
    )
    Hook.reviews.clear()
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "m"}})
    assert created.metadata.labels == {"mutated": "yes"}
    validating = [r for r in Hook.reviews if r["object"]["metadata"].get("labels") == {"mutated": "yes"}]
    assert validating and validating[0]["operation"] == "CREATE" and validating[0]["namespace"] == ns
    assert validating[0]["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}


def test_object_selector_and_operations(webhook, admission, core: client.CoreV1Api, ns: str) -> None:
    url, ca = webhook
    admission.create_validating_webhook_configuration(
        {
            "metadata": {"name": "sel"},
            "webhooks": [
                hook_config(
                    "sel.lahar.io",
                    f"{url}/deny",
                    ca,
                    ["configmaps"],
                    operations=["UPDATE", "DELETE"],
                    objectSelector={"matchExpressions": [{"key": "guarded", "operator": "Exists"}]},
                )
            ],
        }
    )
    core.create_namespaced_config_map(ns, {"metadata": {"name": "free"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "guarded", "labels": {"guarded": "1"}}})
    core.patch_namespaced_config_map("free", ns, {"data": {"a": "b"}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("guarded", ns, {"data": {"a": "b"}})
    assert "denied the request" in err.value.body
    with pytest.raises(ApiException):
        core.delete_namespaced_config_map("guarded", ns)
    core.delete_namespaced_config_map("free", ns)


def test_subresource_rules(webhook, admission, core: client.CoreV1Api, ns: str, pod) -> None:
    url, ca = webhook
    admission.create_validating_webhook_configuration(
        {
            "metadata": {"name": "binds"},
            "webhooks": [hook_config("bind.lahar.io", f"{url}/deny", ca, ["pods/binding"])],
        }
    )
    core.create_namespaced_pod(ns, pod("p"))  # "pods/binding" does not match pods themselves
    with pytest.raises(ApiException) as err:
        bind_pod(core.api_client, ns, "p", "node-0001")
    assert err.value.status == 403


def test_failure_policy(webhook, admission, core: client.CoreV1Api, ns: str) -> None:
    url, ca = webhook
    admission.create_validating_webhook_configuration(
        {
            "metadata": {"name": "broken"},
            "webhooks": [
                hook_config("ignore.lahar.io", "https://127.0.0.1:1/none", ca, ["configmaps"], failurePolicy="Ignore"),
                hook_config("slow.lahar.io", f"{url}/slow", ca, ["secrets"], failurePolicy="Fail", timeoutSeconds=1),
            ],
        }
    )
    core.create_namespaced_config_map(ns, {"metadata": {"name": "ok"}})  # unreachable but Ignore
    began = time.monotonic()
    with pytest.raises(ApiException) as err:
        core.create_namespaced_secret(ns, {"metadata": {"name": "s"}})
    assert time.monotonic() - began < 1.9
    assert err.value.status == 500
    message = json.loads(err.value.body)["message"]
    assert 'failed calling webhook "slow.lahar.io"' in message and "context deadline exceeded" in message


def test_wrong_ca_fails_closed(webhook, admission, core: client.CoreV1Api, ns: str) -> None:
    url, _ = webhook
    other_ca, _, _ = make_certs(Path(tempfile.mkdtemp()))
    admission.create_validating_webhook_configuration(
        {
            "metadata": {"name": "wrong-ca"},
            "webhooks": [
                hook_config("ca.lahar.io", f"{url}/allow", base64.b64encode(other_ca).decode(), ["configmaps"])
            ],
        }
    )
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "x"}})
    assert err.value.status == 500 and "failed calling webhook" in err.value.body


def test_invalid_configuration_is_refused(admission) -> None:
    with pytest.raises(ApiException) as err:
        admission.create_validating_webhook_configuration(
            {
                "metadata": {"name": "bad"},
                "webhooks": [
                    {
                        "name": "x.lahar.io",
                        "clientConfig": {"url": "http://insecure"},
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                    }
                ],
            }
        )
    assert err.value.status == 422 and "webhooks[0].clientConfig.url" in err.value.body


def test_service_reference_resolved_through_the_host_map(webhook, make_sim) -> None:
    url, ca = webhook
    host_port = url.removeprefix("https://")
    emulator = make_sim(webhook_services={"lahar-system/lahar-admission": host_port})
    api = emulator.api_client()
    hook = hook_config("svc.lahar.io", "unused", ca, ["configmaps"])
    hook["clientConfig"] = {
        "service": {"namespace": "lahar-system", "name": "lahar-admission", "path": "/deny"},
        "caBundle": ca,
    }
    client.AdmissionregistrationV1Api(api).create_validating_webhook_configuration(
        {"metadata": {"name": "svc"}, "webhooks": [hook]}
    )
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api).create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    assert 'admission webhook "svc.lahar.io" denied the request' in json.loads(err.value.body)["message"]
    api.close()
