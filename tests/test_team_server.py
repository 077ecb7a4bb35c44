"""``docs/team-server.md`` run as written: every fenced block of the guide, in order, on a bare machine.

The guide cannot drift from what is tested: the blocks are read from the page itself, and every shell line is
either run or named in :data:`SIMULATED` (a line of the page the test does not know fails it).  Real processes
and real OS accounts: ``amux hub setup --team`` makes the Hub's account ``amux`` itself; ``ana``, ``ben`` and
``cy`` are made with ``useradd`` (the test refuses to run when any of the four, ``/var/lib/amux``, ``/run/amux``
or ``/var/backups/amux`` exists already, and removes them all afterwards).  What the test changes, and nothing
else:

- the installation (the guide's first block) is a venv of the system Python every account can run, whose
  ``amux`` imports this checkout (the venv's packages through a ``.pth``) instead of a ``pip install``;
- ``sudo`` is dropped (the test runs as root) and ``sudo -u NAME`` is ``runuser -u NAME`` with that account's
  ``HOME``, as sudo sets it;
- ``setup`` gets ``--no-service`` (systemd does not run here: the test starts the Hub through setup's own
  ``--no-service`` step; its unit is checked by ``tests/test_team_setup.py``);
- the Hub and every command run in a network namespace of their own (``ip netns``) whose ``/etc/hosts`` names
  ``hub.example.lan`` 127.0.0.1, so the guide's ports, name and ``0.0.0.0`` listeners are used as written;
- a block of section 5 runs line by line as the person its ``# Name:`` comments name; the login line runs once
  per person with the line ``invite`` printed for them; the script examples run as Ana with the variables
  ``amux hub connect env`` printed for her.

The commands' own time (the simulated install aside) is measured and must stay under two minutes.
Skips with a message when not root or a tool is missing, except under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from amux_memory.hub.mcp.snapshot import HANDSHAKE_VERSIONS
from tests.conftest import REPO
from tests.helpers import skip_or_fail
from tests.other_users import readable_python

pytestmark = pytest.mark.slow

GUIDE = REPO / "docs" / "team-server.md"
SIMULATED = {
    "sudo python3 -m venv /opt/amux": "a venv of the system Python made by the test",
    "sudo /opt/amux/bin/pip install /path/to/amux-memory": "its amux imports this checkout",
    "sudo ln -sf /opt/amux/bin/amux /usr/local/bin/amux": "its bin folder is first on every account's PATH",
}
"""Lines of the guide the test does not run, and what stands for them."""
ACCOUNTS = ("amux", "ana", "ben", "cy")
PEOPLE = {"Ana": "ana", "Ben": "ben", "Cy": "cy"}
PLACES = (Path("/var/lib/amux"), Path("/run/amux"), Path("/var/backups/amux"))
BUDGET_SECONDS = 120.0
"""The goal for the commands' own time, from a bare machine to three teammates searching the team's memory."""


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced code block of a Markdown page: ``(language, body)`` in order."""
    return [(m[1], m[2]) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)]


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def shared_install(folder: Path) -> Path:
    """``folder/opt/amux``: a venv of the system Python (readable by every account) whose ``amux`` runs this
    checkout; returns its ``bin``."""
    python = readable_python()
    if python is None:
        skip_or_fail("no system Python of this version every account can run", "install python3 (CI=true)")
    venv = folder / "opt" / "amux"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = next(Path(sys.prefix).glob("lib/python3.*/site-packages"))
    own = next(venv.glob("lib/python3.*/site-packages"))
    (own / "amux-checkout.pth").write_text(f"import site; site.addsitedir({str(site)!r})\n")
    script = venv / "bin" / "amux"
    script.write_text(f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom amux_memory.tools.cli.app import main\n"
                      "sys.exit(main())\n")
    script.chmod(0o755)
    for p in [folder, *folder.joinpath("opt").glob("**/")]:
        p.chmod(p.stat().st_mode | 0o055)
    return venv / "bin"


