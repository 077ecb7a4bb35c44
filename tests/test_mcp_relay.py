"""``amux mcp`` as a relay to the MCP server inside the Hub (DESIGN.md §9.2), through real processes.

A real ``amux hub serve``, the real ``amux mcp`` subprocess and raw newline-delimited JSON-RPC on its
stdio (what an agent's client writes): the answers are compared byte for byte with what the SDK stdio
server wrote before the move (``tests/fixtures/mcp_wire.json``, captured from the old ``amux mcp``).  Also:
the relay imports no SDK, the offline snapshot equals the Hub's server, sessions are separate, the Hub may
come, go (killed) and come back under one relay, another OS user gets its own scope, and the wire rules of
``mcp_open`` on a raw socket.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

# Imported before any fork to another uid: the child cannot read root's site-packages (tests/other_users.py).
import amux_memory.tools.cli.agent  # noqa: F401
import amux_memory.tools.mcp.relay  # noqa: F401
from amux_memory.hub.mcp.snapshot import snapshot
from amux_memory.protocol.errors import ErrorCode
from amux_memory.protocol.messages import decode_mcp, decode_response, encode_mcp, encode_request
from amux_memory.protocol.version import package_version
from tests.conftest import REPO, HubProcess
from tests.other_users import ALICE, BOB, run_as, shared_input
from tests.raw_hub import Raw
from tests.relay_stdio import FIXTURE, INITIALIZED, Relay

OFFLINE = REPO / "tools" / "mcp" / "offline.json"
HEAVY = ("mcp", "mcp_types", "trio", "anyio", "pydantic", "pydantic_core", "jsonschema", "cyclopts", "rich")
HUB_SIDE = ("amux_memory.protocol.params",)
"""Our own modules the relay has no use for: the Hub's request parsers cost ~14 ms of its start."""


def fixture_line(name: str) -> str:
    """A line of the fixture with the version the package has now (it was captured at 0.1.0)."""
    return FIXTURE[name].replace('"version":"0.1.0"}', f'"version":{json.dumps(package_version())}}}')


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_initialize_and_tools_list_are_byte_identical_to_the_old_server(hub: HubProcess) -> None:
    relay = Relay(hub.home)
    try:
        assert relay.handshake() == fixture_line("initialize_instructions_on")
        assert relay.ask('{"jsonrpc":"2.0","id":2,"method":"tools/list"}') == FIXTURE["tools_list"]
        assert relay.ask('{"jsonrpc":"2.0","id":4,"method":"ping"}') == FIXTURE["ping"]
        created = relay.tool("memory_upsert", path="MEMORY.md", content="# hi\n", expected_revision="absent")
        assert created["structuredContent"]["created"] is True
    finally:
        relay.close()
    off = Relay(hub.home, AMUX_MCP_INSTRUCTIONS="off")
    try:
        assert off.handshake() == fixture_line("initialize_instructions_off")
        assert off.ask('{"jsonrpc":"2.0","id":2,"method":"tools/list"}') == FIXTURE["tools_list"]
    finally:
        off.close()
    assert (hub.scope_dir / "MEMORY.md").read_text() == "# hi\n"


def test_the_shipped_offline_snapshot_is_what_the_hub_server_answers() -> None:
    shipped = json.loads(OFFLINE.read_text(encoding="utf-8"))
    assert shipped == trio.run(snapshot), "regenerate: python -m amux_memory.hub.mcp.snapshot > tools/mcp/offline.json"


