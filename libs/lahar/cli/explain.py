"""``lahar explain pod|podgroup NAME``: why it waits, which action and plugin stopped it, with
the numbers, and what would let it run — offline on the objects of a dump (``-f FILE``), or live
on the cluster state in the cache's Redis mirror (``LAHAR_REDIS_URL`` and ``LAHAR_PREFIX``, as
``lahar up`` prints them)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from lahar.api.files import FileError, load_file


def register(sub: Any) -> None:
    p = sub.add_parser(
        "explain", help="why a pod or PodGroup waits, live from the cache's mirror or from a dump of objects"
    )
    p.add_argument("kind", choices=("pod", "podgroup"))
    p.add_argument("name", help="NAME or NAMESPACE/NAME")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument(
        "-f", "--file", action="append", metavar="FILE", help="objects, as lahar simulate (default: the live mirror)"
    )
    p.add_argument(
        "--redis-url",
        default=os.environ.get("LAHAR_REDIS_URL", ""),
        help="the mirror's Valkey/Redis (default $LAHAR_REDIS_URL)",
    )
    p.add_argument(
        "--prefix",
        default=os.environ.get("LAHAR_PREFIX", "lahar"),
        help="the services' LAHAR_PREFIX, which names the mirror's keys (default $LAHAR_PREFIX or lahar)",
    )
    p.add_argument("--conf", help="a volcano-scheduler.conf file (default: the dump's or the built-in one)")
    p.add_argument("--cycles", type=int, default=1, help="sessions to run first (default 1)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from lahar_scheduler.core import load_conf
    from lahar_scheduler.explain import NotFound, explain
    from lahar_scheduler.framework.conf import ConfError

    objects: list[Any] = []
    case: dict[str, Any] | None = None
    try:
        if args.file:
            for f in args.file:
                loaded = load_file(f)
                objects.extend(loaded.objects)
                case = case or loaded.case
        else:
            objects = _live(args)
        text = Path(args.conf).read_text() if args.conf else (case or {}).get("schedulerConf")
        conf = load_conf(text)
        if not args.file and not args.conf:
            # The mirror holds the cluster, not the scheduler's configuration file.
            print(
                "lahar explain: scheduler configuration: the built-in one (pass --conf FILE if the "
                "scheduler runs another)",
                file=sys.stderr,
            )
    except (FileError, OSError, ConfError, LiveError) as exc:
        print(f"lahar explain: {exc}", file=sys.stderr)
        return 2
    key = args.name if "/" in args.name else f"{args.namespace}/{args.name}"
    try:
        # The sessions' clock is now: sla's waiting times count from the PodGroups' creation.
        lines = explain(objects, conf, args.kind, key, cycles=max(1, args.cycles), now=time.time())
    except NotFound as exc:
        print(f"lahar explain: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


class LiveError(Exception):
    """The mirror cannot be read (no URL, unreachable, empty or being rebuilt)."""


def _live(args: argparse.Namespace) -> list[Any]:
    from lahar_scheduler.explain import mirror_objects

    if not args.redis_url:
        raise LiveError(
            "no -f FILE, and no mirror to read: set LAHAR_REDIS_URL and LAHAR_PREFIX as lahar up prints them "
            "(or pass --redis-url and --prefix)"
        )
    state = asyncio.run(_load(args.redis_url, args.prefix))
    if not state.stream:
        raise LiveError(
            f"the mirror under prefix {args.prefix!r} is empty or being rebuilt: is lahar's cache running "
            "(and is the prefix the services' LAHAR_PREFIX)?"
        )
    objects, skipped = mirror_objects(state.objects)
    for line in skipped:
        print(f"lahar explain: warning: {line}", file=sys.stderr)
    print(
        f"lahar explain: live: mirror {args.prefix!r} at stream sequence {state.seq}, {len(objects)} objects",
        file=sys.stderr,
    )
    return objects


async def _load(url: str, prefix: str) -> Any:
    import redis.asyncio as aioredis
    import redis.exceptions

    from lahar.adapters.mirror import Mirror
    from lahar_scheduler.live import KINDS

    client = aioredis.from_url(url)
    try:
        return await Mirror(client, prefix).load(KINDS)
    except (redis.exceptions.RedisError, OSError) as exc:
        raise LiveError(f"cannot read the mirror at {_safe(url)}: {exc}") from None
    finally:
        await client.aclose()


def _safe(url: str) -> str:
    """The URL without its password (it travels in LAHAR_REDIS_URL)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    user = f"{parts.username}@" if parts.username else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"
