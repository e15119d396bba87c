"""Settings shared by the services that talk to NATS, Redis and Kubernetes."""

from __future__ import annotations

import os
import re
from typing import Annotated

from msgspec import Meta

from lahar.service.settings import Check, Secret, Settings


def _url(schemes: tuple[str, ...]) -> Check:
    def problem(value: str) -> str | None:
        if not value:
            return f"required (e.g. {schemes[0]}127.0.0.1:{4222 if 'nats' in schemes[0] else 6379})"
        if not value.startswith(schemes):
            return f"must start with {' or '.join(schemes)}"  # not the value: it holds a password
        return None

    return Check(problem)


def _prefix(value: str) -> str | None:
    return None if re.fullmatch(r"[A-Za-z0-9_-]+", value) else f"{value!r}: letters, digits, '_' or '-' only"


class BusSettings(Settings):
    # The URLs carry this service's user and password (``tls://scheduler:PASSWORD@nats:4222``):
    # Secret keeps them out of error messages.
    nats_url: Annotated[
        str, _url(("nats://", "tls://")), Secret(), Meta(description="NATS server URL, with user:password (required)")
    ]
    redis_url: Annotated[
        str,
        _url(("redis://", "rediss://", "unix://")),
        Secret(),
        Meta(description="Redis/Valkey URL, with user:password (required)"),
    ]
    nats_ca: Annotated[
        str, Meta(description="CA certificate file to verify the NATS server's TLS certificate (default: system CAs)")
    ] = ""
    kubeconfig: Annotated[str, Meta(description="kubeconfig file (default $KUBECONFIG, then in-cluster)")] = ""
    prefix: Annotated[str, Check(_prefix), Meta(description="prefix of every stream, subject and Redis key")] = "lahar"
    identity: Annotated[str, Meta(description="this replica's name in leader election (default host-pid)")] = ""
    leader_ttl: Annotated[
        float, Meta(gt=0, description="leader lease, seconds (a crashed leader is replaced within about ttl + 0.5 s)")
    ] = 2.0

    def kubeconfig_path(self) -> str | None:
        return self.kubeconfig or os.environ.get("KUBECONFIG") or None

    def replica(self) -> str:
        return self.identity or f"{os.uname().nodename}-{os.getpid()}"
