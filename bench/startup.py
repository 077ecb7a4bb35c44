"""f. Start-up: ``amux memory search`` end to end beside a bare interpreter, and what it imports.

Both are whole processes of the same interpreter, alternating in one loop so
machine load hits them alike: ``python -c pass`` and the installed ``amux
memory search`` against a real Hub on a small scope (one document).  The
difference is the CLI's own cost: imports, argument parsing, connect +
``hello``, the search and the JSON output.  A second check runs the command
in a process that then lists the heavy modules it imported: a data command
must import none of Trio, ``mcp``, ``jsonschema``, ``frontmatter`` or
``yaml`` (DESIGN.md §2).

In the same loop: ``amux mcp`` (the relay, DESIGN.md §9.2) from spawn to its
``initialize`` answer through the Hub, beside the bare interpreter's whole
run, and its peak resident memory (``VmHWM``) after a ``tools/list`` and a
tool call.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from bench.context import Ctx
from bench.util import HubProc, amux_argv, ms, summary

GOAL_MS = 80.0
"""Target for the ``amux memory search`` p50, whole process, on a 2-core VM."""

HEAVY = ("trio", "mcp", "jsonschema", "frontmatter", "yaml")
"""Top-level packages a data command must not import."""

RELAY_GOAL_MS = 60.0
"""Target: ``amux mcp`` spawn → ``initialize`` answer p50, at most this much over ``python -c pass``'s p50."""
RELAY_GOAL_KIB = 20 * 1024
"""Target: the relay's peak resident memory (``VmHWM``, KiB) after ``tools/list`` and one tool call."""

WORD = "startupbench"

_INITIALIZE = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
               '"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n')
_AFTER = ('{"jsonrpc":"2.0","method":"notifications/initialized"}\n{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n'
          '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory_search","arguments":'
          '{"query":"startupbench"}}}\n')

_IMPORTS = (
    "import sys\n"
    "from amux_memory.tools.cli.app import main\n"
    "code = main(['memory', 'search', {word!r}])\n"
    "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})\n"
    "sys.stderr.write('HEAVY=' + repr(heavy) + '\\n')\n"
    "sys.exit(code)\n"
)


def _time(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    elapsed = ms(time.perf_counter() - t0)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def _relay(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """One ``amux mcp``: (ms from spawn to the ``initialize`` answer, ``VmHWM`` in KiB after two more answers)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(_INITIALIZE.encode())
        proc.stdin.flush()
        first = proc.stdout.readline()
        elapsed = ms(time.perf_counter() - t0)
        proc.stdin.write(_AFTER.encode())
        proc.stdin.flush()
        answers = [proc.stdout.readline() for _ in range(2)]
        status = open(f"/proc/{proc.pid}/status").read()  # noqa: SIM115 - read at once
        hwm = int(next(ln for ln in status.splitlines() if ln.startswith("VmHWM:")).split()[1])
        if b'"id":1' not in first or not all(b'"result"' in a for a in answers) or b'"isError":true' in answers[1]:
            raise RuntimeError(f"amux mcp answered {first[:200]!r} {answers!r}")
    finally:
        proc.stdin.close()
        proc.wait(30)
    return elapsed, hwm


def run(ctx: Ctx, reps: int) -> dict[str, Any]:
    """Measure ``reps`` alternating runs of each process; record target f and return the figures (ms)."""
    hub = HubProc.create(ctx.tmp / "startup")
    with hub:
        client = hub.client()
        try:
            client.call("upsert", {"path": "notes/startup.md", "content": f"# Start-up\n{WORD} lives here\n".encode(),
                                   "expected_revision": "absent"})
        finally:
            client.close()
        search = [*amux_argv(), "memory", "search", WORD]
        bare = [sys.executable, "-c", "pass"]
        # As a user runs it: bytecode caches written by the first run (a CI setting may turn them off).
        env = {k: v for k, v in hub.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        _time(search, env)  # warm the page cache and the bytecode cache once, unmeasured
        relay = [*amux_argv(), "mcp"]
        _relay(relay, env)  # the Hub's first MCP session, unmeasured
        times: dict[str, list[float]] = {"python -c pass": [], "amux memory search": [],
                                         "amux mcp → initialize": []}
        peaks: list[int] = []
        for _ in range(reps):
            times["python -c pass"].append(_time(bare, env))
            times["amux memory search"].append(_time(search, env))
            to_init, hwm = _relay(relay, env)
            times["amux mcp → initialize"].append(to_init)
            peaks.append(hwm)
        probe = subprocess.run([sys.executable, "-c", _IMPORTS.format(word=WORD, heavy=HEAVY)], env=env,
                               capture_output=True, text=True, timeout=60)
    heavy_line = next((ln for ln in probe.stderr.splitlines() if ln.startswith("HEAVY=")), "HEAVY=?")
    heavy = heavy_line.partition("=")[2]
    if probe.returncode != 0 or heavy != "[]":
        ctx.problem(f"amux memory search imported heavy modules or failed ({probe.returncode}): {heavy} "
                    f"{probe.stderr[-1000:]}")
    stats = {label: summary(values) for label, values in times.items()}
    p50 = stats["amux memory search"]["p50"]
    base = stats["python -c pass"]["p50"]
    ctx.target(f"f. start-up: `amux memory search` end to end p50 ≤ {GOAL_MS:.0f} ms", p50 <= GOAL_MS,
               f"p50 {p50:.0f} ms (p95 {stats['amux memory search']['p95']:.0f} ms) beside `python -c pass` "
               f"{base:.0f} ms in the same run: the CLI's own cost {p50 - base:.0f} ms; heavy imports {heavy}",
               f"≤ {GOAL_MS:.0f} ms")
    relay_p50 = stats["amux mcp → initialize"]["p50"]
    ctx.target(f"f. `amux mcp` spawn → initialize p50 ≤ python -c pass + {RELAY_GOAL_MS:.0f} ms",
               relay_p50 - base <= RELAY_GOAL_MS,
               f"p50 {relay_p50:.0f} ms (p95 {stats['amux mcp → initialize']['p95']:.0f} ms) beside `python -c pass` "
               f"{base:.0f} ms: {relay_p50 - base:.0f} ms more", f"≤ +{RELAY_GOAL_MS:.0f} ms")
    ctx.target(f"f. `amux mcp` peak resident memory ≤ {RELAY_GOAL_KIB // 1024} MiB", max(peaks) <= RELAY_GOAL_KIB,
               f"VmHWM max {max(peaks) / 1024:.1f} MiB, median {sorted(peaks)[len(peaks) // 2] / 1024:.1f} MiB "
               "(after initialize, tools/list and a search)", f"≤ {RELAY_GOAL_KIB // 1024} MiB")
    heavy_list = json.loads(heavy.replace("'", '"')) if heavy != "?" else None
    return {"reps": reps, "stats": stats, "heavy_imports": heavy_list, "relay_vmhwm_kib": peaks}
