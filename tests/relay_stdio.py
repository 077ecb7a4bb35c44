"""The real ``amux mcp`` relay subprocess spoken to in raw newline-delimited JSON-RPC on its stdio (what an
agent's client writes), and the wire fixture its answers are compared with (``tests/fixtures/mcp_wire.json``,
captured from the old ``amux mcp``).  Shared by ``tests/test_mcp_relay.py`` and ``tests/test_mcp_isolation.py``."""

from __future__ import annotations

import json
import os
import select
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import REPO, amux_argv

FIXTURE = json.loads((REPO / "tests" / "fixtures" / "mcp_wire.json").read_text(encoding="utf-8"))
INITIALIZED = '{"jsonrpc":"2.0","method":"notifications/initialized"}'


class Relay:
    """A real ``amux mcp`` subprocess spoken to in raw JSON-RPC lines."""

    def __init__(self, home: Path, **env: str) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
        self.proc = subprocess.Popen([*amux_argv(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env={**base, "AMUX_HOME": str(home), **env})
        self.next_id = 100

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def line(self, timeout: float = 20) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "no answer from amux mcp"
        return self.proc.stdout.readline().decode().rstrip("\n")

    def ask(self, text: str) -> str:
        self.send(text)
        return self.line()

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        answer = json.loads(self.ask(json.dumps(message)))
        assert answer["id"] == self.next_id
        return answer

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.request("tools/call", {"name": name, "arguments": arguments})["result"]
        return result

    def handshake(self) -> str:
        answer = self.ask(FIXTURE["initialize_request"])
        self.send(INITIALIZED)
        return answer

    def close(self) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(15) == 0
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode()
