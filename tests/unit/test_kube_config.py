"""KubeConfig.load: the Authorization header for a kubeconfig token and for the in-cluster account."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes.config import incluster_config, kube_config

from lahar.adapters.kube import KubeConfig, _bearer
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
