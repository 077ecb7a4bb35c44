"""``docs/team-server.md`` run as written: every fenced block of the guide, in order, on a fresh home.

The guide cannot drift from what is tested: the blocks are read from the page
itself, and every shell line is either run or named in :data:`SIMULATED` (a
line of the page the test does not know fails it).  What the test changes, and
nothing else (:func:`local`): ``/run/amux`` and ``/var/backups/amux`` become
folders under a fresh world-traversable directory, the group ``amux`` becomes
the existing group ``users`` (the test creates no group and adds no one to
one), and ``sudo`` is dropped (the test runs as root).  The Hub runs in a
network namespace of its own (``ip netns``), so the guide's ports (8765,
7777) and its ``0.0.0.0`` listeners are used as they are, with nothing else
on the machine to collide with; every command of the page runs in it, with
``HOME`` a fresh folder (the home is ``~/.amux``) and this installation's
``amux`` and ``python`` first on ``PATH``.

Checked along the way, through the real CLI, a real Hub and real clients:

- ``amux hub connect claude`` names the certificate's name
  (``https://hub.example.lan:8765/mcp``) and says to copy the CA;
- a second local account (an unnamed uid, ``users`` as its supplementary
  group, as ``usermod -a -G`` gives it) reaches the group socket: it writes a
  note and finds it with ``amux memory search``; an account outside the group
  is refused and writes nothing;
- the Python (``mcp`` SDK) and curl examples, run exactly as written with
  ``AMUX_URL``/``AMUX_TOKEN``/``AMUX_HUB_CA`` set (the URL's host is
  ``localhost``, which the certificate also names, as ``hub.example.lan``
  does not resolve here), call ``memory_search`` over TLS and find that note;
  the curl example's protocol version is the newest the Hub's handshake speaks;
- the backup line writes an archive that ``amux hub backup --verify`` accepts.

Skips with a message when not root or ``ip netns``/``curl`` is missing, except under ``CI=true``.
"""

from __future__ import annotations

import grp
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from amux_memory.hub.mcp.snapshot import HANDSHAKE_VERSIONS
from tests.conftest import REPO, amux_argv
from tests.helpers import skip_or_fail
from tests.other_users import ALICE, BOB, run_as, shared_input

pytestmark = pytest.mark.slow

