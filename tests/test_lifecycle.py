"""tools/lifecycle as a library: unit names and labels recognised by the one definition, the service-manager
decision, a managed Hub left alone, a failed start as data, and the web page's restart without any ``amux`` CLI
process (DESIGN.md §19, §20.1)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.errors import ErrorCode, ExitStatus, HubError
from amux_memory.tools.client.running import serving_hub
from tests.conftest import HubProcess


def test_unit_names_and_labels_are_the_ones_the_detection_recognises(tmp_path: Path) -> None:
    from amux_memory.tools.lifecycle.manager import managed_restart
    from amux_memory.tools.lifecycle.units import is_amux_label, is_amux_unit, launchd_label, unit_name

    home = tmp_path / "h"
    assert unit_name(home).startswith("amux-hub-") and len(unit_name(home)) == len("amux-hub-12345678.service")
    assert is_amux_unit(unit_name(home)) and is_amux_unit("amux-hub.service")
    assert not is_amux_unit("amux-hub.socket") and not is_amux_unit("gnome-terminal-server.service")
    assert is_amux_label(launchd_label(home)) and not is_amux_label("com.apple.Terminal")
    cgroup = f"0::/user.slice/user-1000.slice/user@1000.service/app.slice/{unit_name(home)}\n"
    assert managed_restart({"INVOCATION_ID": "x"}, cgroup, home) == f"systemctl --user restart {unit_name(home)}"
    # cgroup v1: several hierarchies, one naming the unit
    v1 = f"12:pids:/system.slice/{unit_name(home)}\n1:name=systemd:/system.slice/{unit_name(home)}\n"
    assert managed_restart({"INVOCATION_ID": "x"}, v1, home) == f"sudo systemctl restart {unit_name(home)}"
    assert managed_restart({"XPC_SERVICE_NAME": launchd_label(home)}, "", home) == \
        f'launchctl kickstart -k gui/"$(id -u)"/{launchd_label(home)}'


def test_service_restart_command_of_a_process_no_service_runs_is_none(tmp_path: Path) -> None:
    import os

    from amux_memory.tools.lifecycle.manager import service_restart_command

    assert service_restart_command(2 ** 22 + 12345, tmp_path) is None  # no such pid: nothing to read
    env = dict(os.environ)
    env.pop("INVOCATION_ID", None)
    env.pop("XPC_SERVICE_NAME", None)
    child = subprocess.Popen(["sleep", "30"], env=env)
    try:
        assert service_restart_command(child.pid, tmp_path) is None
    finally:
        child.kill()
        child.wait()


def test_restart_of_a_managed_hub_stops_nothing(hub: HubProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    import amux_memory.tools.lifecycle.control as control

    before = serving_hub(hub.home)
    assert before is not None
    monkeypatch.setattr(control, "service_restart_command", lambda pid, home: "systemctl --user restart x.service")
    with pytest.raises(HubError) as caught:
        control.restart_hub(hub.home.resolve())
    assert caught.value.code is ErrorCode.BAD_REQUEST and caught.value.data["command"] == \
        "systemctl --user restart x.service" and f"pid {before.pid}" in caught.value.message
    assert getattr(serving_hub(hub.home), "pid", None) == before.pid and hub.proc is not None \
        and hub.proc.poll() is None


def test_a_start_that_fails_is_data(tmp_path: Path) -> None:
    from amux_memory.protocol.errors import HubStartError
    from amux_memory.tools.lifecycle.control import start_hub

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[memory]\nisolation = "sideways"\n')
    with pytest.raises(HubStartError) as caught:
        start_hub(home.resolve(), timeout=30)
    exc = caught.value
    assert exc.code is ErrorCode.UNAVAILABLE and exc.data["exit_status"] == ExitStatus.HUB_START_FAILED
    assert "memory.isolation" in exc.data["log_tail"] and exc.data["log"] == str(home.resolve() / "hub.log")
    assert serving_hub(home) is None


def test_ui_restart_runs_no_amux_cli(hub: HubProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's restart spawns exactly one process, the new ``amux hub serve``: no ``amux hub restart``."""
    from amux_memory.tools.lifecycle.control import stop_hub
    from amux_memory.tools.ui.restart import restart_hub

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user unit for this home
    spawned: list[subprocess.Popen[Any]] = []
    real_popen = subprocess.Popen

    class Recording(real_popen):  # type: ignore[misc,valid-type]
        def __init__(self, args: Any, *rest: Any, **kw: Any) -> None:
            super().__init__(args, *rest, **kw)
            spawned.append(self)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    before = serving_hub(hub.home)
    assert before is not None
    try:
        sentence = restart_hub(hub.home)
    finally:
        monkeypatch.setattr(subprocess, "Popen", real_popen)
    try:
        after = serving_hub(hub.home)
        assert after is not None and after.pid != before.pid
        assert hub.proc is not None and hub.proc.wait(15) == 0  # the old Hub stopped cleanly
        argvs = [list(map(str, p.args)) for p in spawned]
        assert [argv[-4:] for argv in argvs] == [["hub", "serve", "--home", str(hub.home.resolve())]], argvs
        assert not any("restart" in argv for argv in argvs), argvs
        assert spawned[0].pid == after.pid and f"pid {after.pid}" in sentence
    finally:
        stop_hub(hub.home.resolve())
        for proc in spawned:
            proc.wait(15)
