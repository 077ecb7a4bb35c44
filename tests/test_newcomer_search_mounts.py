"""A newcomer's search across their own memory and team mounts, through the real CLI (DESIGN.md §5.4, §7.8).

A person in two teams searches in a terminal; one team holds more notes than a scope's file budget, so that
mount is cut short.  The JSON answer names it in ``parts``; the readable text, which tells the person to
"narrow --path-prefix", must name it too, or they cannot tell which of their mounts to narrow.
"""

from __future__ import annotations

import time
from pathlib import Path

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.identity import scope_for, team_scope
from tests.conftest import amux_argv, make_hub
from tests.helpers import issued, placed
from tests.terminal import run_in_terminal

CROWDED = 1030
"""Notes placed by hand in one team: past the 1,024 files a scope's search reads (``scan_max_files``)."""


def test_a_terminal_search_cut_in_one_mount_names_that_mount(tmp_path: Path) -> None:
    h = make_hub(tmp_path, isolation="user", start=False)
    reg.modify(h.home, lambda r, now: r.add_principal("pat", "user", now))
    token = reg.modify(h.home, lambda r, now: issued(r, "pat", now))
    for team in ("big", "ops"):
        reg.modify(h.home, lambda r, now, t=team: r.add_team(t, "off", now))
        reg.modify(h.home, lambda r, now, t=team: r.add_member(t, "pat", "reader"))
    stamp = time.time() - 3600
    memory = h.home / "memory"
    placed(memory / scope_for("user", "pat").relpath, {"MEMORY.md": b"# Pat\n\nI deploy on Mondays.\n"}, stamp)
    placed(memory / team_scope("big").relpath,
           {f"notes/n{i:04d}.md": f"# Big {i}\n\nfiller\n".encode() for i in range(CROWDED)}, stamp)
    placed(memory / team_scope("ops").relpath, {"runbook.md": b"# Ops\n\nDeploy with ansible.\n"}, stamp)
    h.start()
    env = {k: v for k, v in h.env.items() if k not in ("NO_COLOR", "AMUX_OUTPUT", "FORCE_COLOR")}
    env.update({"TERM": "xterm-256color", "COLUMNS": "200", "AMUX_HUB": str(h.socket), "AMUX_TOKEN": token})

    found = h.cli("memory", "search", "zebrafish", "--json", env={"AMUX_HUB": str(h.socket), "AMUX_TOKEN": token})
    assert found.returncode == 0, found.stderr
    assert found.json["incomplete"] is True
    cut = {p["mount"] for p in found.json["parts"] if p["incomplete_reasons"]}
    assert "@big/" in cut, found.json["parts"]  # the data is there

    shown = run_in_terminal([*amux_argv(), "memory", "search", "zebrafish"], env=env)
    assert shown.returncode == 0, (shown.plain, shown.stderr)
    assert "incomplete" in shown.plain, shown.plain
    assert "@big/" in shown.plain, shown.plain  # which mount to narrow with --path-prefix
