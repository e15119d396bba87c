"""The HTTPS service: status codes, timeouts, the on-unavailable policy, probes, TLS reload."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509

from lahar_admission.conformance import settings as case_settings
from lahar_admission.live import LiveServer, ProxyView, start_live
from lahar_admission.server import AppConfig
from lahar_admission.tls import make_certs
from lahar_admission.view import InMemoryView, ViewUnavailable, view_from_objects

OPEN_DEFAULT = {
    "kind": "Queue",
    "metadata": {"name": "default"},
    "spec": {"weight": 1},
    "status": {"state": "Open"},
}


def review(
    resource: str,
    obj: dict[str, Any],
    group: str = "batch.volcano.sh",
    version: str = "v1alpha1",
    op: str = "CREATE",
    uid: str = "u1",
) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "operation": op,
                "resource": {"group": group, "version": version, "resource": resource},
                "namespace": "ns",
                "name": obj.get("metadata", {}).get("name", ""),
                "object": obj,
            },
        }
    ).encode()


def job(queue: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {
            "queue": queue,
            "tasks": [
                {
                    "name": "t",
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ],
        },
    }


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]},
}
JSON = {"Content-Type": "application/json"}


class DownView(ProxyView):
    def queue(self, name: str) -> Any:
        raise ViewUnavailable("redis is down")


class BlockingView(ProxyView):
    """A lookup that blocks until the test releases it (stands for a hung dependency)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def queue(self, name: str) -> Any:
        self.release.wait(timeout=30)
        return None


@pytest.fixture
def server_for(tmp_path: Path) -> Iterator[Any]:
    started: list[LiveServer] = []

    def start(view: Any, **kw: Any) -> LiveServer:
        s = start_live(AppConfig(rules=case_settings(), view=view, **kw), tmp_path / f"certs{len(started)}")
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def test_unknown_path_and_kind_are_404(live: LiveServer) -> None:
    with live.client() as c:
        assert c.post("/nothing/here", content=b"{}", headers=JSON).status_code == 404
        r = c.post("/jobs/validate", content=review("deployments", {}, group="apps", version="v1"), headers=JSON)
        assert r.status_code == 404
        assert "deployments" in r.json()["message"]


def test_malformed_bodies_are_400_with_a_message(live: LiveServer) -> None:
    with live.client() as c:
        for body in (b"not json", b"[]", b'{"request": {"uid": 5}}', b"{}"):
            r = c.post("/jobs/validate", content=body, headers=JSON)
            assert r.status_code == 400, body
            assert r.json()["message"].startswith("malformed AdmissionReview")
        assert "uid" in c.post("/jobs/validate", content=b'{"request": {"uid": 5}}', headers=JSON).json()["message"]


