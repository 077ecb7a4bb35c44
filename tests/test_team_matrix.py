"""Who may do what in a team mount, through every transport: an isolation matrix (DESIGN.md §7.8).

One Hub (isolation ``user``) serves the Unix socket, TCP on loopback (``hub.listen``) and MCP over HTTP
(``hub.mcp_listen``).  Team ``web`` (review ``agents``) has a ``reader``, a ``writer`` and a ``maintainer``;
the ``outsider`` belongs to no team; the ``removed`` member was a maintainer whose connections, relay and MCP
sessions were opened (and used on the team) before it was removed.  Each principal calls with its own token:

* ``unix`` and ``tcp``: :class:`HubClient`, every method (``diff`` as ``amux memory diff`` does it: two
  :func:`read_version` reads, a stored version and the live one; ``copy_out`` copies a team note into the
  caller's own memory, ``copy`` one of its own into the team, ``move`` a team note out);
* ``relay`` (``amux mcp``) and ``http`` (``tools/call`` on the Hub's ``/mcp`` with a bearer token): the tools,
  which cover search, get, upsert and forget.  An MCP caller is an agent, so its team writes are proposals;
  every result is checked against the output schema the server published;
* ``ui`` (``amux ui`` acting as the principal of ``AMUX_TOKEN``; slow): the pages and forms that expose a
  method.

Every cell (method x caller x transport) asserts allow or deny as the caller's role says (each route's ``role``,
``hub.methods.routes``):
an allowed call's effect on the files; for a denied one the code and data (``not_found``/``no_mount`` for a
caller without the mount, ``unauthorized``/``role`` for a weaker role, ``not_found`` for a proposal id the caller
may not see: every proposal is the writer's agent's, so only the writer and the maintainer see them, and the
writer's decision is ``unauthorized``/``role``), that no file of the home changed (size and mtime of every
file), and, for callers without the mount and for proposal ids they may not see, that the answer equals the
answer for a team that does not exist (or an id that was never issued) but for the name.  Failures are gathered
per transport and reported together.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import select
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jsonschema
import pytest

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.identity import team_scope
from amux_memory.protocol.errors import HubError
from amux_memory.tools.client.blocking import HubClient
from amux_memory.tools.client.paging import list_all, read_version, review_all
from bench.mcp_http import Session, rpc_message
from tests.conftest import HubProcess, amux_argv, make_hub
from tests.ui_helpers import UiProcess, csrf_of, request, start_ui

pytestmark = [pytest.mark.xdist_group("team_matrix"), pytest.mark.timeout(600)]

TEAM, MISSING = "web", "nosuchteam"
UNKNOWN_ID = "p0123456789ab"
"""A well-formed proposal id the Hub never issued: what a non-member's answer for a real one must equal."""
CALLERS = ("outsider", "reader", "writer", "maintainer", "removed")
ROLE = {"reader": "reader", "writer": "writer", "maintainer": "maintainer"}
RANK = ("reader", "writer", "maintainer")
WITHOUT_MOUNT = ("outsider", "removed")
PROPOSER = "writer"
"""Whose agent makes every proposal of the matrix: it sees them (its own), a maintainer decides them."""
KEYWORD = "kubectl"
"""In the team's notes only."""
V1 = b"# Deploy\n\nkubectl rollout restart deploy/web from main.\n"
V2 = V1 + b"Never on a Friday.\n"
MINE = b"# Mine\n\nA personal note, not the team's.\n"
DEPLOY = "deploy.md"
PROTOCOL = "2025-06-18"
INIT = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "matrix", "version": "1"}}
MCP_TRANSPORTS = ("relay", "http")

Answer = tuple[bool, dict[str, Any]]
"""``(True, result)`` or ``(False, {code, message, data, next_step})``."""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def snapshot(home: Path) -> dict[str, tuple[int, int]]:
    """Every file under the home: size and mtime (a denied call must change none)."""
    out = {}
    for folder, _, files in os.walk(home):
        for name in files:
            st = os.stat(os.path.join(folder, name), follow_symlinks=False)
            out[os.path.join(folder, name)] = (st.st_size, st.st_mtime_ns)
    return out


def error_of(exc: HubError) -> dict[str, Any]:
    return {"code": exc.code.value, "message": exc.message, "data": exc.data, "next_step": exc.refined}


def normalized(answer: dict[str, Any], *names: str) -> str:
    """``answer`` as JSON with the team's and the missing team's labels, and ``names`` (proposal ids, paths),
    replaced by placeholders: what must be equal between a real team and one that does not exist."""
    text = json.dumps(answer, sort_keys=True)
    for i, name in enumerate(names):
        text = text.replace(name, f"<{i}>")
    for name in (TEAM, MISSING):
        text = text.replace(f"@{name}/", "@T/").replace(f"%40{name}/", "%40T/").replace(f"%40{name}%2F", "%40T%2F")
    return text


def text_of(content: Any) -> bytes:
    return content.encode() if isinstance(content, str) else bytes(content)


# -- MCP clients: the relay subprocess and a session over HTTP ----------------------------------------------


