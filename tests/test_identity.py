"""Principals, aliases, tokens and delegated credentials (DESIGN.md §7).

Most tests drive the real ``amux`` CLI against a real Hub subprocess: the
registry commands (``amux hub principal ...``, ``amux hub token ...``) edit
the Hub's home while it runs, and every change must apply to the very next
call.  The decisions themselves (:func:`hub.access.identity.authenticate`, the
registry's token checks) are also tested as plain functions with an explicit
clock.  Cross-principal proofs run through the CLI, through the blocking
client and through raw frames.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from amux_memory.hub.access.identity import authenticate, scope_for
from amux_memory.hub.access.registry import (
    REGISTRY_NAME,
    Registry,
    RegistryFileError,
    check_alias,
    check_name,
    hash_token,
    modify,
    read_registry,
)
from amux_memory.hub.serve.hub import Hub
from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, HubError
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.messages import PROTOCOL_VERSION, decode_response, encode_request
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import CliResult, HubProcess
from tests.helpers import hub_config, ok, sha
from tests.other_users import ALICE, BOB, free_uid, run_as, shared_input
from tests.raw_hub import Raw, error_of

UNAUTHORIZED = EXIT_CODES[ErrorCode.UNAUTHORIZED]
NOW = 1_800_000_000.0


def failed(r: CliResult, code: ErrorCode) -> dict[str, Any]:
    assert r.returncode == EXIT_CODES[code], (r.returncode, r.stdout, r.stderr)
    error: dict[str, Any] = r.json["error"]
    assert error["code"] == code.value
    return error


def issue(h: HubProcess, name: str, *args: str) -> str:
    token: str = ok(h.cli("hub", "token", "issue", name, *args))["token"]
    return token


def secret(token: str) -> str:
    """The random part of ``amux_<id>_<secret>`` (which may itself contain '_')."""
    return token.split("_", 2)[2]


def tamper(token: str) -> str:
    """The same token with its last character changed."""
    return token[:-1] + ("A" if token[-1] != "A" else "B")


def as_token(token: str, **extra: str) -> dict[str, str]:
    return {"AMUX_TOKEN": token, **extra}


# -- the registry and the decisions, as plain functions ------------------------------------


def _registry() -> tuple[Registry, str, str, str]:
    r = Registry()
    r, _ = r.add_principal("alice", "user", NOW)
    r, _ = r.add_principal("ci", "service", NOW)
    r, _ = r.add_alias("alice", "os-uid:4242")
    r, _ = r.add_alias("ci", "os:builder")
    r, plain, _ = r.issue_token("alice", NOW, None, None)
    r, short, _ = r.issue_token("alice", NOW, 60, None)
    r, delegated, _ = r.issue_token("alice", NOW, 30, "principal:alice")
    return r, plain, short, delegated


def _unauthorized(fn: Any, reason: str) -> HubError:
    with pytest.raises(HubError) as info:
        fn()
    assert info.value.code is ErrorCode.UNAUTHORIZED, info.value
    assert info.value.data.get("reason") == reason, info.value.data
    return info.value


def test_token_checks_with_an_explicit_clock() -> None:
    r, plain, short, delegated = _registry()
    assert r.verify_token(plain, NOW + 10 * 365 * 86400).principal == "alice"  # no expiry
    assert r.verify_token(short, NOW + 59.9).expires == NOW + 60
    _unauthorized(lambda: r.verify_token(short, NOW + 60), "expired")
    # Right id, wrong secret; wrong shape; empty; a hash passed as the token.
    token_id = plain.split("_")[1]
    for bad in [tamper(plain), "amux_" + token_id, "x" * 40, "",
                r.tokens[token_id].sha256, plain + "x"]:
        _unauthorized(lambda bad=bad: r.verify_token(bad, NOW), "unknown_token")
    r2, record = r.revoke_token(token_id, NOW + 1)
    e = _unauthorized(lambda: r2.verify_token(plain, NOW + 2), "revoked")
    assert plain not in e.message and secret(plain) not in json.dumps(e.to_wire())  # never echo the secret
    # A removed principal takes its tokens and aliases with it.
    r3, removed = r.remove_principal("alice", NOW)
    assert len(removed["tokens"]) == 3 and removed["aliases"] == ["os-uid:4242"]
    _unauthorized(lambda: r3.verify_token(plain, NOW), "unknown_token")
    # Pruning drops only what expired.
    assert set(r.pruned(NOW + 45).tokens) == {plain.split("_")[1], short.split("_")[1]}
    assert r.tokens[token_id].sha256 == hash_token(plain) and plain not in json.dumps(r.to_toml())


def test_authenticate_decides_from_kernel_credentials_or_token_only() -> None:
    r, plain, _, delegated = _registry()

    def auth(uid: int | None, name: str | None = None, token: str | None = None, binding: str | None = None,
             now: float = NOW) -> Any:
        return authenticate(r, uid=uid, os_name=name, token=token, binding=binding, now=now)

    # OS accounts: os-uid alias, os: alias, then the name, then uid:<n>.
    assert auth(4242, "whoever").principal == "alice"
    assert (auth(7, "builder").principal, auth(7, "builder").kind) == ("ci", "service")
    assert auth(8, "bob").principal == "bob" and auth(8, "bob").kind == "user"
    assert auth(9, None).principal == "uid:9"
    # A token decides alone, whoever the OS account is.
    i = auth(4242, "whoever", token=plain)
    assert (i.principal, i.method, i.token_id) == ("alice", "token", plain.split("_")[1])
    # A bad token never falls back to the OS account.
    _unauthorized(lambda: auth(8, "bob", token="amux_000000000000_" + "x" * 43), "unknown_token")
    # No kernel credentials (TCP/TLS): a token is required.
    _unauthorized(lambda: auth(None), "token_required")
    assert auth(None, token=plain).principal == "alice"
    # Delegated credentials need their binding, exactly.
    _unauthorized(lambda: auth(None, token=delegated), "binding_required")
    for wrong in ["principal:bob", "global", "principal:alice ", "principal:Alice"]:
        e = _unauthorized(lambda wrong=wrong: auth(None, token=delegated, binding=wrong), "binding_not_delegated")
        assert e.data["expected"] == "principal:alice"
    assert auth(None, token=delegated, binding="principal:alice").delegated_binding == "principal:alice"
    _unauthorized(lambda: auth(None, token=delegated, binding="principal:alice", now=NOW + 30), "expired")
    # An ordinary (non-delegated) token may omit the binding or give any; the Hub checks it against the scope.
    assert auth(None, token=plain, binding="principal:alice").principal == "alice"


def test_isolation_user_never_falls_back_to_global() -> None:
    assert scope_for("user", "alice").binding == "principal:alice"
    assert scope_for("user", "alice").relpath == f"users/{sha('alice')}"
    assert scope_for("off", "alice").binding == "global"
    for principal, policy in [("", "user"), ("alice", "strict"), ("alice", "")]:
        with pytest.raises(HubError) as info:
            scope_for(policy, principal)
        assert info.value.code is ErrorCode.UNAUTHORIZED


@pytest.mark.parametrize("name", ["", "a:b", "uid:7", "white space", "-x", ".x", "x" * 65, "é", "a/b", "a\n"])
def test_invalid_principal_names(name: str) -> None:
    with pytest.raises(HubError) as info:
        check_name(name)
    assert info.value.code is ErrorCode.BAD_REQUEST


@pytest.mark.parametrize("alias", ["alice", "os:", "os-uid:", "os-uid:-1", "os-uid:x", "os-uid:4294967296",
                                   "feishu:ou_1", "os:a b", "os:a\n", "os-uid:١٢"])
def test_invalid_aliases(alias: str) -> None:
    with pytest.raises(HubError) as info:
        check_alias(alias)
    assert info.value.code is ErrorCode.BAD_REQUEST


def test_registry_file_is_parsed_strictly(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_NAME
    assert read_registry(path)[0] == Registry()  # absent: empty
    modify(tmp_path, lambda r, now: r.add_principal("alice", "user", now))
    assert (path.stat().st_mode & 0o777) == 0o600
    good = path.read_text()
    bad_files = [
        "version = 2\n",
        "[principals.alice]\nkind = 'admin'\ncreated = 1\n",
        "[principals.'a:b']\nkind = 'user'\ncreated = 1\n",
        good + "[aliases]\n'os:x' = 'nobody-registered'\n",
        good + "[tokens.0123456789ab]\nprincipal = 'alice'\nsha256 = 'short'\ncreated = 1\n",
        good + "[tokens.0123456789ab]\nprincipal = 'bob'\nsha256 = '" + "0" * 64 + "'\ncreated = 1\n",
        good + "surprise = 1\n",
        "not toml at all [",
    ]
    for text in bad_files:
        path.write_text(text)
        with pytest.raises(RegistryFileError):
            read_registry(path)
    path.write_text(good)
    path.chmod(0o620)  # writable by the group: anyone there could add tokens
    with pytest.raises(RegistryFileError, match="writable by other users"):
        read_registry(path)


# -- the CLI on a running Hub -------------------------------------------------------------


@pytest.mark.slow
def test_principal_and_token_commands(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(isolation="user")
    added = ok(h.cli("hub", "principal", "add", "alice"))
    assert (added["name"], added["kind"], added["added"], added["binding"]) == ("alice", "user", True,
                                                                                "principal:alice")
    assert ok(h.cli("hub", "principal", "add", "alice"))["added"] is False  # idempotent
    failed(h.cli("hub", "principal", "add", "alice", "--service"), ErrorCode.CONFLICT)
    assert ok(h.cli("hub", "principal", "add", "deploy", "--service"))["kind"] == "service"
    failed(h.cli("hub", "principal", "add", "uid:0"), ErrorCode.BAD_REQUEST)
    assert ok(h.cli("hub", "principal", "alias", "alice", "os-uid:0042"))["alias"] == "os-uid:42"
    ok(h.cli("hub", "principal", "alias", "alice", "os:alice"))
    failed(h.cli("hub", "principal", "alias", "deploy", "os:alice"), ErrorCode.CONFLICT)
    failed(h.cli("hub", "principal", "alias", "nobody-here", "os:x"), ErrorCode.NOT_FOUND)
    failed(h.cli("hub", "principal", "alias", "alice", "slack:U123"), ErrorCode.BAD_REQUEST)
    ok(h.cli("hub", "principal", "unalias", "os:alice"))
    listed = ok(h.cli("hub", "principal", "list"))["principals"]
    assert [(p["name"], p["kind"], p["aliases"]) for p in listed] == [
        ("alice", "user", ["os-uid:42"]), ("deploy", "service", [])]

    r = h.cli("hub", "token", "issue", "alice", "--ttl", "3600")
    issued = ok(r)
    token, token_id = issued["token"], issued["id"]
    assert token.startswith(f"amux_{token_id}_") and "shown once" in r.stderr
    assert issued["state"] == "active" and issued["binding"] is None and issued["expires"]
    delegated = ok(h.cli("hub", "token", "issue", "alice", "--binding", "principal:alice"))
    assert delegated["delegated"] and delegated["expires"]  # short-lived by default
    failed(h.cli("hub", "token", "issue", "alice", "--binding", "principal:deploy"), ErrorCode.BAD_REQUEST)
    failed(h.cli("hub", "token", "issue", "alice", "--ttl", "0"), ErrorCode.BAD_REQUEST)
    failed(h.cli("hub", "token", "issue", "ghost"), ErrorCode.NOT_FOUND)

    r = h.cli("hub", "token", "list")
    assert token not in r.stdout.decode() and secret(token) not in r.stdout.decode()
    assert {t["id"] for t in ok(r)["tokens"]} == {token_id, delegated["id"]}
    assert ok(h.cli("hub", "token", "list", "--principal", "deploy"))["tokens"] == []
    assert ok(h.cli("hub", "token", "revoke", token_id))["state"] == "revoked"
    failed(h.cli("hub", "token", "revoke", "ffffffffffff"), ErrorCode.NOT_FOUND)

    # Stored as a hash only; the file is the Hub user's, 0600.
    registry = h.home / REGISTRY_NAME
    text = registry.read_text()
    assert token not in text and secret(token) not in text and hash_token(token) in text
    assert (registry.stat().st_mode & 0o777) == 0o600 and registry.stat().st_uid == os.geteuid()
    removed = ok(h.cli("hub", "principal", "remove", "alice"))
    assert removed["aliases"] == ["os-uid:42"] and len(removed["tokens"]) == 2


@pytest.mark.slow
def test_token_authenticates_on_the_unix_socket_without_os_fallback(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(isolation="user")
    ok(h.cli("hub", "principal", "add", "alice"))
    token = issue(h, "alice")
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert ok(h.cli("hub", "status"))["principal"] == me  # the kernel names this process
    status = ok(h.cli("hub", "status", env=as_token(token)))
    assert (status["principal"], status["auth"], status["binding"], status["transport"]) == (
        "alice", "token", "principal:alice", "unix")
    ok(h.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=b"# Alice\n",
             env=as_token(token)))
    alice_dir = h.home / "memory" / "users" / sha("alice")
    assert (alice_dir / "MEMORY.md").read_bytes() == b"# Alice\n"
    assert (alice_dir.stat().st_mode & 0o777) == 0o700 and ((alice_dir / "MEMORY.md").stat().st_mode & 0o777) == 0o600
    # A wrong token is refused outright: never "then use the OS account instead".
    for bad in [tamper(token), "amux_0123456789ab_" + "x" * 43, "not-a-token"]:
        e = failed(h.cli("memory", "search", "Alice", env=as_token(bad)), ErrorCode.UNAUTHORIZED)
        assert e["data"]["reason"] == "unknown_token"
    assert list((h.home / "memory" / "global").iterdir()) == []


def test_revoked_token_is_rejected_at_once(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(isolation="user")
    ok(h.cli("hub", "principal", "add", "alice"))
    issued = ok(h.cli("hub", "token", "issue", "alice"))
    env = as_token(issued["token"])
    ok(h.cli("memory", "upsert", "a.md", "--expected-revision", "absent", input=b"alpha\n", env=env))
    with HubClient(h.socket, token=issued["token"], timeout=5) as open_conn:
        assert open_conn.call("search", {"query": "alpha"})["matches"]
        ok(h.cli("hub", "token", "revoke", issued["id"]))  # while the Hub runs, no restart
        # The connection opened before the revocation is refused on its very next call ...
        with pytest.raises(HubError) as info:
            open_conn.call("get", {"path": "a.md"})
        assert info.value.code is ErrorCode.UNAUTHORIZED and info.value.data["reason"] == "revoked"
    # ... and so is every new connection.
    e = failed(h.cli("memory", "show", "a.md", env=env), ErrorCode.UNAUTHORIZED)
    assert e["data"] == {"token_id": issued["id"], "reason": "revoked"}
    # A token issued now works at once too.
    fresh = issue(h, "alice")
    assert ok(h.cli("memory", "show", "a.md", env=as_token(fresh)))["content"] == "alpha\n"


@pytest.mark.slow
def test_expired_token_is_rejected(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(isolation="user")
    ok(h.cli("hub", "principal", "add", "alice"))
    issued = ok(h.cli("hub", "token", "issue", "alice", "--ttl", "2"))
    with HubClient(h.socket, token=issued["token"], timeout=5) as conn:
        assert conn.hello["expires"] is not None
        expires = conn.hello["expires"]
        assert conn.call("search", {"query": "x"})["matches"] == []
        # Until just past the expiry the hello named: the Hub checks it against the clock on each call, so
        # the wall clock passing is what is tested (nothing to poll).
        time.sleep(max(0.0, expires - time.time()) + 0.2)
        with pytest.raises(HubError) as info:
            conn.call("search", {"query": "x"})  # an open connection does not outlive its token
        assert info.value.code is ErrorCode.UNAUTHORIZED and info.value.data["reason"] == "expired"
    e = failed(h.cli("hub", "status", env=as_token(issued["token"])), ErrorCode.UNAUTHORIZED)
    assert e["data"]["reason"] == "expired" and "expired" in e["message"]
    # Expired tokens leave the file at its next change.
    issue(h, "alice")
    assert issued["id"] not in (h.home / REGISTRY_NAME).read_text()


@pytest.mark.slow
def test_delegated_credential_needs_the_matching_binding(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(isolation="user")
    ok(h.cli("hub", "principal", "add", "alice"))
    delegated = ok(h.cli("hub", "token", "issue", "alice", "--binding", "principal:alice", "--ttl", "300"))
    token = delegated["token"]
    e = failed(h.cli("memory", "search", "x", env=as_token(token)), ErrorCode.UNAUTHORIZED)
    assert e["data"]["reason"] == "binding_required" and "AMUX_MEMORY_BINDING" in e["message"]
    for wrong in ["principal:bob", "global", "principal:alice2"]:
        e = failed(h.cli("memory", "search", "x", env=as_token(token, AMUX_MEMORY_BINDING=wrong)),
                   ErrorCode.UNAUTHORIZED)
        assert e["data"]["reason"] == "binding_not_delegated" and e["data"]["expected"] == "principal:alice"
    status = ok(h.cli("hub", "status", env=as_token(token, AMUX_MEMORY_BINDING="principal:alice")))
    assert status["principal"] == "alice" and status["expires"] == int(status["expires"])
    # An ordinary enrolled caller may omit the binding and act in its current scope.
    plain = issue(h, "alice")
    assert ok(h.cli("hub", "status", env=as_token(plain)))["binding"] == "principal:alice"
    # Raw frames: a second hello with the wrong binding closes the session it had.
    with Raw(h.socket) as conn:
        conn.hello(1, token=token, binding="principal:alice")
        code, data = error_of(conn.call(2, "hello", {"protocol": PROTOCOL_VERSION, "token": token}))
        assert code is ErrorCode.UNAUTHORIZED and data["reason"] == "binding_required"
        assert error_of(conn.call(3, "search", {"query": "x"}))[0] is ErrorCode.BAD_REQUEST  # hello first


def test_delegated_credential_after_a_policy_change_is_a_binding_mismatch(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(isolation="off")
    ok(h.cli("hub", "principal", "add", "alice"))
    token = issue(h, "alice", "--binding", "global", "--ttl", "300")
    assert ok(h.cli("hub", "status", env=as_token(token, AMUX_MEMORY_BINDING="global")))["scope"] == "global"
    h.stop()
    h.configure("memory.isolation", "user")
    h.start()
    # Authenticated, but the conversation's memory is not what the Hub now gives: start a new one.
    e = failed(h.cli("memory", "search", "x", env=as_token(token, AMUX_MEMORY_BINDING="global")),
               ErrorCode.BINDING_MISMATCH)
    assert e["data"] == {"binding": "global", "current": "principal:alice"}


@pytest.mark.slow
def test_service_principal_has_its_own_isolated_scope(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(isolation="user")
    ok(h.cli("hub", "principal", "add", "nightly", "--service"))
    token = issue(h, "nightly")
    status = ok(h.cli("hub", "status", env=as_token(token)))
    assert (status["principal"], status["principal_kind"], status["binding"]) == ("nightly", "service",
                                                                                 "principal:nightly")
    ok(h.cli("memory", "upsert", "runs.md", "--expected-revision", "absent", input=b"service-fact\n",
             env=as_token(token)))
    assert (h.home / "memory" / "users" / sha("nightly") / "runs.md").exists()
    assert ok(h.cli("memory", "search", "service-fact"))["matches"] == []  # root is someone else


@pytest.mark.slow
def test_cross_principal_cli_cannot_reach_another_scope(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(isolation="user")
    for name in ("alice", "bob"):
        ok(h.cli("hub", "principal", "add", name))
    a, b = as_token(issue(h, "alice")), as_token(issue(h, "bob"))
    secret = b"# Alice\n\nalpha-secret: the launch code is 0000\n"
    ok(h.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=secret, env=a))
    ok(h.cli("memory", "upsert", "notes/plan.md", "--expected-revision", "absent", input=b"alpha-secret plan\n",
             env=a))
    alice_file = h.home / "memory" / "users" / sha("alice") / "MEMORY.md"
    alice_rev = hashlib.sha256(secret).hexdigest()

    # read / search / export
    found = ok(h.cli("memory", "search", "alpha-secret", env=b))
    assert found["matches"] == [] and found["scanned_files"] == 0
    assert ok(h.cli("memory", "search", "alpha-secret", "--path-prefix", "notes/", env=b))["matches"] == []
    shown = ok(h.cli("memory", "show", "MEMORY.md", env=b))
    assert shown["exists"] is False and shown["revision"] == "absent"
    r = h.cli("memory", "export", "notes/plan.md", env=b)
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND] and r.stdout == b""
    # forget / upsert with Alice's revision act on Bob's own scope: nothing there, Alice untouched.
    forgot = ok(h.cli("memory", "forget", "MEMORY.md", "--expected-revision", alice_rev, env=b))
    assert forgot["deleted"] is False and forgot["already_absent"] is True
    failed(h.cli("memory", "upsert", "MEMORY.md", "--expected-revision", alice_rev, input=b"x\n", env=b),
           ErrorCode.CONFLICT)
    ok(h.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=b"# Bob\n", env=b))
    assert ok(h.cli("memory", "forget", "notes/plan.md", "--expected-revision", "absent", env=b))
    # Paths cannot climb into another scope either.
    users = "../users/" + sha("alice") + "/MEMORY.md"
    for path in [users, "../../users/" + sha("alice") + "/MEMORY.md", "/" + str(alice_file)]:
        failed(h.cli("memory", "show", path, env=b), ErrorCode.INVALID_PATH)
        failed(h.cli("memory", "forget", path, "--expected-revision", alice_rev, env=b), ErrorCode.INVALID_PATH)
    # A binding names a scope but never selects one: Bob claiming Alice's is refused.
    failed(h.cli("memory", "search", "alpha-secret", env={**b, "AMUX_MEMORY_BINDING": "principal:alice"}),
           ErrorCode.BINDING_MISMATCH)

    assert alice_file.read_bytes() == secret
    assert (alice_file.parent / "notes" / "plan.md").read_bytes() == b"alpha-secret plan\n"
    assert ok(h.cli("memory", "show", "MEMORY.md", env=a))["content"] == secret.decode()
    assert list((h.home / "memory" / "global").iterdir()) == []


def test_cross_principal_raw_frames_cannot_reach_another_scope(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(isolation="user")
    for name in ("alice", "bob"):
        ok(h.cli("hub", "principal", "add", name))
    alice, bob = issue(h, "alice"), issue(h, "bob")
    with Raw(h.socket) as conn:
        conn.hello(1, token=alice)
        rev = conn.call(2, "upsert", {"path": "MEMORY.md", "content": "alpha-secret\n",
                                      "expected_revision": "absent"}).unwrap()["revision"]
    with Raw(h.socket) as conn:
        # Smuggled identity or scope fields are not part of the protocol.
        for i, extra in enumerate([{"principal": "alice"}, {"scope": "principal:alice"}, {"user": "alice"},
                                   {"uid": 0}]):
            code, _ = error_of(conn.call(10 + i, "hello", {"protocol": PROTOCOL_VERSION, "token": bob, **extra}))
            assert code is ErrorCode.BAD_REQUEST
        code, _ = error_of(conn.call(20, "hello", {"protocol": PROTOCOL_VERSION, "token": bob,
                                                   "binding": "principal:alice"}))
        assert code is ErrorCode.BINDING_MISMATCH
        assert conn.hello(21, token=bob)["principal"] == "bob"
        for i, (method, params) in enumerate([
            ("get", {"path": "MEMORY.md", "scope": "principal:alice"}),
            ("search", {"query": "alpha-secret", "principal": "alice"}),
            ("get", {"path": f"../users/{sha('alice')}/MEMORY.md"}),
            ("export", {"path": "../../memory/users/" + sha("alice") + "/MEMORY.md"}),
            ("search", {"query": "alpha-secret", "path_prefix": "../"}),
            ("upsert", {"path": f"../users/{sha('alice')}/MEMORY.md", "content": "x", "expected_revision": rev}),
            ("forget", {"path": f"../users/{sha('alice')}/MEMORY.md", "expected_revision": rev}),
        ]):
            resp = conn.call(30 + i, method, params)
            assert resp.error is not None and resp.error.code in (ErrorCode.BAD_REQUEST, ErrorCode.INVALID_PATH,
                                                                  ErrorCode.NOT_FOUND), (method, params, resp)
        # The other scope's directory name is just a path inside Bob's own scope.
        assert conn.call(39, "get", {"path": f"users/{sha('alice')}/MEMORY.md"}).unwrap()["exists"] is False
        assert conn.call(40, "search", {"query": "alpha-secret"}).unwrap()["matches"] == []
        assert conn.call(41, "get", {"path": "MEMORY.md"}).unwrap()["exists"] is False
        assert error_of(conn.call(42, "export", {"path": "MEMORY.md"}))[0] is ErrorCode.NOT_FOUND
        assert conn.call(43, "forget", {"path": "MEMORY.md", "expected_revision": rev}).unwrap()["deleted"] is False
        assert error_of(conn.call(46, "upsert", {"path": "MEMORY.md", "content": "x",
                                                 "expected_revision": rev}))[0] is ErrorCode.CONFLICT
        # Re-hello as someone else on the same connection needs that someone's credential.
        code, data = error_of(conn.call(44, "hello", {"protocol": PROTOCOL_VERSION,
                                                      "token": tamper(alice)}))
        assert code is ErrorCode.UNAUTHORIZED
        assert error_of(conn.call(45, "get", {"path": "MEMORY.md"}))[0] is ErrorCode.BAD_REQUEST  # no session
    assert (h.home / "memory" / "users" / sha("alice") / "MEMORY.md").read_text() == "alpha-secret\n"


@pytest.mark.slow
def test_registry_changes_apply_at_once_and_a_broken_file_fails_closed(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(isolation="user")
    me = pwd.getpwuid(os.geteuid()).pw_name
    ok(h.cli("hub", "principal", "add", "alice"))
    token = issue(h, "alice")
    # Alias this very OS account: the next connection is alice, no restart.
    ok(h.cli("hub", "principal", "alias", "alice", f"os-uid:{os.geteuid()}"))
    assert ok(h.cli("hub", "status"))["principal"] == "alice"
    ok(h.cli("hub", "principal", "unalias", f"os-uid:{os.geteuid()}"))
    assert ok(h.cli("hub", "status"))["principal"] == me
    registry = h.home / REGISTRY_NAME
    good = registry.read_bytes()
    # A hand edit that breaks the file: nobody is authenticated until it is fixed.
    registry.write_bytes(good + b"\n[tokens.broken\n")
    for env in [None, as_token(token)]:
        e = failed(h.cli("hub", "status", env=env), ErrorCode.UNAUTHORIZED)
        assert e["data"]["reason"] == "registry_invalid" and REGISTRY_NAME in e["message"]
    registry.write_bytes(good)
    assert ok(h.cli("hub", "status", env=as_token(token)))["principal"] == "alice"
    registry.chmod(0o666)
    failed(h.cli("hub", "status"), ErrorCode.UNAUTHORIZED)
    # ... and a Hub does not start on a file it cannot use.
    h.stop()
    assert h.proc is not None
    with pytest.raises(RuntimeError, match="writable by other users"):
        h.start()
    registry.chmod(0o600)
    h.start()
    assert ok(h.cli("hub", "status", env=as_token(token)))["principal"] == "alice"


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_concurrent_registry_edits_lose_nothing(tmp_path: Path) -> None:
    import subprocess

    from tests.conftest import amux_argv

    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(tmp_path)
    subprocess.run([*amux_argv(), "hub", "principal", "add", "alice"], env=env, check=True, capture_output=True)
    procs = [subprocess.Popen([*amux_argv(), "hub", "token", "issue", "alice"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL) for _ in range(8)]
    ids = {json.loads(p.communicate(timeout=60)[0])["id"] for p in procs}
    assert len(ids) == 8 and set(read_registry(tmp_path / REGISTRY_NAME)[0].tokens) == ids


# -- OS aliases across real uids (root only) -----------------------------------------------


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the CLI as other uids")


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
@needs_root
def test_aliases_make_several_os_accounts_share_one_scope(hub_factory: Any, shared_dir: Path) -> None:
    h: HubProcess = hub_factory(isolation="user", settings={"hub.socket_path": str(shared_dir / "hub.sock"),
                                                            "hub.socket_mode": "0666"})
    carol_uid = free_uid(BOB + 1)
    nobody = pwd.getpwnam("nobody").pw_uid
    ok(h.cli("hub", "principal", "add", "dana"))
    ok(h.cli("hub", "principal", "alias", "dana", f"os-uid:{ALICE}"))  # e.g. her CLI login
    ok(h.cli("hub", "principal", "alias", "dana", f"os-uid:{BOB}"))    # e.g. the chat bridge's account
    ok(h.cli("hub", "principal", "alias", "dana", "os:nobody"))        # by name
    note = shared_input(shared_dir, "n.md", "# Dana\n\nshared-between-accounts\n")
    code, out, err = run_as(ALICE, h.socket, "memory", "upsert", "MEMORY.md", "--expected-revision", "absent",
                            "--file", str(note))
    assert code == 0, err
    for uid in (ALICE, BOB, nobody):
        code, status, err = run_as(uid, h.socket, "hub", "status")
        assert code == 0 and (status["principal"], status["binding"]) == ("dana", "principal:dana"), (uid, err)
        code, found, _ = run_as(uid, h.socket, "memory", "search", "shared-between-accounts")
        assert [m["path"] for m in found["matches"]] == ["MEMORY.md"], uid
    # An account without an alias is its own principal and sees nothing of dana's.
    code, found, _ = run_as(carol_uid, h.socket, "memory", "search", "shared-between-accounts")
    assert code == 0 and found["matches"] == []
    code, status, _ = run_as(carol_uid, h.socket, "hub", "status")
    assert status["principal"] == f"uid:{carol_uid}"
    # Removing an alias applies to that account's next call.
    ok(h.cli("hub", "principal", "unalias", f"os-uid:{BOB}"))
    code, found, _ = run_as(BOB, h.socket, "memory", "search", "shared-between-accounts")
    assert found["matches"] == []
    code, status, _ = run_as(BOB, h.socket, "hub", "status")
    assert status["principal"] == f"uid:{BOB}"
    scope = h.home / "memory" / "users" / sha("dana")
    assert (scope / "MEMORY.md").read_bytes() == note.read_bytes()
    assert (scope.stat().st_mode & 0o777) == 0o700 and scope.stat().st_uid == os.geteuid()
    assert list((h.home / "memory" / "global").iterdir()) == []


@needs_root
def test_a_token_lets_another_os_account_act_as_its_principal_only(hub_factory: Any, shared_dir: Path) -> None:
    h: HubProcess = hub_factory(isolation="user", settings={"hub.socket_path": str(shared_dir / "hub.sock"),
                                                            "hub.socket_mode": "0666"})
    ok(h.cli("hub", "principal", "add", "erin"))
    token = issue(h, "erin")
    code, status, _ = run_as(ALICE, h.socket, "hub", "status", env={"AMUX_TOKEN": token})
    assert status["principal"] == "erin" and status["auth"] == "token"
    code, out, _ = run_as(ALICE, h.socket, "hub", "status", env={"AMUX_TOKEN": token + "x"})
    assert code == UNAUTHORIZED  # a bad token does not quietly become uid:ALICE
    # Other users cannot read the registry or the memory files directly.
    code, out, err = run_as(ALICE, h.socket, "hub", "token", "list", "--home", str(h.home))
    assert code != 0


# -- token expiry and revocation on open connections, in process ------------------------------


async def _hello(stream: trio.SocketStream, decoder: FrameDecoder, rid: int, method: str,
                 params: dict[str, Any]) -> Any:
    await stream.send_all(encode_request(rid, method, params))
    while (body := decoder.next_frame()) is None:
        decoder.feed(await stream.receive_some(65536))
    return decode_response(body)


async def test_open_connection_loses_access_when_its_token_expires(tmp_path: Path) -> None:
    modify(tmp_path, lambda r, now: r.add_principal("alice", "user", now))

    def issue_60s(r: Registry, now: float) -> tuple[Registry, str]:
        updated, text, _ = r.issue_token("alice", now, 60, None)
        return updated, text

    text = modify(tmp_path, issue_60s)
    clock = [time.time()]
    config = hub_config(tmp_path, isolation="user", socket_path=tmp_path / "s")
    hub = Hub(config, LIMITS, wall_clock=lambda: clock[0])
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client, decoder = trio.SocketStream(b), FrameDecoder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        hello = await _hello(client, decoder, 1, "hello", {"protocol": 1, "token": text})
        assert hello.unwrap()["principal"] == "alice"
        assert (await _hello(client, decoder, 2, "get", {"path": "a.md"})).error is None
        clock[0] += 61
        resp = await _hello(client, decoder, 3, "get", {"path": "a.md"})
        assert resp.error is not None and resp.error.code is ErrorCode.UNAUTHORIZED
        assert resp.error.data["reason"] == "expired"
        await client.aclose()
