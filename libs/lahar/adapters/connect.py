"""Connecting to NATS as one role: its user (in the URL), its inbox prefix and TLS verified
against a given CA.

    nc = await connect_nats("tls://binder:PASSWORD@nats:4222", ca="/etc/lahar/nats/ca.crt", role="binder")

The user and password travel in the URL (``LAHAR_NATS_URL``), so one setting says where and as
whom.  The role's inbox prefix (``lahar.wire.access.inbox_prefix``) is the only one its user may
subscribe to: replies to it (JetStream API answers, acknowledgements, pushed messages) cannot be
read by another service.
"""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import urlsplit

import nats
from nats.aio.client import Client as NATS

from lahar.wire.access import ADMIN, inbox_prefix


def tls_context(ca: str) -> ssl.SSLContext:
    """A client context that trusts ``ca`` (a PEM file), or the system's CAs when it is ""."""
    return ssl.create_default_context(cafile=ca or None)


def nats_options(url: str, *, ca: str = "", role: str = ADMIN) -> dict[str, Any]:
    """``nats.connect`` keyword arguments for ``role`` at ``url``."""
    options: dict[str, Any] = {"servers": [url], "inbox_prefix": inbox_prefix(role)}
    if ca or urlsplit(url).scheme == "tls":
        options["tls"] = tls_context(ca)
    return options


async def connect_nats(url: str, *, ca: str = "", role: str = ADMIN, **options: Any) -> NATS:
    """A NATS connection for ``role``; ``options`` go to ``nats.connect`` as they are."""
    return await nats.connect(**nats_options(url, ca=ca, role=role), **options)
