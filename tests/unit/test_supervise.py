"""Supervised loops: a loop that dies ends the service, loudly; a normal stop ends the loops."""

from __future__ import annotations

import asyncio

import pytest

from lahar.service.supervise import LoopDied, supervised


async def _forever() -> None:
    await asyncio.Event().wait()


def test_main_returns_and_the_loops_are_cancelled() -> None:
    cancelled: list[str] = []

    async def loop() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("loop")
            raise

    async def main() -> int:
        await asyncio.sleep(0)
        return 7

    async def run() -> int:
        return await supervised(main(), {"loop": loop()})

    assert asyncio.run(run()) == 7
    assert cancelled == ["loop"]


@pytest.mark.parametrize("how", ["raises", "returns"])
def test_a_dying_loop_ends_main_and_is_named(how: str) -> None:
    seen: list[str] = []

    async def loop() -> None:
        await asyncio.sleep(0)
        if how == "raises":
            raise OverflowError("int too large to convert")

    async def main() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("main cancelled")
            raise

    async def run() -> None:
        await supervised(main(), {"deltas": loop(), "other": _forever()}, on_death=lambda d: seen.append(d.name))

    with pytest.raises(LoopDied, match="deltas") as info:
        asyncio.run(run())
    assert seen == ["main cancelled", "deltas"]
    if how == "raises":
        assert isinstance(info.value.__cause__, OverflowError)


def test_an_error_of_main_passes_through_unwrapped() -> None:
    async def main() -> None:
        raise KeyError("x")

    async def run() -> None:
        await supervised(main(), {"loop": _forever()})

    with pytest.raises(KeyError):
        asyncio.run(run())


def test_a_loop_that_swallows_its_cancellation_is_cancelled_again() -> None:
    """nats-py swallows a CancelledError while a publish waits to flush; the stop must not wait
    for such a loop forever."""
    swallowed = []

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed.append(True)  # the first one is lost, as in the library

    async def scenario() -> str:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, stop.set)

        async def main() -> str:
            await stop.wait()
            return "stopped"

        return await asyncio.wait_for(supervised(main(), {"stubborn": stubborn()}), 5)

    assert asyncio.run(scenario()) == "stopped"
    assert swallowed == [True]


def test_a_loop_cancelled_from_outside_is_a_death() -> None:
    async def scenario() -> None:
        async def main() -> None:
            await asyncio.Event().wait()

        async def loop() -> None:
            asyncio.current_task().cancel()  # type: ignore[union-attr]
            await asyncio.sleep(1)

        await asyncio.wait_for(supervised(main(), {"cancelled": loop()}), 5)

    with pytest.raises(LoopDied, match="cancelled"):
        asyncio.run(scenario())
