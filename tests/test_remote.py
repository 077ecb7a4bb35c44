"""Remote Runtimes (TCP/TLS with tokens) and the Hub's bounds against abuse (DESIGN.md §7, §6).

Real Hub subprocesses and the real CLI for what a user does: ``hub.listen`` /
``amux hub serve --listen`` with TLS certificates made by ``trustme`` (no
network: everything is on 127.0.0.1), tokens in ``AMUX_TOKEN``, the CA in
``AMUX_HUB_CA``.  The time bounds (TLS handshake, slow sender, slow reader,
per-request deadline) run in process under Trio's virtual clock, so they
take no real time.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import amux_memory.hub.serve.connection as connection
import amux_memory.hub.serve.listeners as listeners
from amux_memory.hub.access.config import parse_listen
from amux_memory.hub.access.identity import GLOBAL
from amux_memory.hub.access.registry import Registry, modify
from amux_memory.hub.serve.hub import Hub
from amux_memory.hub.serve.run import serve
from amux_memory.protocol.endpoint import is_loopback, parse_endpoint
from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, ExitStatus, HubError, HubStartError
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.messages import Response, decode_response, encode_request
from tests.conftest import CliResult, HubProcess, amux_argv
from tests.helpers import StandInMemory, hub_config, ok

trustme = pytest.importorskip("trustme", reason="trustme makes the test certificates (pip install trustme)")


# -- certificates and Hubs ----------------------------------------------------------------------


@dataclass
class Certs:
    ca: Any
    cert: Path
    key: Path
    ca_file: Path
    other_ca_file: Path  # a CA that did not sign the Hub's certificate


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    d = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost", "::1")
    cert, key, ca_file, other = d / "hub.crt", d / "hub.key", d / "ca.pem", d / "other-ca.pem"
    for blob in leaf.cert_chain_pems:
        with open(cert, "ab") as fh:
            fh.write(blob.bytes())
    leaf.private_key_pem.write_to_path(str(key))
    key.chmod(0o600)
    ca.cert_pem.write_to_path(str(ca_file))
    trustme.CA().cert_pem.write_to_path(str(other))
    return Certs(ca, cert, key, ca_file, other)


def network_address(h: HubProcess, kind: str = "tls") -> str:
    """The ``kind://host:port`` the Hub logged (it listens on port 0: the kernel picks a free one)."""
    assert h.log is not None
    found = re.findall(rf"listening on ({kind}://[^\s]+)", h.log.read_text())
    assert found, h.log.read_text()
    return str(found[-1])


def start_with(h: HubProcess, *extra: str, timeout: float = 15.0) -> None:
    """Start ``amux hub serve --home H EXTRA...`` on a fresh log (:meth:`HubProcess.start` with more arguments)."""
    assert h.log is not None
    h.log.write_bytes(b"")
    h.start(timeout, extra=extra)


def tls_hub(hub_factory: Any, certs: Certs, **kw: Any) -> HubProcess:
    h: HubProcess = hub_factory(isolation="user", settings={
        "hub.listen": "127.0.0.1:0", "hub.tls_cert": str(certs.cert), "hub.tls_key": str(certs.key)}, **kw)
    return h


def code_of(r: CliResult) -> str:
    """The error code a failed CLI call printed, checked against its exit status."""
    code = str(r.json["error"]["code"])
    assert r.returncode == EXIT_CODES[ErrorCode(code)], (r.returncode, r.stdout, r.stderr)
    return code


def remote(address: str, certs: Certs | None, token: str | None = None, **extra: str) -> dict[str, str]:
    """Environment of a remote caller: no AMUX_HOME that could lead it to the local socket."""
    env = {"AMUX_HUB": address, "AMUX_HOME": "/nonexistent", **extra}
    if certs is not None:
        env["AMUX_HUB_CA"] = str(certs.ca_file)
    if token is not None:
        env["AMUX_TOKEN"] = token
    return env


def enroll(h: HubProcess, name: str, *args: str) -> dict[str, Any]:
    ok(h.cli("hub", "principal", "add", name))
    issued: dict[str, Any] = ok(h.cli("hub", "token", "issue", name, *args))
    return issued


# -- TLS and loopback TCP through the real CLI ------------------------------------------------------


