"""Server configuration and client URLs made from the access table (``lahar.wire.access``).

The same renderers write the embedded servers' files (passwords inline, made per run) and the
deploy/ manifests (passwords as ``$VARIABLES`` nats-server reads from its environment, hashes
in Valkey's ACL file), so the permissions deployed are the permissions tested.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from lahar.infra.certs import CertPair
from lahar.wire import access
from lahar.wire.names import Names

Password = Callable[[str], str]  # role -> the text after ``password:`` in nats-server.conf


def _new_passwords(roles: tuple[str, ...]) -> dict[str, str]:
    # URL-safe, so a password can sit in a nats:// or redis:// URL without escaping.
    return {role: secrets.token_urlsafe(24) for role in roles}


@dataclass(frozen=True)
class Credentials:
    """A password per role for NATS and another for Valkey (a leaked one opens one server only)."""

    nats: Mapping[str, str] = field(default_factory=lambda: _new_passwords(access.NATS_ROLES))
    redis: Mapping[str, str] = field(default_factory=lambda: _new_passwords(access.REDIS_ROLES))


def password_env(role: str) -> str:
    """The environment variable that holds ``role``'s NATS password for nats-server (deploy/)."""
    return f"LAHAR_NATS_PASSWORD_{role.upper()}"


def literal(passwords: Mapping[str, str]) -> Password:
    return lambda role: json.dumps(passwords[role])


def from_environment(role: str) -> str:
    return f"${password_env(role)}"


# -- nats-server ------------------------------------------------------------------------------------


def nats_conf(names: Names, password: Password, *, tls: tuple[str, str] | None = None) -> str:
    """nats-server.conf: one user per role with its permissions and, with ``tls`` (certificate
    and key file), TLS required of every client.  No monitoring port is configured: the server
    serves clients only.  JetStream and the listen address are given as flags."""
    users = "\n".join(_nats_user(names, role, password) for role in access.NATS_ROLES)
    text = f"# Generated from lahar.wire.access; do not edit.\nauthorization {{\n  users = [\n{users}\n  ]\n}}\n"
    if tls is not None:
        cert, key = tls
        text += f"tls {{\n  cert_file: {json.dumps(cert)}\n  key_file: {json.dumps(key)}\n  timeout: 5\n}}\n"
    return text


def _nats_user(names: Names, role: str, password: Password) -> str:
    lines = ["    {", f"      user: {json.dumps(role)}", f"      password: {password(role)}"]
    perms = access.nats_permissions(names, role)
    if perms is not None:
        lines += [
            "      permissions: {",
            f"        publish: {{allow: {_list(perms.publish, 10)}}}",
            f"        subscribe: {{allow: {_list(perms.subscribe, 10)}}}",
            "      }",
        ]
    return "\n".join([*lines, "    }"])


def _list(items: tuple[str, ...], indent: int) -> str:
    pad = " " * (indent + 2)
    body = "".join(f"{pad}{json.dumps(item)}\n" for item in items)
    return f"[\n{body}{' ' * indent}]"


# -- Valkey -------------------------------------------------------------------------------------------


def valkey_acl(prefix: str, passwords: Mapping[str, str]) -> str:
    """Valkey's ACL file: the ``default`` user off (no unauthenticated access), one user per role
    with its rules; passwords only as SHA-256 hashes."""
    lines = ["user default off resetkeys resetchannels -@all"]
    for role in access.REDIS_ROLES:
        digest = hashlib.sha256(passwords[role].encode()).hexdigest()
        lines.append(" ".join(["user", role, "on", f"#{digest}", *access.redis_rules(prefix, role)]))
    return "\n".join(lines) + "\n"


# -- clients ------------------------------------------------------------------------------------------


def with_user(url: str, user: str, password: str) -> str:
    """``url`` logging in as ``user``, e.g. ``tls://scheduler:PASSWORD@127.0.0.1:4222``."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return parts._replace(netloc=f"{quote(user, safe='')}:{quote(password, safe='')}@{host}").geturl()


# -- Kubernetes (deploy/) -----------------------------------------------------------------------------

CREDENTIALS_SECRET = "lahar-credentials"  # key nats-ROLE / redis-ROLE: that role's password
VALKEY_ACL_SECRET = "lahar-valkey-acl"  # key users.acl
NATS_TLS_SECRET = "lahar-nats-tls"  # keys tls.crt, tls.key (the server's) and ca.crt (for clients)


def credential_key(server: str, role: str) -> str:
    """The key of ``role``'s password for ``server`` (nats or redis) in the credentials Secret."""
    return f"{server}-{role}"


def kubernetes_secrets(prefix: str, creds: Credentials, certs: CertPair, namespace: str) -> list[dict[str, Any]]:
    """The Secrets deploy/ mounts: every role's passwords, Valkey's ACL file (hashes only) and
    NATS's TLS pair with its CA."""
    passwords = {credential_key("nats", r): p for r, p in creds.nats.items()}
    passwords |= {credential_key("redis", r): p for r, p in creds.redis.items()}
    return [
        _secret(CREDENTIALS_SECRET, namespace, passwords),
        _secret(VALKEY_ACL_SECRET, namespace, {"users.acl": valkey_acl(prefix, creds.redis)}),
        _secret(
            NATS_TLS_SECRET,
            namespace,
            {"tls.crt": certs.cert.decode(), "tls.key": certs.key.decode(), "ca.crt": certs.ca.decode()},
        ),
    ]


def _secret(name: str, namespace: str, data: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "lahar"}},
        "type": "Opaque",
        "stringData": dict(data),
    }
