"""``amux hub setup --team``: one idempotent command that makes a Hub ready for a team (DESIGN.md §19.3).

Run as root (or as the account that will run the Hub).  Everything is decided first (:func:`make_plan`: what is
there, what is missing, every refusal: a port another program holds, no systemd, an account that is not ours),
then done step by step, each step saying what it did or why nothing was needed; ``--dry-run`` stops after the
plan.  A step that fails undoes what this run did (in reverse), so nothing is left half-done.  The steps:

1. the Hub's account and group (``groupadd --system``, then ``useradd --system --gid``: the group first, so a
   group of that name from before is used, never collided with), home ``/var/lib/NAME``;
2. its home (``~NAME/.amux``, ``0700``), the settings (``memory.enabled``, ``memory.isolation user``, the three
   listeners, the socket in a folder the group may pass) and TLS (``tls init`` with the machine's names and IP
   addresses), files owned by the account;
3. the socket's folder (``/run/amux``: the account's, its group's, ``0750``) and the backups' (``0700``);
4. the Hub's systemd unit (``RuntimeDirectory=`` for a folder under ``/run``) and a daily backup timer, enabled
   and started; with ``--no-service`` none, and the Hub started as the account.

:func:`team_checks` is ``amux doctor``'s look at what setup made.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import pwd
import shutil
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from cyclopts import Parameter

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.output.contract import fail
from amux_memory.tools.cli.output.plain import Json, show
from amux_memory.tools.client.inert import inert

DEFAULTS = {"hub.listen": "0.0.0.0:7777", "hub.mcp_listen": "0.0.0.0:8765", "hub.metrics_listen": "127.0.0.1:9464"}
"""The listeners setup asks for when the home sets none: the CLI's and Pi's TLS, MCP's, the metrics' (loopback)."""
LISTENERS = {"hub.listen": "--listen", "hub.mcp_listen": "--mcp-listen", "hub.metrics_listen": "--metrics-listen"}
"""Each listener setting and the option that chooses it."""
UNIT_DIR = Path("/etc/systemd/system")
"""Where the system units go."""

Undo = Callable[[], object]
Status = Literal["ok", "warn", "fail", "skip"]


@dataclass
class Step:
    """One step of the plan: ``name``; ``done`` says why nothing is needed (``None``: something is); ``todo`` what
    it will do; ``run`` does it, appending to the undo list, and returns what it did."""

    name: str
    done: str | None
    todo: str = ""
    run: Callable[[list[Undo]], str] | None = None


@dataclass
class Plan:
    """What setup found and decided before changing anything."""

    root: bool
    account: str
    group: str
    account_home: Path
    home: Path
    socket_dir: Path
    backup_dir: Path
    service: bool
    command: list[str]
    steps: list[Step] = field(default_factory=list)
    settings_changed: bool = False


def machine_addresses() -> list[str]:
    """This machine's IP addresses other machines may use: each interface's IPv4 address (``SIOCGIFADDR``) and
    global IPv6 address (``/proc/net/if_inet6``), loopback and link-local left out.  Linux; ``[]`` elsewhere."""
    import fcntl
    import ipaddress
    import struct

    found: list[str] = []
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue
            found.append(socket.inet_ntoa(packed[20:24]))
    except OSError:
        pass
    finally:
        probe.close()
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as f:
            found += [str(ipaddress.IPv6Address(bytes.fromhex(line.split()[0]))) for line in f
                      if line.split()[3] == "00"]
    except (OSError, IndexError, ValueError):
        pass
    keep = []
    for text in found:
        address = ipaddress.ip_address(text)
        if not (address.is_loopback or address.is_link_local or address.is_unspecified):
            keep.append(text)
    return list(dict.fromkeys(keep))


def _refuse(message: str, fix: str, data: dict[str, Any] | None = None) -> HubError:
    return HubError(ErrorCode.BAD_REQUEST, f"{message}; nothing was changed", data or {}, next_step=fix)


def _port_taken(value: str) -> bool:
    """Whether another program listens on ``HOST:PORT`` (a bind with ``SO_REUSEADDR`` fails with ``EADDRINUSE``)."""
    from amux_memory.protocol.settings import parse_listen

    host, port = parse_listen(value)
    if port == 0:
        return False
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def systemd_running() -> bool:
    """Whether systemd is this machine's service manager (``sd_booted``: ``/run/systemd/system`` exists)."""
    return Path("/run/systemd/system").is_dir()