@pytest.mark.slow
def test_tls_with_a_token_end_to_end(hub_factory: Any, certs: Certs) -> None:
    h = tls_hub(hub_factory, certs)
    address = network_address(h)
    assert address.startswith("tls://127.0.0.1:")
    issued = enroll(h, "alice")
    env = remote(address, certs, issued["token"])
    status = ok(h.cli("hub", "status", env=env))
    assert (status["principal"], status["transport"], status["auth"], status["binding"]) == (
        "alice", "tls", "token", "principal:alice")
    doc = b"# Alice\n\nremote-runtime preference: tabs\n"
    rev = ok(h.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=doc, env=env))["revision"]
    assert [m["path"] for m in ok(h.cli("memory", "search", "remote-runtime", env=env))["matches"]] == ["MEMORY.md"]
    assert ok(h.cli("memory", "show", "MEMORY.md", env=env))["content"] == doc.decode()
    assert h.cli("memory", "export", "MEMORY.md", env=env).stdout == doc
    # The same Principal through the local socket (token there too) sees the same scope.
    assert ok(h.cli("memory", "show", "MEMORY.md", env={"AMUX_TOKEN": issued["token"]}))["revision"] == rev
    ok(h.cli("memory", "forget", "MEMORY.md", "--expected-revision", rev, env=env))
    # The certificate names localhost too.
    port = address.rsplit(":", 1)[1]
    assert ok(h.cli("hub", "status", env=remote(f"tls://localhost:{port}", certs, issued["token"])))["principal"] \
        == "alice"


@pytest.mark.slow
def test_tls_refusals(hub_factory: Any, certs: Certs) -> None:
    h = tls_hub(hub_factory, certs)
    address = network_address(h)
    issued = enroll(h, "alice")
    # No token over the network: unauthorized, with the fix in the message.
    r = h.cli("hub", "status", env=remote(address, certs))
    assert r.returncode == EXIT_CODES[ErrorCode.UNAUTHORIZED] and "AMUX_TOKEN" in r.json["error"]["message"]
    tampered = issued["token"][:-1] + ("A" if issued["token"][-1] != "A" else "B")
    assert code_of(h.cli("memory", "search", "x", env=remote(address, certs, tampered))) == "unauthorized"
    # A Hub whose certificate the caller's CA did not sign is not talked to (the token is never sent).
    r = h.cli("hub", "status", env={**remote(address, certs, issued["token"]), "AMUX_HUB_CA": str(certs.other_ca_file)})
    assert code_of(r) == "unavailable" and "certificate verify failed" in r.json["error"]["message"]
    # Plaintext to the TLS port: the Hub hangs up.
    r = h.cli("hub", "status", env=remote(address.replace("tls://", "tcp://"), None, issued["token"]))
    assert code_of(r) == "unavailable"
    # Revoked while the Hub runs: refused on the next call.
    ok(h.cli("hub", "token", "revoke", issued["id"]))
    r = h.cli("hub", "status", env=remote(address, certs, issued["token"]))
    assert code_of(r) == "unauthorized" and r.json["error"]["data"]["reason"] == "revoked"
    assert h.proc is not None and h.proc.poll() is None
    log = h.log.read_text() if h.log else ""
    assert issued["token"] not in log and issued["token"].split("_", 2)[2] not in log  # never logged


@pytest.mark.slow
def test_delegated_credential_over_tls(hub_factory: Any, certs: Certs) -> None:
    h = tls_hub(hub_factory, certs)
    address = network_address(h)
    issued = enroll(h, "alice", "--binding", "principal:alice", "--ttl", "600")
    env = remote(address, certs, issued["token"])
    r = h.cli("memory", "search", "x", env=env)
    assert code_of(r) == "unauthorized" and r.json["error"]["data"]["reason"] == "binding_required"
    r = h.cli("memory", "search", "x", env={**env, "AMUX_MEMORY_BINDING": "principal:mallory"})
    assert code_of(r) == "unauthorized" and r.json["error"]["data"]["reason"] == "binding_not_delegated"
    assert ok(h.cli("memory", "search", "x", env={**env, "AMUX_MEMORY_BINDING": "principal:alice"}))["matches"] == []


