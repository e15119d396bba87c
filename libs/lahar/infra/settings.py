"""The settings that point Lahar at servers it should use instead of starting its own."""

from __future__ import annotations

import os
from urllib.parse import SplitResult, urlsplit

from lahar.infra.errors import InfraError

NATS_URL_ENV = "LAHAR_NATS_URL"
REDIS_URL_ENV = "LAHAR_REDIS_URL"
NATS_CA_ENV = "LAHAR_NATS_CA"  # the CA certificate file NATS clients verify the server with

_NATS_SCHEMES = ("nats", "tls", "ws", "wss")
_REDIS_SCHEMES = ("redis", "rediss", "unix")


def nats_url_setting(explicit: str | None = None) -> str | None:
    """The NATS URL to use: ``explicit`` if given, else ``$LAHAR_NATS_URL``; None means start one."""
    return _url_setting(explicit, "nats_url", NATS_URL_ENV, _NATS_SCHEMES, "nats://127.0.0.1:4222")


def redis_url_setting(explicit: str | None = None) -> str | None:
    """The Redis URL to use: ``explicit`` if given, else ``$LAHAR_REDIS_URL``; None means start one."""
    return _url_setting(explicit, "redis_url", REDIS_URL_ENV, _REDIS_SCHEMES, "redis://127.0.0.1:6379/0")


def _url_setting(explicit: str | None, argument: str, env: str, schemes: tuple[str, ...], example: str) -> str | None:
    source, value = (argument, explicit) if explicit is not None else (env, os.environ.get(env, ""))
    if explicit is None and not value.strip():
        return None  # unset and set-but-empty both mean "start our own"
    problem = _url_problem(value, schemes)
    if problem:
        raise InfraError(f"{source}: {_redacted(value)!r} is not a usable URL: {problem} (e.g. {example})")
    return value


def _url_problem(value: str, schemes: tuple[str, ...]) -> str | None:
    parts = urlsplit(value.strip())
    if parts.scheme not in schemes:
        return f"the scheme must be one of {', '.join(s + '://' for s in schemes)}"
    if parts.scheme == "unix":
        return None if parts.path else "a unix:// URL needs a socket path"
    if not parts.hostname:
        return "it names no host"
    try:
        parts.port  # noqa: B018 - urllib validates the port only when it is read
    except ValueError:
        return "the port must be a number from 0 to 65535"
    return None


def _redacted(value: str) -> str:
    """The URL as it may appear in an error message: without its password."""
    parts: SplitResult = urlsplit(value)
    if not parts.password:
        return value
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"{parts.username or ''}:***@{host}").geturl()
