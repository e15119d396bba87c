"""Who may do what on the bus and in the mirror: the one table of NATS and Valkey permissions.

Every Lahar service has its own NATS user and its own Valkey user, each allowed exactly what that
service's code does (read from services/*/lahar_*/ and lahar.adapters), so that a compromised or
buggy service, or anyone holding one service's password, cannot forge another's messages:

* only the **scheduler** publishes decisions (and writes the scheduler lease, which fences them);
* only the **cache** publishes deltas and writes the mirror;
* only **binders** publish results and take decisions off the work queue;
* the **controller** reads deltas and holds its own lease;
* **admission** has no NATS user at all, and reads the mirror only;
* **admin** may do anything: operators' tools, ``lahar up``'s status line and the tests.

Each stream is created and reconfigured by one owner only (``owned_streams``); the others read
its info and wait for it.  The scheduler owns the work queue, the results it reads and the dead
letters, so that no service waits on one that starts after it.  The lease bucket is created by
any of the three roles that lead (each needs it to campaign); each writes its own key only.

The embedded servers (``lahar.infra``) and deploy/ are generated from this table
(``lahar.infra.auth``); nothing else spells a permission.
"""

from __future__ import annotations

from dataclasses import dataclass

from lahar.wire import keys
from lahar.wire.names import Names

ADMIN = "admin"
# Roles with a NATS user; admission talks to Valkey only.
NATS_ROLES = ("cache", "scheduler", "binder", "controller", ADMIN)
# Roles with a Valkey user; binders never read the mirror.
REDIS_ROLES = ("cache", "scheduler", "controller", "admission", ADMIN)
ROLES = ("cache", "scheduler", "binder", "controller", "admission", ADMIN)
LEADERS = ("cache", "scheduler", "controller")  # each elects a leader through a key of the lease bucket

API = "$JS.API"


@dataclass(frozen=True, slots=True)
class NatsPermissions:
    """Subjects a NATS user may publish to and subscribe to (allow lists: the rest is denied)."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]


def stream_owners(names: Names) -> dict[str, str]:
    """Stream name -> the only role that creates it and brings it to the current policy."""
    return {
        names.cluster_stream: "cache",
        names.decisions_stream: "scheduler",
        names.results_stream: "scheduler",
        names.dead_letter_stream: "scheduler",
    }


def owned_streams(names: Names, role: str) -> frozenset[str]:
    """The streams ``role`` creates and updates (admin: every one); it only reads the others'."""
    owners = stream_owners(names)
    return frozenset(s for s, owner in owners.items() if role in (owner, ADMIN))


def inbox_prefix(role: str) -> str:
    """The reply-subject prefix of a role's connections: replies to one service (JetStream API
    answers, publish acknowledgements, pushed messages) cannot be read by another."""
    _check(role, ROLES)
    return "_INBOX" if role == ADMIN else f"_INBOX_{role}"


def lease_bucket_stream(names: Names) -> str:
    return f"KV_{names.leader_bucket}"


def nats_permissions(names: Names, role: str) -> NatsPermissions | None:
    """What ``role``'s NATS user may do; None for admin (everything)."""
    _check(role, NATS_ROLES)
    if role == ADMIN:
        return None
    publish: list[str] = []
    for stream in sorted(stream_owners(names)):
        publish += _stream_api(stream, create=stream in owned_streams(names, role))
    publish += _ROLE_PUBLISH[role](names)
    # Dead letters are copies kept for inspection, read by no service: any service may add one,
    # so a new source of poison never fails to be kept.
    if role != "cache":
        publish.append(names.dead_letter_subjects)
    return NatsPermissions(publish=tuple(publish), subscribe=(f"{inbox_prefix(role)}.>",))


def _stream_api(stream: str, *, create: bool) -> list[str]:
    allowed = [f"{API}.STREAM.INFO.{stream}"]
    if create:
        allowed += [f"{API}.STREAM.CREATE.{stream}", f"{API}.STREAM.UPDATE.{stream}"]
    return allowed


def _read_stream(stream: str) -> list[str]:
    """Follow a stream with ordered (ephemeral, push) consumers: create them, ask how far they
    are, and answer the server's flow-control requests."""
    return [
        f"{API}.CONSUMER.CREATE.{stream}",
        f"{API}.CONSUMER.CREATE.{stream}.>",
        f"{API}.CONSUMER.INFO.{stream}.*",
        f"{API}.CONSUMER.DELETE.{stream}.*",
        f"$JS.FC.{stream}.>",
    ]