@pytest.mark.slow
def test_listen_flag_plaintext_on_loopback_needs_a_token(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(isolation="user", start=False)
    start_with(h, "--listen", "127.0.0.1:0")
    address = network_address(h, "tcp")
    issued = enroll(h, "alice")
    status = ok(h.cli("hub", "status", env=remote(address, None, issued["token"])))
    assert (status["principal"], status["transport"]) == ("alice", "tcp")
    assert code_of(h.cli("hub", "status", env=remote(address, None))) == "unauthorized"
    ok(h.cli("hub", "token", "revoke", issued["id"]))
    assert code_of(h.cli("hub", "status", env=remote(address, None, issued["token"]))) == "unauthorized"
    # The client refuses to send a token in clear text to anything but loopback.
    r = h.cli("hub", "status", env=remote("tcp://192.0.2.1:7070", None, issued["token"]))
    assert code_of(r) == "bad_request" and "loopback" in r.json["error"]["message"]


@pytest.mark.slow
@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0", "192.0.2.1:7070"])
def test_plaintext_on_a_non_loopback_address_is_refused_at_start(hub_factory: Any, listen: str) -> None:
    h: HubProcess = hub_factory(start=False)
    r = subprocess.run([*amux_argv(), "hub", "serve", "--home", str(h.home), "--listen", listen], env=h.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == ExitStatus.HUB_START_FAILED, r.stderr
    assert "refusing plaintext TCP" in r.stderr and "hub.tls_cert" in r.stderr, r.stderr
    assert not h.socket.exists()  # refused before anything was opened
    # The same from the setting.
    h.configure("hub.listen", listen)
    with pytest.raises(RuntimeError, match="refusing plaintext TCP"):
        h.start()


@pytest.mark.slow
def test_unusable_network_settings_refuse_to_start(hub_factory: Any, certs: Certs, tmp_path: Path) -> None:
    h: HubProcess = hub_factory(start=False, settings={"hub.listen": "127.0.0.1:0"})
    h.configure("hub.tls_cert", str(certs.cert))
    with pytest.raises(RuntimeError, match="set both hub.tls_cert and hub.tls_key"):
        h.start()
    h.configure("hub.tls_key", str(tmp_path / "missing.key"))
    with pytest.raises(RuntimeError, match="hub.tls_key"):
        h.start()
    garbage = tmp_path / "garbage.key"
    garbage.write_text("not a key\n")
    garbage.chmod(0o600)
    h.configure("hub.tls_key", str(garbage))
    with pytest.raises(RuntimeError, match="cannot load"):
        h.start()
    r = h.cli("system", "config", "set", "hub.listen", "nonsense")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST]
    r = subprocess.run([*amux_argv(), "hub", "serve", "--home", str(h.home), "--listen", "1.2.3.4"], env=h.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and "HOST:PORT" in r.stderr


def test_listen_parsing_and_loopback_check() -> None:
    assert parse_listen("127.0.0.1:7070") == ("127.0.0.1", 7070)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen("localhost:80") == ("localhost", 80)
    for bad in ["7070", ":7070", "::1:7070", "host:", "host:99999", "host:-1", "[::1]", "a b:1"]:
        with pytest.raises(ValueError):
            parse_listen(bad)
    for host in ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1", "localhost"]:
        assert is_loopback(host), host
    for host in ["0.0.0.0", "::", "10.0.0.1", "192.168.1.1", "172.16.0.1", "8.8.8.8", "::ffff:10.0.0.1", "fe80::1"]:
        assert not is_loopback(host), host
    # One rule for the Hub and the clients, and no resolver in it: only the name "localhost" counts.
    for host in ["localhost.localdomain", "ip6-localhost", "127.0.0.1.nip.io"]:
        assert not is_loopback(host), host


def test_client_endpoints() -> None:
    assert parse_endpoint("/run/amux.sock").kind == "unix"
    assert str(parse_endpoint("unix:/run/amux.sock").path) == "/run/amux.sock"
    e = parse_endpoint("tls://hub.example:7443")
    assert (e.kind, e.host, e.port, str(e)) == ("tls", "hub.example", 7443, "tls://hub.example:7443")
    assert parse_endpoint("tls://[::1]:7443").host == "::1"
    assert parse_endpoint("tcp://127.0.0.1:7070").kind == "tcp"
    for bad in ["tcp://10.0.0.1:7070", "tcp://hub.example:7070", "http://x:1", "tls://x", "tls://x:0", "tls://:1"]:
        with pytest.raises(HubError) as info:
            parse_endpoint(bad)
        assert info.value.code is ErrorCode.BAD_REQUEST, bad


# -- bounds, in process under the virtual clock ------------------------------------------------------


async def _eof(stream: trio.abc.Stream) -> list[Response]:
    """Read to EOF; the responses seen on the way."""
    decoder, seen = FrameDecoder(), []
    while True:
        try:
            data = await stream.receive_some(65536)
        except trio.BrokenResourceError:
            return seen
        if not data:
            return seen
        decoder.feed(bytes(data))
        while (body := decoder.next_frame()) is not None:
            seen.append(decode_response(body))


async def _call(stream: trio.abc.Stream, decoder: FrameDecoder, rid: int, method: str,
                params: dict[str, Any]) -> Response:
    await stream.send_all(encode_request(rid, method, params))
    while (body := decoder.next_frame()) is None:
        data = await stream.receive_some(65536)
        assert data, "the Hub closed the connection"
        decoder.feed(bytes(data))
    return decode_response(body)


def _pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return trio.SocketStream(a), trio.SocketStream(b)


async def test_tls_handshake_must_finish_in_time(tmp_path: Path, certs: Certs,
                                                 autojump_clock: trio.testing.MockClock) -> None:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs.cert, certs.key)
    hub = Hub(hub_config(tmp_path), LIMITS)
    srv, client = _pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, srv, "tls", ctx)
        start = trio.current_time()
        await client.send_all(b"\x16\x03\x01")  # the start of a ClientHello, then nothing
        assert await _eof(client) == []
        waited = trio.current_time() - start
        assert connection.TLS_HANDSHAKE_TIMEOUT_SECONDS <= waited < connection.HELLO_TIMEOUT_SECONDS + 1
    assert hub.connections == 0


