"""Watch: replay from a resourceVersion (or the current state), then live events, bookmarks,
``timeoutSeconds``, and 410 Gone as an ERROR event when the history no longer reaches back.

Opening a watch is synchronous (replay and registration happen with no ``await`` in between),
so no event can fall between the replay and the live stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from lahar.sim.api import Api, Query, Target, matcher, namespace_slice
from lahar.sim.errors import ApiError, status_object
from lahar.sim.objects import int_option
from lahar.sim.store import ADDED, Table, Watcher, watch_line

Obj = dict[str, Any]
_encode = msgspec.json.Encoder().encode
DEFAULT_TIMEOUT = 1800.0  # the real server's minimum request timeout for watches


def open_watch(api: Api, t: Target, query: Query) -> tuple[Table, Watcher]:
    rtype = t.rtype
    table = api.table(rtype)
    match = matcher(rtype, query)
    if t.name is not None:  # the legacy form /pods/NAME?watch=true
        name, inner = t.name, match

        def match(obj: Obj) -> bool:
            return bool(obj["metadata"]["name"] == name and (inner is None or inner(obj)))

    watcher = Watcher(t.namespace, match, None)
    rv = query.get("resourceVersion") or ""
    initial = query.get("sendInitialEvents") == "true" or rv in ("", "0")
    if initial:
        keys = namespace_slice(table, t.namespace, "") if t.namespace is not None else table.sorted_keys()
        for key in keys:
            entry = table.objects[key]
            if match is None or match(entry.obj):
                watcher.push(watch_line(ADDED, entry.raw))
        if query.get("sendInitialEvents") == "true" and query.get("allowWatchBookmarks") == "true":
            watcher.push(bookmark(api, t, initial_end=True))
    else:
        try:
            since = int(rv)
        except ValueError:
            raise ApiError(
                500, "", f'resourceVersion: Invalid value: "{rv}": strconv.ParseUint: parsing "{rv}": invalid syntax'
            ) from None
        if since < table.compacted_rv:
            watcher.push(gone(since, table.compacted_rv + 1))
            watcher.close()
            return table, watcher
        for event in table.events_after(since):
            watcher.offer(event)
    table.watchers.add(watcher)
    return table, watcher


def gone(since: int, oldest: int) -> bytes:
    status = status_object(410, "Expired", f"too old resource version: {since} ({oldest})")
    return b'{"type":"ERROR","object":' + _encode(status) + b"}\n"


def bookmark(api: Api, t: Target, initial_end: bool = False) -> bytes:
    meta: Obj = {"resourceVersion": str(api.store.rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    obj = {"kind": t.rtype.kind, "apiVersion": t.rtype.api_version, "metadata": meta}
    obj.update(_BOOKMARK_BODY.get(t.rtype.key, {}))
    return b'{"type":"BOOKMARK","object":' + _encode(obj) + b"}\n"


# A bookmark is an empty object of the watched type: what the Go type serialises when empty.
_BOOKMARK_BODY: dict[tuple[str, str], Obj] = {("", "pods"): {"spec": {"containers": None}, "status": {}}}


def watch_timeout(query: Query) -> float:
    seconds = int_option(query.get("timeoutSeconds"), "timeoutSeconds")
    return float(seconds) if seconds else DEFAULT_TIMEOUT


async def stream(
    api: Api,
    t: Target,
    query: Query,
    table: Table,
    watcher: Watcher,
    write: Callable[[bytes], Awaitable[None]],
    disconnected: asyncio.Event,
    bookmark_interval: float,
) -> None:
    """Write the watcher's events until timeout, disconnection or closure."""
    deadline = time.monotonic() + watch_timeout(query)
    bookmarks = query.get("allowWatchBookmarks") == "true"
    next_bookmark = time.monotonic() + bookmark_interval
    try:
        while True:
            if watcher.pending:
                await write(watcher.drain())
            now = time.monotonic()
            if watcher.closed or disconnected.is_set() or now >= deadline:
                return
            if bookmarks and now >= next_bookmark:
                watcher.push(bookmark(api, t))
                next_bookmark = now + bookmark_interval
                continue
            wait = min(deadline, next_bookmark if bookmarks else deadline) - now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watcher.wake.wait(), timeout=max(wait, 0.0))
    finally:
        table.watchers.discard(watcher)
        watcher.close()
