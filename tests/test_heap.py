"""The Hub hands freed memory back to the OS between calls (``hub/serve/heap.py``, DESIGN.md §6)."""

from __future__ import annotations

import trio
import trio.testing

from amux_memory.hub.serve import heap


async def test_a_due_trim_waits_for_a_moment_with_no_call_running(mock_clock: trio.testing.MockClock) -> None:
    """A trim holds malloc's locks, so a due one waits until no call is running; under calls that never pause it
    gives up waiting at its bound (memory must stay bounded).  The clock moves only when the test jumps it."""
    running = {"calls": 1}
    results: list[tuple[bool, float]] = []

    async def wait(give_up: float) -> None:
        results.append((await heap.quiet_moment(lambda: running["calls"], give_up), trio.current_time()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, 10.0)
        for step in (3.0, 4.0):  # a call running at 3 s and at 7 s: still waiting
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(step)
        await trio.testing.wait_all_tasks_blocked()
        assert results == []
        running["calls"] = 0
        mock_clock.jump(heap.QUIET_POLL_SECONDS)
    assert results == [(True, 7.0 + heap.QUIET_POLL_SECONDS)]
    running["calls"] = 2
    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, trio.current_time() + 10.0)
        for _ in range(3):
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(5.0)
    assert results[1][0] is False and results[1][1] >= 7.0 + heap.QUIET_POLL_SECONDS + 10.0