def _systemctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["systemctl", *args], capture_output=True, text=True, timeout=120, check=False)


def _must(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode != 0:
        raise HubError(ErrorCode.UNAVAILABLE, f"{what} failed ({' '.join(map(str, done.args))}: "
                       f"{(done.stderr or done.stdout).strip()})", {"exit_status": done.returncode},
                       next_step="Fix what the message says, then run 'amux hub setup --team' again: it picks up "
                       "where it stopped.")


def _ids(plan: Plan) -> tuple[int, int]:
    return pwd.getpwnam(plan.account).pw_uid, grp.getgrnam(plan.group).gr_gid


def _chown(plan: Plan, *paths: Path) -> None:
    """Give ``paths`` to the Hub's account (when setup runs as root; as the account they are its already)."""
    if plan.root:
        uid, gid = _ids(plan)
        for path in paths:
            os.chown(path, uid, gid)


def _as_account(plan: Plan, *args: str) -> subprocess.CompletedProcess[str]:
    """``amux ARGS`` run as the Hub's account (root: with its uid, gid, groups and ``HOME``)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": os.environ.get("LANG", "C.UTF-8"),
           "HOME": str(plan.account_home), "USER": plan.account, "LOGNAME": plan.account}
    extra: dict[str, Any] = {}
    if plan.root:
        uid, gid = _ids(plan)
        extra = {"user": uid, "group": gid, "extra_groups": os.getgrouplist(plan.account, gid)}
    return subprocess.run([*plan.command, *args], capture_output=True, text=True, timeout=120, check=False,
                          env=env, cwd="/", **extra)


def _account_steps(plan: Plan, make_group: bool, make_user: bool) -> Step:
    who = f"{plan.account} (group {plan.group}, home {plan.account_home})"
    if not make_user:
        return Step("account", f"{who} exists")

    def run(undo: list[Undo]) -> str:
        made = []
        if make_group:
            _must(subprocess.run(["groupadd", "--system", plan.group], capture_output=True, text=True, timeout=60,
                                 check=False), f"making the group {plan.group}")
            undo.append(lambda: subprocess.run(["groupdel", plan.group], capture_output=True, check=False))
            made.append(f"group {plan.group}")
        home_existed = plan.account_home.exists()
        _must(subprocess.run(["useradd", "--system", "--gid", plan.group, "--home-dir", str(plan.account_home),
                              "--create-home", "--shell", "/usr/sbin/nologin", "--comment", "amux-memory Hub",
                              plan.account], capture_output=True, text=True, timeout=60, check=False),
              f"making the account {plan.account}")
        undo.append(lambda: subprocess.run(["userdel", *([] if home_existed else ["--remove"]), plan.account],
                                           capture_output=True, check=False))
        uid = pwd.getpwnam(plan.account).pw_uid
        group = " and ".join(made) or f"group {plan.group}"
        return f"created the account {plan.account} (uid {uid}, {group}, home {plan.account_home})"

    group_text = f"the group {plan.group} and " if make_group else f"(in the existing group {plan.group}) "
    return Step("account", None, f"create {group_text}the system account {plan.account}, home {plan.account_home}",
                run)


def _folder_step(plan: Plan, name: str, path: Path, mode: int, why: str) -> Step:
    """``path`` a folder of the Hub's account and group with ``mode``; root makes or fixes it."""
    try:
        st = path.stat()
        owner_ok = st.st_uid == pwd.getpwnam(plan.account).pw_uid and st.st_gid == grp.getgrnam(plan.group).gr_gid
        if owner_ok and st.st_mode & 0o7777 == mode:
            return Step(name, f"{path} is {plan.account}:{plan.group}, {mode:04o} ({why})")
        exists = True
    except (FileNotFoundError, KeyError):
        exists = False

    def run(undo: list[Undo]) -> str:
        if exists:
            st = path.stat()

            def give_back() -> None:
                os.chown(path, st.st_uid, st.st_gid)
                os.chmod(path, st.st_mode & 0o7777)

            undo.append(give_back)
        else:
            missing = [p for p in [path, *path.parents] if not p.exists()]
            path.mkdir(parents=True, mode=mode)

            def remove() -> None:
                for p in missing:
                    if p.is_dir():
                        p.rmdir()

            undo.append(remove)
        _chown(plan, path)
        os.chmod(path, mode)
        return f"{'gave' if exists else 'made'} {path} {plan.account}:{plan.group}, {mode:04o} ({why})"

    return Step(name, None, f"{'give' if exists else 'make'} {path} {plan.account}:{plan.group}, {mode:04o} ({why})",
                run)


def _home_step(plan: Plan) -> Step:
    if plan.home.is_dir():
        return Step("home", f"{plan.home} exists")

    def run(undo: list[Undo]) -> str:
        missing = [p for p in [plan.home, *plan.home.parents] if not p.exists()]
        plan.home.mkdir(parents=True, mode=0o700)
        undo.append(lambda: shutil.rmtree(missing[-1], ignore_errors=True))
        _chown(plan, plan.home)
        return f"made {plan.home} (0700, {plan.account}'s)"

    return Step("home", None, f"make {plan.home} (0700, {plan.account}'s)", run)


def _settings_step(plan: Plan, wanted: dict[str, str]) -> Step:
    from amux_memory.protocol.config_file import CONFIG_NAME
    from amux_memory.protocol.settings import get_value, parse_value

    changes: dict[str, str] = {}
    same: list[str] = []
    for key, text in wanted.items():
        try:
            now = get_value(plan.home, key) if plan.home.is_dir() else None
        except (HubError, OSError):
            now = None
        if now is not None and now == parse_value(key, text):
            same.append(key)
        else:
            changes[key] = text
    listing = ", ".join(f"{k} {v}" for k, v in wanted.items())
    if not changes:
        return Step("settings", f"already {listing}")
    plan.settings_changed = True

    def run(undo: list[Undo]) -> str:
        from amux_memory.hub.access.config import set_value

        config = plan.home / CONFIG_NAME
        before = config.read_bytes() if config.exists() else None

        def restore() -> None:
            if before is None:
                config.unlink(missing_ok=True)
            else:
                config.write_bytes(before)

        undo.append(restore)
        for key, text in changes.items():
            set_value(plan.home, key, text)
        _chown(plan, config)
        return "set " + ", ".join(f"{k} {v}" for k, v in changes.items()) + (
            f" (already: {', '.join(same)})" if same else "")

    return Step("settings", None, "set " + ", ".join(f"{k} {v}" for k, v in changes.items()), run)


def _tls_step(plan: Plan, names: list[str]) -> Step:
    from amux_memory.protocol.settings import get_value

    try:
        cert = str(get_value(plan.home, "hub.tls_cert")) if plan.home.is_dir() else ""
    except (HubError, OSError):
        cert = ""
    if cert and Path(cert).exists():
        from amux_memory.tools.cli.tls import certificate_problems

        missing = certificate_problems(cert, names)
        note = f"; {'; '.join(missing)}: 'amux hub tls init --force --name ...' makes a new one" if missing else ""
        return Step("tls", f"{cert} is set up{note}")

    def run(undo: list[Undo]) -> str:
        from amux_memory.hub.access.config import set_value
        from amux_memory.tools.cli.tls import make_certificates

        folder = plan.home / "tls"
        existed = folder.exists()
        undo.append(lambda: None if existed else shutil.rmtree(folder, ignore_errors=True))
        made = make_certificates(folder, names)
        set_value(plan.home, "hub.tls_cert", made["cert"])
        set_value(plan.home, "hub.tls_key", made["key"])
        set_value(plan.home, "hub.tls_ca", made["ca"])
        _chown(plan, folder, *(Path(made[k]) for k in ("ca", "ca_key", "cert", "key")), plan.home / "config.toml")
        return f"made a CA and a certificate for {', '.join(names)} in {folder} (valid until {made['expires']})"

    plan.settings_changed = True
    return Step("tls", None, f"make a CA and a certificate for {', '.join(names)} in {plan.home / 'tls'}", run)


def unit_texts(plan: Plan) -> dict[str, str]:
    """``{file name: text}`` of the Hub's unit and the backup service and timer setup writes in :data:`UNIT_DIR`."""
    from amux_memory.tools.lifecycle.units import backup_units, runtime_directory, systemd_unit, unit_name

    default = plan.account_home / ".amux"
    hub = systemd_unit(plan.command, plan.home, user=False, account=plan.account, group=plan.group,
                       runtime=runtime_directory(plan.socket_dir / "hub.sock"))
    return {unit_name(plan.home, default): hub,
            **backup_units(plan.command, plan.home, plan.backup_dir, plan.account, plan.group, default)}


def _service_step(plan: Plan, units: dict[str, str], hub_running: bool) -> Step:
    hub_unit = next(n for n in units if n.endswith(".service") and "backup" not in n)
    timer = next(n for n in units if n.endswith(".timer"))
    stale = {n: t for n, t in units.items() if _read(UNIT_DIR / n) != t}
    enabled = all(_systemctl("is-enabled", "--quiet", n).returncode == 0 for n in (hub_unit, timer))
    active = all(_systemctl("is-active", "--quiet", n).returncode == 0 for n in (hub_unit, timer))
    restart = plan.settings_changed or bool(stale)
    if not stale and enabled and active and not plan.settings_changed:
        return Step("service", f"{', '.join(units)} in {UNIT_DIR}, enabled and running")

    def run(undo: list[Undo]) -> str:
        did = []
        for name, text in stale.items():
            path = UNIT_DIR / name
            undo.append(_restorer(path, _read(path)))
            path.write_text(text)
            os.chmod(path, 0o644)
            did.append(f"wrote {path}")
        if stale:
            _must(_systemctl("daemon-reload"), "reloading systemd")
        _must(_systemctl("enable", "--now", hub_unit, timer), f"enabling {hub_unit} and {timer}")
        did.append(f"enabled and started {hub_unit} and {timer}")
        if restart and hub_running:
            _must(_systemctl("restart", hub_unit), f"restarting {hub_unit}")
            did.append(f"restarted {hub_unit} (new settings)")
        _wait_for_hub(plan)
        return "; ".join(did)

    todo = [f"write {UNIT_DIR / n}" for n in stale] + [f"enable and start {hub_unit} and {timer}"]
    if restart and hub_running:
        todo.append(f"restart {hub_unit} (new settings)")
    return Step("service", None, "; ".join(todo), run)


def _restorer(path: Path, before: str | None) -> Undo:
    """Put ``path`` back as it was: ``before``'s text, or no file."""

    def restore() -> None:
        if before is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(before)

    return restore


def _start_step(plan: Plan, hub_running: bool) -> Step:
    if hub_running and not plan.settings_changed:
        return Step("hub", f"the Hub runs for {plan.home} (as {plan.account}; --no-service: no unit, no timer)")
    verb = "restart" if hub_running else "start"

    def run(undo: list[Undo]) -> str:
        done = _as_account(plan, "hub", verb, "--home", str(plan.home), "--json")
        if done.returncode != 0:
            raise HubError(ErrorCode.UNAVAILABLE, f"the Hub did not {verb}: {done.stderr.strip()}",
                           next_step=f"Read {plan.home / 'hub.log'}, fix what it says, and run 'amux hub setup "
                           "--team' again.")
        if not hub_running:
            undo.append(lambda: _as_account(plan, "hub", "stop", "--home", str(plan.home)) and None)
        home = "" if plan.home == plan.account_home / ".amux" else f" --home {plan.home}"
        return f"{verb}ed the Hub as {plan.account} (--no-service: start it after a reboot with 'sudo -u " \
               f"{plan.account} amux hub start{home}')"

    return Step("hub", None, f"{verb} the Hub as {plan.account} ('amux hub {verb}'; --no-service)", run)


def _wait_for_hub(plan: Plan) -> None:
    import time

    from amux_memory.tools.client.running import serving_hub
    from amux_memory.tools.lifecycle.control import TIMEOUT_SECONDS

    deadline = time.monotonic() + TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if serving_hub(plan.home) is not None and (plan.socket_dir / "hub.sock").is_socket():
            return
        time.sleep(0.2)
    raise HubError(ErrorCode.UNAVAILABLE, f"the Hub did not answer within {TIMEOUT_SECONDS:.0f} s",
                   next_step="See 'journalctl -u amux-hub.service', fix it, then run 'amux hub setup --team' again.")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def make_plan(*, account: str | None, home: Path | None, names: list[str], listeners: dict[str, str | None],
              socket_dir: Path, backup_dir: Path, service: bool) -> Plan:
    """Look at the machine and decide every step; raises ``bad_request`` (nothing changed) for what setup cannot
    do, naming the fix."""
    from amux_memory.protocol.settings import get_value, parse_listen
    from amux_memory.tools.client.installation import amux_command
    from amux_memory.tools.client.running import serving_hub

    root = os.geteuid() == 0
    me = pwd.getpwuid(os.geteuid()).pw_name
    name = account or ("amux" if root else me)
    if not root and name != me:
        raise _refuse(f"only root may set up a Hub for the account {name}", f"Run 'sudo amux hub setup --team "
                      f"--account {name}', or run it as {name}.")
    try:
        entry: pwd.struct_passwd | None = pwd.getpwnam(name)
    except KeyError:
        entry = None
    make_user = entry is None
    account_home = Path(entry.pw_dir) if entry else Path("/var/lib") / name
    group = grp.getgrgid(entry.pw_gid).gr_name if entry else name
    make_group = entry is None and not _group_exists(group)
    if make_user:
        for tool in ("useradd", *(["groupadd"] if make_group else [])):
            if shutil.which(tool) is None:
                raise _refuse(f"there is no {name} account and no '{tool}' to make one",
                              "Make the account yourself, then pass --account NAME.")
    target = (home or account_home / ".amux").absolute()
    if target.exists() and entry is not None and target.stat().st_uid != entry.pw_uid:
        owner = pwd.getpwuid(target.stat().st_uid).pw_name if _uid_known(target.stat().st_uid) else target.stat().st_uid
        raise _refuse(f"{target} belongs to {owner}, not to {name}", f"Pass --home with a folder of {name}'s (or "
                      f"'sudo chown -R {name}: {target}' if it is meant to be its Hub).")
    if service and not systemd_running():
        raise _refuse("systemd is not running on this machine (no /run/systemd/system): the Hub's unit and the "
                      "backup timer need it", "Pass --no-service: setup then starts the Hub as "
                      f"{name} itself; after a reboot start it with 'sudo -u {name} amux hub start' and run "
                      "'amux hub backup' from cron.")
    if service and not root:
        raise _refuse(f"the Hub's unit goes to {UNIT_DIR}, which only root may write",
                      f"Run 'sudo amux hub setup --team --account {name}', or pass --no-service.")
    if not root:
        for folder in (socket_dir, backup_dir):
            parent = next(p for p in [folder, *folder.parents] if p.exists())
            if not (folder.exists() and folder.stat().st_uid == os.geteuid()) and not os.access(parent, os.W_OK):
                mode = "0750" if folder == socket_dir else "0700"
                raise _refuse(f"{name} may not make {folder}", f"As root, once: 'sudo install -d -o {name} -g "
                              f"{group} -m {mode} {folder}' (or run setup as root)")
    running = serving_hub(target) is not None if target.exists() else False
    wanted: dict[str, str] = {"memory.enabled": "true", "memory.isolation": "user"}
    for key, option in LISTENERS.items():
        given = listeners.get(key)
        current = ""
        if target.is_dir():
            try:
                current = str(get_value(target, key))
            except (HubError, OSError):
                current = ""
        value = given if given is not None else (current or DEFAULTS[key])
        try:
            parse_listen(value)
        except ValueError as exc:
            raise _refuse(f"{option} {value!r} is invalid: {exc}", f"Give {option} HOST:PORT.") from None
        held = running and current == value
        if not held and _port_taken(value):
            port = parse_listen(value)[1]
            raise _refuse(f"port {port} ({key} {value}) is taken by another program",
                          f"See which with 'ss -ltnp \"sport = :{port}\"' and stop it, or choose another port with "
                          f"{option} HOST:PORT.", {"field": key, "port": port})
        wanted[key] = value
    ports = [parse_listen(wanted[k])[1] for k in LISTENERS if parse_listen(wanted[k])[1]]
    if len(set(ports)) != len(ports):
        raise _refuse(f"two listeners on one port ({', '.join(f'{k} {wanted[k]}' for k in LISTENERS)})",
                      "Give each of --listen, --mcp-listen and --metrics-listen its own port.")
    wanted.update({"hub.socket_path": str(socket_dir / "hub.sock"), "hub.socket_mode": "0660",
                   "hub.socket_group": group})
    plan = Plan(root, name, group, account_home, target, socket_dir, backup_dir, service, amux_command())
    names = list(dict.fromkeys([*names, *_default_names()]))
    plan.steps = [_account_steps(plan, make_group, make_user), _home_step(plan)]
    if make_user:  # the group does not exist yet: the settings step checks the group name, so it waits for it
        plan.steps.append(_late(lambda: _settings_step(plan, wanted), "settings",
                                "set " + ", ".join(f"{k} {v}" for k, v in wanted.items())))
        plan.settings_changed = True
    else:
        plan.steps.append(_settings_step(plan, wanted))
    plan.steps.append(_tls_step(plan, names))
    if make_user:
        plan.steps += [_late(lambda: _folder_step(plan, "socket", socket_dir, 0o750, "the group reaches the socket"),
                             "socket", f"make {socket_dir} {name}:{group}, 0750 (the group reaches the socket)"),
                       _late(lambda: _folder_step(plan, "backups", backup_dir, 0o700, "the daily backups"),
                             "backups", f"make {backup_dir} {name}:{group}, 0700 (the daily backups)")]
    else:
        plan.steps += [_folder_step(plan, "socket", socket_dir, 0o750, "the group reaches the socket"),
                       _folder_step(plan, "backups", backup_dir, 0o700, "the daily backups")]
    if service:
        plan.steps.append(_late(lambda: _service_step(plan, unit_texts(plan), running), "service",
                                f"write and enable the Hub's unit and the daily backup timer in {UNIT_DIR}")
                          if make_user else _service_step(plan, unit_texts(plan), running))
    else:
        plan.steps.append(_start_step(plan, running))
    return plan


def _late(make: Callable[[], Step], name: str, todo: str) -> Step:
    """A step that can only be looked at once the account exists: planned as ``todo``, decided when it runs."""

    def run(undo: list[Undo]) -> str:
        step = make()
        return step.done or (step.run(undo) if step.run else "")

    return Step(name, None, todo, run)


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def _uid_known(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _default_names() -> list[str]:
    """The certificate's names after ``--name``: this machine's fully qualified and short names, its IP addresses,
    then ``localhost`` and the loopback addresses (:func:`tools.cli.tls.default_names`)."""
    from amux_memory.tools.cli.tls import default_names

    return [socket.getfqdn(), socket.gethostname(), *machine_addresses(), *default_names()]


def apply(plan: Plan) -> list[dict[str, str]]:
    """Run the plan's steps in order; a step that fails undoes every change this run made, then raises."""
    undo: list[Undo] = []
    report = []
    for step in plan.steps:
        if step.run is None:
            report.append({"step": step.name, "state": "done", "detail": step.done or ""})
            continue
        try:
            did = step.run(undo)
        except (HubError, OSError) as exc:
            for action in reversed(undo):
                with contextlib.suppress(OSError):
                    action()
            message = exc.message if isinstance(exc, HubError) else f"{exc.strerror or exc} ({exc.filename})"
            raise HubError(ErrorCode.UNAVAILABLE, f"step '{step.name}' failed: {message}; every change this run "
                           "made was undone", {"step": step.name},
                           next_step=exc.next_step if isinstance(exc, HubError) and exc.next_step else
                           "Fix what the message says, then run 'amux hub setup --team' again.") from None
        report.append({"step": step.name, "state": "changed", "detail": did})
    return report


def setup(*, team: bool = False, account: str | None = None,
          name: Annotated[list[str] | None, Parameter(negative="")] = None, listen: str | None = None,
          mcp_listen: str | None = None, metrics_listen: str | None = None,
          socket_dir: Path | None = None, backup_dir: Path | None = None,
          no_service: Annotated[bool, Parameter(negative="")] = False,
          dry_run: Annotated[bool, Parameter(negative="")] = False, home: Path | None = None,
          json: Json = False) -> int:
    """Make this machine's Hub ready for a team, in one idempotent command: run it as root (or as the Hub's account).

    The Hub's account and group (made when missing, as root), its home, a
    memory per person (memory.isolation user), TLS for the other machines
    (a private CA; the certificate names --name, this machine's names and IP
    addresses), the CLI's listener (hub.listen, 0.0.0.0:7777), MCP's
    (hub.mcp_listen, 0.0.0.0:8765), metrics on loopback (127.0.0.1:9464), a
    socket the account's group may use (/run/ACCOUNT/hub.sock, 0660), a
    systemd unit for the Hub and a daily backup timer, enabled and started.
    Each step says what it did or why nothing was needed; run again, it
    changes nothing. A step it cannot do (a port another program holds, no
    systemd) stops it before any change, naming the fix; a step that fails
    undoes what the run did. Exit status 0; 2 when refused.

    Parameters
    ----------
    team
        Set up a Hub for a team (the one set-up there is).
    account
        The account the Hub runs as (default: amux as root, else you).
    name
        A DNS name or IP address the other machines use (repeatable; the first is the one invitations carry).
    listen
        hub.listen (HOST:PORT), for the amux CLI and 'amux login' on other machines.
    mcp_listen
        hub.mcp_listen (HOST:PORT), for agents over MCP.
    metrics_listen
        hub.metrics_listen (HOST:PORT); a loopback address serves plain HTTP.
    socket_dir
        The socket's folder: the account's, its group may pass it (0750); default /run/ACCOUNT.
    backup_dir
        Where the daily backup writes amux-YYYY-MM-DD.tar.gz; default /var/backups/ACCOUNT.
    no_service
        Write no unit and no timer (a machine without systemd): setup starts the Hub as the account itself.
    dry_run
        Print the plan and change nothing.
    home
        The Hub's home (default: ~ACCOUNT/.amux).
    """
    try:
        if not team:
            raise HubError(ErrorCode.BAD_REQUEST, "say which set-up: --team (a Hub for a team on this machine)",
                           {"field": "team"}, next_step="Run 'amux hub setup --team --dry-run' to see what it does.")
        who = account or ("amux" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name)
        socket_dir = socket_dir or Path("/run") / who  # two Hubs of two accounts never share a folder
        backup_dir = backup_dir or Path("/var/backups") / who
        plan = make_plan(account=account, home=home, names=list(name or []),
                         listeners={"hub.listen": listen, "hub.mcp_listen": mcp_listen,
                                    "hub.metrics_listen": metrics_listen},
                         socket_dir=socket_dir.absolute(), backup_dir=backup_dir.absolute(), service=not no_service)
        if dry_run:
            steps = [{"step": s.name, "state": "done" if s.run is None else "planned", "detail": s.done or s.todo}
                     for s in plan.steps]
        else:
            steps = apply(plan)
    except HubError as exc:
        return fail(exc, as_json=json)
    changed = any(s["state"] != "done" for s in steps)
    after = _next(plan)
    doc = {"dry_run": dry_run, "changed": changed, "account": plan.account, "group": plan.group,
           "home": str(plan.home), "socket": str(plan.socket_dir / "hub.sock"), "steps": steps,
           "next": after}

    def lines() -> list[str]:
        mark = {"done": "ok     ", "changed": "done   ", "planned": "to do  "}
        head = (f"The plan for a team Hub run by {plan.account} (group {plan.group}), home {plan.home}; nothing "
                "was changed:" if dry_run else f"A team Hub run by {plan.account} (group {plan.group}), home "
                f"{plan.home}{'' if changed else ': nothing needed doing'}:")
        out = [head, *(f"  {mark[s['state']]}{s['step']:<9} {s['detail']}" for s in steps)]
        if not dry_run:
            out += ["Next:", *(f"  {line}" for line in after)]
        return [inert(line) for line in out]

    show(doc, lines, json_flag=json)
    return 0


def _next(plan: Plan) -> list[str]:
    run = f"sudo -u {plan.account} amux" if plan.root else "amux"
    home = "" if plan.home == plan.account_home / ".amux" else f" --home {plan.home}"
    return [f"people on this machine: 'sudo usermod -a -G {plan.group} NAME', then they log in again and use "
            f"AMUX_HUB={plan.socket_dir / 'hub.sock'}",
            f"a team and its people: '{run} hub team add TEAM{home}', then '{run} hub invite NAME --team TEAM "
            f"--role writer{home}' prints the line each person runs ('amux login ...')",
            f"check it: '{run} doctor{home}'"]


def team_checks(home: Path) -> list[tuple[str, Status, str, str]]:
    """``amux doctor``'s look at what ``setup --team`` made, for a home whose ``hub.socket_group`` is set:
    ``(name, status, summary, fix)`` for isolation, the socket's folder, the TLS listener, the metrics listener, the
    unit and the backup timer."""
    from amux_memory.protocol.config_file import read_config, socket_path
    from amux_memory.protocol.settings import get_value, parse_listen
    from amux_memory.tools.lifecycle.units import BACKUP_PREFIX, UNIT_PREFIX, runtime_directory

    try:
        group = str(get_value(home, "hub.socket_group"))
        if not group:
            return []
        isolation = str(get_value(home, "memory.isolation"))
        sock = socket_path(home, read_config(home))
        cli, metrics = str(get_value(home, "hub.listen")), str(get_value(home, "hub.metrics_listen"))
        tls = bool(get_value(home, "hub.tls_cert"))
    except (HubError, OSError):
        return []
    owner = pwd.getpwuid(os.geteuid()).pw_name
    systemd = Path("/run/systemd/system").is_dir()  # systemd runs this machine's services
    fix = f"sudo amux hub setup --team --account {owner} --socket-dir {sock.parent}" + ("" if systemd else
                                                                                         " --no-service")
    out: list[tuple[str, Status, str, str]] = [("team_isolation", "ok" if isolation == "user" else "fail",
            f"memory.isolation {isolation}" + ("" if isolation == "user" else ": everyone shares one memory"), fix)]
    folder = sock.parent
    try:
        st = folder.stat()
        mine = st.st_uid == os.geteuid()
        passable = st.st_mode & 0o050 == 0o050 and grp.getgrgid(st.st_gid).gr_name == group
        out.append(("team_socket", "ok" if mine and passable else "fail",
                    f"{folder}: {'the Hub account' if mine else 'not the Hub account'}'s, group "
                    f"{grp.getgrgid(st.st_gid).gr_name}, {st.st_mode & 0o7777:04o}", fix))
    except (OSError, KeyError) as exc:
        out.append(("team_socket", "fail", f"{folder}: {getattr(exc, 'strerror', None) or exc}", fix))
    out.append(("team_listen", "ok" if cli and tls else "fail",
                f"hub.listen {cli or 'off'} {'with TLS' if tls else 'without TLS'} (invitations need both)", fix))
    host = parse_listen(metrics)[0] if metrics else ""
    out.append(("team_metrics", "ok" if metrics else "warn",
                f"hub.metrics_listen {metrics or 'off'}" + (" (plain HTTP on loopback)" if metrics and host in (
                    "127.0.0.1", "::1", "localhost") else " (HTTPS)" if metrics else ""), fix))
    units = sorted(p.name for p in UNIT_DIR.glob(f"{UNIT_PREFIX}*.service")) if UNIT_DIR.is_dir() else []
    if not units and not systemd:
        out.append(("team_service", "warn", "no systemd on this machine: nothing starts the Hub after a reboot or "
                    "backs it up each day", f"after a reboot, '{fix}' again as root (it makes the socket's folder "
                    "and starts the Hub); back up from cron with 'amux hub backup'"))
    elif not units:
        out.append(("team_service", "warn", f"no Hub unit in {UNIT_DIR} (set up with --no-service?)", fix))
    else:
        texts = [_read(UNIT_DIR / u) or "" for u in units]
        ours = [t for t in texts if f"--home {home}" in t or f'--home "{home}"' in t]
        runtime = runtime_directory(sock)
        good = bool(ours) and (runtime is None or f"RuntimeDirectory={runtime}" in ours[0])
        out.append(("team_service", "ok" if good else "fail",
                    f"{UNIT_DIR}: {', '.join(units)}" + ("" if good else f" (none for {home} with RuntimeDirectory="
                                                                          f"{runtime})"), fix))
        timers = list(UNIT_DIR.glob(f"{BACKUP_PREFIX}*.timer"))
        out.append(("team_backup", "ok" if timers else "warn",
                    f"daily backup: {', '.join(p.name for p in timers) or 'no timer'}", fix))
    return out
