"""The client core: the sans-I/O ``ClientConnection``, the request builders, the settings, and both clients over it.

``ClientConnection`` is tested with bytes only (no sockets).  The clients are
tested against a real Hub (``hub`` fixture) and against small scripted stub
Hubs for the failures a real Hub does not produce on demand.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgpack
import pytest

from amux_memory.hub.methods.routes import ROUTES
from amux_memory.protocol.connection import ClientConnection, ConnectionClosed, unencodable
from amux_memory.protocol.endpoint import Endpoint
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.framing import FrameDecoder, FrameTooLarge, encode_frame
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.messages import PROTOCOL_VERSION, decode_request, encode_error, encode_result
from amux_memory.protocol.requests import (
    export_params,
    forget_params,
    get_params,
    hello_params,
    list_params,
    search_params,
    upsert_params,
)
from amux_memory.tools.client.blocking import HubClient
from amux_memory.tools.client.paging import export_document, list_all
from amux_memory.tools.client.settings import (
    ClientSettings,
    connect_deadline_from_env,
    resolve_endpoint,
    resolve_socket,
)
from tests.conftest import HubProcess

LONE = "\udcff"
"""What Python makes of the byte 0xff in a non-UTF-8 argv or file name (surrogateescape)."""

METHODS = frozenset(ROUTES)
"""The Hub's method names (its route table)."""


def requests_in(frame: bytes) -> list[Any]:
    """The request maps in ``frame`` bytes (one or more whole frames)."""
    decoder = FrameDecoder()
    decoder.feed(frame)
    out = []
    while (body := decoder.next_frame()) is not None:
        out.append(msgpack.unpackb(body, raw=False))
    return out


# -- request builders --------------------------------------------------------------------------------------------


def test_builders_send_optional_fields_only_when_set() -> None:
    assert hello_params("amux-cli") == {"protocol": PROTOCOL_VERSION, "client": "amux-cli"}
    assert hello_params("c", "global", "t") == {"protocol": PROTOCOL_VERSION, "client": "c", "binding": "global",
                                                "token": "t"}
    assert hello_params("c", "", "") == {"protocol": PROTOCOL_VERSION, "client": "c"}
    assert search_params("a b") == {"query": "a b"}
    assert search_params("a", limit=3, path_prefix="p/") == {"query": "a", "limit": 3, "path_prefix": "p/"}
    assert get_params("a.md") == {"path": "a.md", "start_line": 0, "end_line": 0, "offset": 0}
    assert upsert_params("a.md", b"x", "absent") == {"path": "a.md", "content": b"x", "expected_revision": "absent"}
    assert upsert_params("a.md", "x", "absent", allow_shrink=True)["allow_shrink"] is True
    assert forget_params("a.md", "absent") == {"path": "a.md", "expected_revision": "absent"}
    assert export_params("a.md") == {"path": "a.md", "offset": 0}
    assert export_params("a.md", offset=9, expected_revision="r") == {"path": "a.md", "offset": 9,
                                                                      "expected_revision": "r"}
    assert list_params() == {"path_prefix": "", "cursor": ""}


def test_builders_make_params_the_hub_accepts() -> None:
    from amux_memory.protocol import params as p

    rev = "a" * 64
    assert p.parse_hello(hello_params("c", "global", "t")).binding == "global"
    assert p.parse_search(search_params("x y", limit=2, path_prefix="d/")).keywords == ("x", "y")
    assert p.parse_get(get_params("a.md", start_line=2)).start_line == 2
    assert p.parse_upsert(upsert_params("a.md", b"x\n", rev, allow_shrink=True)).allow_shrink is True
    assert p.parse_upsert(upsert_params("a.md", b"x\n", "absent")).allow_shrink is False
    assert p.parse_forget(forget_params("a.md", rev)).expected_revision == rev
    assert p.parse_export(export_params("a.md", offset=3, expected_revision=rev)).offset == 3
    assert p.parse_list(list_params("d/", "d/a.md")).cursor == "d/a.md"


# -- ClientConnection: ids, frames, matching ---------------------------------------------------------------------


def test_ids_count_up_and_frames_are_exact_requests() -> None:
    conn = ClientConnection()
    rid, frame = conn.hello_request("amux-test", "global", "secret")
    assert rid == 1 and conn.outstanding == (1,)
    assert requests_in(frame) == [{"id": 1, "method": "hello", "params": {
        "protocol": PROTOCOL_VERSION, "client": "amux-test", "binding": "global", "token": "secret"}}]
    rid2, frame2 = conn.send_request("search", {"query": "x"})
    assert rid2 == 2 and conn.outstanding == (1, 2)
    assert decode_request(frame2[4:], METHODS).params == {"query": "x"}
    assert ClientConnection(first_id=40).send_request("get", {})[0] == 40