def _lease(names: Names, key: str | None) -> list[str]:
    """Read and watch the lease bucket; with ``key``, also create or reconfigure the bucket and
    write that one key (a leader's own lease)."""
    bucket, stream = names.leader_bucket, lease_bucket_stream(names)
    allowed = [
        f"{API}.STREAM.INFO.{stream}",
        f"{API}.DIRECT.GET.{stream}.>",
        f"{API}.DIRECT.GET.{stream}",
        f"{API}.STREAM.MSG.GET.{stream}",
        *_read_stream(stream),
    ]
    if key is not None:
        allowed += [f"{API}.STREAM.CREATE.{stream}", f"{API}.STREAM.UPDATE.{stream}", f"$KV.{bucket}.{key}"]
    return allowed


def _cache(names: Names) -> list[str]:
    return [names.delta_subjects, *_lease(names, "cache")]


def _scheduler(names: Names) -> list[str]:
    return [
        names.decision_subjects,
        *_read_stream(names.cluster_stream),
        *_read_stream(names.results_stream),
        *_lease(names, names.scheduler_lease),
    ]


def _binder(names: Names) -> list[str]:
    stream, consumer = names.decisions_stream, names.binder_consumer
    return [
        names.result_subject,
        # The one durable pull consumer every binder shares: create it, read it, fetch from it,
        # and acknowledge (ack, nak, in-progress, terminate) what it delivers.
        f"{API}.CONSUMER.CREATE.{stream}.{consumer}",
        f"{API}.CONSUMER.CREATE.{stream}.{consumer}.>",
        f"{API}.CONSUMER.DURABLE.CREATE.{stream}.{consumer}",
        f"{API}.CONSUMER.INFO.{stream}.{consumer}",
        f"{API}.CONSUMER.MSG.NEXT.{stream}.{consumer}",
        f"$JS.ACK.{stream}.{consumer}.>",
        # The scheduler's lease, read and watched: a decision runs only in the current epoch.
        *_lease(names, None),
    ]


def _controller(names: Names) -> list[str]:
    return [*_read_stream(names.cluster_stream), *_lease(names, "controller")]


_ROLE_PUBLISH = {"cache": _cache, "scheduler": _scheduler, "binder": _binder, "controller": _controller}


# -- Valkey ---------------------------------------------------------------------------------------

# Connection housekeeping every client needs (AUTH, HELLO, PING, CLIENT SETNAME/SETINFO, SELECT),
# without the administrative and dangerous commands of those categories.
_CONNECT = ("-@all", "+@connection", "-@admin", "-@dangerous")
# Running the mirror's Lua scripts (every command a script runs is checked against the same rules).
_SCRIPTS = ("+evalsha", "+eval", "+script|load", "+script|exists")


def redis_rules(prefix: str, role: str) -> tuple[str, ...]:
    """The ACL rules of ``role``'s Valkey user (after ``on`` and its password)."""
    _check(role, REDIS_ROLES)
    mirror = f"{prefix}:mirror:*"
    epochs = keys.epochs_key(prefix)
    if role == ADMIN:
        return ("~*", "&*", "+@all")
    if role == "cache":  # writes the mirror (scripts), and its epoch
        return (f"~{mirror}", f"~{epochs}", *_CONNECT, "+@read", "+@write", "+@transaction", *_SCRIPTS,
                "-@dangerous")  # fmt: skip
    if role in ("scheduler", "controller"):  # read the mirror; record their epoch (a script's HSET)
        return (f"%R~{mirror}", f"~{epochs}", *_CONNECT, "+@read", "+@transaction", *_SCRIPTS, "+hset",
                "-@dangerous")  # fmt: skip
    return (f"%R~{mirror}", *_CONNECT, "+@read", "+@transaction", "-@dangerous")  # admission


def _check(role: str, allowed: tuple[str, ...]) -> None:
    if role not in allowed:
        raise ValueError(f"role {role!r}: expected one of {', '.join(allowed)}")


def may_publish(names: Names, role: str, subject: str) -> bool:
    """Whether ``role``'s NATS user may publish to ``subject`` (as nats-server decides it)."""
    perms = nats_permissions(names, role)
    return perms is None or any(subject_matches(pattern, subject) for pattern in perms.publish)


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, a final ``>`` one or more."""
    want, got = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(got) > i
        if i >= len(got) or (token != "*" and token != got[i]):
            return False
    return len(got) == len(want)
