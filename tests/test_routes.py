"""The route table (DESIGN.md §2.2): a method added through a table alone is answered end to end, and a table
whose entry lacks a field, or contradicts itself, is refused when it is built."""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from amux_memory.hub.access.identity import GLOBAL, MCP_CLIENT, Identity
from amux_memory.hub.access.mounts import READ, WRITE
from amux_memory.hub.mcp.tools import hub_backend
from amux_memory.hub.methods.calls import Call, Kind, Reach, Route, Who, check_routes
from amux_memory.hub.methods.routes import ROUTES, data_methods
from amux_memory.hub.serve.hub import Hub
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.messages import PROTOCOL_VERSION, Response, decode_response, encode_request
from tests.helpers import hub_config


def echo(memory: Any, call: Call) -> dict[str, Any]:
    """The test method's handler: run under its scope's lock, it says what it was given."""
    return {"echo": call.params["say"], "scope": call.scope.binding, "principal": call.actor.principal,
            "locked": memory._lock(call.scope).locked()}


def parse_echo(params: dict[str, Any]) -> dict[str, Any]:
    """The test method's parser: ``say``, a string."""
    if set(params) != {"say"} or not isinstance(params["say"], str):
        raise HubError(ErrorCode.BAD_REQUEST, "echo takes one string, 'say'", {"field": "say"})
    return params


ECHO = Route("echo", Kind.DATA, Reach.ROOT, READ, locked=True, proposes=False, parse=parse_echo, handler=echo)
WITH_ECHO = {**ROUTES, "echo": ECHO}


async def exchange(stream: trio.SocketStream, decoder: FrameDecoder, rid: int, method: str,
                   params: dict[str, Any]) -> Response:
    await stream.send_all(encode_request(rid, method, params))
    with trio.fail_after(10):
        while (body := decoder.next_frame()) is None:
            decoder.feed(await stream.receive_some(65536))
    return decode_response(body)


async def test_a_method_added_through_the_table_alone_works_over_the_socket_and_mcp(tmp_path: Path) -> None:
    check_routes(WITH_ECHO)
    hub = Hub(hub_config(tmp_path), LIMITS, routes=WITH_ECHO)
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client, decoder = trio.SocketStream(b), FrameDecoder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        hello = (await exchange(client, decoder, 1, "hello", {"protocol": PROTOCOL_VERSION})).unwrap()
        assert "echo" in hello["methods"] and hello["methods"] == data_methods(WITH_ECHO)
        answer = (await exchange(client, decoder, 2, "echo", {"say": "hi"})).unwrap()
        assert answer == {"echo": "hi", "scope": "global", "principal": hello["principal"], "locked": True}
        refused = await exchange(client, decoder, 3, "echo", {"say": 7})
        assert refused.error is not None and refused.error.code is ErrorCode.BAD_REQUEST
        # Every MCP tool call, over HTTP or the relay, runs through this backend (hub.mcp.tools.MemoryTools.forward).
        identity = Identity(hello["principal"], "user", "os", uid=None)
        backend = hub_backend(partial(hub.call, transport="mcp_http"), identity, GLOBAL)
        assert (await backend("echo", {"say": "over mcp"}))["echo"] == "over mcp"
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_the_default_table_does_not_know_the_test_method(tmp_path: Path) -> None:
    hub = Hub(hub_config(tmp_path), LIMITS)
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client, decoder = trio.SocketStream(b), FrameDecoder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        (await exchange(client, decoder, 1, "hello", {"protocol": PROTOCOL_VERSION})).unwrap()
        unknown = await exchange(client, decoder, 2, "echo", {"say": "hi"})
        assert unknown.error is not None and unknown.error.code is ErrorCode.BAD_REQUEST
        assert unknown.error.message.startswith("unknown method 'echo'; known: backup_stage, copy, export")
        assert unknown.id == 2
        await client.aclose()
        nursery.cancel_scope.cancel()


def test_a_route_missing_a_field_fails_where_it_is_declared() -> None:
    with pytest.raises(TypeError, match="handler"):
        Route("echo", Kind.DATA, Reach.ROOT, READ, locked=True, proposes=False, parse=parse_echo)  # type: ignore[call-arg]