def test_with_no_hub_the_relay_answers_like_the_old_server_then_uses_a_hub_that_starts(hub_factory: Any) -> None:
    hub: HubProcess = hub_factory(start=False)
    relay = Relay(hub.home)
    try:
        assert relay.handshake() == fixture_line("initialize_instructions_on")
        assert relay.ask('{"jsonrpc":"2.0","id":2,"method":"tools/list"}') == FIXTURE["tools_list"]
        call = ('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory_get","arguments":'
                '{"path":"MEMORY.md"}}}')
        assert relay.ask(call) == FIXTURE["unavailable_call"].replace("{home}", str(hub.home))
        assert relay.ask('{"jsonrpc":"2.0","id":4,"method":"ping"}') == FIXTURE["ping"]
        unknown = relay.request("resources/list")
        assert unknown["error"]["code"] == -32601
        hub.start()  # the same relay process: the next request opens the session (initialize replayed)
        result = relay.tool("memory_upsert", path="MEMORY.md", content="# later\n", expected_revision="absent")
        assert not result["isError"], result
        assert relay.tool("memory_get", path="MEMORY.md")["structuredContent"]["content"] == "# later\n"
        assert json.dumps(relay.request("tools/list")["result"], separators=(",", ":"), ensure_ascii=False) \
            == json.dumps(json.loads(FIXTURE["tools_list"])["result"], separators=(",", ":"), ensure_ascii=False)
    finally:
        log = relay.close()
    assert "not usable" in log


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_a_hub_killed_mid_session_is_unavailable_then_serves_again(hub: HubProcess) -> None:
    relay = Relay(hub.home)
    try:
        relay.handshake()
        rev = relay.tool("memory_upsert", path="a.md", content="a\n", expected_revision="absent")
        assert hub.proc is not None
        hub.proc.send_signal(signal.SIGKILL)
        hub.proc.wait(10)
        hub.proc = None
        down = relay.tool("memory_get", path="a.md")
        assert down["isError"] and down["structuredContent"]["error"]["code"] == ErrorCode.UNAVAILABLE.value
        hub.start()
        back = relay.tool("memory_get", path="a.md")["structuredContent"]
        assert back["content"] == "a\n" and back["revision"] == rev["structuredContent"]["revision"]
    finally:
        relay.close()


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_two_relays_are_two_sessions_with_their_own_pages(hub: HubProcess) -> None:
    big = "".join(f"line {i} " + "x" * 80 + "\n" for i in range(600))  # ~54 KiB: a get comes in pages
    a, b = Relay(hub.home), Relay(hub.home)
    try:
        a.handshake()
        b.handshake()
        assert not a.tool("memory_upsert", path="big.md", content=big, expected_revision="absent")["isError"]
        first_a = a.tool("memory_get", path="big.md")["structuredContent"]
        first_b = b.tool("memory_get", path="big.md")["structuredContent"]
        assert first_a["pages"] >= 2 and first_b["pages"] >= 2 and first_a["continuation"] != first_b["continuation"]
        crossed = b.tool("result_continue", token=first_a["continuation"])
        assert crossed["isError"] and crossed["structuredContent"]["error"]["data"]["reason"] == "unknown"
        data = first_a["data"]
        token = first_a["continuation"]
        while token is not None:
            page = a.tool("result_continue", token=token)["structuredContent"]
            data, token = data + page["data"], page["continuation"]
        assert json.loads(data)["content"] == big[:len(json.loads(data)["content"])]
    finally:
        a.close()
        b.close()