class Relay:
    """A real ``amux mcp`` subprocess for one token, spoken to in JSON-RPC lines."""

    def __init__(self, home: Path, token: str, errlog: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
        with open(errlog, "ab") as err:
            self.proc = subprocess.Popen([*amux_argv(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, env={**env, "AMUX_HOME": str(home), "AMUX_TOKEN": token})
        self.ids = itertools.count(1)
        self.buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request; its ``result`` (a JSON-RPC error fails the test)."""
        ident = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 60
        while True:
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
                assert ready, f"amux mcp did not answer {method} within 60 s"
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, "amux mcp exited"
                self.buffer += chunk
            line, _, self.buffer = self.buffer.partition(b"\n")
            message = json.loads(line)
            if message.get("id") == ident:
                assert "result" in message, message
                result: dict[str, Any] = message["result"]
                return result

    def open(self) -> list[dict[str, Any]]:
        self.request("initialize", INIT)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools: list[dict[str, Any]] = self.request("tools/list", {})["tools"]
        return tools

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


class Http:
    """One MCP session over HTTP (``/mcp``, a bearer token) on a persistent connection."""

    def __init__(self, url: str, token: str) -> None:
        self.session = Session(url, token)

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.session.next_id += 1
        status, _, body = self.session.post({"jsonrpc": "2.0", "id": self.session.next_id, "method": method,
                                             "params": params})
        assert status == 200, (status, body[:300])
        message = rpc_message(body)
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        return result

    def open(self) -> list[dict[str, Any]]:
        self.session.open()
        tools: list[dict[str, Any]] = self.request("tools/list", {})["tools"]
        return tools

    def close(self) -> None:
        self.session.close()


@dataclass
class Mcp:
    """An MCP client (relay or HTTP) and the output schemas its server published."""

    client: Relay | Http
    schemas: dict[str, Any] = field(default_factory=dict)

    def open(self) -> None:
        self.schemas = {t["name"]: t["outputSchema"] for t in self.client.open()}

    def tool(self, name: str, arguments: dict[str, Any]) -> Answer:
        """``tools/call``; the structured result or error, checked against the published output schema first
        (clients such as the Python SDK refuse a result that does not match)."""
        result = self.client.request("tools/call", {"name": name, "arguments": arguments})
        structured = result["structuredContent"]
        try:
            jsonschema.validate(structured, self.schemas[name])
        except jsonschema.ValidationError as exc:
            raise AssertionError(f"{name} answered outside its published output schema: {exc.message[:300]}"
                                 ) from None
        if result.get("isError"):
            return False, structured["error"]
        return True, structured


# -- the world: one Hub, the team, a client per transport and caller ------------------------------------------


@dataclass
class World:
    hub: HubProcess
    tmp: Path
    tokens: dict[str, str]
    tcp: str
    mcp_url: str
    admin: HubClient
    """The maintainer as a person on the Unix socket: prepares the cells."""
    agent: HubClient
    """The writer as an agent (client ``amux-mcp``) on the Unix socket: makes proposals."""
    shared_proposal: str = ""
    clients: dict[tuple[str, str], HubClient] = field(default_factory=dict)
    mcp: dict[tuple[str, str], Mcp] = field(default_factory=dict)
    cells: dict[str, int] = field(default_factory=dict)
    """Cells run, per transport (the matrix's size)."""

    def team_file(self, inner: str) -> Path:
        return self.hub.home / "memory" / team_scope(TEAM).relpath / inner

    def own_file(self, caller: str, inner: str) -> Path:
        return self.hub.home / "memory" / "users" / sha(caller.encode()) / inner

    def put(self, inner: str, *versions: bytes) -> list[str]:
        """Write ``versions`` of the team note ``inner`` in turn (as the maintainer, a person); their revisions."""
        revision, out = "absent", []
        for content in versions:
            revision = self.admin.call("upsert", {"path": f"@{TEAM}/{inner}", "content": content,
                                                  "expected_revision": revision, "allow_shrink": True})["revision"]
            out.append(revision)
        return out

    def propose(self, inner: str, content: bytes) -> str:
        """A pending proposal of the writer's agent for the team note ``inner``; its id."""
        answer = self.agent.call("upsert", {"path": f"@{TEAM}/{inner}", "content": content,
                                            "expected_revision": "absent"})
        assert answer["proposed"] is True, answer
        return str(answer["proposal"])


def _add_principals(home: Path) -> dict[str, str]:
    def change(r: reg.Registry, now: float) -> tuple[reg.Registry, dict[str, str]]:
        tokens = {}
        for name in CALLERS:
            r, _ = r.add_principal(name, "user", now)
            r, tokens[name], _ = r.issue_token(name, now, None, None)
        r, _ = r.add_team(TEAM, "agents", now)
        for name, role in (*ROLE.items(), ("removed", "maintainer")):
            r, _ = r.add_member(TEAM, name, role)
        return r, tokens

    return reg.modify(home, change)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("matrix")
    h = make_hub(tmp, isolation="user", settings={"hub.listen": "127.0.0.1:0",
                                                   "hub.mcp_listen": f"127.0.0.1:{free_port()}"})
    opened: list[HubClient] = []
    mcps: list[Mcp] = []
    try:
        assert h.log is not None
        log = h.log.read_text()
        tcp = re.findall(r"Hub listening on (tcp://\S+)", log)
        url = re.findall(r"serving MCP on (http://\S+)", log)
        assert tcp and url, log
        tokens = _add_principals(h.home)

        def client(endpoint: Path | str, caller: str, **kw: Any) -> HubClient:
            c = (HubClient(endpoint, token=tokens[caller], **kw) if isinstance(endpoint, Path)
                 else HubClient(endpoint=endpoint, token=tokens[caller], **kw))
            c.connect()
            opened.append(c)
            return c

        w = World(h, tmp, tokens, tcp[0], url[0], client(h.socket, "maintainer"),
                  client(h.socket, "writer", client_name="amux-mcp"))
        w.put(DEPLOY, V1, V2)
        w.shared_proposal = w.propose("proposed/shared.md", b"# Shared\n\nA proposal everyone asks about.\n")
        for caller in CALLERS:
            for transport, endpoint in (("unix", h.socket), ("tcp", w.tcp)):
                w.clients[transport, caller] = client(endpoint, caller)
            own = client(h.socket, caller)
            own.call("upsert", {"path": "mine.md", "content": MINE, "expected_revision": "absent"})
            for transport in MCP_TRANSPORTS:
                m = Mcp(Relay(h.home, tokens[caller], tmp / "relay.err") if transport == "relay"
                        else Http(w.mcp_url, tokens[caller]))
                mcps.append(m)
                w.mcp[transport, caller] = m
        with ThreadPoolExecutor(len(mcps)) as pool:
            list(pool.map(Mcp.open, mcps))
        # The removed member used the team on every connection and session before it was removed.
        for transport in ("unix", "tcp"):
            assert w.clients[transport, "removed"].call("get", {"path": f"@{TEAM}/{DEPLOY}"})["revision"] == sha(V2)
        for transport in MCP_TRANSPORTS:
            ok, got = w.mcp[transport, "removed"].tool("memory_get", {"path": f"@{TEAM}/{DEPLOY}"})
            assert ok and got["revision"] == sha(V2), got
        reg.modify(h.home, lambda r, now: r.remove_member(TEAM, "removed"))
        yield w
        total = sum(w.cells.values())
        print(f"\n[team matrix] {total} cells: " + ", ".join(f"{t} {n}" for t, n in sorted(w.cells.items())))
    finally:
        for c in opened:
            c.close()
        for m in mcps:
            m.client.close()
        h.stop()


# -- the methods ---------------------------------------------------------------------------------------------


Ctx = dict[str, Any]


@dataclass(frozen=True)
class Method:
    """One row of the matrix: the role it needs in the team, how to prepare a cell, how each transport calls it
    (``team`` is the mount's name in the paths), and what an allowed call must have done."""

    name: str
    needs: str
    call: Callable[[HubClient, Ctx, str], dict[str, Any]]
    check: Callable[[World, Ctx, dict[str, Any], str, bool], None]
    prepare: Callable[[World, str], Ctx] = lambda w, cell: {}
    tool: Callable[[Ctx, str], tuple[str, dict[str, Any]]] | None = None
    by_id: bool = False
    """Addressed by a proposal id, not a path: looked for only in the teams the caller maintains."""


def _diff(c: HubClient, ctx: Ctx, team: str) -> dict[str, Any]:
    """What ``amux memory diff PATH --from REV`` reads: the stored version and the live document."""
    old, old_rev = read_version(c, f"@{team}/{DEPLOY}", ctx["from"])
    new, new_rev = read_version(c, f"@{team}/{DEPLOY}")
    return {"old": old, "old_revision": old_rev, "new": new, "new_revision": new_rev}


def _paths(items: list[dict[str, Any]]) -> list[str]:
    return [str(i["path"]) for i in items]


def _all_team(paths: list[str]) -> bool:
    return bool(paths) and all(p.startswith(f"@{TEAM}/") for p in paths)


def _check_search(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert _all_team(_paths(r["matches"])) and f"@{TEAM}/{DEPLOY}" in _paths(r["matches"]), r


def _check_get(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert (r["path"], r["revision"], text_of(r["content"])) == (f"@{TEAM}/{DEPLOY}", sha(V2), V2), r


def _check_export(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert (r["path"], r["revision"], bytes(r["content"])) == (f"@{TEAM}/{DEPLOY}", sha(V2), V2), r


def _check_list(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert _all_team(_paths(r["entries"])) and f"@{TEAM}/{DEPLOY}" in _paths(r["entries"]), r


def _check_history(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert r["path"] == f"@{TEAM}/{DEPLOY}" and [v["revision"] for v in r["versions"]] == [sha(V2), sha(V1)], r


def _check_diff(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert (r["old"], r["old_revision"], r["new"], r["new_revision"]) == (V1, sha(V1), V2, sha(V2)), r


def _check_log(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert _all_team(_paths(r["changes"])) and r["changes"][0]["path"] == f"@{TEAM}/{ctx['path']}", r


def _check_upsert(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert r["path"] == f"@{TEAM}/{ctx['path']}", r
    if agent:  # an agent's write to a team under review "agents" is a proposal: nothing applied
        assert r["proposed"] is True and not w.team_file(ctx["path"]).exists(), r
    else:
        assert r["revision"] == sha(ctx["content"]) and w.team_file(ctx["path"]).read_bytes() == ctx["content"], r


def _check_forget(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert r["path"] == f"@{TEAM}/{ctx['path']}", r
    if agent:
        assert r["proposed"] is True and w.team_file(ctx["path"]).exists(), r
    else:
        assert r["deleted"] is True and not w.team_file(ctx["path"]).exists(), r


def _check_restore(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert r["restored_from"] == ctx["revisions"][0] and w.team_file(ctx["path"]).read_bytes() == ctx["versions"][0]


def _check_purge(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert [e["revision"] for e in r["erased"]] == [ctx["revisions"][0]], r
    with pytest.raises(HubError) as gone:
        w.admin.call("export", {"path": f"@{TEAM}/{ctx['path']}", "revision": ctx["revisions"][0]})
    assert gone.value.data.get("reason") == "purged", gone.value


def _check_copy(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert (r["source"], r["path"], r["moved"]) == ("mine.md", f"@{TEAM}/{ctx['dest']}", False), r
    assert w.team_file(ctx["dest"]).read_bytes() == MINE


def _check_copy_out(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert (r["source"], r["path"]) == (f"@{TEAM}/{DEPLOY}", ctx["dest"]), r
    assert w.own_file(caller, ctx["dest"]).read_bytes() == V2


def _check_move(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert r["moved"] is True and not w.team_file(ctx["path"]).exists(), r
    assert w.own_file(caller, ctx["dest"]).read_bytes() == ctx["content"]


def _check_review_list(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    """A maintainer's list holds every proposal, the proposer's its own (all of them here), a reader's none."""
    ids = [p["id"] for p in r["proposals"]]
    if caller == "reader":
        assert (ids, r["pending"]) == ([], 0), r
    else:
        assert _all_team(_paths(r["proposals"])) and w.shared_proposal in ids, r


def _check_review_show(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert (r["proposal"]["id"], r["proposal"]["path"]) == (ctx["id"], f"@{TEAM}/proposed/shared.md"), r


def _check_approve(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert (r["status"], r["path"]) == ("approved", f"@{TEAM}/{ctx['path']}"), r
    assert w.team_file(ctx["path"]).read_bytes() == ctx["content"]
    newest = w.admin.call("history", {"path": f"@{TEAM}/{ctx['path']}"})["versions"][0]
    assert newest["actor"]["principal"] == caller and newest["review"]["proposed_by"]["principal"] == "writer"


def _check_reject(w: World, ctx: Ctx, r: dict[str, Any], caller: str, agent: bool) -> None:
    assert r["status"] == "rejected" and not w.team_file(ctx["path"]).exists(), r


def _cell_note(cell: str) -> bytes:
    return f"# Cell {cell}\n\nWritten for one cell of the matrix.\n".encode()


def _prepare_note(w: World, cell: str) -> Ctx:
    path = f"cells/{cell}.md"
    content = _cell_note(cell)
    return {"path": path, "content": content, "revision": w.put(path, content)[0]}


def _prepare_versions(w: World, cell: str) -> Ctx:
    path = f"cells/{cell}.md"
    versions = [_cell_note(cell), _cell_note(cell) + b"A second version.\n"]
    return {"path": path, "versions": versions, "revisions": w.put(path, *versions)}


def _prepare_proposal(w: World, cell: str) -> Ctx:
    path, content = f"proposed/{cell}.md", _cell_note(cell)
    return {"path": path, "content": content, "id": w.propose(path, content)}


def _at(team: str, inner: str) -> str:
    return f"@{team}/{inner}"


METHODS: list[Method] = [
    Method("search", "reader", lambda c, x, t: c.call("search", {"query": KEYWORD, "path_prefix": f"@{t}/"}),
           _check_search, tool=lambda x, t: ("memory_search", {"query": KEYWORD, "path_prefix": f"@{t}/"})),
    Method("get", "reader", lambda c, x, t: c.call("get", {"path": _at(t, DEPLOY)}), _check_get,
           tool=lambda x, t: ("memory_get", {"path": _at(t, DEPLOY)})),
    Method("list", "reader", lambda c, x, t: c.call("list", {"path_prefix": f"@{t}/"}), _check_list),
    Method("export", "reader", lambda c, x, t: c.call("export", {"path": _at(t, DEPLOY)}), _check_export),
    Method("history", "reader", lambda c, x, t: c.call("history", {"path": _at(t, DEPLOY)}), _check_history),
    Method("diff", "reader", _diff, _check_diff, prepare=lambda w, cell: {"from": sha(V1)[:12]}),
    Method("log", "reader", lambda c, x, t: c.call("log", {"path_prefix": f"@{t}/"}), _check_log,
           prepare=_prepare_note),
    Method("copy_out", "reader", lambda c, x, t: c.call("copy", {
        "source": _at(t, DEPLOY), "destination": x["dest"], "expected_revision": "absent"}), _check_copy_out,
        prepare=lambda w, cell: {"dest": f"out/{cell}.md"}),
    Method("upsert", "writer", lambda c, x, t: c.call("upsert", {
        "path": _at(t, x["path"]), "content": x["content"], "expected_revision": "absent"}), _check_upsert,
        prepare=lambda w, cell: {"path": f"cells/{cell}.md", "content": _cell_note(cell)},
        tool=lambda x, t: ("memory_upsert", {"path": _at(t, x["path"]), "content": x["content"].decode(),
                                             "expected_revision": "absent"})),
    Method("forget", "writer", lambda c, x, t: c.call("forget", {
        "path": _at(t, x["path"]), "expected_revision": x["revision"]}), _check_forget, prepare=_prepare_note,
        tool=lambda x, t: ("memory_forget", {"path": _at(t, x["path"]), "expected_revision": x["revision"]})),
    Method("restore", "writer", lambda c, x, t: c.call("restore", {
        "path": _at(t, x["path"]), "revision": x["revisions"][0], "expected_revision": x["revisions"][1]}),
        _check_restore, prepare=_prepare_versions),
    Method("copy", "writer", lambda c, x, t: c.call("copy", {
        "source": "mine.md", "destination": _at(t, x["dest"]), "expected_revision": "absent"}), _check_copy,
        prepare=lambda w, cell: {"dest": f"cells/{cell}.md"}),
    Method("move", "writer", lambda c, x, t: c.call("copy", {
        "source": _at(t, x["path"]), "destination": x["dest"], "expected_revision": "absent", "move": True}),
        _check_move, prepare=lambda w, cell: {**_prepare_note(w, cell), "dest": f"moved/{cell}.md"}),
    Method("purge", "maintainer", lambda c, x, t: c.call("purge", {
        "path": _at(t, x["path"]), "revision": x["revisions"][0]}), _check_purge, prepare=_prepare_versions),
    Method("review_list", "reader", lambda c, x, t: c.call("review_list", {"path_prefix": f"@{t}/"}),
           _check_review_list),
    # Shown to its proposer (the writer) and the maintainer: "writer" or stronger, as the matrix's ranks go.
    Method("review_show", "writer", lambda c, x, t: c.call("review_show", {"id": x["id"]}), _check_review_show,
           prepare=lambda w, cell: {"id": w.shared_proposal}, by_id=True),
    Method("approve", "maintainer", lambda c, x, t: c.call("review_decide", {
        "id": x["id"], "decision": "approve", "expected_revision": "absent"}), _check_approve,
        prepare=_prepare_proposal, by_id=True),
    Method("reject", "maintainer", lambda c, x, t: c.call("review_decide", {
        "id": x["id"], "decision": "reject", "reason": "not for the team"}), _check_reject,
        prepare=_prepare_proposal, by_id=True),
]


def expected_denial(caller: str, method: Method) -> tuple[str, dict[str, Any]] | None:
    """``None`` when ``caller`` may call ``method`` on the team, else the error ``(code, data)`` it must get."""
    if caller not in WITHOUT_MOUNT and RANK.index(ROLE[caller]) >= RANK.index(method.needs):
        return None
    if method.by_id and caller == PROPOSER:  # its own proposal: seen, but a maintainer decides
        return "unauthorized", {"reason": "role", "mount": f"@{TEAM}/", "role": ROLE[caller], "needs": method.needs}
    if method.by_id:  # a proposal the caller may not see: exactly an unknown id
        return "not_found", {"proposal": "<id>"}
    if caller in WITHOUT_MOUNT:
        return "not_found", {"mount": f"@{TEAM}/", "reason": "no_mount"}
    return "unauthorized", {"reason": "role", "mount": f"@{TEAM}/", "role": ROLE[caller], "needs": method.needs}


@dataclass
class Verdicts:
    """What a transport's cells found: failures (reported together) and the denials of callers without the mount,
    normalized (the outsider's and the removed member's must be the same)."""

    failures: list[str] = field(default_factory=list)
    without_mount: dict[tuple[str, str], str] = field(default_factory=dict)

    def cell(self, label: str, run: Callable[[], None]) -> None:
        try:
            run()
        except AssertionError as exc:
            self.failures.append(f"{label}: {str(exc)[:600]}")

    def finish(self) -> None:
        for (method, caller), text in self.without_mount.items():
            if caller == "removed":
                self.cell(f"{method}: removed = outsider",
                          lambda m=method, x=text: _same(x, self.without_mount[m, "outsider"]))
        assert self.failures == [], f"{len(self.failures)} cells failed:\n" + "\n".join(self.failures)


def _same(a: str, b: str) -> None:
    import difflib
    assert a == b, "\n".join(difflib.unified_diff(b.split("\\n"), a.split("\\n"), lineterm="", n=1))


def run_cell(w: World, v: Verdicts, transport: str, caller: str, method: Method,
             perform: Callable[[Ctx, str], Answer], agent: bool) -> None:
    """One cell: prepare, call on the team, check the effect or the denial (nothing written; for a caller without
    the mount or a proposal id, the same answer as for a team or an id that does not exist)."""
    cell = f"{transport}-{caller}-{method.name}"
    w.cells[transport] = w.cells.get(transport, 0) + 1

    def run() -> None:
        ctx = method.prepare(w, cell)
        denial = expected_denial(caller, method)
        before = snapshot(w.hub.home) if denial is not None else {}
        ok, answer = perform(ctx, TEAM)
        if denial is None:
            assert ok, f"refused: {answer}"
            method.check(w, ctx, answer, caller, agent)
            return
        assert not ok, f"allowed: {str(answer)[:300]}"
        code, data = denial
        ids = [ctx["id"]] if method.by_id else []
        shown = {k: "<id>" if method.by_id and v == ctx["id"] else v for k, v in answer["data"].items()}
        assert (answer["code"], shown) == (code, data), answer
        assert snapshot(w.hub.home) == before, "a denied call changed files of the home"
        if caller in WITHOUT_MOUNT or (method.by_id and code == "not_found"):
            other_ctx = {**ctx, "id": UNKNOWN_ID} if method.by_id else ctx
            other_ok, other = perform(other_ctx, MISSING)
            assert not other_ok, other
            assert normalized(answer, *ids) == normalized(other, *([UNKNOWN_ID] if method.by_id else [])), \
                f"differs from a missing team's answer:\n{answer}\n{other}"
        if caller in WITHOUT_MOUNT:
            v.without_mount[method.name, caller] = normalized(answer, *ids)

    v.cell(cell, run)


def protocol_perform(c: HubClient, method: Method) -> Callable[[Ctx, str], Answer]:
    def perform(ctx: Ctx, team: str) -> Answer:
        try:
            return True, method.call(c, ctx, team)
        except HubError as exc:
            return False, error_of(exc)

    return perform


def mcp_perform(m: Mcp, method: Method) -> Callable[[Ctx, str], Answer]:
    assert method.tool is not None
    tool = method.tool

    def perform(ctx: Ctx, team: str) -> Answer:
        return m.tool(*tool(ctx, team))

    return perform


def _whole_view(w: World, v: Verdicts, transport: str, caller: str) -> None:
    """Calls that name no mount cover every mount the caller has (DESIGN.md §7.8): a member's search finds the team
    note; a caller without the mount gets nothing of the team (no match, count, part, entry, change or proposal);
    a maintainer's review list holds the team's proposals, the proposer's its own, a reader's none."""
    mcp = transport in MCP_TRANSPORTS
    team = f"@{TEAM}/"

    def search() -> None:
        if mcp:
            ok, r = w.mcp[transport, caller].tool("memory_search", {"query": KEYWORD})
            assert ok, r
        else:
            r = w.clients[transport, caller].call("search", {"query": KEYWORD})
        if caller in WITHOUT_MOUNT:
            assert (r["matches"], r["candidates"], "parts" in r, team in json.dumps(r)) == ([], 0, False, False), r
        else:
            assert f"@{TEAM}/{DEPLOY}" in _paths(r["matches"]) and [p["mount"] for p in r["parts"]] == ["", team], r

    v.cell(f"{transport}-{caller}-search everything", search)
    w.cells[transport] += 1
    if mcp:
        return
    c = w.clients[transport, caller]

    def listing() -> None:
        paths = _paths(list_all(c)[0])
        assert (f"@{TEAM}/{DEPLOY}" in paths) is (caller not in WITHOUT_MOUNT), paths
        if caller in WITHOUT_MOUNT:
            assert not any(p.startswith("@") for p in paths), paths

    def log() -> None:
        r = c.call("log", {"limit": 200})
        if caller in WITHOUT_MOUNT:
            assert r["next_cursor"] is None and r["changes"] and team not in json.dumps(r), r

    def reviews() -> None:
        r = review_all(c)
        ids = [p["id"] for p in r["proposals"]]
        assert (w.shared_proposal in ids) is (caller in ("maintainer", PROPOSER)), r
        if caller in WITHOUT_MOUNT:
            assert team not in json.dumps(r), r
        elif caller == "reader":
            assert (ids, r["pending"]) == ([], 0), r

    def partial() -> None:  # a prefix "@w" names the mounts whose label starts with it
        r = c.call("search", {"query": KEYWORD, "path_prefix": f"@{TEAM[0]}"})
        if caller in WITHOUT_MOUNT:
            other = c.call("search", {"query": KEYWORD, "path_prefix": f"@{MISSING[0]}"})
            assert r["matches"] == [] and {**r, "elapsed_ms": 0} == {**other, "elapsed_ms": 0}, (r, other)
        else:
            assert _all_team(_paths(r["matches"])) and f"@{TEAM}/{DEPLOY}" in _paths(r["matches"]), r

    for name, check in (("list everything", listing), ("log everything", log), ("review everything", reviews),
                        ("search a partial mount prefix", partial)):
        v.cell(f"{transport}-{caller}-{name}", check)
        w.cells[transport] += 1


def test_every_method_through_the_protocol_and_every_tool_through_mcp(world: World) -> None:
    """Unix socket and TCP: every method; the relay and MCP over HTTP: every tool; then the calls that name no
    mount.  One test, so one Hub serves them all wherever the test runs."""
    v = Verdicts()
    for transport in ("unix", "tcp"):
        for method in METHODS:
            for caller in CALLERS:
                run_cell(world, v, transport, caller, method,
                         protocol_perform(world.clients[transport, caller], method), agent=False)
    for transport in MCP_TRANSPORTS:
        for method in METHODS:
            if method.tool is None:
                continue
            for caller in CALLERS:
                run_cell(world, v, transport, caller, method, mcp_perform(world.mcp[transport, caller], method),
                         agent=True)
    for transport in ("unix", "tcp", *MCP_TRANSPORTS):
        for caller in CALLERS:
            _whole_view(world, v, transport, caller)
    v.finish()
    assert world.cells == {"unix": 115, "tcp": 115, "relay": 25, "http": 25}


# -- the web page ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """One method as the web page exposes it: a GET of ``url`` or a POST of ``form`` (both of ``ctx`` and the
    team's name), and what the page shows when allowed."""

    name: str
    needs: str
    url: Callable[[Ctx, str], str]
    form: Callable[[Ctx, str], dict[str, str]] | None
    check: Callable[[World, Ctx, str], None]
    prepare: Callable[[World, str], Ctx] = lambda w, cell: {}
    by_id: bool = False
    whole_view: bool = False
    """The page names no mount (search, the review queue): a caller without it sees nothing of the team, no
    error."""


def _shows(*texts: str) -> Callable[[World, Ctx, str], None]:
    def check(w: World, ctx: Ctx, body: str) -> None:
        for text in texts:
            assert text in body, f"{text!r} not on the page"
    return check


def _page_written(w: World, ctx: Ctx, body: str) -> None:
    assert w.team_file(ctx["path"]).read_bytes() == ctx["content"]


def _page_forgotten(w: World, ctx: Ctx, body: str) -> None:
    assert not w.team_file(ctx["path"]).exists()


def _page_restored(w: World, ctx: Ctx, body: str) -> None:
    assert w.team_file(ctx["path"]).read_bytes() == ctx["versions"][0]


def _page_purged(w: World, ctx: Ctx, body: str) -> None:
    with pytest.raises(HubError) as gone:
        w.admin.call("export", {"path": f"@{TEAM}/{ctx['path']}", "revision": ctx["revisions"][0]})
    assert gone.value.data.get("reason") == "purged", gone.value


def _page_rejected(w: World, ctx: Ctx, body: str) -> None:
    shown = w.admin.call("review_show", {"id": ctx["id"]})
    assert shown["proposal"]["status"] == "rejected" and not w.team_file(ctx["path"]).exists(), shown


def _team_cursor(t: str) -> str:
    return quote(f"@{t}/|", safe="")


PAGES: list[Page] = [
    Page("search", "reader", lambda x, t: f"/search?q={KEYWORD}", None, _shows(f"@{TEAM}/{DEPLOY}"), whole_view=True),
    Page("export", "reader", lambda x, t: f"/doc/@{t}/{DEPLOY}", None, _shows("Never on a Friday.")),
    Page("list", "reader", lambda x, t: f"/?cursor={_team_cursor(t)}", None, _shows(f"@{TEAM}/{DEPLOY}")),
    Page("log", "reader", lambda x, t: f"/log?cursor={_team_cursor(t)}", None, _shows(f"@{TEAM}/cells/"),
         prepare=_prepare_note),
    Page("history", "reader", lambda x, t: f"/history/@{t}/{DEPLOY}", None, _shows(sha(V1)[:12], sha(V2)[:12])),
    Page("diff", "reader", lambda x, t: f"/diff/@{t}/{DEPLOY}?from={sha(V1)}", None, _shows("Never on a Friday.")),
    Page("upsert", "writer", lambda x, t: "/save", lambda x, t: {
        "path": f"@{t}/{x['path']}", "content": x["content"].decode(), "expected_revision": "absent"},
        _page_written, prepare=lambda w, cell: {"path": f"cells/{cell}.md", "content": _cell_note(cell)}),
    Page("forget", "writer", lambda x, t: "/forget", lambda x, t: {
        "path": f"@{t}/{x['path']}", "expected_revision": x["revision"], "confirm": "on"}, _page_forgotten,
        prepare=_prepare_note),
    Page("restore", "writer", lambda x, t: "/restore", lambda x, t: {
        "path": f"@{t}/{x['path']}", "revision": x["revisions"][0], "expected_revision": x["revisions"][1]},
        _page_restored, prepare=_prepare_versions),
    Page("purge", "maintainer", lambda x, t: "/purge", lambda x, t: {
        "path": f"@{t}/{x['path']}", "revision": x["revisions"][0], "confirm": "on"}, _page_purged,
        prepare=_prepare_versions),
    Page("review_list", "writer", lambda x, t: "/review", None, lambda w, x, body: _shows(w.shared_proposal)(
        w, x, body), whole_view=True),
    Page("review_show", "writer", lambda x, t: f"/review/{x['id']}", None,
         _shows(f"@{TEAM}/proposed/shared.md"), prepare=lambda w, cell: {"id": w.shared_proposal}, by_id=True),
    Page("approve", "maintainer", lambda x, t: "/review/decide", lambda x, t: {
        "id": x["id"], "decision": "approve", "expected_revision": "absent"}, _page_written,
        prepare=_prepare_proposal, by_id=True),
    Page("reject", "maintainer", lambda x, t: "/review/decide", lambda x, t: {
        "id": x["id"], "decision": "reject", "reason": "not for the team"}, _page_rejected,
        prepare=_prepare_proposal, by_id=True),
]


@dataclass
class Browser:
    """One ``amux ui`` for a principal, signed in: its cookie and the CSRF token of its session."""

    ui: UiProcess
    cookie: str = ""
    csrf: str = ""

    def fetch(self, page: Page, ctx: Ctx, team: str) -> tuple[int, str]:
        form = page.form(ctx, team) if page.form is not None else None
        status, headers, body = request(self.ui, "POST" if form is not None else "GET", page.url(ctx, team),
                                        cookie=self.cookie, form=None if form is None else {**form, "csrf": self.csrf})
        return status, body + headers.get("location", "")


def _start_browser(w: World, caller: str) -> Browser:
    env = {k: v for k, v in w.hub.env.items() if k != "AMUX_TOKEN"}
    b = Browser(start_ui({**env, "AMUX_TOKEN": w.tokens[caller]}, tmp=w.tmp))
    b.cookie = b.ui.sign_in()
    _, _, body = request(b.ui, "GET", "/new", cookie=b.cookie)
    b.csrf = csrf_of(body)
    return b


@pytest.mark.slow
def test_every_page_of_the_web_page(world: World) -> None:
    """``amux ui`` run as each principal (its ``AMUX_TOKEN``): every page and form that reaches a team note or the
    team's review queue, allowed or denied as through the protocol, nothing written on a denial, a caller without
    the mount shown what a team that does not exist shows."""
    with ThreadPoolExecutor(len(CALLERS)) as pool:
        browsers = dict(zip(CALLERS, pool.map(lambda c: _start_browser(world, c), CALLERS), strict=True))
    v = Verdicts()
    try:
        for page in PAGES:
            for caller in CALLERS:
                _page_cell(world, v, browsers[caller], caller, page)
    finally:
        for b in browsers.values():
            b.ui.stop()
    v.finish()
    assert world.cells["ui"] == len(PAGES) * len(CALLERS) == 70


def _page_cell(w: World, v: Verdicts, b: Browser, caller: str, page: Page) -> None:
    cell = f"ui-{caller}-{page.name}"
    w.cells["ui"] = w.cells.get("ui", 0) + 1
    allowed = caller not in WITHOUT_MOUNT and RANK.index(ROLE[caller]) >= RANK.index(page.needs)

    def run() -> None:
        ctx = page.prepare(w, cell)
        before = snapshot(w.hub.home)
        status, body = b.fetch(page, ctx, TEAM)
        if allowed:
            assert status in (200, 303), (status, body[:500])
            if status == 303:  # a form that worked moves on; the page it leads to is not this check's
                assert "error" not in body.lower(), body[:500]
            page.check(w, ctx, body)
            return
        assert snapshot(w.hub.home) == before, "a denied page changed files of the home"
        ids = [ctx["id"]] if page.by_id else []
        if page.whole_view:
            assert f"@{TEAM}/" not in body and all(i not in body for i in (*ids, w.shared_proposal)), body[:500]
            return
        unknown = page.by_id and caller != PROPOSER  # its own proposal: seen, but a maintainer decides
        if caller not in WITHOUT_MOUNT:
            code = "not_found" if unknown else "unauthorized"
            assert code in body, (status, body[:800])
        if caller in WITHOUT_MOUNT or unknown:
            other_ctx = {**ctx, "id": UNKNOWN_ID} if page.by_id else ctx
            other_status, other = b.fetch(page, other_ctx, MISSING)
            assert (status, normalized({"page": body}, *ids)) == (
                other_status, normalized({"page": other}, *([UNKNOWN_ID] if page.by_id else []))), \
                f"differs from a missing team's page:\n{body}\n{other}"
        if caller in WITHOUT_MOUNT:
            # Each caller has its own session and wrote its own note at its own time.
            own = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z?", "<time>",
                         body.replace(caller, "<caller>").replace(b.csrf, "<csrf>"))
            v.without_mount[page.name, caller] = normalized({"page": own}, *ids)

    v.cell(cell, run)