@pytest.mark.parametrize(("entry", "problem"), [
    (Route("echo", Kind.DATA, Reach.ROOT, READ, locked=True, proposes=False, parse=None, handler=echo),
     "data method without"),
    (Route("echo", Kind.DATA, Reach.NONE, READ, locked=True, proposes=False, parse=parse_echo, handler=echo),
     "data method without"),
    (Route("echo", Kind.RUN, Reach.ROOT, None, locked=False, proposes=False, parse=parse_echo, handler=echo),
     "meets mounts"),
    (Route("echo", Kind.OPERATOR, Reach.NONE, None, locked=False, proposes=False, parse=parse_echo, handler=echo,
           who=Who.OPERATOR), "operator method with a command"),
    (Route("other", Kind.DATA, Reach.ROOT, WRITE, locked=True, proposes=False, parse=parse_echo, handler=echo),
     "filed under"),
])
def test_a_table_whose_entry_contradicts_itself_is_refused(entry: Route, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_routes({**ROUTES, "echo": entry})


def test_a_module_declaring_a_bad_table_fails_at_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "planted_routes.py").write_text(
        "from amux_memory.hub.methods.calls import Kind, Reach, Route, check_routes\n"
        "from amux_memory.hub.methods.routes import ROUTES\n"
        "TABLE = {**ROUTES, 'x': Route('x', Kind.DATA, Reach.ROOT, 'reader', locked=False, proposes=False,\n"
        "                             parse=None, handler=None)}\n"
        "check_routes(TABLE)\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="route 'x' is a data method without"):
        __import__("planted_routes")
    assert "planted_routes" not in sys.modules


def _team_hub(tmp_path: Path, table: dict[str, Route]) -> Hub:
    """An in-process Hub (isolation ``user``) whose caller, this process's OS account, is a writer of team
    ``web`` (review ``agents``), answering ``table``."""
    import pwd

    from amux_memory.hub.access import registry as reg

    me = pwd.getpwuid(os.getuid()).pw_name
    config = hub_config(tmp_path, isolation="user")
    reg.modify(config.home, lambda r, now: r.add_team("web", "agents", now))
    reg.modify(config.home, lambda r, now: r.add_principal(me, "user", now))
    reg.modify(config.home, lambda r, now: r.add_member("web", me, "writer"))
    return Hub(config, LIMITS, routes=table)


async def _session(hub: Hub, calls: list[tuple[str, dict[str, Any]]], client: str = "") -> list[Response]:
    """Open a connection to ``hub``, say ``hello`` (as ``client``), run ``calls`` in order; their responses."""
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stream, decoder = trio.SocketStream(b), FrameDecoder()
    answers: list[Response] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        hello = {"protocol": PROTOCOL_VERSION, **({"client": client} if client else {})}
        (await exchange(stream, decoder, 1, "hello", hello)).unwrap()
        for rid, (method, params) in enumerate(calls, start=2):
            answers.append(await exchange(stream, decoder, rid, method, params))
        await stream.aclose()
        nursery.cancel_scope.cancel()
    return answers


async def test_a_paged_method_added_through_the_table_pages_across_mounts_as_list_does(tmp_path: Path) -> None:
    listed = replace(ROUTES["list"], name="list2")
    hub = _team_hub(tmp_path, {**ROUTES, "list2": listed})
    writes = [("upsert", {"path": path, "content": b"# x\n", "expected_revision": "absent"})
              for path in ("mine.md", "@web/team.md")]
    prefixes = ("", "@web/", "@w", "@nope", "mine")
    answers = await _session(hub, writes + [(method, {"path_prefix": prefix}) for prefix in prefixes
                                            for method in ("list", "list2")])
    assert all(a.error is None for a in answers[:2])
    pages = [a.unwrap() for a in answers[2:]]
    assert pages[0::2] == pages[1::2]  # list2 answers exactly as list, for every prefix
    assert [[e["path"] for e in page["entries"]] for page in pages[0::2]] == [
        ["mine.md"], ["@web/team.md"], ["@web/team.md"], [], ["mine.md"]]
    assert pages[0]["next_cursor"] == "@web/|"  # the root's page, then the mount's


async def test_whether_a_write_may_become_a_proposal_is_the_tables(tmp_path: Path) -> None:
    upsert = {"path": "@web/agent.md", "content": b"# From an agent\n", "expected_revision": "absent"}
    reviewed = await _session(_team_hub(tmp_path / "a", dict(ROUTES)), [("upsert", upsert)], client=MCP_CLIENT)
    assert reviewed[0].unwrap()["proposed"] is True
    table = {**ROUTES, "upsert": replace(ROUTES["upsert"], proposes=False)}
    written = await _session(_team_hub(tmp_path / "b", table), [("upsert", upsert)], client=MCP_CLIENT)
    assert written[0].unwrap().get("proposed") is None and written[0].unwrap()["created"] is True
