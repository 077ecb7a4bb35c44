"""The Hub as a service, through the real CLI: hub start/stop/restart/status, the start-up and stop log lines,
restart_required, and the systemd unit and launchd property list (DESIGN.md §19)."""

from __future__ import annotations

import hashlib
import json
import os
import plistlib
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, ExitStatus
from tests.conftest import CliResult, amux_argv
from tests.helpers import ok, skip_or_fail


class Home:
    """A temporary user (HOME, XDG_CONFIG_HOME) and AMUX_HOME; ``amux(...)`` runs the real CLI there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "amux home"  # a space: every path must be quoted where it is passed on
        self.user = root / "user"
        self.user.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("AMUX_", "XDG_"))}
        self.env.update(HOME=str(self.user), AMUX_HOME=str(self.home), XDG_CONFIG_HOME=str(root / "xdg"))

    def amux(self, *args: str, timeout: float = 60) -> CliResult:
        proc = subprocess.run([*amux_argv(), *args], capture_output=True, env=self.env, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        return CliResult(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))

    def lock_pid(self) -> int | None:
        try:
            text = (self.home / "hub.lock").read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by init) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, IndexError):
        return True


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    h = Home(tmp_path)
    yield h
    # Whatever the test did, no background Hub outlives it.
    h.amux("hub", "stop", "--timeout", "20")
    pid = h.lock_pid()
    if pid is not None and _alive(pid):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_start_status_stop_restart(home: Home) -> None:
    ok(home.amux("system", "config", "set", "memory.enabled", "true"))
    not_running = home.amux("hub", "status")
    assert not_running.returncode == ExitStatus.HUB_NOT_RUNNING, (not_running.stdout, not_running.stderr)
    assert not_running.json == {"running": False, "home": str(home.home), "socket": str(home.home / "hub.sock"),
                                "start_command": f"amux hub start --home {shlex.quote(str(home.home))}"}
    assert not_running.stderr == ""  # a state, not an error

    started = ok(home.amux("hub", "start"))
    pid = started["pid"]
    assert started["started"] is True and started["home"] == str(home.home.resolve())
    assert started["log"] == str(home.home.resolve() / "hub.log")
    assert home.amux("memory", "search", "x").returncode == 0  # it answers as soon as start returned
    assert _alive(pid) and home.lock_pid() == pid

    again = ok(home.amux("hub", "start"))
    assert again["started"] is False and again["pid"] == pid  # already running: says so, exit 0

    status = ok(home.amux("hub", "status"))
    assert (status["running"], status["pid"], status["home"]) == (True, pid, str(home.home))
    assert status["memory_enabled"] is True and status["uptime_seconds"] >= 0 and status["started"].endswith("Z")
    assert status["hub_version"] and status["principal"] and status["scope"] == "global"  # hello's keys stay

    changed = home.amux("system", "config", "set", "memory.history", "false")
    assert ok(changed)["restart_required"] is True
    assert f"pid {pid}" in changed.stderr and "amux hub restart --home" in changed.stderr, changed.stderr

    restarted = ok(home.amux("hub", "restart"))
    new_pid = restarted["pid"]
    assert restarted["started"] is True and new_pid != pid and not _alive(pid)
    assert ok(home.amux("hub", "status"))["history"] is False  # the restart applied the setting

    stopped = ok(home.amux("hub", "stop"))
    assert stopped == {"stopped": True, "running": False, "home": str(home.home.resolve()), "pid": new_pid}
    assert not _alive(new_pid) and not (home.home / "hub.sock").exists()
    nothing = ok(home.amux("hub", "stop"))
    assert nothing["stopped"] is False  # idempotent: exit 0
    assert ok(home.amux("system", "config", "set", "memory.history", "true"))["restart_required"] is False

    log = (home.home / "hub.log").read_text()
    assert f"pid {pid}, home {home.home.resolve()})" in log, log  # the start-up line names the pid
    assert "Hub stopped (SIGTERM) after" in log and f"; pid {new_pid}" in log, log  # a stop says why
    assert log.count("Hub listening on") == 2


def test_start_that_fails_shows_the_log_tail_and_exits_21(home: Home) -> None:
    home.home.mkdir()
    (home.home / "config.toml").write_text('[memory]\nisolation = "sideways"\n')
    r = home.amux("hub", "start")
    assert r.returncode == ExitStatus.HUB_START_FAILED, (r.stdout, r.stderr)
    error = r.json["error"]
    assert error["data"]["exit_status"] == ExitStatus.HUB_START_FAILED
    assert "memory.isolation" in error["data"]["log_tail"] and "memory.isolation" in r.stderr, error
    assert '"error"' not in error["data"]["log_tail"], "the log holds the failure once, not its JSON too"
    assert (home.home / "hub.log").read_text().count("memory.isolation") == 1
    assert home.lock_pid() is None or not _alive(home.lock_pid() or 0)


def test_a_stale_pid_in_the_lock_file_is_not_a_running_hub(home: Home) -> None:
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        home.home.mkdir()
        (home.home / "hub.lock").write_text(f"{bystander.pid}\n")  # a killed Hub's leftover, pid reused
        assert ok(home.amux("hub", "stop"))["stopped"] is False
        assert home.amux("hub", "status").json["running"] is False
        assert bystander.poll() is None  # never signalled
        started = ok(home.amux("hub", "start"))
        assert started["started"] is True and started["pid"] != bystander.pid
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.slow
def test_status_of_a_remote_hub_has_no_local_fields(home: Home, tmp_path: Path) -> None:
    ok(home.amux("system", "config", "set", "memory.enabled", "true"))
    ok(home.amux("hub", "start"))
    home.env["AMUX_HUB"] = str(home.home / "hub.sock")
    home.env["AMUX_HOME"] = str(tmp_path / "elsewhere")
    status = ok(home.amux("hub", "status"))
    assert status["running"] is True and status["pid"] is None and status["home"] is None
    with_home = ok(home.amux("hub", "status", "--home", str(home.home)))
    assert with_home["pid"] == home.lock_pid()


def _verify_unit(path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        skip_or_fail("systemd-analyze is not installed; the unit was only read back",
                     "systemd-analyze is missing (CI=true: .ci/run installs systemd)")
    proc = subprocess.run([tool, "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr


def test_systemd_user_unit_install_verify_uninstall(home: Home) -> None:
    installed = ok(home.amux("hub", "service", "install", "--user", "--manager", "systemd"))
    unit = Path(installed["installed"])
    name = f"amux-hub-{hashlib.sha256(str(home.home.resolve()).encode()).hexdigest()[:8]}.service"
    assert unit == home.root / "xdg" / "systemd" / "user" / name and unit.is_file()
    assert f"systemctl --user enable --now {name}" in installed["enable"]
    text = unit.read_text()
    amux = amux_argv()[0]
    assert f'ExecStart={amux} hub serve --home "{home.home.resolve()}"' in text, text
    assert "Restart=on-failure" in text and "WantedBy=default.target" in text and "User=" not in text
    _verify_unit(unit)
    wants = unit.parent / "default.target.wants"
    wants.mkdir()
    (wants / name).symlink_to(unit)  # what 'systemctl --user enable' would make
    # Without --user, uninstall looks at the system-wide place and at this user's: it finds what --user wrote.
    removed = ok(home.amux("hub", "service", "uninstall", "--manager", "systemd"))
    assert sorted(removed["removed"]) == sorted([str(unit), str(wants / name)])
    assert not unit.exists() and not (wants / name).is_symlink()
    again = home.amux("hub", "service", "uninstall", "--manager", "systemd")
    assert again.returncode != 0 and again.json["error"]["code"] == "not_found", again.stderr
    assert str(unit) in again.json["error"]["message"] and "/etc/systemd/system/" in again.json["error"]["message"]
    assert "nothing was removed" in again.stderr


def test_system_unit_is_printed_not_installed(home: Home, tmp_path: Path) -> None:
    odd = tmp_path / "odd %h $HOME"
    odd.mkdir()
    r = home.amux("hub", "service", "install", "--manager", "systemd", "--print", "--home", str(odd))
    assert r.returncode == 0, r.stderr
    unit = tmp_path / "printed" / "amux-hub.service"
    unit.parent.mkdir()
    unit.write_bytes(r.stdout)
    text = r.stdout.decode()
    assert '--home "' + str(odd.resolve()).replace("%", "%%").replace("$", "$$") + '"' in text, text
    assert "WantedBy=multi-user.target" in text and "User=" in text
    _verify_unit(unit)


def test_launchd_plist_parses_back(home: Home) -> None:
    installed = ok(home.amux("hub", "service", "install", "--user", "--manager", "launchd"))
    path = Path(installed["installed"])
    tag = hashlib.sha256(str(home.home.resolve()).encode()).hexdigest()[:8]
    assert path == home.user / "Library" / "LaunchAgents" / f"io.amux-memory.hub.{tag}.plist"
    with open(path, "rb") as fh:
        job = plistlib.load(fh)
    assert job["ProgramArguments"] == [*amux_argv(), "hub", "serve", "--home", str(home.home.resolve())]
    assert job["KeepAlive"] == {"SuccessfulExit": False} and job["RunAtLoad"] is True and "UserName" not in job
    assert job["StandardErrorPath"] == str(home.home.resolve() / "hub.log")
    assert any("launchctl bootstrap" in line for line in installed["enable"])
    plutil = shutil.which("plutil")
    if plutil is not None:
        lint = subprocess.run([plutil, "-lint", str(path)], capture_output=True, text=True, timeout=60)
        assert lint.returncode == 0, lint.stdout + lint.stderr
    ok(home.amux("hub", "service", "uninstall", "--user", "--manager", "launchd"))
    assert not path.exists()


def test_human_status_in_a_terminal(home: Home) -> None:
    import pty

    ok(home.amux("system", "config", "set", "memory.enabled", "true"))
    pid = ok(home.amux("hub", "start"))["pid"]
    main, sub = pty.openpty()
    try:
        proc = subprocess.run([*amux_argv(), "hub", "status"], stdout=sub, stderr=subprocess.PIPE, env=home.env,
                              timeout=60, stdin=subprocess.DEVNULL)
        os.close(sub)
        sub = -1
        out = b""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        if sub >= 0:
            os.close(sub)
        os.close(main)
    text = out.decode()
    assert proc.returncode == 0, proc.stderr
    assert text.startswith(f"Hub running: pid {pid}, up "), text
    assert "memory   enabled" in text and "{" not in text, text
    piped = home.amux("hub", "status", "--json")
    assert json.loads(piped.stdout)["pid"] == pid


@pytest.mark.slow
def test_stop_of_a_hub_that_does_not_exit_is_busy(home: Home) -> None:
    pid = ok(home.amux("hub", "start"))["pid"]
    os.kill(pid, signal.SIGSTOP)  # a Hub that cannot act on SIGTERM
    try:
        r = home.amux("hub", "stop", "--timeout", "0.5")
        assert r.returncode == EXIT_CODES[ErrorCode.BUSY], (r.stdout, r.stderr)
        error = r.json["error"]
        assert error["data"]["pid"] == pid and f"kill -KILL {pid}" in error["message"], error
        assert home.lock_pid() == pid  # still the Hub serving the home
    finally:
        os.kill(pid, signal.SIGCONT)
    # The pending SIGTERM is handled once it runs again: a second stop finds it stopping or gone.
    assert ok(home.amux("hub", "stop"))["running"] is False
    assert home.amux("hub", "status").json["running"] is False


def test_uninstall_removes_only_a_unit_amux_wrote_and_homes_get_their_own(home: Home, tmp_path: Path) -> None:
    units = home.root / "xdg" / "systemd" / "user"
    units.mkdir(parents=True)
    mine = units / "amux-hub.service"
    mine.write_text("[Service]\nExecStart=/my/own\n")
    default = {**home.env, "AMUX_HOME": str(home.user / ".amux")}  # the default home: the plain unit name
    proc = subprocess.run([*amux_argv(), "hub", "service", "uninstall", "--user", "--manager", "systemd"],
                          capture_output=True, env=default, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and b'"bad_request"' in proc.stdout, proc.stderr
    assert b"not written by 'amux hub service install'" in proc.stdout
    assert mine.read_text() == "[Service]\nExecStart=/my/own\n", "a unit amux did not write stays"
    other = tmp_path / "second home"
    other.mkdir()
    first = Path(ok(home.amux("hub", "service", "install", "--user", "--manager", "systemd"))["installed"])
    second = Path(ok(home.amux("hub", "service", "install", "--user", "--manager", "systemd", "--home",
                               str(other)))["installed"])
    assert first != second and first.is_file() and second.is_file() and first.name != mine.name
    assert str(other.resolve()) in second.read_text() and str(home.home.resolve()) in first.read_text()
    ok(home.amux("hub", "service", "uninstall", "--user", "--manager", "systemd", "--home", str(other)))
    assert first.is_file() and not second.exists() and mine.is_file()


def test_restart_of_a_service_run_hub_names_the_service_manager(tmp_path: Path) -> None:
    from amux_memory.tools.lifecycle.manager import managed_restart

    home = tmp_path / "h"
    user_unit = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/amux-hub-1a2b3c4d.service\n"
    assert managed_restart({"INVOCATION_ID": "x"}, user_unit, home) == \
        "systemctl --user restart amux-hub-1a2b3c4d.service"
    system_unit = "0::/system.slice/amux-hub.service\n"
    assert managed_restart({"INVOCATION_ID": "x"}, system_unit, home) == "sudo systemctl restart amux-hub.service"
    terminal = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/gnome-terminal-server.service\n"
    assert managed_restart({"INVOCATION_ID": "x"}, terminal, home) is None, "only inherited from a terminal"
    assert managed_restart({}, system_unit, home) is None
    assert managed_restart({"XPC_SERVICE_NAME": "io.amux-memory.hub.1a2b3c4d"}, "", home) == \
        'launchctl kickstart -k gui/"$(id -u)"/io.amux-memory.hub.1a2b3c4d'
    assert managed_restart({"XPC_SERVICE_NAME": "com.apple.Terminal"}, "", home) is None