def test_the_relay_imports_no_sdk_trio_pydantic_or_cli(hub: HubProcess, tmp_path: Path) -> None:
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write('MODULES=' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
            "sys.argv = ['amux', 'mcp']\n"
            "from amux_memory.tools.cli.entry import main\n"
            "main()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    lines = [FIXTURE["initialize_request"], INITIALIZED, '{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
             '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory_search","arguments":'
             '{"query":"x"}}}']
    proc = subprocess.run([sys.executable, "-c", code], input="\n".join(lines).encode() + b"\n",
                          capture_output=True, env={**env, "AMUX_HOME": str(hub.home)}, cwd=REPO, timeout=60)
    answers = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert [a["id"] for a in answers] == [1, 2, 3] and not answers[2]["result"]["isError"], answers
    modules = proc.stderr.decode().split("MODULES=", 1)[1].split()
    loaded = sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HUB_SIDE)
    assert loaded == [], loaded


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the relay as other uids")
def test_a_relay_run_as_another_user_gets_that_users_scope(hub_factory: Any, shared_dir: Path) -> None:
    h: HubProcess = hub_factory(isolation="user", settings={"hub.socket_path": str(shared_dir / "hub.sock"),
                                                            "hub.socket_mode": "0666"})

    def conversation(name: str, *calls: dict[str, Any]) -> Path:
        lines = [FIXTURE["initialize_request"], INITIALIZED]
        lines += [json.dumps({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": c})
                  for i, c in enumerate(calls)]
        return shared_input(shared_dir, name, "\n".join(lines) + "\n")

    write = conversation("alice.jsonl", {"name": "memory_upsert", "arguments": {
        "path": "MEMORY.md", "content": "# Alice\n", "expected_revision": "absent"}})
    code, out, err = run_as(ALICE, h.socket, "mcp", stdin_file=write)
    assert code == 0, err
    answers = {a["id"]: a for a in map(json.loads, out.decode().splitlines())}
    assert answers[10]["result"]["structuredContent"]["created"] is True, answers
    read = conversation("bob.jsonl", {"name": "memory_get", "arguments": {"path": "MEMORY.md"}})
    code, out, err = run_as(BOB, h.socket, "mcp", stdin_file=read)
    assert code == 0, err
    answers = {a["id"]: a for a in map(json.loads, out.decode().splitlines())}
    assert answers[10]["result"]["structuredContent"]["exists"] is False, "Bob does not see Alice's memory"
    alice_files = list((h.home / "memory" / "users").glob("*/MEMORY.md"))
    assert [p.read_text() for p in alice_files] == ["# Alice\n"]
    assert not (h.home / "memory" / "global" / "MEMORY.md").exists()


# -- the wire: mcp_open on a raw socket -----------------------------------------------------------------


def test_mcp_open_needs_hello_valid_params_and_happens_once(hub: HubProcess) -> None:
    with Raw(hub.socket) as raw:
        raw.send(encode_request(1, "mcp_open", {}))
        assert decode_response(raw.frame()).error.code == ErrorCode.BAD_REQUEST  # type: ignore[union-attr]
        raw.send(encode_request(2, "hello", {"protocol": 1, "client": "raw"}))
        assert decode_response(raw.frame()).result is not None
        raw.send(encode_request(3, "mcp_open", {"instructions": "yes"}))
        refused = decode_response(raw.frame()).error
        assert refused is not None and refused.code == ErrorCode.BAD_REQUEST and refused.data["field"] == "instructions"
        raw.send(encode_request(4, "mcp_open", {"instructions": False, "page_ttl": 5}))
        assert decode_response(raw.frame()).result == {"mcp": True, "instructions": False}
        # From now on frames are MCP messages: a Hub request frame is refused, the session goes on.
        raw.send(encode_request(5, "get", {"path": "MEMORY.md"}))
        assert decode_response(raw.frame()).error.code == ErrorCode.BAD_REQUEST  # type: ignore[union-attr]
        raw.send(encode_mcp(FIXTURE["initialize_request"]))
        assert decode_mcp(raw.frame()) == fixture_line("initialize_instructions_off")
        raw.send(encode_mcp("not json"))
        assert json.loads(decode_mcp(raw.frame()))["error"]["code"] == -32700
        raw.send(encode_mcp(INITIALIZED))
        raw.send(encode_mcp('{"jsonrpc":"2.0","id":2,"method":"tools/list"}'))
        assert decode_mcp(raw.frame()) == FIXTURE["tools_list"]
        started = time.monotonic()
        raw.send(encode_mcp('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory_get",'
                            '"arguments":{"path":"MEMORY.md"}}}'))
        answer = json.loads(decode_mcp(raw.frame()))
        assert answer["result"]["structuredContent"]["exists"] is False and time.monotonic() - started < 10
