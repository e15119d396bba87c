"""KubeConfig.load: the Authorization header for a kubeconfig token and for the in-cluster account."""

from __future__ import annotations

import datetime
import types
from pathlib import Path
from typing import Any

import pytest
from kubernetes.config import incluster_config, kube_config

from lahar.adapters import kube
from lahar.adapters.kube import KubeClient, KubeConfig, _bearer
from lahar_admission.tls import make_certs


@pytest.mark.parametrize(
    ("given", "header"),
    [
        ("abc", "Bearer abc"),
        ("Bearer abc", "Bearer abc"),
        ("bearer abc", "Bearer abc"),  # what the official in-cluster loader stores
        ("BEARER  abc ", "Bearer abc"),
    ],
)
def test_bearer_header_has_one_scheme_word(given: str, header: str) -> None:
    assert _bearer(given) == header


def test_in_cluster_service_account_token_is_sent_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a pod, the official loader stores ``bearer <token>``; the header must not repeat the scheme."""
    token = tmp_path / "token"
    token.write_text("sa-token-123")
    ca = make_certs(["kubernetes.default.svc"], tmp_path / "certs").ca
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    # No kubeconfig anywhere (the loader read $KUBECONFIG into this constant when imported).
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.delenv("KUBECONFIG", raising=False)

    cfg = KubeConfig.load()

    assert cfg.host == "https://10.96.0.1:443"
    assert cfg.headers == {"Authorization": "Bearer sa-token-123"}


def test_rotated_service_account_token_is_picked_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubelet rotates a projected token; requests must carry the new one once it is re-read
    (the official loader re-reads the file a minute after the last read)."""
    token = tmp_path / "token"
    token.write_text("first")
    ca = make_certs(["kubernetes.default.svc"], tmp_path / "certs").ca
    clock = {"now": datetime.datetime(2026, 1, 1, 12, 0, 0)}

    class _Clock(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> _Clock:
            return clock["now"]  # type: ignore[return-value]

    monkeypatch.setattr(
        incluster_config, "datetime", types.SimpleNamespace(datetime=_Clock, timedelta=datetime.timedelta)
    )
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.delenv("KUBECONFIG", raising=False)

    monkeypatch.setattr(kube, "TOKEN_RECHECK_SECONDS", 0.0)  # ask the loader on every request
    cfg = KubeConfig.load()
    assert cfg.authorization is not None
    assert cfg.authorization() == "Bearer first"
    token.write_text("second")
    assert cfg.authorization() == "Bearer first"  # the loader re-reads a minute after its last read
    clock["now"] += datetime.timedelta(minutes=2)
    assert cfg.authorization() == "Bearer second"

    sent: dict[str, Any] = {}
    KubeClient(cfg)._authorize(sent)
    assert sent["headers"]["Authorization"] == "Bearer second"


def test_kubeconfig_token_is_sent_on_each_request(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: static}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    cfg = KubeConfig.load(str(path))
    assert cfg.headers == {"Authorization": "Bearer static"}
    sent: dict[str, Any] = {}
    KubeClient(cfg)._authorize(sent)
    assert sent["headers"]["Authorization"] == "Bearer static"
