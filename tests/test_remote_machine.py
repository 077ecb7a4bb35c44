"""An agent on another machine: a client in a network namespace of its own reaches the Hub over TLS.

The "other machine" is a network namespace the test makes (as root): a veth
pair, ``10.200.N.1/30`` on the host side and ``10.200.N.2/30`` inside (``N``
from the test's pid, so two runs at once do not collide), the namespace's
loopback up, no route anywhere else, so all traffic stays between the two
ends.  A finalizer deletes the namespace and the veth whatever happens.

The Hub gets ``amux hub tls init --name 10.200.N.1`` and listens on that
address only: ``hub.mcp_listen`` (MCP over streamable HTTP) and
``hub.listen`` (the Hub's own msgpack protocol, for the CLI).  Everything the
other machine runs comes from ``amux hub connect env``/``claude`` output, run
by ``ip netns exec`` with a home of its own (``HOME`` with the CA copied to
``~/.amux/hub-ca.pem`` as the printed ``scp`` line says, no ``AMUX_HOME``: the
Hub's Unix socket, which a namespace does not hide, is never used):

- the printed ``export`` lines, then ``amux memory upsert`` and ``amux
  memory search`` over ``tls://10.200.N.1``; the Hub's own view (a local
  CLI) then has the document;
- ``tests/remote_mcp_client.py``, the ``mcp`` SDK's streamable-HTTP client
  trusting the CA, with the token of the printed ``export AMUX_TOKEN`` line:
  lists the five memory tools and calls ``memory_search``, which finds the
  document the CLI wrote (the token's principal's memory);
- without the CA, both the CLI and the MCP client are refused (certificate
  verify failed) and nothing is written.

Skips with a message when not root or ``ip netns`` is unavailable, except
under ``CI=true`` (CI runs as root), where it fails instead.  The refusal to
start plaintext HTTP on a non-loopback ``hub.mcp_listen`` is
``tests/test_mcp_http.py``'s.  DESIGN.md §7.7 (remote callers).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from tests.conftest import HubProcess, amux_argv, make_hub
from tests.helpers import free_port, skip_or_fail

pytestmark = pytest.mark.slow

CLIENT_SCRIPT = Path(__file__).resolve().parent / "remote_mcp_client.py"
WORD = "Zephyrine"
"""A word only the remote upsert writes, for the searches."""


@dataclass(frozen=True)
class Namespace:
    """The other machine: namespace ``name``; ``host_ip`` is the Hub's side of the veth, ``peer_ip`` its own."""

    name: str
    host_if: str
    host_ip: str
    peer_ip: str

    def run(self, argv: list[str], env: dict[str, str], timeout: float = 90,
            input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """``argv`` inside the namespace (``ip netns exec``) with exactly ``env``."""
        return subprocess.run(["ip", "netns", "exec", self.name, *argv], env=env, input=input,
                              capture_output=True, timeout=timeout)


def unavailable(message: str) -> NoReturn:
    """The namespace cannot be made: skip with ``message``, or fail under ``CI=true`` (CI runs as root)."""
    skip_or_fail(message, f"{message} (CI=true: the other-machine test must run; CI runs as root with iproute2)")


def _ip(*args: str, ns: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = ["ip", *(["netns", "exec", ns, "ip"] if ns else []), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


@pytest.fixture
def netns() -> Iterator[Namespace]:
    """A fresh namespace with a veth pair to this one (see the module docstring), removed afterwards."""
    if os.geteuid() != 0:
        unavailable("not root: making a network namespace needs root (ip netns add)")
    if shutil.which("ip") is None or _ip("netns", "list").returncode != 0:
        unavailable("'ip netns' is unavailable (package iproute2)")
    n = os.getpid() % 200 + 20
    ns = Namespace(f"amuxt{os.getpid()}", f"amx{os.getpid()}h", f"10.200.{n}.1", f"10.200.{n}.2")
    peer_if = f"amx{os.getpid()}n"
    try:
        steps = [
            ((("netns", "add", ns.name)), None),
            (("link", "add", ns.host_if, "type", "veth", "peer", "name", peer_if), None),
            (("link", "set", peer_if, "netns", ns.name), None),
            (("addr", "add", f"{ns.host_ip}/30", "dev", ns.host_if), None),
            (("link", "set", ns.host_if, "up"), None),
            (("addr", "add", f"{ns.peer_ip}/30", "dev", peer_if), ns.name),
            (("link", "set", peer_if, "up"), ns.name),
            (("link", "set", "lo", "up"), ns.name),
        ]
        for args, inside in steps:
            done = _ip(*args, ns=inside)
            if done.returncode != 0:
                unavailable(f"cannot set up the namespace: ip {' '.join(args)}: {done.stderr.strip()}")
        yield ns
    finally:
        _ip("netns", "del", ns.name)  # takes the veth pair with it
        _ip("link", "del", ns.host_if)  # in case the namespace never got its end
    assert ns.name not in _ip("netns", "list").stdout


def remote_env(home: Path) -> dict[str, str]:
    """The other machine's environment: its own ``HOME``, this installation's ``PATH``, no ``AMUX_*``."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def shell_with(exports: list[str], argv: list[str]) -> list[str]:
    """``bash -c`` running the printed ``export`` lines, then ``argv``."""
    return ["bash", "-c", "\n".join([*exports, "exec " + shlex.join(argv)])]


@pytest.fixture
def remote_hub(netns: Namespace, tmp_path: Path) -> Iterator[tuple[HubProcess, str, str]]:
    """A Hub with TLS from ``amux hub tls init --name HOST_IP`` and both listeners on ``HOST_IP`` only:
    ``(hub, MCP port, CLI port)``."""
    mcp_port, cli_port = free_port(netns.host_ip), free_port(netns.host_ip)
    h = make_hub(tmp_path, start=False, settings={"hub.mcp_listen": f"{netns.host_ip}:{mcp_port}",
                                                  "hub.listen": f"{netns.host_ip}:{cli_port}"})
    made = h.cli("hub", "tls", "init", "--name", netns.host_ip)
    assert made.returncode == 0, made.stderr
    assert netns.host_ip in made.json["names"]
    h.start()
    assert h.cli("hub", "principal", "add", "alice").returncode == 0
    try:
        yield h, str(mcp_port), str(cli_port)
    finally:
        h.stop()


def test_a_client_on_another_machine_uses_the_printed_commands(
        netns: Namespace, remote_hub: tuple[HubProcess, str, str], tmp_path: Path) -> None:
    """From the namespace, with only what ``amux hub connect`` printed and the CA copied over: the CLI
    writes and finds a document over ``tls://``, the MCP client lists tools and calls one over ``https``;
    the Hub's side sees the document; without the CA both are refused with certificate verify failed and
    nothing more is written."""
    h, mcp_port, cli_port = remote_hub
    routes = _ip("route", ns=netns.name).stdout.strip().splitlines()  # only the /30 between the two ends
    assert routes and all(r.startswith(netns.host_ip.rsplit(".", 1)[0] + ".0/30 ") for r in routes), routes

    env_plan = h.cli("hub", "connect", "env", "--principal", "alice", "--json")
    assert env_plan.returncode == 0, env_plan.stderr
    plan = env_plan.json
    assert plan["url"] == f"https://{netns.host_ip}:{mcp_port}/mcp"
    assert f"export AMUX_HUB=tls://{netns.host_ip}:{cli_port}" in plan["env"], plan["env"]
    assert any(line.startswith("export AMUX_HUB_CA=") for line in plan["env"]), plan["env"]

    other = tmp_path / "other-machine"
    (other / ".amux").mkdir(parents=True)
    shutil.copy(plan["ca"], other / ".amux" / "hub-ca.pem")  # the printed 'scp ... OTHER:.amux/hub-ca.pem'
    env = remote_env(other)
    amux = amux_argv()

    up = netns.run(shell_with(plan["env"], [*amux, "memory", "upsert", "notes/remote.md", "--expected-revision",
                                            "absent"]), env, input=f"# From elsewhere\n\n{WORD} was here.\n".encode())
    assert up.returncode == 0, up.stderr.decode()
    assert json.loads(up.stdout)["created"] is True
    found = netns.run(shell_with(plan["env"], [*amux, "memory", "search", WORD]), env)
    assert found.returncode == 0, found.stderr.decode()
    assert [m["path"] for m in json.loads(found.stdout)["matches"]] == ["notes/remote.md"]
    here = h.cli("memory", "get", "notes/remote.md")
    assert here.returncode == 0 and WORD in here.json["content"], here.stderr

    claude = h.cli("hub", "connect", "claude", "--principal", "alice", "--json")
    assert claude.returncode == 0, claude.stderr
    token = claude.json["token"]
    assert claude.json["commands"][-1].startswith("claude mcp add-json -s user amux ")  # every project
    assert token not in " ".join(claude.json["commands"])  # a headersHelper reads it from a 0600 file
    assert f"export AMUX_TOKEN={token}" in claude.json["env"]
    assert "export NODE_EXTRA_CA_CERTS=\"$HOME/.amux/hub-ca.pem\"" in claude.json["env"]
    url = claude.json["url"]
    client = [sys.executable, str(CLIENT_SCRIPT), url, "--token", token, "--query", WORD]
    mcp = netns.run([*client, "--ca", str(other / ".amux" / "hub-ca.pem")], env)
    assert mcp.returncode == 0, mcp.stderr.decode()
    doc = json.loads(mcp.stdout)
    assert doc["tools"] == ["memory_search", "memory_get", "memory_upsert", "memory_forget", "result_continue"], doc
    assert doc["called"] == "memory_search" and not doc["is_error"], doc
    assert [m["path"] for m in doc["structured"]["matches"]] == ["notes/remote.md"], doc
    assert "notes/remote.md" in doc["text"], doc

    before = h.cli("memory", "list").json["entries"]
    no_ca = [line for line in plan["env"] if not line.startswith("export AMUX_HUB_CA=")]
    refused = netns.run(shell_with(no_ca, [*amux, "memory", "upsert", "notes/refused.md", "--expected-revision",
                                           "absent"]), env, input=b"# no\n")
    assert refused.returncode != 0
    assert "certificate verify failed" in refused.stderr.decode().lower(), refused.stderr.decode()
    assert "AMUX_HUB_CA" in refused.stderr.decode(), refused.stderr.decode()
    mcp_refused = netns.run(client, env)
    assert mcp_refused.returncode == 3, mcp_refused.stdout.decode() + mcp_refused.stderr.decode()
    assert "certificate verify failed" in mcp_refused.stderr.decode().lower(), mcp_refused.stderr.decode()
    assert h.cli("memory", "list").json["entries"] == before
