"""``amux hub setup --team`` (DESIGN.md §19.3): what it refuses before changing anything, and the units it writes.

The whole set-up, run twice (the second run changes nothing), through real accounts and processes, is
``tests/test_team_server.py``.  Here: a port another program holds stops it with the port, the option and
nothing made; a machine without systemd stops it with ``--no-service`` as the fix; the Hub's unit and the
daily backup's service and timer pass ``systemd-analyze verify``; ``amux hub service install`` gives a socket
folder under ``/run`` its ``RuntimeDirectory=``.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from amux_memory.tools.cli.team_setup import Plan, systemd_running, unit_texts
from tests.conftest import amux_argv
from tests.helpers import skip_or_fail


def _setup(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*amux_argv(), "hub", "setup", "--team", "--home", str(tmp_path / "home"), "--socket-dir",
                           str(tmp_path / "run"), "--backup-dir", str(tmp_path / "backups"), *args],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)})


def _nothing_made(tmp_path: Path, account: str) -> None:
    assert not any((tmp_path / p).exists() for p in ("home", "run", "backups")), list(tmp_path.iterdir())
    with pytest.raises(KeyError):
        pwd.getpwnam(account)


def test_a_taken_port_stops_it_before_any_change(tmp_path: Path) -> None:
    account = f"amuxport{os.getpid()}"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        owner = ["--account", account] if os.geteuid() == 0 else []
        done = _setup(tmp_path, "--no-service", "--listen", f"127.0.0.1:{port}", "--mcp-listen", "127.0.0.1:0",
                      "--metrics-listen", "127.0.0.1:0", *owner)
    assert done.returncode == 2, done
    error = json.loads(done.stdout)["error"]
    assert f"port {port} (hub.listen 127.0.0.1:{port}) is taken by another program" in error["message"], error
    assert "nothing was changed" in error["message"] and "--listen HOST:PORT" in error["next_step"], error
    _nothing_made(tmp_path, account)


def test_no_systemd_stops_it_with_no_service_as_the_fix(tmp_path: Path) -> None:
    if systemd_running():
        pytest.skip("systemd runs here: setup would use it")
    account = f"amuxsd{os.getpid()}"
    done = _setup(tmp_path, *(["--account", account] if os.geteuid() == 0 else []))
    assert done.returncode == 2, done
    error = json.loads(done.stdout)["error"]
    assert "systemd is not running" in error["message"] and "--no-service" in error["next_step"], error
    _nothing_made(tmp_path, account)


def _verify(folder: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        skip_or_fail("systemd-analyze is not installed", "systemd-analyze is missing (CI=true: .ci/run installs it)")
    units = sorted(str(p) for p in folder.iterdir())
    proc = subprocess.run([tool, "verify", *units], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr


def test_the_units_setup_writes_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    plan = Plan(root=True, account="root", group="root", account_home=tmp_path, home=tmp_path / ".amux",
                socket_dir=Path("/run/amux"), backup_dir=Path("/var/backups/amux"), service=True,
                command=amux_argv())
    texts = unit_texts(plan)
    assert sorted(texts) == ["amux-daily-backup.service", "amux-daily-backup.timer", "amux-hub.service"], texts
    hub = texts["amux-hub.service"]
    for line in ("User=root", "Group=root", "RuntimeDirectory=amux", "RuntimeDirectoryMode=0750",
                 "RuntimeDirectoryPreserve=yes", f"--home {tmp_path / '.amux'}"):
        assert line in hub, hub
    backup = texts["amux-daily-backup.service"]
    assert "hub backup --home" in backup and "/var/backups/amux/amux-$$(date +%%F).tar.gz" in backup, backup
    assert "OnCalendar=daily" in texts["amux-daily-backup.timer"]
    units = tmp_path / "units"
    units.mkdir()
    for name, text in texts.items():
        (units / name).write_text(text)
    _verify(units)


def test_service_install_makes_the_run_folder_of_the_socket(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "HOME": str(tmp_path)}
    for key, value in (("hub.socket_path", "/run/amux-t/hub.sock"), ("hub.socket_mode", "0660"),
                       ("hub.socket_group", "root")):
        subprocess.run([*amux_argv(), "system", "config", "set", key, value, "--home", str(home)], check=True,
                       capture_output=True, timeout=60, env=env)
    unit = subprocess.run([*amux_argv(), "hub", "service", "install", "--print", "--manager", "systemd", "--home",
                           str(home)], capture_output=True, text=True, timeout=60, env=env, check=True).stdout
    assert "RuntimeDirectory=amux-t\n" in unit and "Group=root\n" in unit, unit
    user = subprocess.run([*amux_argv(), "hub", "service", "install", "--print", "--user", "--manager", "systemd",
                           "--home", str(home)], capture_output=True, text=True, timeout=60, env=env, check=True).stdout
    assert "RuntimeDirectory" not in user, user
    units = tmp_path / "units"
    units.mkdir()
    (units / "amux-hub-t.service").write_text(unit)
    _verify(units)