def test_responses_arrive_in_any_split_and_are_matched_by_id() -> None:
    conn = ClientConnection()
    hello_id, _ = conn.hello_request("c")
    wire = encode_result(hello_id, {"scope": "global"})
    for byte in wire[:-1]:  # one byte at a time: a header split, then a body split
        conn.receive_data(bytes([byte]))
        assert conn.next_response() is None
    conn.receive_data(wire[-1:])
    response = conn.next_response()
    assert response is not None and response.id == hello_id and response.unwrap() == {"scope": "global"}
    assert conn.hello == {"scope": "global"} and conn.outstanding == ()
    assert conn.next_response() is None


def test_two_responses_in_one_read_come_out_one_at_a_time() -> None:
    conn = ClientConnection()
    a, _ = conn.send_request("get", {})
    b, _ = conn.send_request("search", {})
    conn.receive_data(encode_result(b, {"n": "b"}) + encode_result(a, {"n": "a"}))
    first, second = conn.next_response(), conn.next_response()
    assert first is not None and second is not None
    assert (first.id, second.id) == (b, a) and conn.next_response() is None and conn.outstanding == ()


def test_unknown_and_abandoned_ids_are_skipped() -> None:
    conn = ClientConnection()
    late, _ = conn.send_request("get", {})
    conn.abandon(late)  # timed out: its answer must not be taken for the next request's
    current, _ = conn.send_request("get", {})
    conn.receive_data(encode_result(late, {"which": "late"}) + encode_result(999, {"which": "bogus"})
                      + encode_result(current, {"which": "current"}))
    response = conn.next_response()
    assert response is not None and response.id == current and response.unwrap() == {"which": "current"}


def test_an_unaddressed_error_answers_the_oldest_outstanding_request() -> None:
    conn = ClientConnection()
    conn.hello_request("c")
    conn.send_request("get", {})
    conn.receive_data(encode_error(None, HubError(ErrorCode.BUSY, "full", {"maximum": 256})))
    response = conn.next_response()
    assert response is not None and response.id is None and conn.outstanding == (2,)
    with pytest.raises(HubError) as info:
        response.unwrap()
    assert info.value.code is ErrorCode.BUSY and info.value.data == {"maximum": 256}
    assert conn.hello is None  # an error is not a hello reply


def test_hub_errors_come_back_with_code_message_and_data() -> None:
    conn = ClientConnection()
    rid, _ = conn.send_request("upsert", {})
    conn.receive_data(encode_error(rid, HubError(ErrorCode.CONFLICT, "changed", {"observed_revision": "r"})))
    response = conn.next_response()
    assert response is not None and response.error is not None
    assert (response.error.code, response.error.message, response.error.data) == (
        ErrorCode.CONFLICT, "changed", {"observed_revision": "r"})


def test_malformed_and_oversized_responses() -> None:
    conn = ClientConnection()
    conn.send_request("get", {})
    conn.receive_data(encode_frame(b"\xc1"))  # 0xc1 is never valid msgpack
    with pytest.raises(HubError) as info:
        conn.next_response()
    assert info.value.code is ErrorCode.INTERNAL
    small = ClientConnection(max_frame_bytes=64)
    with pytest.raises(FrameTooLarge):
        small.receive_data((65).to_bytes(4, "big"))


# -- ClientConnection: end of stream ---------------------------------------------------------------------------


def test_eof_between_frames_and_inside_one() -> None:
    conn = ClientConnection()
    rid, _ = conn.send_request("get", {})
    conn.receive_data(b"")
    assert conn.closed
    with pytest.raises(ConnectionClosed) as info:
        conn.next_response()
    assert info.value.code is ErrorCode.UNAVAILABLE and not info.value.mid_frame
    with pytest.raises(ConnectionClosed):
        conn.send_request("get", {})  # nothing can be sent on a closed stream
    cut = ClientConnection()
    rid, _ = cut.send_request("get", {})
    cut.receive_data(encode_result(rid, {"x": 1})[:-1])
    cut.receive_data(b"")
    with pytest.raises(ConnectionClosed) as info:
        cut.next_response()
    assert info.value.mid_frame


def test_a_complete_response_before_eof_is_still_delivered() -> None:
    conn = ClientConnection()
    rid, _ = conn.send_request("get", {})
    conn.receive_data(encode_result(rid, {"x": 1}))
    conn.receive_data(b"")
    response = conn.next_response()
    assert response is not None and response.unwrap() == {"x": 1}
    with pytest.raises(ConnectionClosed):
        conn.next_response()


