"""What ``amux mcp`` answers with no Hub: the server's own ``initialize`` and ``tools/list`` results (DESIGN.md §9.2).

The relay ships them as ``tools/mcp/offline.json``; a test holds that file to
:func:`snapshot` byte for byte.  Regenerate it after changing a tool, a
schema, the protocol text or the version::

    python -m amux_memory.hub.mcp.snapshot > tools/mcp/offline.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import trio
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

from amux_memory.hub.mcp.server import build_server
from amux_memory.hub.mcp.session import json_text
from amux_memory.hub.mcp.tools import Backend
from amux_memory.protocol.errors import ErrorCode, HubError

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The ``initialize`` protocol versions the SDK server accepts as asked (any other gets the last one)."""


async def _no_hub(method: str, params: dict[str, Any]) -> dict[str, Any]:
    raise HubError(ErrorCode.UNAVAILABLE, "no Hub")


async def exchange(messages: list[str], backend: Backend = _no_hub, *, instructions: bool = True) -> list[str]:
    """The JSON-RPC text the server writes for ``messages`` (JSON-RPC texts), one answer per request, in order."""
    server = build_server(backend, instructions=instructions)
    send_in, inbox = anyio.create_memory_object_stream[SessionMessage | Exception](len(messages))
    outbox_send, outbox = anyio.create_memory_object_stream[SessionMessage](len(messages))
    answers: list[str] = []
    expected = sum(1 for m in messages if "id" in json.loads(m))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.run, inbox, outbox_send, server.create_initialization_options())
        for text in messages:
            await send_in.send(SessionMessage(jsonrpc_message_adapter.validate_json(text, by_name=False)))
            if "id" in json.loads(text):
                answers.append(json_text((await outbox.receive()).message))
        assert len(answers) == expected
        send_in.close()
    return answers


def _result_text(line: str) -> str:
    head = '{"jsonrpc":"2.0","id":1,"result":'
    assert line.startswith(head) and line.endswith("}"), line[:80]
    return line[len(head):-1]


async def snapshot() -> dict[str, Any]:
    """``{protocol_versions, initialize: {on, off}, tools_list}``: result texts exactly as the server writes them
    (``initialize`` asked for the newest handshake version, ``protocol_versions[-1]``)."""
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": HANDSHAKE_VERSIONS[-1], "capabilities": {}, "clientInfo": {"name": "snapshot",
                                                                                      "version": "1"}}})
    listed = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    initialized = '{"jsonrpc":"2.0","method":"notifications/initialized"}'
    on = await exchange([init, initialized, listed])
    off = await exchange([init], instructions=False)
    return {"protocol_versions": list(HANDSHAKE_VERSIONS),
            "initialize": {"on": _result_text(on[0]), "off": _result_text(off[0])},
            "tools_list": _result_text(on[1])}


def main() -> None:
    """Print the snapshot as JSON on stdout (the content of ``tools/mcp/offline.json``)."""
    sys.stdout.write(json.dumps(trio.run(snapshot), indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
