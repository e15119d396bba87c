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