@pytest.mark.parametrize("depth", [101, 1_000, 100_000])
def test_deeply_nested_bodies_are_400_not_a_recursion_error(live: LiveServer, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    body = json.loads(review("jobs", job()))
    body["request"]["object"]["spec"]["plugins"] = {"x": "PLACEHOLDER"}
    text = json.dumps(body).replace('"PLACEHOLDER"', nested)
    with live.client() as c:
        r = c.post("/jobs/validate", content=text.encode(), headers=JSON)
        assert r.status_code == 400
        assert r.json()["message"] == "malformed AdmissionReview: nested deeper than 100 levels"
        # Brackets inside strings do not nest; nor does the depth of an ordinary review.
        quoted = json.dumps(body).replace('"PLACEHOLDER"', json.dumps(nested))
        assert c.post("/jobs/validate", content=quoted.encode(), headers=JSON).status_code == 200


def test_content_type_and_size_limits(live: LiveServer) -> None:
    with live.client() as c:
        assert (
            c.post("/jobs/validate", content=review("jobs", job()), headers={"Content-Type": "text/plain"}).status_code
            == 415
        )
        big = b'{"pad": "' + b"x" * (4 * 1024 * 1024) + b'"}'
        assert c.post("/jobs/validate", content=big, headers=JSON).status_code == 413


def test_a_wrong_resource_on_a_known_path_is_denied_like_volcano(live: LiveServer, proxy_view: ProxyView) -> None:
    with live.client() as c:
        r = c.post(
            "/jobs/validate",
            content=review("queues", {"metadata": {"name": "q"}}, group="scheduling.volcano.sh", version="v1beta1"),
            headers=JSON,
        )
    resp = r.json()["response"]
    assert resp["allowed"] is False
    assert "expect resource to be batch.volcano.sh/v1alpha1, Resource=jobs" in resp["status"]["message"]


def test_probes_and_metrics(live: LiveServer, proxy_view: ProxyView) -> None:
    proxy_view.target = view_from_objects([OPEN_DEFAULT])
    with live.client() as c:
        assert c.get("/healthz").status_code == 200
        assert c.get("/readyz").status_code == 200
        assert c.post("/jobs/validate", content=review("jobs", job()), headers=JSON).json()["response"]["allowed"]
        text = c.get("/metrics").text
    assert 'lahar_admission_reviews_total{allowed="true",path="/jobs/validate"}' in text
    assert "lahar_admission_review_seconds_bucket" in text


def test_unavailable_mirror_follows_the_policy(server_for: Any) -> None:
    s = server_for(DownView(), ready=lambda: (False, "redis is down"))
    with s.client() as c:
        r = c.post("/jobs/validate", content=review("jobs", job()), headers=JSON).json()["response"]
        assert r["allowed"] is False
        assert "mirror is unavailable" in r["status"]["message"]
        assert "--on-unavailable jobs=deny" in r["status"]["message"]
        assert c.get("/readyz").status_code == 503
    s2 = server_for(
        DownView(), on_unavailable={"jobs": "allow", "queues": "deny", "podgroups": "deny", "pods": "allow"}
    )
    with s2.client() as c:
        r = c.post("/jobs/validate", content=review("jobs", job()), headers=JSON).json()["response"]
        assert r["allowed"] is True
        assert "allowed by --on-unavailable jobs=allow" in r["warnings"][0]


def test_answers_within_the_request_timeout(server_for: Any) -> None:
    view = BlockingView()
    s = server_for(view, inline_max_bytes=0)
    try:
        with s.client() as c:
            started = time.monotonic()
            r = c.post("/jobs/validate?timeout=1s", content=review("jobs", job()), headers=JSON)
            elapsed = time.monotonic() - started
        resp = r.json()["response"]
        assert r.status_code == 200
        assert elapsed < 1.0
        assert resp["allowed"] is False
        assert "no decision within" in resp["status"]["message"]
    finally:
        view.release.set()


def _served_serial(live: LiveServer) -> int:
    # Read the certificate the server presents on a fresh handshake.
    import socket

    host, port = live.url.removeprefix("https://").split(":")
    raw = ssl.create_default_context()
    raw.check_hostname = False
    raw.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, int(port))) as sock, raw.wrap_socket(sock) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def test_certificates_reload_without_restart(server_for: Any, tmp_path: Path) -> None:
    from lahar_admission.tls import CertReloader

    s = server_for(InMemoryView())
    before = _served_serial(s)
    reloader = CertReloader(s.config.ssl, s.certs.cert, s.certs.key, interval=0.05)
    assert reloader.check() is False  # nothing changed yet
    fresh = make_certs(["localhost", "127.0.0.1"], tmp_path / "rotated")
    s.certs.cert.write_bytes(fresh.cert.read_bytes())
    s.certs.key.write_bytes(fresh.key.read_bytes())
    assert reloader.check() is True
    after = _served_serial(s)
    assert after != before
    assert after == x509.load_pem_x509_certificate(fresh.cert.read_bytes()).serial_number
    # A client that trusts only the new CA now gets through.
    with httpx.Client(base_url=s.url, verify=ssl.create_default_context(cafile=str(fresh.ca))) as c:
        assert c.get("/healthz").status_code == 200