async def test_tls_in_process_and_a_network_peer_has_no_kernel_identity(tmp_path: Path, certs: Certs) -> None:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs.cert, certs.key)
    modify(tmp_path, lambda r, now: r.add_principal("alice", "user", now))

    def issue(r: Registry, now: float) -> tuple[Registry, str]:
        updated, text, _ = r.issue_token("alice", now, None, None)
        return updated, text

    token = modify(tmp_path, issue)
    hub = Hub(hub_config(tmp_path, isolation="user"), LIMITS)
    client_ctx = ssl.create_default_context()
    certs.ca.configure_trust(client_ctx)
    for transport, params, expected in [
        ("tls", {"protocol": 1}, ErrorCode.UNAUTHORIZED),   # a socketpair has SO_PEERCRED, but tls never uses it
        ("tls", {"protocol": 1, "token": token}, None),
    ]:
        srv, raw = _pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hub.handle, srv, transport, ctx)
            client = trio.SSLStream(raw, client_ctx, server_hostname="127.0.0.1")
            resp = await _call(client, FrameDecoder(), 1, "hello", params)
            if expected is None:
                assert resp.unwrap()["principal"] == "alice" and resp.unwrap()["transport"] == "tls"
            else:
                assert resp.error is not None and resp.error.code is expected
            await client.aclose()


async def test_slow_sender_is_closed(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    hub = Hub(hub_config(tmp_path), LIMITS)
    srv, client = _pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, srv)
        assert (await _call(client, FrameDecoder(), 1, "hello", {"protocol": 1})).error is None
        frame = encode_request(2, "get", {"path": "MEMORY.md"})
        start = trio.current_time()

        async def trickle() -> None:
            # One byte every 5 s: never idle long enough for the idle timeout, but the frame never completes.
            for byte in frame[:-1]:
                try:
                    await client.send_all(bytes([byte]))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                await trio.sleep(5)

        nursery.start_soon(trickle)
        seen = await _eof(client)
        waited = trio.current_time() - start
        assert connection.FRAME_TIMEOUT_SECONDS <= waited < connection.FRAME_TIMEOUT_SECONDS + 6
        assert [r.error.code for r in seen if r.error] == [ErrorCode.BAD_REQUEST]
        assert seen[0].error is not None and "within" in seen[0].error.message
        nursery.cancel_scope.cancel()


async def test_a_slow_but_complete_frame_is_served(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    hub = Hub(hub_config(tmp_path), LIMITS)
    srv, client = _pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, srv)
        decoder = FrameDecoder()
        assert (await _call(client, decoder, 1, "hello", {"protocol": 1})).error is None
        frame = encode_request(2, "get", {"path": "MEMORY.md"})
        half = len(frame) // 2
        await client.send_all(frame[:half])
        await trio.sleep(connection.FRAME_TIMEOUT_SECONDS - 5)
        await client.send_all(frame[half:])
        while (body := decoder.next_frame()) is None:
            decoder.feed(await client.receive_some(65536))
        assert decode_response(body).unwrap()["exists"] is False
        # Many small frames back to back, each well within the bound, for longer than the bound in all.
        for i in range(8):
            resp = await _call(client, decoder, 10 + i, "get", {"path": "MEMORY.md"})
            assert resp.error is None
            await trio.sleep(10)
        await client.aclose()