GUIDE = REPO / "docs" / "team-server.md"
SIMULATED = {
    "sudo groupadd amux": "the group is the existing 'users'",
    "sudo usermod -a -G amux alice": "the second account runs with 'users' as a supplementary group (run_as)",
}
"""Lines of the guide the test does not run, and what stands for them."""
NOTE = "ops/deploy.md"
NOTE_TEXT = "Deploy: run the Ansible playbook from the bastion, never from a laptop.\n"


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced code block of a Markdown page: ``(language, body)`` in order."""
    return [(m[1], m[2]) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)]


def local(line: str, shared: Path) -> str:
    """``line`` as the test runs it (the module docstring's substitutions)."""
    line = line.replace("/run/amux", f"{shared}/run/amux").replace("/var/backups/amux", f"{shared}/backups")
    line = line.replace("hub.socket_group amux", "hub.socket_group users")
    return line.removeprefix("sudo ")


@pytest.fixture
def netns() -> Iterator[str]:
    """A fresh network namespace with its loopback up, deleted afterwards."""
    if os.geteuid() != 0:
        skip_or_fail("not root: the second account and the network namespace need root",
                     "not root (CI=true: CI runs as root)")
    for tool in ("ip", "curl"):
        if shutil.which(tool) is None:
            skip_or_fail(f"{tool} is not installed", f"{tool} is missing (CI=true: .ci/run installs it)")
    name = f"amuxts{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=30)
    if made.returncode != 0:
        skip_or_fail(f"ip netns add failed: {made.stderr.strip()}", f"ip netns add failed: {made.stderr.strip()}")
    try:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True, timeout=30)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def test_the_team_server_guide_runs_as_written(netns: str, shared_dir: Path, tmp_path: Path) -> None:
    text = GUIDE.read_text(encoding="utf-8")
    blocks = fenced_blocks(text)
    assert [lang for lang, _ in blocks] == ["sh", "sh", "sh", "sh", "python", "bash", "sh"], blocks
    assert f"`{HANDSHAKE_VERSIONS[0]}` to `{HANDSHAKE_VERSIONS[-1]}`" in text
    bin_dir = str(Path(amux_argv()[0]).parent)
    assert Path(bin_dir, "amux").is_file() and Path(bin_dir, "python").exists(), "needs the installed console script"
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "USER": "root", "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "LANG": os.environ.get("LANG", "C.UTF-8")}
    users = grp.getgrnam("users").gr_gid
    outputs: dict[str, str] = {}

    def run(argv: list[str], extra: dict[str, str] | None = None) -> str:
        done = subprocess.run(["ip", "netns", "exec", netns, *argv], env={**env, **(extra or {})},
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, f"{argv}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def shell_block(body: str) -> None:
        for line in body.splitlines():
            if line in SIMULATED:
                continue
            assert "sudo" not in line or line.startswith("sudo install "), f"a line the test does not know: {line}"
            ran = local(line, shared_dir)
            if ran.startswith("export "):
                key, _, value = ran.removeprefix("export ").partition("=")
                env[key] = value
                continue
            outputs[line] = run(["bash", "-c", ran])

    socket = shared_dir / "run" / "amux" / "hub.sock"
    try:
        for lang, body in blocks[:4]:  # TLS, the shared socket, AMUX_HUB, start and a token per person
            assert lang == "sh"
            shell_block(body)
        assert env["AMUX_HUB"] == str(socket)
        claude = json.loads(outputs["amux hub connect claude --principal alice"])
        assert claude["url"] == "https://hub.example.lan:8765/mcp" and not claude["local_only"], claude
        assert claude["ca_on_other_machine"], claude
        connect_env = json.loads(outputs["amux hub connect env --principal alice"])
        assert "export AMUX_HUB=tls://hub.example.lan:7777" in connect_env["env"], connect_env

        # The second local account: in the socket's group, it writes and searches; outside it, refused.
        assert socket.is_socket() and socket.stat().st_gid == users and socket.stat().st_mode & 0o777 == 0o660
        note = shared_input(shared_dir, "note.md", NOTE_TEXT)
        code, out, err = run_as(ALICE, socket, "memory", "upsert", NOTE, "--expected-revision", "absent",
                                "--json", stdin_file=note, groups=[users])
        assert code == 0, err
        code, out, err = run_as(ALICE, socket, "memory", "search", "bastion", "--json", groups=[users])
        assert code == 0, err
        assert [m["path"] for m in out["matches"]] == [NOTE], out
        code, out, err = run_as(BOB, socket, "memory", "upsert", "ops/bob.md", "--expected-revision", "absent",
                                "--json", stdin_file=note)
        assert code != 0 and "ermission denied" in err + json.dumps(out), (code, out, err)

        # The script examples, as written, with alice's token over TLS.
        client = {"AMUX_URL": "https://localhost:8765/mcp", "AMUX_TOKEN": claude["token"],
                  "AMUX_HUB_CA": str(home / ".amux" / "tls" / "ca.pem")}
        script = tmp_path / "example.py"
        script.write_text(blocks[4][1])
        printed = run(["python", str(script)], client)
        assert NOTE in printed and "bastion" in printed, printed
        curl = blocks[5][1]
        assert f'"protocolVersion":"{HANDSHAKE_VERSIONS[-1]}"' in curl
        assert f"MCP-Protocol-Version: {HANDSHAKE_VERSIONS[-1]}" in curl
        (tmp_path / "example.sh").write_text(curl)
        printed = run(["bash", "-e", str(tmp_path / "example.sh")], client)
        # The Hub answers a POST with one JSON body (DESIGN.md §22.3); an event stream's "data: " line is read too.
        answer = json.loads(next(line.removeprefix("data: ") for line in printed.splitlines()
                                 if line.startswith(("data: ", "{")) and '"id":2' in line))
        assert answer["result"]["isError"] is False and NOTE in answer["result"]["content"][0]["text"], answer

        # The backup line, then the archive checks out.
        shell_block(blocks[6][1])
        archives = list((shared_dir / "backups").glob("amux-*.tar.gz"))
        assert len(archives) == 1, archives
        verified = json.loads(run(["amux", "hub", "backup", "--verify", str(archives[0]), "--json"]))
        assert verified["ok"] is True and verified["manifest"]["documents"] == 1, verified
    finally:
        subprocess.run(["ip", "netns", "exec", netns, *amux_argv(), "hub", "stop"], env=env, capture_output=True,
                       timeout=60)

