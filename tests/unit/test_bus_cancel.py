"""A cancellation a library swallowed still stops the task (nats-py's flush wait does that)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from lahar.adapters.bus import raise_if_cancelled


async def _swallowing_wait() -> None:
    # What nats-py's Client._flush_pending does around its wait.
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(10)


async def test_a_swallowed_cancellation_is_raised_again() -> None:
    reached = asyncio.Event()

    async def worker() -> str:
        reached.set()
        await _swallowing_wait()
        raise_if_cancelled()
        return "carried on"

    task = asyncio.create_task(worker())
    await reached.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)


async def test_nothing_happens_without_a_cancellation() -> None:
    raise_if_cancelled()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(0.01):  # a handled timeout uncancels: not a pending cancellation
            await asyncio.sleep(1)
    raise_if_cancelled()
