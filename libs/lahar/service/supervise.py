"""Supervision of a service's long-running loops: none may die in silence.

``supervised(main, loops)`` runs ``main`` (the service's foreground work, which returns when the
service stops) beside its background loops in one ``asyncio.TaskGroup``.  A loop is never meant
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


class _MainDone(Exception):
    """Ends the task group once ``main`` has returned."""


async def supervised(
    main: Awaitable[T],
    loops: Mapping[str, Coroutine[Any, Any, object]],
    on_death: Callable[[LoopDied], None] | None = None,
) -> T:
    """``main``'s result, with ``loops`` running beside it and cancelled when it returns."""
    result: list[T] = []

    async def foreground() -> None:
        result.append(await main)
        raise _MainDone

    try:
        async with asyncio.TaskGroup() as group:
            for name, loop in loops.items():
                group.create_task(_forever(name, loop), name=name)
            group.create_task(foreground(), name="main")
    except* _MainDone:
        pass
    except* LoopDied as dead:
        first = dead.exceptions[0]
        assert isinstance(first, LoopDied)
        if on_death is not None:
            on_death(first)
        raise first from first.__cause__
    except* Exception as failed:
        # main itself raised: let that exception through as it is, not wrapped in a group
        raise failed.exceptions[0] from None
    return result[0]


async def _forever(name: str, loop: Coroutine[Any, Any, object]) -> None:
    try:
        await loop
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise LoopDied(name, f"failed: {exc!r}") from exc
    raise LoopDied(name, "ended")