@pytest.fixture
def machine(shared_dir: Path) -> Iterator[tuple[str, Path]]:
    """A bare machine for the guide: a network namespace (``hub.example.lan`` is its 127.0.0.1), the accounts
    ana, ben and cy, and the shared installation's ``bin``; everything the guide made is removed afterwards."""
    if os.geteuid() != 0:
        skip_or_fail("not root: the guide makes accounts", "not root (CI=true: CI runs as root)")
    for tool in ("ip", "curl", "useradd", "userdel", "runuser"):
        if shutil.which(tool) is None:
            skip_or_fail(f"{tool} is not installed", f"{tool} is missing (CI=true: .ci/run installs it)")
    taken = [a for a in ACCOUNTS if _exists(a)] + [str(p) for p in PLACES if p.exists()]
    if taken:
        skip_or_fail(f"{', '.join(taken)} exist already: the guide makes them", f"{', '.join(taken)} exist (CI=true)")
    name = f"amuxts{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=30)
    if made.returncode != 0:
        skip_or_fail(f"ip netns add failed: {made.stderr.strip()}", f"ip netns add failed: {made.stderr.strip()}")
    hosts = Path("/etc/netns") / name
    bin_dir = shared_install(shared_dir)
    try:
        hosts.mkdir(parents=True)
        (hosts / "hosts").write_text("127.0.0.1 localhost hub.example.lan\n::1 localhost\n")
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True, timeout=30)
        for person in PEOPLE.values():
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", person], check=True, timeout=30)
        yield name, bin_dir
    finally:
        for home in ("/var/lib/amux/restored", "/var/lib/amux/.amux"):
            if _exists("amux") and Path(home).exists():
                subprocess.run(["ip", "netns", "exec", name, "runuser", "-u", "amux", "--", str(bin_dir / "amux"),
                                "hub", "stop", "--home", home], capture_output=True, timeout=60)
        for account in ACCOUNTS:
            if _exists(account):
                subprocess.run(["userdel", "--remove", account], capture_output=True, timeout=30)
        subprocess.run(["groupdel", "amux"], capture_output=True, timeout=30)
        for place in PLACES:
            shutil.rmtree(place, ignore_errors=True)
        shutil.rmtree(hosts, ignore_errors=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def test_the_team_server_guide_runs_as_written(machine: tuple[str, Path], shared_dir: Path, tmp_path: Path) -> None:
    netns, bin_dir = machine
    text = GUIDE.read_text(encoding="utf-8")
    blocks = fenced_blocks(text)
    assert [lang for lang, _ in blocks] == ["sh", "sh", "sh", "sh", "sh", "python", "bash", "sh", "sh", "sh"], blocks
    assert f"`{HANDSHAKE_VERSIONS[0]}` to `{HANDSHAKE_VERSIONS[-1]}`" in text
    path = f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    root_home = tmp_path / "root"
    root_home.mkdir()
    timings: list[tuple[str, float]] = []

    def run(line: str, account: str = "root", extra: dict[str, str] | None = None) -> str:
        """``line`` through bash in the namespace, as ``account`` (root, or with runuser and its HOME)."""
        home = str(root_home) if account == "root" else pwd.getpwnam(account).pw_dir
        env = {"HOME": home, "USER": account, "PATH": path, "LANG": "C.UTF-8", **(extra or {})}
        user = [] if account == "root" else ["runuser", "-u", account, "--"]
        argv = ["ip", "netns", "exec", netns, *user, "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                "bash", "-c", line]
        started = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd="/")
        timings.append((f"{account}: {line[:70]}", time.monotonic() - started))
        assert done.returncode == 0, f"{account}: {line}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def as_written(line: str) -> tuple[str, str]:
        """``(account, line)`` as the test runs a root or ``sudo -u`` line (the module docstring's substitutions)."""
        account = "root"
        if line.startswith("sudo -u amux "):
            account, line = "amux", line.removeprefix("sudo -u amux ")
        elif line.startswith("sudo amux hub setup "):
            line = line.removeprefix("sudo ") + " --no-service"
        elif line.startswith("for "):  # a loop of 'sudo -u amux' commands
            line = line.replace("sudo -u amux ", "runuser -u amux -- env HOME=/var/lib/amux ")
        else:
            assert line.startswith("sudo "), f"a line the test does not know: {line}"
            line = line.removeprefix("sudo ")
        assert "sudo " not in line, line
        return account, line

    # 1. Install (simulated), 2. setup, dry run first
    assert all(line in SIMULATED for line in blocks[0][1].splitlines())
    outputs: dict[str, str] = {}
    for line in blocks[1][1].splitlines():
        account, ran = as_written(line)
        if line.startswith("sudo -u amux amux doctor"):
            doctor = json.loads(run(ran + " --json || true", account))  # a warning or a missing agent is not ours
            outputs[line] = json.dumps(doctor)
            continue
        outputs[line] = run(ran, account)
        if "--dry-run" in line:
            plan = json.loads(outputs[line])
            assert plan["dry_run"] and not _exists("amux") and not any(p.exists() for p in PLACES), plan
    setup = json.loads(outputs["sudo amux hub setup --team --name hub.example.lan"])
    assert [s["state"] for s in setup["steps"]] == ["changed"] * 7, setup
    assert setup["account"] == "amux" and setup["group"] == "amux", setup
    checks = {c["name"]: c for c in doctor["checks"]}
    for name in ("team_isolation", "team_socket", "team_listen", "team_metrics"):
        assert checks[name]["status"] == "ok", checks[name]
    sock = Path("/run/amux/hub.sock")
    assert sock.is_socket() and sock.stat().st_mode & 0o777 == 0o660 and sock.parent.stat().st_mode & 0o777 == 0o750
    assert pwd.getpwuid(sock.parent.stat().st_uid).pw_name == "amux"

    # Run twice: nothing changes (the files, their times, the Hub's pid).
    def state() -> dict[str, tuple[int, int]]:
        home = Path("/var/lib/amux/.amux")
        return {str(p): (p.stat().st_mtime_ns, p.stat().st_mode) for p in [home, *home.glob("*"), *home.glob("tls/*"),
                                                                           *PLACES]}

    before = state()
    again = json.loads(run("amux hub setup --team --name hub.example.lan --no-service --json"))
    assert not again["changed"] and {s["state"] for s in again["steps"]} == {"done"}, again
    assert state() == before

    # 3. A team and the invitations, as the Hub's account
    invitations = {}
    for line in blocks[2][1].splitlines():
        account, ran = as_written(line)
        out = run(ran + " --json", account)
        if " invite " in line:
            doc = json.loads(out)
            invitations[doc["principal"]] = doc["command"]
    assert sorted(invitations) == ["ana", "ben", "cy"]

    # 4. Each person logs in with their own line
    login_line = blocks[3][1].strip()
    assert login_line.startswith("amux login amux-invite:hub.example.lan:7777:")
    for person in PEOPLE.values():
        doc = json.loads(run(invitations[person], person))
        assert doc["principal"] == person and [t["team"] for t in doc["teams"]] == ["web"], doc
        assert (Path(pwd.getpwnam(person).pw_dir) / ".amux" / "hub-token").stat().st_mode & 0o777 == 0o600

    # 5. Working together, each line as the person its comment names
    who = ""
    found: dict[str, list[str]] = {}
    for line in blocks[4][1].splitlines():
        if line.startswith("# "):
            who = PEOPLE[line[2:].split(":")[0]]
            continue
        out = run(line, who)
        if line.startswith("amux memory search"):
            found[who] = [m["path"] for m in json.loads(out)["matches"]]
    assert found == {p: ["@web/deploy.md"] for p in ("ana", "ben", "cy")}, found

    # 6. The script examples, as Ana, with what 'amux hub connect env' printed for her
    exports = json.loads(run("amux hub connect env --json", "ana"))["env"]
    assert "export AMUX_URL=https://hub.example.lan:8765/mcp" in exports, exports
    (shared_dir / "example.py").write_text(blocks[5][1])
    (shared_dir / "example.sh").write_text(blocks[6][1])
    for f in ("example.py", "example.sh"):
        (shared_dir / f).chmod(0o644)
    prefix = "; ".join(exports) + "; "
    printed = run(prefix + f"python {shared_dir / 'example.py'}", "ana")
    assert "@web/deploy.md" in printed, printed
    assert f'"protocolVersion":"{HANDSHAKE_VERSIONS[-1]}"' in blocks[6][1]
    printed = run(prefix + f"bash -e {shared_dir / 'example.sh'}", "ana")
    answer = json.loads(next(line.removeprefix("data: ") for line in printed.splitlines()
                             if line.startswith(("data: ", "{")) and '"id":2' in line))
    assert answer["result"]["isError"] is False and "@web/deploy.md" in answer["result"]["content"][0]["text"], answer

    # 7. Metrics, as written (loopback: plain HTTP, with TLS on)
    metrics, ready = (run(line) for line in blocks[7][1].splitlines())
    assert metrics.startswith("amux_requests_total{") and ready == "200\n", (metrics, ready)

    # 8. A backup, checked; restored beside the running Hub, which every listener of the copy would collide with
    for line in [*blocks[8][1].splitlines(), *blocks[9][1].splitlines()]:
        account, ran = as_written(line)
        out = run(ran, account)
        if "--verify" in line:
            assert json.loads(out)["ok"] is True, out
        if " hub start " in line:
            assert "Hub started" in out or '"started": true' in out, out

    total = sum(seconds for _, seconds in timings)
    report = "\n".join(f"{seconds:6.2f} s  {line}" for line, seconds in timings)
    print(f"\nthe guide's commands: {len(timings)}, {total:.1f} s in all\n{report}")
    assert total < BUDGET_SECONDS, report