# -- ClientConnection: what cannot be sent ---------------------------------------------------------------------


@pytest.mark.parametrize(("params", "field"), [
    ({"query": LONE}, "query"),
    ({"query": "ok " + LONE + "x"}, "query"),
    ({"path": "a.md", "content": "text" + LONE}, "content"),
    ({"nested": {"inner": [1, LONE]}}, "nested.inner[1]"),
    ({LONE: 1}, "\\udcff"),  # a key: named printably, never echoed raw
])
def test_text_that_is_not_unicode_is_bad_request_before_anything_is_sent(params: dict[str, Any], field: str) -> None:
    conn = ClientConnection()
    with pytest.raises(HubError) as info:
        conn.send_request("search", params)
    assert info.value.code is ErrorCode.BAD_REQUEST and info.value.exit_code == 2
    assert info.value.data["method"] == "search" and info.value.data["field"] == field
    assert "not valid UTF-8" in info.value.message and LONE not in info.value.message
    assert conn.outstanding == ()
    assert conn.send_request("search", {"query": "fine"})[0] == 1  # no id was used up


def test_integers_msgpack_cannot_carry_are_bad_request() -> None:
    conn = ClientConnection()
    for value in (2**64, -(2**63) - 1, 10**30):
        with pytest.raises(HubError) as info:
            conn.send_request("search", {"query": "x", "limit": value})
        assert info.value.code is ErrorCode.BAD_REQUEST and info.value.data["field"] == "limit"
    assert unencodable("get", {"offset": 2**64 - 1, "start": -(2**63), "flag": True}) is None
    assert conn.outstanding == ()


def test_an_oversized_request_is_frame_too_large_before_anything_is_sent() -> None:
    conn = ClientConnection()
    with pytest.raises(HubError) as info:
        conn.send_request("upsert", upsert_params("a.md", b"x" * LIMITS.max_frame_bytes, "absent"))
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE and info.value.data["maximum"] == LIMITS.max_frame_bytes
    assert conn.outstanding == ()


# -- settings --------------------------------------------------------------------------------------------------


def test_settings_from_the_environment(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"AMUX_HOME": str(home), "AMUX_TOKEN": "t", "AMUX_HUB_CA": "/ca.pem", "AMUX_MEMORY_BINDING": "global",
           "AMUX_CONNECT_DEADLINE": "2.5"}
    s = ClientSettings.from_env(env)
    assert s.endpoint == Endpoint("unix", home / "hub.sock")
    assert (s.token, s.ca_file, s.binding, s.connect_deadline) == ("t", "/ca.pem", "global", 2.5)
    empty = ClientSettings.from_env({"AMUX_HOME": str(home), "AMUX_TOKEN": "", "AMUX_MEMORY_BINDING": ""})
    assert (empty.token, empty.binding, empty.ca_file, empty.connect_deadline) == (None, None, None, None)
    assert s.override(binding="", token="u").binding == "" and s.override(token="u").token == "u"
    assert s.override().binding == "global"
    home.mkdir()
    (home / "config.toml").write_text('[hub]\nsocket_path = "/run/other.sock"\n')
    assert resolve_socket(env) == Path("/run/other.sock")
    (home / "config.toml").write_text("not toml [")
    assert resolve_socket(env) == home / "hub.sock"
    assert resolve_endpoint({**env, "AMUX_HUB": "unix:/x.sock"}) == Endpoint("unix", Path("/x.sock"))
    assert resolve_endpoint({**env, "AMUX_HUB": "tls://h:7443"}).kind == "tls"
    assert resolve_socket({**env, "AMUX_HUB": "tls://h:7443"}) == home / "hub.sock"
    for bad in ("", "0", "-1", "soon"):
        assert connect_deadline_from_env({"AMUX_CONNECT_DEADLINE": bad}) is None
    with pytest.raises(HubError) as info:
        ClientSettings.from_env({"AMUX_HUB": "tcp://10.0.0.1:1"})
    assert info.value.code is ErrorCode.BAD_REQUEST and info.value.data == {"hub": "tcp://10.0.0.1:1"}
    # An explicit endpoint does not read AMUX_HUB at all.
    assert ClientSettings.from_env({"AMUX_HUB": "bogus://x"}, socket_path=Path("/s")).endpoint.path == Path("/s")


# -- both clients against a real Hub ---------------------------------------------------------------------------