async def test_request_deadline_answers_busy_and_changes_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    hub = Hub(hub_config(tmp_path), LIMITS)
    srv, client = _pair()
    (tmp_path / "memory" / "global").mkdir(parents=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, srv)
        decoder = FrameDecoder()
        assert (await _call(client, decoder, 1, "hello", {"protocol": 1})).error is None
        upsert = {"path": "a.md", "content": "late\n", "expected_revision": "absent"}
        async with hub.memory._lock(GLOBAL):  # the scope is held (e.g. by a stuck writer)
            start = trio.current_time()
            resp = await _call(client, decoder, 2, "upsert", upsert)
            assert LIMITS.request_start_seconds <= trio.current_time() - start < LIMITS.request_start_seconds + 1
            assert resp.error is not None and resp.error.code is ErrorCode.BUSY
            assert resp.error.data == {"deadline_seconds": LIMITS.request_start_seconds}
            assert "nothing was done" in resp.error.message
            # Reads do not wait for the lock and are not affected.
            assert (await _call(client, decoder, 3, "get", {"path": "a.md"})).unwrap()["exists"] is False
        assert not (tmp_path / "memory" / "global" / "a.md").exists()
        # The connection goes on, and the same write now succeeds.
        assert (await _call(client, decoder, 4, "upsert", upsert)).unwrap()["created"] is True
        await client.aclose()


