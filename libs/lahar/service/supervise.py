"""Supervision of a service's long-running loops: none may die in silence.

``supervised(main, loops)`` runs ``main`` (the service's foreground work, which returns when the
service stops) beside its background loops, each a task.  A loop is never meant
to end: one that returns or raises ends ``main`` and everything else, and ``supervised`` raises
``LoopDied`` naming it.  The service's process then fails its ``/healthz`` and exits non-zero,
so its supervisor (Kubernetes, ``lahar up``) restarts it, rather than leaving a replica that
holds a lease and passes its probes while part of it is dead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

__all__ = ["LoopDied", "supervised"]

T = TypeVar("T")


class LoopDied(RuntimeError):
    """A background loop ended; ``__cause__`` holds its exception, if it raised one."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"loop {name!r} {why}")
        self.name = name


# How often a task that has not ended since it was cancelled is cancelled again.
RECANCEL_SECONDS = 0.2


async def supervised(
    main: Awaitable[T],
    loops: Mapping[str, Coroutine[Any, Any, object]],
    on_death: Callable[[LoopDied], None] | None = None,
) -> T:
    """``main``'s result, with ``loops`` running beside it and cancelled when it returns.

    Not an ``asyncio.TaskGroup``: a group cancels its tasks once and then waits for them, and a
    library that swallows a CancelledError (nats-py's publish does, while it waits to flush)
    leaves the loop running and the stop waiting forever.  Here the tasks that have not ended are
    cancelled again every RECANCEL_SECONDS until they have."""
    tasks = [asyncio.create_task(_forever(name, loop), name=name) for name, loop in loops.items()]
    foreground = asyncio.ensure_future(main)
    try:
        done, _ = await asyncio.wait([foreground, *tasks], return_when=asyncio.FIRST_COMPLETED)
    finally:
        # Main returned, a loop died, or we are cancelled ourselves: stop everything else.
        await _stop([foreground, *tasks])
    if foreground in done:
        return foreground.result()  # main's own exception passes through as it is
    ended = [t for t in tasks if t in done]
    found = next((t.exception() for t in ended if not t.cancelled()), None)
    dead = found if isinstance(found, LoopDied) else LoopDied(ended[0].get_name(), "was cancelled")
    if on_death is not None:
        on_death(dead)
    raise dead from dead.__cause__


async def _stop(tasks: list[asyncio.Future[Any]]) -> None:
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=RECANCEL_SECONDS)
    for task in tasks:
        if not task.cancelled():
            task.exception()  # read, so asyncio does not log it as never retrieved


async def _forever(name: str, loop: Coroutine[Any, Any, object]) -> None:
    try:
        await loop
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise LoopDied(name, f"failed: {exc!r}") from exc
    raise LoopDied(name, "ended")
