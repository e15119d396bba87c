"""The control plane's credentials: a serving certificate, a service-account signing key pair
and a static token file.  New ones on every start; nothing here is meant to outlive the cluster."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from lahar.infra.certs import make_pair

# Every name and address a client on this machine (or a pod, by the in-cluster name) may use.
SERVING_NAMES = [
    "127.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "10.96.0.1",  # the "kubernetes" Service: the first address of --service-cluster-ip-range
]


@dataclass(frozen=True)
class Pki:
    ca: Path
    cert: Path
    key: Path
    sa_key: Path
    sa_pub: Path
    tokens: Path
    admin_token: str


def make_pki(out: Path) -> Pki:
    files = make_pair(SERVING_NAMES, ca_name="lahar-kube-ca").write(out)
    sa = ec.generate_private_key(ec.SECP256R1())
    sa_key, sa_pub = out / "sa.key", out / "sa.pub"
    _write(
        sa_key,
        sa.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
    _write(
        sa_pub,
        sa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    # One admin identity (group system:masters) for us, kube-controller-manager and KWOK: this is a
    # development cluster on loopback.  Services get their own ServiceAccount tokens later.
    admin = secrets.token_urlsafe(32)
    tokens = out / "tokens.csv"
    _write(tokens, f'{admin},lahar-admin,lahar-admin,"system:masters"\n'.encode())
    return Pki(files.ca, files.cert, files.key, sa_key, sa_pub, tokens, admin)


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o600)
    tmp.replace(path)
