"""The Hub hands freed memory back to the OS between calls (``hub/serve/heap.py``, DESIGN.md §6)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
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


MMAP_PROBE = """
import ctypes, platform, sys
from amux_memory.hub.serve import heap

libc = ctypes.CDLL(None)
if hasattr(libc, "mallinfo2"):  # glibc 2.33 and later
    mallinfo, counter = libc.mallinfo2, ctypes.c_size_t
else:  # older glibc: the same counters as ints, ample for these sizes
    mallinfo, counter = libc.mallinfo, ctypes.c_int

class MallInfo(ctypes.Structure):
    _fields_ = [(name, counter) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                                             "uordblks", "fordblks", "keepcost")]

mallinfo.restype = MallInfo
big = bytearray(8 << 20)  # mapped at any threshold; freeing it raises glibc's own threshold to 8 MiB
del big
if sys.argv[1] == "fixed":  # after, as in the Hub, whose start-up has raised it: the fix must bring it down
    assert heap.fix_mmap_threshold()
mapped_before = mallinfo().hblkhd
block = bytearray(512 << 10)
print(mallinfo().hblkhd - mapped_before >= 512 << 10)
"""


@pytest.mark.skipif(heap.malloc_trim() is None, reason="glibc only: other C libraries have no mmap threshold to fix")
@pytest.mark.parametrize("mode", ["fixed", "glibc"])
def test_large_blocks_keep_pages_of_their_own_once_the_threshold_is_fixed(mode: str) -> None:
    """After an 8 MiB block is freed, glibc alone serves a 512 KiB block from its heap (where freeing it leaves
    a hole); with the threshold fixed after that (as in the Hub, whose start-up has raised it: setting any other
    malloc parameter would only stop it moving, so the test tells them apart) the block is mapped pages of its
    own, unmapped when freed.  Each mode in a fresh interpreter, whose allocator has seen nothing of this test
    run's, and with glibc's defaults: a ``MALLOC_*`` variable or a ``glibc.malloc`` tunable stops glibc moving
    its threshold too, and would fail the unfixed mode."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    tunables = [t for t in env.pop("GLIBC_TUNABLES", "").split(":") if t and not t.startswith("glibc.malloc.")]
    if tunables:
        env["GLIBC_TUNABLES"] = ":".join(tunables)
    out = subprocess.run([sys.executable, "-c", MMAP_PROBE, mode], capture_output=True, text=True, check=True,
                         env=env)
    assert out.stdout.strip() == ("True" if mode == "fixed" else "False")


def test_an_operators_own_threshold_stands() -> None:
    """A threshold the operator set for glibc (variable or tunable) is theirs: the Hub leaves it (DESIGN.md §6)."""
    assert not heap.fix_mmap_threshold({"MALLOC_MMAP_THRESHOLD_": "1048576"})
    assert not heap.fix_mmap_threshold({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=4096"})