class _StuckService(StandInMemory):
    """Never answers data calls (a wedged dependency); counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def run(self, route: Any, scope: Any, params: dict[str, Any], identity: Any = None,
                  **where: Any) -> dict[str, Any]:
        self.calls += 1
        await trio.sleep_forever()
        raise AssertionError


async def test_request_deadline_frees_the_in_flight_slots(tmp_path: Path,
                                                          autojump_clock: trio.testing.MockClock) -> None:
    service = _StuckService()
    hub = Hub(hub_config(tmp_path), LIMITS, service)  # type: ignore[arg-type]
    srv, client = _pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, srv)
        decoder = FrameDecoder()
        assert (await _call(client, decoder, 1, "hello", {"protocol": 1})).error is None
        n = connection.MAX_IN_FLIGHT
        await client.send_all(b"".join(encode_request(100 + i, "search", {"query": "x"}) for i in range(n)))
        answers: dict[int | None, Response] = {}
        while len(answers) < n:
            while (body := decoder.next_frame()) is None:
                decoder.feed(await client.receive_some(65536))
            resp = decode_response(body)
            answers[resp.id] = resp
        assert all(r.error is not None and r.error.code is ErrorCode.BUSY for r in answers.values())
        # All slots are free again: a full batch is accepted (not refused as "in flight").
        resp = await _call(client, decoder, 500, "search", {"query": "x"})
        assert resp.error is not None and resp.error.data.get("deadline_seconds") == LIMITS.request_start_seconds
        assert service.calls == n + 1
        await client.aclose()


class _BigAnswers(StandInMemory):
    async def run(self, route: Any, scope: Any, params: dict[str, Any], identity: Any = None,
                  **where: Any) -> dict[str, Any]:
        return {"blob": "x" * 60_000}


async def test_a_peer_that_never_reads_is_closed(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    hub = Hub(hub_config(tmp_path), LIMITS, _BigAnswers())  # type: ignore[arg-type]
    srv, client = _pair()
    done = trio.Event()

    async def serve_one() -> None:
        await hub.handle(srv)
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_one)
        assert (await _call(client, FrameDecoder(), 1, "hello", {"protocol": 1})).error is None
        await client.send_all(b"".join(encode_request(10 + i, "get", {"path": "a.md"}) for i in range(64)))
        start = trio.current_time()
        with trio.fail_after(connection.SEND_TIMEOUT_SECONDS + 5):
            await done.wait()  # the answers fill the socket; nobody reads; the Hub gives up on the peer
        assert trio.current_time() - start >= connection.SEND_TIMEOUT_SECONDS
        assert hub.connections == 0
        await client.aclose()


async def test_connection_over_the_cap_on_tls_is_told_busy(tmp_path: Path, certs: Certs,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listeners, "MAX_CONNECTIONS", 1)
    config = hub_config(tmp_path, listen="127.0.0.1:0", tls_cert=str(certs.cert), tls_key=str(certs.key))
    client_ctx = ssl.create_default_context()
    certs.ca.configure_trust(client_ctx)
    async with trio.open_nursery() as nursery:
        hub: Hub = await nursery.start(serve, config, LIMITS)
        (address,) = hub.network_addresses
        host, port = address.removeprefix("tls://").rsplit(":", 1)
        held = await trio.open_ssl_over_tcp_stream(host, int(port), ssl_context=client_ctx)
        await held.do_handshake()
        await trio.testing.wait_all_tasks_blocked()
        extra = await trio.open_ssl_over_tcp_stream(host, int(port), ssl_context=client_ctx)
        with trio.fail_after(5):
            seen = await _eof(extra)
        assert [r.error.code for r in seen if r.error] == [ErrorCode.BUSY]
        await held.aclose()
        nursery.cancel_scope.cancel()


async def test_network_listener_is_checked_before_anything_opens(tmp_path: Path) -> None:
    with pytest.raises(HubStartError, match="refusing plaintext"):
        await serve(hub_config(tmp_path, listen="0.0.0.0:0"), LIMITS)
    assert not (tmp_path / "hub.sock").exists()


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_hub_survives_garbage_on_the_tls_port(hub_factory: Any, certs: Certs) -> None:
    h = tls_hub(hub_factory, certs)
    host, port = network_address(h).removeprefix("tls://").rsplit(":", 1)
    for payload in [b"", b"GET / HTTP/1.0\r\n\r\n", b"\x16\x03\x01\x02\x00" + os.urandom(600), os.urandom(5000)]:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            if payload:
                s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            try:
                while s.recv(65536):
                    pass
            except ConnectionResetError:
                pass
    issued = enroll(h, "alice")
    assert ok(h.cli("hub", "status", env=remote(network_address(h), certs, issued["token"])))["principal"] == "alice"
    assert h.proc is not None and h.proc.poll() is None
    assert h.stop(signal.SIGTERM) == 0


@pytest.mark.slow
async def test_mcp_server_reaches_a_tls_hub_with_a_token(hub_factory: Any, certs: Certs, tmp_path: Path) -> None:
    from tests.mcp_session import call, mcp_session
    from tests.mcp_session import ok as mcp_ok

    h = tls_hub(hub_factory, certs)
    issued = enroll(h, "runtime")
    address = network_address(h)
    env = remote(address, certs, issued["token"])
    r = h.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=b"# remote-note\n", env=env)
    assert r.returncode == 0, r.stderr
    with trio.fail_after(60):
        async with mcp_session(Path("/nonexistent"), tmp_path / "mcp.log", **env) as s:
            found = mcp_ok(await call(s, "memory_search", query="remote-note"))
            assert [m["path"] for m in found["matches"]] == ["MEMORY.md"]


@pytest.mark.slow
async def test_mcp_with_one_principals_token_never_reaches_anothers_scope(
    hub_factory: Any, certs: Certs, tmp_path: Path
) -> None:
    from tests.mcp_session import call, err, mcp_session
    from tests.mcp_session import ok as mcp_ok

    h = tls_hub(hub_factory, certs)
    address = network_address(h)
    alice = remote(address, certs, enroll(h, "alice")["token"])
    bob = remote(address, certs, enroll(h, "bob")["token"])
    wrote = h.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=b"alice-only-fact\n",
                  env=alice)
    alice_rev = ok(wrote)["revision"]
    with trio.fail_after(60):
        async with mcp_session(Path("/nonexistent"), tmp_path / "mcp.log", **bob) as s:
            assert mcp_ok(await call(s, "memory_search", query="alice-only-fact"))["matches"] == []
            got = mcp_ok(await call(s, "memory_get", path="MEMORY.md"))
            assert got["exists"] is False
            # Bob's scope has no MEMORY.md: forgetting "it" touches nothing of Alice's.
            assert mcp_ok(await call(s, "memory_forget", path="MEMORY.md", expected_revision=alice_rev))[
                "already_absent"] is True
            err(await call(s, "memory_upsert", path="MEMORY.md", content="bob\n", expected_revision=alice_rev),
                ErrorCode.CONFLICT)
    shown = ok(h.cli("memory", "show", "MEMORY.md", env=alice))
    assert shown["content"] == "alice-only-fact\n" and shown["revision"] == alice_rev
