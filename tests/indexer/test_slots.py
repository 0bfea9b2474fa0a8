"""The crawler's slots (``session.Slots``): a bound like a semaphore's, and a way to the front of the line
for the one request every other page waits for (a host's ``.md`` twin probe)."""

from __future__ import annotations

import asyncio

import pytest
from docbundle.indexer.pipeline.session import Slots


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_the_bound_holds_and_is_reached() -> None:
    async def main() -> int:
        slots = Slots(3)
        inside = 0
        most = 0

        async def job() -> None:
            nonlocal inside, most
            async with slots.held(first=False):
                inside += 1
                most = max(most, inside)
                await _settle()
                inside -= 1

        await asyncio.gather(*(job() for _ in range(20)))
        return most

    assert asyncio.run(main()) == 3


def test_a_first_waiter_is_served_before_everyone_already_waiting() -> None:
    async def main() -> list[str]:
        slots = Slots(1)
        order: list[str] = []
        await slots.acquire()  # held by the test

        async def job(name: str, first: bool) -> None:
            async with slots.held(first=first):
                order.append(name)
                await _settle()

        tasks = []
        for name, first in (("a", False), ("b", False), ("probe", True), ("c", False)):
            tasks.append(asyncio.create_task(job(name, first)))
            await _settle()  # each queues in turn
        slots.release()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(main()) == ["probe", "a", "b", "c"]


def test_a_cancelled_waiter_gives_up_its_place_and_a_handed_slot_goes_on() -> None:
    async def main() -> tuple[list[str], int]:
        slots = Slots(1)
        order: list[str] = []
        await slots.acquire()

        async def job(name: str) -> None:
            async with slots.held():
                order.append(name)

        gone = asyncio.create_task(job("gone"))
        handed = asyncio.create_task(job("handed"))
        kept = asyncio.create_task(job("kept"))
        await _settle()
        gone.cancel()  # cancelled while it waits
        await _settle()
        slots.release()  # handed to "handed" ...
        handed.cancel()  # ... which is cancelled before it runs: the slot must go on to "kept"
        await asyncio.gather(gone, handed, kept, return_exceptions=True)
        # Nothing leaked: the one slot is free again, and only once.
        await asyncio.wait_for(slots.acquire(), 1)
        extra = asyncio.create_task(slots.acquire())
        await _settle()
        taken_twice = int(extra.done())
        extra.cancel()
        return order, taken_twice

    order, taken_twice = asyncio.run(main())
    assert order == ["kept"]
    assert taken_twice == 0


@pytest.mark.parametrize("n", [1, 2, 5])
def test_every_slot_comes_back(n: int) -> None:
    async def main() -> None:
        slots = Slots(n)

        async def job(i: int) -> None:
            async with slots.held(first=i % 3 == 0):
                await _settle()

        await asyncio.gather(*(job(i) for i in range(30)))
        for _ in range(n):
            await asyncio.wait_for(slots.acquire(), 1)

    asyncio.run(main())
