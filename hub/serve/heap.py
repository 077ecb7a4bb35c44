"""Freed memory back to the OS: glibc's ``malloc_trim`` at a bounded cadence (DESIGN.md §6).

Objects over 512 bytes (documents, frames, folded text) come from the C library's ``malloc``; each worker
thread gets an arena of its own, and memory freed inside an arena stays with the process (its RSS) until the
arena is trimmed, which glibc does only at an arena's top.  Under sustained writes the Hub's RSS therefore
climbed for as long as the load lasted while the live Python objects stayed nearly flat: ``python -m
bench.soak`` (40 principals, 6 teams, ~280 requests a second, 2-core VM) measured 78 → 427 MiB in 6 minutes
(43 MiB a minute at the end) with ``tracemalloc`` seeing under 10 MiB of that growth.  ``malloc_trim(0)``
walks every arena and returns its free pages (``madvise``): every 30 s it held the same run at 137 MiB after 2
minutes (240 without); ``MALLOC_ARENA_MAX=2`` alone made it worse (553 MiB after 6 minutes), and with the trim
no better than the trim alone, so only the trim is used.  The 30-minute soak (``bench/README.md``) with it and
the bounded indexes: 78.8 → 221.4 MiB, 2.0 MiB a minute over the last 10; before: 78.7 → 721.8 MiB in 10.

Blocks of :data:`MMAP_THRESHOLD_BYTES` or more get pages of their own (:func:`fix_mmap_threshold`), so the
large short-lived buffers of a request go back to the OS as they are freed instead of leaving holes in a heap.

:func:`return_freed_memory` runs in the Hub's nursery and calls it every :data:`TRIM_SECONDS` when a data call
ended since the last one (an idle Hub frees nothing new), in a worker thread: it holds each arena's lock while it
walks it, never the event loop.  Not glibc (musl, macOS): it does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import platform
import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

log = logging.getLogger("amux.hub")

TRIM_SECONDS = 10.0
"""Seconds between two ``malloc_trim(0)`` calls while the Hub serves calls.  One call took 0.05 ms in an idle
25 MiB process and 90-170 ms over a 1.2 GiB fragmented heap on a loaded 2-core VM (a soak's Hub is ~150 MiB).
In the 8-minute soak, every 10 s instead of 30 s: RSS 135-164 MiB instead of 140-176 over minutes 4-8."""


def glibc_function(name: str, argtypes: list[type[Any]]) -> Any | None:
    """The C library's function ``name`` taking ``argtypes`` and returning an ``int`` (ctypes), or None when the
    C library is not glibc or has no such function.  Raises nothing."""
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


def malloc_trim() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)`` as a function returning its result (1: memory was returned), or None when the
    C library is not glibc or has no such function.  Raises nothing."""
    function = glibc_function("malloc_trim", [ctypes.c_size_t])
    return None if function is None else lambda: int(function(0))


MMAP_THRESHOLD_BYTES = 128 << 10
"""Blocks of at least this many bytes are mapped pages of their own, unmapped when freed (glibc's
``M_MMAP_THRESHOLD``, fixed).  glibc starts there but raises the threshold to the size of each mapped block
freed (up to 32 MiB), so after the Hub's first multi-MiB buffer (a folded scope joined for matching, a
history segment read for a backup) blocks of up to that size came from the heap, and the heap grew around
them: in ``python -m bench.soak`` glibc's heaps grew 54 → 116 MiB in 9 minutes while 25-28 MiB of them
were in use (``mallinfo2``), RSS 115 → 182 MiB.  Fixed at 128 KiB: 30 → 35 MiB in 4 minutes, RSS 105 → 115;
in the 60-minute soak glibc's heaps stayed at 38-50 MiB.  The price is fresh pages for each large block: a
search right after a write over a full scope (16 MiB cached, its 8 MiB joined text rebuilt) took a median of
45.5-47.8 ms in process instead of 40.7-43.8 (40 searches, three alternating runs each)."""


def fix_mmap_threshold(environ: Mapping[str, str] = os.environ) -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD_BYTES` for this process (``mallopt``), which also
    stops glibc moving it; True when set, False where the C library is not glibc or refused, or where the
    operator chose a threshold (``MALLOC_MMAP_THRESHOLD_``, or ``glibc.malloc.mmap_threshold`` in
    ``GLIBC_TUNABLES``): theirs stands.  Raises nothing."""
    if "MALLOC_MMAP_THRESHOLD_" in environ or "glibc.malloc.mmap_threshold" in environ.get("GLIBC_TUNABLES", ""):
        return False
    mallopt = glibc_function("mallopt", [ctypes.c_int, ctypes.c_int])
    return mallopt is not None and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter number for the mmap threshold (``malloc.h``; a name, not a limit)."""


def resident_bytes() -> int:
    """This process's resident set in bytes (``/proc/self/statm``), 0 where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


QUIET_POLL_SECONDS = 0.02
"""How often a due trim looks for a moment with no call running (s).  A trim holds each arena's lock while it
walks it, so a call allocating meanwhile waits for it: one cold search in the bench's 72 (section a, on a fresh
clone) took 326 ms and came back incomplete when a trim ran beside it."""


async def quiet_moment(calls_running: Callable[[], int], give_up: float) -> bool:
    """Wait until ``calls_running()`` is 0, polling every :data:`QUIET_POLL_SECONDS`, or the Trio time
    ``give_up``; True when the moment is quiet."""
    while calls_running():
        if trio.current_time() >= give_up:
            return False
        await trio.sleep(QUIET_POLL_SECONDS)
    return True


async def return_freed_memory(last_call_ended: Callable[[], float], period: float = TRIM_SECONDS,
                              calls_running: Callable[[], int] = lambda: 0) -> None:
    """Every ``period`` seconds, when ``last_call_ended()`` (the Trio time the last data call ended) moved since
    the last trim, run ``malloc_trim(0)`` in a worker thread and log at debug level what it returned.  A due trim
    first waits, polling every :data:`QUIET_POLL_SECONDS`, for a moment when ``calls_running()`` is 0 (at most
    one more ``period``: under a load that never pauses it trims anyway, memory must stay bounded).  Returns at
    once where :func:`malloc_trim` is None; runs until cancelled (the Hub's shutdown).  First fixes the mmap
    threshold (:func:`fix_mmap_threshold`)."""
    log.debug("mmap threshold %s", f"fixed at {MMAP_THRESHOLD_BYTES} bytes" if fix_mmap_threshold() else "left as is")
    trim = malloc_trim()
    if trim is None:
        return
    trimmed_at = -math.inf
    while True:
        await trio.sleep(period)
        ended = last_call_ended()
        if ended <= trimmed_at:
            continue
        await quiet_moment(calls_running, trio.current_time() + period)
        trimmed_at = ended
        before = resident_bytes()
        started = time.perf_counter()
        await trio.to_thread.run_sync(trim, abandon_on_cancel=True)
        log.debug("malloc_trim: RSS %.1f -> %.1f MiB in %.1f ms", before / 2**20, resident_bytes() / 2**20,
                  (time.perf_counter() - started) * 1000)