def test_blocking_client_refuses_unencodable_text_and_stays_usable(hub: HubProcess) -> None:
    with HubClient(hub.socket, timeout=10) as client:
        for method, params in [("search", search_params(LONE)), ("get", get_params(f"a{LONE}.md")),
                               ("upsert", upsert_params("a.md", f"x{LONE}", "absent"))]:
            with pytest.raises(HubError) as info:
                client.call(method, params)
            assert info.value.code is ErrorCode.BAD_REQUEST and info.value.data["method"] == method
        assert client.call("search", search_params("fine"))["matches"] == []
    assert not (hub.scope_dir / "a.md").exists()


def test_the_client_words_a_missing_hub_for_people_and_agents(tmp_path: Path) -> None:
    path = tmp_path / "nobody.sock"
    with pytest.raises(HubError) as blocking:
        HubClient(path, timeout=2).connect()
    assert "no Hub is listening" in blocking.value.message and "amux hub serve" in blocking.value.message
    assert blocking.value.data == {"hub": str(path)}  # the Hub named once


def test_paging_reads_every_page(hub: HubProcess) -> None:
    with HubClient(hub.socket, timeout=10) as client:
        big = b"".join(b"line %05d of a long document\n" % i for i in range(2000))  # several 8 KiB pages
        for name in ("a.md", "b/c.md", "b/d.md"):
            client.call("upsert", upsert_params(name, big, "absent"))
        pages: list[int] = []
        data, revision = export_document(client, "a.md", between_pages=pages.append)
        assert data == big and len(revision) == 64 and len(pages) > 2 and pages == list(range(1, len(pages) + 1))
        entries, incomplete = list_all(client, "b/")
        assert [e["path"] for e in entries] == ["b/c.md", "b/d.md"] and not incomplete


def test_paging_refuses_a_hub_that_makes_no_progress() -> None:
    class Stuck:
        def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
            if method == "list":
                return {"entries": [], "next_cursor": "same"}
            return {"revision": "r", "content": b"", "truncated": True, "next_offset": 0}

    with pytest.raises(HubError) as info:
        list_all(Stuck())
    assert info.value.code is ErrorCode.INTERNAL
    with pytest.raises(HubError) as info:
        export_document(Stuck(), "a.md")
    assert info.value.code is ErrorCode.INTERNAL


# -- the blocking client against a scripted stub Hub ---------------------------------------------------------


@contextmanager
def stub_hub(path: Path, answer: Callable[[Any], bytes | None]) -> Iterator[list[str]]:
    """A one-connection Hub on ``path``: ``hello`` is answered; ``answer(request)`` gives the bytes for any other
    request (``None``: close the connection without answering).  Yields the methods seen."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    seen: list[str] = []

    def serve() -> None:
        conn, _ = server.accept()
        decoder = FrameDecoder()
        with conn:
            while data := conn.recv(65536):
                decoder.feed(data)
                while (body := decoder.next_frame()) is not None:
                    request = decode_request(body, METHODS)
                    seen.append(request.method)
                    reply = (encode_result(request.id, {"scope": "global"}) if request.method == "hello"
                             else answer(request))
                    if reply is None:
                        return
                    conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.close()
        thread.join(5)


def test_blocking_client_says_a_lost_write_is_uncertain_and_a_lost_read_is_not(tmp_path: Path) -> None:
    with (stub_hub(tmp_path / "w.sock", lambda request: None) as seen,
          HubClient(tmp_path / "w.sock", timeout=5) as client, pytest.raises(HubError) as info):
        client.call("upsert", upsert_params("a.md", b"x", "absent"))
    assert seen == ["hello", "upsert"]
    assert info.value.code is ErrorCode.UNAVAILABLE and info.value.data["uncertain"] is True
    assert "read the document again" in info.value.message
    with (stub_hub(tmp_path / "r.sock", lambda request: None),
          HubClient(tmp_path / "r.sock", timeout=5) as client, pytest.raises(HubError) as info):
        client.call("get", get_params("a.md"))
    assert info.value.code is ErrorCode.UNAVAILABLE and "closed the connection" in info.value.message
    assert "uncertain" not in info.value.data


def test_blocking_client_skips_a_late_answer_after_a_timeout(tmp_path: Path) -> None:
    def answer(request: Any) -> bytes | None:
        if request.id == 2:  # the first get is not answered in time; its answer comes just before the second's
            return b""
        return encode_result(request.id - 1, {"n": "late"}) + encode_result(request.id, {"n": "current"})

    with stub_hub(tmp_path / "s.sock", answer), HubClient(tmp_path / "s.sock", timeout=0.3) as client:
        with pytest.raises(HubError) as info:
            client.call("get", get_params("a.md"))
        assert info.value.code is ErrorCode.UNAVAILABLE and "did not answer get within 0.3 s" in info.value.message
        assert info.value.data["uncertain"] is True
        assert client.call("get", get_params("a.md")) == {"n": "current"}
