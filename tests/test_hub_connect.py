"""``amux hub connect`` through the real CLI: a URL that would leak the token is refused before one is issued,
the Claude command reads the token from ``$AMUX_TOKEN``, ``env``/``pi`` need ``hub.listen``, and a terminal is
shown nothing raw; the URL names the certificate (the first `--name` of `amux hub tls init`) or `--url`, and a
loopback listener is for this machine, with no CA to copy (DESIGN.md §7, §17).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import HubProcess, amux_argv, make_hub
from tests.terminal import run_in_terminal


@pytest.fixture
def home(tmp_path: Path) -> HubProcess:
    h = make_hub(tmp_path, start=False)
    assert h.cli("hub", "principal", "add", "alice").returncode == 0
    return h


def tokens(h: HubProcess) -> list[object]:
    r = h.cli("hub", "token", "list", "--json")
    assert r.returncode == 0, r.stderr
    return list(r.json["tokens"])


@pytest.mark.parametrize("url", ["ftp://x", "http://evil.example.com/mcp", "http://10.0.0.5:8765/mcp", "https:///mcp",
                                 "https://h:99999/mcp", "hub.example.com/mcp", "https://x\x1b[2Jy/mcp",
                                 "https://a b/mcp", ""])
def test_a_url_that_would_leak_the_token_is_refused_and_nothing_issued(home: HubProcess, url: str) -> None:
    r = home.cli("hub", "connect", "claude", "--principal", "alice", "--url", url, "--json")
    assert r.returncode == 2, r.stdout
    error = r.json["error"]
    assert error["code"] == "bad_request" and error["data"] == {"field": "url"}, error
    assert "nothing was issued" in error["message"]
    assert "\x1b" not in r.stdout.decode() and "\x1b" not in r.stderr
    assert tokens(home) == []


@pytest.mark.parametrize("url", ["https://hub.example.com:8765/mcp", "http://127.0.0.1:8765/mcp",
                                 "http://localhost:8765/mcp", "http://[::1]:8765/mcp"])
def test_https_anywhere_and_http_to_loopback_are_accepted(home: HubProcess, url: str) -> None:
    r = home.cli("hub", "connect", "codex", "--principal", "alice", "--url", url, "--json")
    assert r.returncode == 0, r.stderr
    assert r.json["url"] == url and len(tokens(home)) == 1


def test_the_claude_commands_keep_the_token_in_a_file_and_register_for_every_project(home: HubProcess) -> None:
    url = "http://127.0.0.1:8765/mcp"
    r = home.cli("hub", "connect", "claude", "--principal", "alice", "--url", url, "--json")
    assert r.returncode == 0, r.stderr
    token = r.json["token"]
    assert r.json["env"] == [f"export AMUX_TOKEN={token}"]
    write, add = r.json["commands"]
    assert write == '(umask 077 && mkdir -p "$HOME/.amux" && printf %s "$AMUX_TOKEN" > "$HOME/.amux/claude-token")'
    assert add.startswith("claude mcp add-json -s user amux ") and '"headersHelper"' in add, add
    assert token not in write + add
    assert r.json["expires"] is not None  # 180 days unless --ttl says otherwise
    screen = run_in_terminal([*amux_argv(), "hub", "connect", "claude", "--principal", "alice", "--url", url],
                             env=home.env)
    assert screen.returncode == 0, screen.stderr
    assert screen.plain.count("amux_") == 1, screen.plain  # the token, once: in the export line
    assert "every project of that user (-s user)" in " ".join(screen.plain.split())


@pytest.mark.parametrize("agent", ["env", "pi"])
def test_env_and_pi_without_hub_listen_are_refused_before_a_token(home: HubProcess, agent: str) -> None:
    r = home.cli("hub", "connect", agent, "--principal", "alice", "--url", "https://hub.example.com/mcp", "--json")
    assert r.returncode == 2, r.stdout
    assert r.json["error"]["data"] == {"field": "hub.listen"}
    assert "hub.listen" in r.json["error"]["message"] and "amux hub tls init" in r.json["error"]["message"]
    assert tokens(home) == []


def test_env_with_hub_listen_prints_the_whole_recipe(home: HubProcess) -> None:
    port = 7777  # the Hub is not started: only the printed endpoint matters
    home.configure("hub.listen", f"127.0.0.1:{port}")
    r = home.cli("hub", "connect", "env", "--principal", "alice", "--url", "http://127.0.0.1:8765/mcp", "--json")
    assert r.returncode == 0, r.stderr
    assert r.json["env"] == [f"export AMUX_HUB=tcp://127.0.0.1:{port}", f"export AMUX_TOKEN={r.json['token']}",
                             "export AMUX_URL=http://127.0.0.1:8765/mcp"]


def test_the_url_names_the_certificate_and_a_loopback_listener_stays_on_this_machine(home: HubProcess) -> None:
    made = home.cli("hub", "tls", "init", "--name", "hub.example.lan", "--name", "10.9.8.7")
    assert made.returncode == 0, made.stderr
    home.configure("hub.mcp_listen", "0.0.0.0:8765")  # not started: only the printed commands matter
    home.configure("hub.listen", "[::]:7777")
    claude = home.cli("hub", "connect", "claude", "--principal", "alice", "--json")
    assert claude.returncode == 0, claude.stderr
    assert claude.json["url"] == "https://hub.example.lan:8765/mcp" and claude.json["local_only"] is False
    assert claude.json["ca_on_other_machine"] and claude.json["ca"].endswith("ca.pem")
    env = home.cli("hub", "connect", "env", "--principal", "alice", "--json")
    assert "export AMUX_HUB=tls://hub.example.lan:7777" in env.json["env"], env.json
    given = home.cli("hub", "connect", "codex", "--principal", "alice", "--url", "https://memory.example.com/mcp",
                     "--json")
    assert given.json["url"] == "https://memory.example.com/mcp" and given.json["local_only"] is False
    screen = run_in_terminal([*amux_argv(), "hub", "connect", "claude", "--principal", "alice"], env=home.env)
    assert screen.returncode == 0, screen.stderr
    assert "https://hub.example.lan:8765/mcp" in screen.plain and "scp " in screen.plain, screen.plain

    home.configure("hub.mcp_listen", "127.0.0.1:8765")
    no_claude = {"PATH": "/usr/bin:/bin"}  # Claude Code is not installed here: connect prints its command
    local = home.cli("hub", "connect", "claude", "--principal", "alice", "--json", env=no_claude)
    assert local.json["url"] == "https://127.0.0.1:8765/mcp" and local.json["local_only"] is True, local.json
    assert local.json["ca_on_other_machine"] == "" and local.json["registered"] is False
    assert f"export NODE_EXTRA_CA_CERTS={local.json['ca']}" in local.json["env"], local.json["env"]
    screen = run_in_terminal([*amux_argv(), "hub", "connect", "claude", "--principal", "alice"],
                             env={**home.env, **no_claude})
    assert screen.returncode == 0, screen.stderr
    text = " ".join(screen.plain.split())
    assert "scp " not in text and "Copy this Hub's CA" not in text and "other machine:" not in text, text
    assert "reused in" in text and "claude is not on PATH here" in text, text
    assert f"export NODE_EXTRA_CA_CERTS={local.json['ca']}" in text and "amux_" not in text, text
