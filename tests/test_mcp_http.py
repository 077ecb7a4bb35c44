"""The Hub's streamable-HTTP MCP listener (``hub.mcp_listen``, ``hub/mcp/http_listener.py``), through raw HTTP.

Every rule of the front door is checked against a real Hub subprocess with
``http.client`` (what an agent's HTTP stack sends, nothing more): bearer
tokens (missing, wrong, revoked, expired, in the URL, delegated without its
binding), ``Host`` and ``Origin``, sessions bound to the token that opened
them, DELETE, idle expiry, the per-principal session cap, the per-token
rate, the body bound, stalled clients, and that no refusal writes anything.
Behind it the Hub's own MCP server (DESIGN.md §9.2): ``initialize`` and
``tools/list`` as the relay's (``tests/fixtures/mcp_wire.json``), the five
tools for each token's principal and scope, with history naming the caller
(client ``amux-mcp``, the ``Amux-Session``), pages per session, an agent's
upsert kept as a proposal under review, and the SDK's own streamable-HTTP
client.  DESIGN.md §7, §9.2, §21.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from amux_memory.tools.client.blocking import HubClient
from bench.mcp_http import rpc_message
from tests.conftest import amux_argv, make_hub
from tests.helpers import free_port, mcp_http_hub, mcp_url, wait_until
from tests.mcp_http_raw import INIT, PROTOCOL, bearer, issue, open_session, request, rpc, tool


def read_entry(url: str, token: str, sid: str, **more: str) -> tuple[int, Any]:
    """A read through the session (``memory_get`` of ``MEMORY.md``): ``(status, its structured content)``."""
    status, result = tool(url, token, sid, **more)
    return (status, result["structuredContent"]) if status == 200 else (status, result)


def upsert(url: str, token: str, sid: str, path: str, content: str, expected: str = "absent",
           **more: str) -> dict[str, Any]:
    """``memory_upsert`` through the session; its structured content (asserting a 200 answer)."""
    status, result = tool(url, token, sid, "memory_upsert",
                          {"path": path, "content": content, "expected_revision": expected}, **more)
    assert status == 200, result
    structured: dict[str, Any] = result["structuredContent"]
    return structured


def taken_in(pid: int, client: socket.socket) -> bool:
    """Whether process ``pid`` holds the server end of the loopback TCP connection ``client`` opened (it has
    accepted it) and has read all that was sent on it (the end's receive queue is empty), from ``/proc``."""
    port, peer_port = client.getsockname()[1], client.getpeername()[1]
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()  # sl, local, remote, state, tx_queue:rx_queue, ..., inode (10th)
        if int(fields[1].split(":")[1], 16) == peer_port and int(fields[2].split(":")[1], 16) == port:
            return f"socket:[{fields[9]}]" in held and int(fields[4].split(":")[1], 16) == 0
    return False


def snapshot(home: Path) -> dict[str, tuple[int, int]]:
    """Every file of the home but the log and the lock: size and mtime, to show nothing was written."""
    out = {}
    for p in home.rglob("*"):
        if p.is_file() and p.name not in ("hub.lock",):
            st = p.stat()
            out[str(p.relative_to(home))] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_tokens_are_checked_on_every_request_and_refusals_say_nothing(tmp_path: Path) -> None:
    """Wrong, revoked, expired and delegated-without-binding tokens get the same 401 (invalid, expired or revoked:
    not which), a missing one a 401 saying to send one, each with a bare ``WWW-Authenticate: Bearer``; a token in
    the query string is never read; nothing is written."""
    h, url = mcp_http_hub(tmp_path)
    good, good_id = issue(h, "alice")
    revoked, revoked_id = issue(h, "alice")
    expired, _ = issue(h, "alice", "--ttl", "1")
    delegated, _ = issue(h, "alice", "--binding", "global")
    assert h.cli("hub", "token", "revoke", revoked_id).returncode == 0
    # A --ttl 1 token expires at ceil(issue time + 1 s): up to 2 s after it was issued. The Hub compares its
    # expiry with the clock on each request, so the wall clock passing is what is tested: nothing to poll.
    time.sleep(2.2)
    before = snapshot(h.home)
    answers = []
    for headers in ({}, bearer("amux_nope_nope"), bearer(revoked), bearer(expired), bearer(delegated),
                    {"Authorization": f"Basic {good}"}, bearer(delegated, **{"Amux-Binding": "principal:alice"})):
        status, hdrs, body = request(url, body=INIT, headers=headers)
        assert status == 401, (headers, status, body)
        assert hdrs["www-authenticate"] == "Bearer"
        answers.append(body)
    missing, *refused = answers  # no token: how to send one; a refused one: never which refusal
    assert len(set(refused)) == 1 and b"resource_metadata" not in refused[0]
    assert b"invalid, expired or revoked" in refused[0] and b"'Authorization: Bearer TOKEN'" in missing
    status, _, _ = request(url, body=INIT, path=f"/mcp?token={good}")
    assert status == 400
    status, _, _ = request(url, body=INIT, path=f"/mcp?access_token={good}", headers=bearer(good))
    assert status == 400
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server",
                 "/.well-known/oauth-protected-resource/mcp", "/"):
        assert request(url, "GET", path=path, headers=bearer(good))[0] == 404
    assert snapshot(h.home) == before
    # A revoked token stops working on a session it opened, from the next request.
    sid = open_session(url, good)
    assert read_entry(url, good, sid)[0] == 200
    assert h.cli("hub", "token", "revoke", good_id).returncode == 0
    assert read_entry(url, good, sid)[0] == 401


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_host_and_origin(tmp_path: Path) -> None:
    """``Host`` must name the listener (421 otherwise); ``Origin`` may be absent, or the listener's own (else
    403); refusals write nothing."""
    h, url = mcp_http_hub(tmp_path)
    token, _ = issue(h, "alice")
    port = urlsplit(url).port
    before = snapshot(h.home)
    assert request(url, body=INIT, headers=bearer(token, Host="evil.example"))[0] == 421
    assert request(url, body=INIT, headers=bearer(token, Host=f"evil.example:{port}"))[0] == 421
    assert request(url, body=INIT, headers=bearer(token, Origin="https://evil.example"))[0] == 403
    assert request(url, body=INIT, headers=bearer(token, Origin=f"http://evil.example:{port}"))[0] == 403
    assert request(url, body=INIT, headers=bearer("wrong", Origin="https://evil.example"))[0] == 403
    assert snapshot(h.home) == before
    assert request(url, body=INIT, headers=bearer(token, Origin=f"http://127.0.0.1:{port}"))[0] == 200
    assert request(url, body=INIT, headers=bearer(token, Host=f"localhost:{port}"))[0] == 200


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_sessions_belong_to_their_token_and_end(tmp_path: Path) -> None:
    """A session id is 128 random bits, usable only with the token that opened it (another token, even of the
    same principal: 404, and nothing is written); DELETE ends it; history names each token's principal."""
    h, url = mcp_http_hub(tmp_path)
    a, _ = issue(h, "alice")
    a2, _ = issue(h, "alice")
    b, _ = issue(h, "bob")
    sid = open_session(url, a)
    assert re.fullmatch(r"[0-9a-f]{32}", sid)
    assert upsert(url, a, sid, "MEMORY.md", "# alice\n")["created"] is True
    status, who = read_entry(url, a, sid)
    assert status == 200 and who["content"] == "# alice\n"
    before = snapshot(h.home)
    for other in (b, a2):
        status, _ = tool(url, other, sid, "memory_upsert", {"path": "MEMORY.md", "content": "# taken\n",
                                                           "expected_revision": who["revision"]})
        assert status == 404
    assert snapshot(h.home) == before
    (version,) = h.cli("memory", "history", "MEMORY.md").json["versions"]
    assert version["actor"]["principal"] == "alice" and version["actor"]["client"] == "amux-mcp"
    assert read_entry(url, b, sid)[0] == 404
    assert read_entry(url, a2, sid)[0] == 404
    assert request(url, "DELETE", headers=bearer(b, **{"Mcp-Session-Id": sid}))[0] == 404
    assert read_entry(url, a, sid)[0] == 200
    assert request(url, "DELETE", headers=bearer(a, **{"Mcp-Session-Id": sid,
                                                        "MCP-Protocol-Version": PROTOCOL}))[0] == 200
    assert read_entry(url, a, sid)[0] == 404


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_isolation_user_gives_each_token_its_principals_scope(tmp_path: Path) -> None:
    """With isolation ``user`` each token reads and writes its own principal's scope only (search, get and
    upsert of the same path land in ``users/<key>``); a delegated token works only with its binding in
    ``Amux-Binding``, in its principal's scope, and history records that binding."""
    h, url = mcp_http_hub(tmp_path, isolation="user")
    a, _ = issue(h, "alice")
    b, _ = issue(h, "bob")
    d, _ = issue(h, "bob", "--binding", "principal:bob")
    sids = {}
    for token, name in ((a, "alice"), (b, "bob")):
        sids[name] = sid = open_session(url, token)
        assert upsert(url, token, sid, "notes/who.md", f"# {name}\n\nisoword {name} only\n")["created"] is True
    for token, name, other in ((a, "alice", "bob"), (b, "bob", "alice")):
        status, who = tool(url, token, sids[name], arguments={"path": "notes/who.md"})
        assert status == 200 and who["structuredContent"]["content"] == f"# {name}\n\nisoword {name} only\n"
        status, found = tool(url, token, sids[name], "memory_search", {"query": "isoword"})
        assert status == 200 and len(found["structuredContent"]["matches"]) == 1
        assert name in found["structuredContent"]["matches"][0]["snippet"], found
        assert other not in json.dumps(found["structuredContent"]), found
    dirs = sorted(p.parent.parent.name for p in (h.home / "memory" / "users").glob("*/notes/who.md"))
    assert len(dirs) == 2, dirs
    assert request(url, body=INIT, headers=bearer(d))[0] == 401
    assert request(url, body=INIT, headers=bearer(d, **{"Amux-Binding": "principal:alice"}))[0] == 401
    sid = open_session(url, d, **{"Amux-Binding": "principal:bob"})
    status, who = tool(url, d, sid, arguments={"path": "notes/who.md"}, **{"Amux-Binding": "principal:bob"})
    assert status == 200 and who["structuredContent"]["content"].startswith("# bob"), who


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_idle_sessions_expire_and_the_cap_per_principal_answers(tmp_path: Path) -> None:
    """``hub.mcp_session_idle`` ends an idle session (404 after); the 17th open session of one principal is
    answered 429 at once while another principal still opens one; an ended session frees its place."""
    h, url = mcp_http_hub(tmp_path, **{"hub.mcp_session_idle": "2"})
    a, _ = issue(h, "alice")
    b, _ = issue(h, "bob")
    sids = [open_session(url, a) for _ in range(16)]
    idle_from = time.monotonic()  # no request touches sids[1:] after this
    t0 = time.monotonic()
    status, headers, body = request(url, body=INIT, headers=bearer(a))
    assert status == 429 and "16 open MCP sessions" in rpc_message(body)["error"]["message"], body
    assert time.monotonic() - t0 < 2 and headers["retry-after"]
    open_session(url, b)
    assert request(url, "DELETE", headers=bearer(a, **{"Mcp-Session-Id": sids[0],
                                                        "MCP-Protocol-Version": PROTOCOL}))[0] == 200
    open_session(url, a)
    # The idle time passing is the behaviour: any request for a session restarts its idle clock, so this waits
    # out the 2 s, then polls, each time through another session idle as long (one asked earlier in the round
    # has been idle again longer than 2 s before it is asked again), until the SDK has ended them.
    time.sleep(max(0.0, idle_from + 2 - time.monotonic()))
    probes = itertools.cycle(sids[2:])
    wait_until(lambda: read_entry(url, a, next(probes))[0] == 404, 10, "the sessions idle for 2 s to be ended",
               interval=0.25)
    assert read_entry(url, a, sids[1])[0] == 404
    open_session(url, a)  # the expired ones no longer count


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_body_bound_and_rate(tmp_path: Path) -> None:
    """A body over ``MCP_HTTP_MAX_BODY_BYTES`` is 413; past the burst one token gets 429 with ``Retry-After``
    while another token is unaffected.

    The default burst with a refill of one request a second (``hub.mcp_rate``): at the default 20 a second a
    loaded machine answering slower than 20 requests a second never empties the bucket (seen in CI).
    """
    from amux_memory.protocol.limits import MCP_HTTP_BURST, MCP_HTTP_MAX_BODY_BYTES

    h, url = mcp_http_hub(tmp_path, **{"hub.mcp_rate": "1"})
    a, _ = issue(h, "alice")
    b, _ = issue(h, "bob")
    before = snapshot(h.home)
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * MCP_HTTP_MAX_BODY_BYTES + b'"}}'
    assert request(url, raw=big, headers=bearer(a))[0] == 413
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    statuses = []
    for _ in range(int(MCP_HTTP_BURST) + 20):
        conn.request("POST", "/mcp", body=b"{}", headers={"Content-Type": "application/json", **bearer(a)})
        resp = conn.getresponse()
        resp.read()
        statuses.append(resp.status)
        if resp.status == 429:
            assert int(resp.getheader("Retry-After") or "0") >= 1
            break
    conn.close()
    assert statuses[-1] == 429, statuses
    assert request(url, body=INIT, headers=bearer(b))[0] == 200
    assert snapshot(h.home) == before


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_stalled_clients_do_not_stall_others(tmp_path: Path) -> None:
    """Half-sent headers (slowloris) and a body that never finishes, held open, while another token's session
    and a Unix-socket client are served at once; the stalled ones are closed by the listener's timeouts."""
    h, url = mcp_http_hub(tmp_path)
    a, _ = issue(h, "alice")
    u = urlsplit(url)
    assert u.hostname is not None and u.port is not None
    loris = socket.create_connection((u.hostname, u.port))
    loris.sendall(f"POST /mcp HTTP/1.1\r\nHost: {u.netloc}\r\nAuthoriz".encode())
    body = socket.create_connection((u.hostname, u.port))
    body.sendall((f"POST /mcp HTTP/1.1\r\nHost: {u.netloc}\r\nAuthorization: Bearer {a}\r\n"
                  "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                  "Content-Length: 5000\r\n\r\n{\"jsonrpc\"").encode())
    assert h.proc is not None
    wait_until(lambda: taken_in(h.proc.pid, loris) and taken_in(h.proc.pid, body), 4,
               "the Hub to accept both stalled connections and read what they sent")
    t0 = time.monotonic()
    sid = open_session(url, a)
    assert read_entry(url, a, sid)[0] == 200
    with HubClient(h.socket, timeout=5) as c:
        assert c.hello["principal"]
    assert time.monotonic() - t0 < 3
    loris.settimeout(15)
    assert loris.recv(100) == b""  # closed by the keep-alive timeout, headers never completed
    loris.close()
    body.close()


def test_plain_http_off_loopback_refuses_to_start(tmp_path: Path) -> None:
    """``hub.mcp_listen`` on a non-loopback address without ``hub.tls_cert``/``hub.tls_key``: the Hub exits 21 with
    one line naming the setting, and leaves no socket behind."""
    h = make_hub(tmp_path, settings={"hub.mcp_listen": "0.0.0.0:0"}, start=False)
    proc = subprocess.run([*amux_argv(), "hub", "serve", "--home", str(h.home)], env=h.env, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 21, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "hub.mcp_listen" in lines[0] and "amux hub tls init" in lines[0], proc.stderr
    assert not h.socket.exists()


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_tls_init_then_the_listener_is_reachable_with_the_ca_only(tmp_path: Path) -> None:
    """``amux hub tls init`` makes 0600 keys and sets the TLS settings; the Hub then serves ``https`` that a
    client verifying with ``ca.pem`` reaches and one with the system roots refuses; a second init refuses
    without ``--force``; ``amux doctor`` checks the listener and the certificate."""
    import ssl

    h = make_hub(tmp_path, settings={"hub.mcp_listen": f"127.0.0.1:{free_port()}"}, start=False)
    r = h.cli("hub", "tls", "init", "--name", "hub.example.test")
    assert r.returncode == 0, r.stderr
    made = r.json
    assert {"localhost", "127.0.0.1", "::1", "hub.example.test"} <= set(made["names"])
    for key in (made["key"], h.home / "tls" / "ca.key"):
        assert os.stat(key).st_mode & 0o777 == 0o600
    again = h.cli("hub", "tls", "init")
    assert again.returncode == 2 and "--force" in again.stderr
    h.start()
    url = mcp_url(h, "https")
    token, _ = issue(h, "alice")
    u = urlsplit(url)
    trusted = ssl.create_default_context(cafile=made["ca"])
    conn = http.client.HTTPSConnection("localhost", u.port, context=trusted, timeout=10)
    conn.request("POST", "/mcp", body=json.dumps(INIT), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Host": f"localhost:{u.port}", **bearer(token)})
    assert conn.getresponse().status == 200
    conn.close()
    untrusted = http.client.HTTPSConnection("localhost", u.port, context=ssl.create_default_context(), timeout=10)
    with pytest.raises(ssl.SSLCertVerificationError):
        untrusted.request("POST", "/mcp", body=b"{}")
    untrusted.close()
    d = h.cli("doctor", "--home", str(h.home), "--json")
    checks = {c["name"]: c for c in json.loads(d.stdout)["checks"]}
    assert checks["mcp_http"]["status"] == "ok" and checks["tls_cert"]["status"] == "ok", checks
    h.stop()
    d = h.cli("doctor", "--home", str(h.home), "--json")
    assert {c["name"]: c for c in json.loads(d.stdout)["checks"]}["mcp_http"]["status"] == "fail"


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_hub_connect_prints_working_commands(tmp_path: Path) -> None:
    """``amux hub connect`` issues a working token once and prints, per agent, the commands with it: Claude
    Code's ``claude mcp add-json -s user`` (the token in a 0600 file a headersHelper reads), Codex's ``codex mcp
    add --url`` with the token in an environment variable, ``AMUX_HUB``/``AMUX_TOKEN`` for Pi and scripts; the
    token opens a session."""
    h, url = mcp_http_hub(tmp_path, **{"hub.listen": f"127.0.0.1:{free_port()}"})
    h.cli("hub", "principal", "add", "alice")
    out = {}
    for agent in ("claude", "codex", "pi", "env"):
        # No claude on PATH: connect keeps the token in a file and prints the registration instead of running it.
        r = h.cli("hub", "connect", agent, "--principal", "alice", "--ttl", "7d", "--json",
                  env={"PATH": "/usr/bin:/bin"} if agent == "claude" else None)
        assert r.returncode == 0, r.stderr
        out[agent] = r.json
        assert r.json["url"] == url and r.json["expires"]
        open_session(url, r.json["token"] or Path(r.json["token_file"]).read_text())
    claude = out["claude"]["commands"][-1]
    assert claude.startswith("claude mcp add-json -s user amux ") and '"headersHelper"' in claude, claude
    assert out["claude"]["token"] is None and out["claude"]["registered"] is False
    assert out["codex"]["commands"] == [f"codex mcp add amux --url {url} --bearer-token-env-var AMUX_TOKEN"]
    assert f"export AMUX_TOKEN={out['codex']['token']}" in out["codex"]["env"]
    assert f"export AMUX_TOKEN={out['pi']['token']}" in out["pi"]["env"]
    bad = h.cli("hub", "connect", "claude", "--principal", "nobody", "--json")
    assert bad.returncode != 0
    bad = h.cli("hub", "connect", "claude", "--principal", "alice", "--ttl", "soon", "--json")
    assert bad.returncode == 2 and "--ttl" in bad.json["error"]["message"]


@pytest.mark.slow
def test_printed_claude_command_registers_the_server(tmp_path: Path) -> None:
    """The printed ``claude mcp add …`` run by the installed Claude Code (its own config in a temp dir) makes
    ``claude mcp list`` show the server, connected."""
    from tests.agent_clients import install_clients

    claude = install_clients() / "claude"
    h, url = mcp_http_hub(tmp_path)
    h.cli("hub", "principal", "add", "alice")
    r = h.cli("hub", "connect", "claude", "--principal", "alice", "--json")
    env = {**os.environ, "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
    command = " && ".join([*r.json["env"], r.json["commands"][0].replace("claude ", f"{claude} ", 1)])
    added = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, timeout=120)
    assert added.returncode == 0, added.stderr
    listed = subprocess.run([str(claude), "mcp", "list"], env=env, capture_output=True, text=True, timeout=120)
    assert "amux" in listed.stdout and url in listed.stdout, listed.stdout + listed.stderr


# -- the Hub's own MCP server behind the front door (DESIGN.md §9.2) ---------------------------------------

WIRE = json.loads((Path(__file__).parent / "fixtures" / "mcp_wire.json").read_text(encoding="utf-8"))


def wire(name: str) -> Any:
    """A fixture message (the relay's exact answer), with the package's version (captured at 0.1.0)."""
    from amux_memory.protocol.version import package_version

    doc = json.loads(WIRE[name])
    if "serverInfo" in doc.get("result", {}):
        doc["result"]["serverInfo"]["version"] = package_version()
    return doc


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_initialize_and_tools_list_are_the_relays(tmp_path: Path) -> None:
    """Over HTTP, ``initialize`` (instructions on by default, off with ``Amux-Instructions: off``), ``tools/list``
    and ``ping`` answer exactly what the relay answers (``tests/fixtures/mcp_wire.json``); a bad
    ``Amux-Instructions`` or ``Amux-Session`` is 400 and opens nothing."""
    h, url = mcp_http_hub(tmp_path)
    token, _ = issue(h, "alice")
    init = json.loads(WIRE["initialize_request"])
    for extra, expected in (({}, "initialize_instructions_on"), ({"Amux-Instructions": "off"},
                                                                   "initialize_instructions_off")):
        status, headers, body = request(url, body=init, headers=bearer(token, **extra))
        assert status == 200, body
        assert rpc_message(body) == wire(expected)
        sid = headers["mcp-session-id"]
        more = {**extra, "MCP-Protocol-Version": "2025-11-25"}
        status, _, _ = request(url, body={"jsonrpc": "2.0", "method": "notifications/initialized"},
                               headers=bearer(token, **{"Mcp-Session-Id": sid}, **more))
        assert status == 202
        status, _, body = request(url, body=json.loads('{"jsonrpc":"2.0","id":2,"method":"tools/list"}'),
                                  headers=bearer(token, **{"Mcp-Session-Id": sid}, **more))
        assert status == 200 and rpc_message(body) == wire("tools_list")
        status, _, body = request(url, body={"jsonrpc": "2.0", "id": 4, "method": "ping"},
                                  headers=bearer(token, **{"Mcp-Session-Id": sid}, **more))
        assert status == 200 and rpc_message(body) == wire("ping")
    before = snapshot(h.home)
    for bad in ({"Amux-Instructions": "maybe"}, {"Amux-Session": "has space"}, {"Amux-Session": "x" * 129}):
        status, headers, body = request(url, body=init, headers=bearer(token, **bad))
        assert status == 400 and "mcp-session-id" not in headers, (bad, status, body)
        assert next(iter(bad)) in rpc_message(body)["error"]["message"], body
    assert snapshot(h.home) == before


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_the_memory_tools_over_http_with_history_and_pages_per_session(tmp_path: Path) -> None:
    """upsert, get, search and forget through one HTTP session act on the Hub (the CLI sees it); history names
    client ``amux-mcp``, the principal and the ``Amux-Session``; a result over the page budget comes in pages
    that ``result_continue`` serves to its own session only, and they end with the session (DELETE)."""
    h, url = mcp_http_hub(tmp_path)
    token, _ = issue(h, "alice")
    launch = {"Amux-Session": "launch-1234"}
    sid = open_session(url, token, **launch)
    made = upsert(url, token, sid, "notes/fact.md", "# Fact\n\nhttpword lives here\n", **launch)
    assert made["created"] is True
    assert h.cli("memory", "get", "notes/fact.md").json["content"] == "# Fact\n\nhttpword lives here\n"
    status, found = tool(url, token, sid, "memory_search", {"query": "httpword"}, **launch)
    assert status == 200 and [m["path"] for m in found["structuredContent"]["matches"]] == ["notes/fact.md"]
    assert "notes/fact.md" in found["content"][0]["text"]
    (version,) = h.cli("memory", "history", "notes/fact.md").json["versions"]
    assert version["actor"] == {"principal": "alice", "client": "amux-mcp", "binding": None,
                                "session": "launch-1234"}, version
    status, gone = tool(url, token, sid, "memory_forget", {"path": "notes/fact.md",
                                                          "expected_revision": made["revision"]}, **launch)
    assert status == 200 and gone["structuredContent"]["deleted"] is True
    assert not (h.home / "memory" / "global" / "notes" / "fact.md").exists()

    big = "".join(f"line {i} " + "x" * 80 + "\n" for i in range(600))  # ~54 KiB: a get comes in pages
    upsert(url, token, sid, "big.md", big)
    other = open_session(url, token)
    status, first = tool(url, token, sid, arguments={"path": "big.md"})
    assert status == 200 and first["structuredContent"]["pages"] >= 2, first
    page_token = first["structuredContent"]["continuation"]
    status, crossed = tool(url, token, other, "result_continue", {"token": page_token})
    assert status == 200 and crossed["isError"], crossed
    assert crossed["structuredContent"]["error"]["data"]["reason"] == "unknown"
    data, next_token = first["structuredContent"]["data"], page_token
    while next_token is not None:
        status, page = tool(url, token, sid, "result_continue", {"token": next_token})
        assert status == 200 and not page["isError"], page
        data, next_token = data + page["structuredContent"]["data"], page["structuredContent"]["continuation"]
    content = json.loads(data)["content"]
    assert len(content) > 6000 and big.startswith(content)
    assert request(url, "DELETE", headers=bearer(token, **{"Mcp-Session-Id": sid,
                                                            "MCP-Protocol-Version": PROTOCOL}))[0] == 200
    assert tool(url, token, sid, "result_continue", {"token": page_token})[0] == 404


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_review_on_keeps_an_http_upsert_as_a_proposal(tmp_path: Path) -> None:
    """With ``memory.review = agents`` an HTTP MCP caller is an agent: its upsert answers a pending proposal,
    the document is not written, and ``amux memory review`` lists it; ``tools/list`` publishes the proposal
    schemas."""
    h, url = mcp_http_hub(tmp_path, **{"memory.review": "agents"})
    token, _ = issue(h, "alice")
    sid = open_session(url, token)
    status, listed = rpc(url, token, sid, "tools/list")
    assert status == 200 and listed != wire("tools_list")
    assert "proposal" in json.dumps(listed["result"]["tools"][2]["outputSchema"])
    result = upsert(url, token, sid, "MEMORY.md", "# by an agent\n")
    assert result["proposed"] is True and result["status"] == "pending", result
    assert not (h.home / "memory" / "global" / "MEMORY.md").exists()
    pending = h.cli("memory", "review", "--json").json["proposals"]
    assert [p["id"] for p in pending] == [result["proposal"]], pending


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_the_sdk_streamable_http_client_uses_the_memory_tools(tmp_path: Path) -> None:
    """The ``mcp`` SDK's own streamable-HTTP client (``tests/remote_mcp_client.py``'s stack) against the Hub:
    initialize names the ``amux`` server with its instructions; upsert, search, get, a paged get followed with
    ``result_continue``, and forget all answer as over the relay."""
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    h, url = mcp_http_hub(tmp_path)
    token, _ = issue(h, "alice")
    big = "".join(f"row {i} " + "y" * 90 + "\n" for i in range(400))

    async def run() -> dict[str, Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0))
        with anyio.fail_after(60):
            async with (http, streamable_http_client(url, http_client=http) as (read, write),
                        ClientSession(read, write) as session):
                init = await session.initialize()
                out: dict[str, Any] = {"server": init.server_info.name, "instructions": init.instructions}
                made = await session.call_tool("memory_upsert", {"path": "sdk.md", "content": "# sdkword\n",
                                                                 "expected_revision": "absent"})
                out["search"] = (await session.call_tool("memory_search", {"query": "sdkword"})).structured_content
                out["get"] = (await session.call_tool("memory_get", {"path": "sdk.md"})).structured_content
                await session.call_tool("memory_upsert", {"path": "big.md", "content": big,
                                                          "expected_revision": "absent"})
                page = (await session.call_tool("memory_get", {"path": "big.md"})).structured_content
                assert page is not None
                data, pages = page["data"], 1
                while page["continuation"] is not None:
                    page = (await session.call_tool("result_continue",
                                                    {"token": page["continuation"]})).structured_content
                    assert page is not None
                    data, pages = data + page["data"], pages + 1
                out["paged"] = (pages, json.loads(data)["content"])
                assert made.structured_content is not None
                out["forget"] = (await session.call_tool("memory_forget", {
                    "path": "sdk.md", "expected_revision": made.structured_content["revision"]})).structured_content
                return out

    out = anyio.run(run)
    from amux_memory.protocol.agent_protocol import render

    assert out["server"] == "amux" and out["instructions"] == render("mcp")
    assert [m["path"] for m in out["search"]["matches"]] == ["sdk.md"]
    assert out["get"]["content"] == "# sdkword\n"
    pages, content = out["paged"]
    assert pages >= 2 and big.startswith(content) and len(content) > 6000
    assert out["forget"]["deleted"] is True and h.cli("memory", "list").json["entries"] == [
        {"path": "big.md", "bytes": len(big.encode())}]


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_an_http_caller_is_an_agent_the_secret_check_cannot_be_overridden(tmp_path: Path) -> None:
    """An HTTP ``memory_upsert`` of a note holding a (fake) credential is refused with ``secret_detected`` even with
    ``allow_secret: true`` among its arguments (no schema names it; the Hub refuses it from an agent), the value
    is not echoed, and nothing is written.  A session opened with ``Amux-Instructions: off`` keeps its server
    when a later request leaves the header out."""
    from tests.secret_samples import samples

    h, url = mcp_http_hub(tmp_path)
    token, _ = issue(h, "alice")
    sample = samples(41)[0]
    sid = open_session(url, token)
    before = snapshot(h.home)
    status, result = tool(url, token, sid, "memory_upsert", {
        "path": "deploy.md", "content": f"# Deploy\n\n{sample.line}\n", "expected_revision": "absent",
        "allow_secret": True})
    assert status == 200 and result["isError"], result
    assert result["structuredContent"]["error"]["code"] == "secret_detected", result
    assert sample.secret not in json.dumps(result)
    assert snapshot(h.home) == before
    quiet = open_session(url, token, **{"Amux-Instructions": "off"})
    assert read_entry(url, token, quiet, **{"Amux-Instructions": "off"})[0] == 200
    assert read_entry(url, token, quiet)[0] == 200


def test_session_pagers_are_per_session_and_dropped() -> None:
    """:class:`hub.mcp.http_servers.SessionPagers`: one pager per (token, session), the same one again on reuse, dropped
    by :meth:`forget` and once unused for the page TTL."""
    from amux_memory.hub.mcp.http_servers import SessionPagers

    now = [0.0]
    pagers = SessionPagers(ttl=10, clock=lambda: now[0])
    a = pagers.of("t1", "s1")
    assert pagers.of("t1", "s1") is a and pagers.of("t2", "s1") is not a and pagers.of("t1", "s2") is not a
    assert len(pagers) == 3
    pagers.forget("s1")
    assert len(pagers) == 1 and pagers.of("t1", "s1") is not a
    now[0] = 9.0
    pagers.of("t1", "s2")
    now[0] = 15.0
    pagers.of("t9", "s9")
    assert len(pagers) == 2, "t1/s1 unused for 15 s is gone; t1/s2, used at 9 s, stays"
