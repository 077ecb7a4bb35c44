"""Secrets kept out of memory (DESIGN.md §16), through the real CLI, a real Hub and the real ``amux mcp``.

Every credential is fake and assembled at run time (:mod:`tests.secret_samples`).
A refused write leaves the document byte-identical and records no history
version; no answer, stream or log holds any credential or its middle third.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import trio

from hub.secrets import find_secrets, redact
from protocol.errors import ERRORS, ErrorCode, HubError
from protocol.requests import upsert_params
from tests.conftest import HubProcess
from tests.mcp_session import call, err, mcp_session, ok
from tests.secret_samples import REFERENCES, Sample, note_forms, samples
from tools.client.blocking import HubClient

TIMEOUT = 60
CLEAN = b"# Deploy notes\n\nThe deploy token is in 1Password, item 'deploy'.\n"


def assert_no_leak(sample: Sample, *texts: str | bytes) -> None:
    """None of ``texts`` holds the secret or its distinctive middle."""
    for t in texts:
        s = t.decode("utf-8", "replace") if isinstance(t, bytes) else t
        assert sample.secret not in s, f"{sample.rule}: the secret leaked"
        assert sample.middle not in s, f"{sample.rule}: part of the secret leaked"


def note(sample: Sample) -> bytes:
    return b"# Deploy notes\n\nSee the runbook.\n" + sample.line.encode() + b"\n"


def versions(hub: HubProcess, path: str) -> list[dict[str, Any]]:
    r = hub.cli("memory", "history", path)
    assert r.returncode == 0, r.stderr
    out: list[dict[str, Any]] = r.json["versions"]
    return out


def create(hub: HubProcess, path: str, content: bytes = CLEAN) -> str:
    r = hub.cli("memory", "upsert", path, "--expected-revision", "absent", input=content)
    assert r.returncode == 0, r.stderr
    rev: str = r.json["revision"]
    return rev


def test_each_rule_family_is_refused_and_nothing_is_written_or_echoed(hub: HubProcess) -> None:
    rev = create(hub, "deploy.md")
    before = (hub.scope_dir / "deploy.md").read_bytes()
    exit_status = ERRORS[ErrorCode.SECRET_DETECTED].exit_status
    for sample in samples():
        r = hub.cli("memory", "upsert", "deploy.md", "--expected-revision", rev, input=note(sample))
        assert r.returncode == exit_status == 18, (sample.rule, r.stdout, r.stderr)
        error = r.json["error"]
        assert error["code"] == "secret_detected", sample.rule
        assert [f["rule"] for f in error["data"]["findings"]] == [sample.rule]
        finding = error["data"]["findings"][0]
        assert finding["line"] == 4 and finding["preview"] == redact(sample.secret) and "…" in finding["preview"]
        assert "secret_detected" in r.stderr
        assert_no_leak(sample, r.stdout, r.stderr)
        # also a create is refused, and no file appears
        r = hub.cli("memory", "upsert", "new.md", "--expected-revision", "absent", input=note(sample))
        assert r.returncode == 18 and not (hub.scope_dir / "new.md").exists()
        assert_no_leak(sample, r.stdout, r.stderr)
    assert (hub.scope_dir / "deploy.md").read_bytes() == before
    assert len(versions(hub, "deploy.md")) == 1
    assert versions(hub, "new.md") == []
    assert hub.log is not None
    log = hub.log.read_text()
    assert "refused a write of deploy.md" in log
    for sample in samples():
        assert_no_leak(sample, log)
    history = (hub.home / "history" / "global" / "versions.log").read_bytes()
    for sample in samples():
        assert_no_leak(sample, history)


def test_allow_secret_from_the_cli_writes_and_the_history_records_the_override(hub: HubProcess) -> None:
    sample = samples(1)[0]
    r = hub.cli("memory", "upsert", "ops.md", "--expected-revision", "absent", "--allow-secret", input=note(sample))
    assert r.returncode == 0, r.stderr
    assert [f["rule"] for f in r.json["secret_findings"]] == [sample.rule]
    assert "--allow-secret" in r.json["warnings"][0]
    assert_no_leak(sample, json.dumps(r.json["secret_findings"]), r.stderr)
    assert (hub.scope_dir / "ops.md").read_bytes() == note(sample)
    (version,) = versions(hub, "ops.md")
    assert version["secret_override"] == [sample.rule]
    assert version["actor"]["client"] == "amux-cli"
    # an ordinary write afterwards records no override
    r = hub.cli("memory", "upsert", "ops.md", "--expected-revision", r.json["revision"], input=CLEAN)
    assert r.returncode == 0 and "secret_findings" not in r.json
    assert "secret_override" not in versions(hub, "ops.md")[0]
    assert hub.log is not None
    log = hub.log.read_text()
    assert "overridden by --allow-secret" in log
    assert_no_leak(sample, log)


def test_restore_of_a_version_holding_a_credential_is_refused_unless_allowed(hub: HubProcess) -> None:
    sample = samples(2)[3]
    r = hub.cli("memory", "upsert", "a.md", "--expected-revision", "absent", "--allow-secret", input=note(sample))
    leaky = r.json["revision"]
    r = hub.cli("memory", "upsert", "a.md", "--expected-revision", leaky, input=CLEAN)
    clean = r.json["revision"]
    r = hub.cli("memory", "restore", "a.md", "--revision", leaky, "--expected-revision", clean)
    assert r.returncode == 18 and r.json["error"]["code"] == "secret_detected", r.stdout
    assert_no_leak(sample, r.stdout, r.stderr)
    assert (hub.scope_dir / "a.md").read_bytes() == CLEAN and len(versions(hub, "a.md")) == 2
    r = hub.cli("memory", "restore", "a.md", "--revision", leaky, "--expected-revision", clean, "--allow-secret")
    assert r.returncode == 0, r.stdout
    newest = versions(hub, "a.md")[0]
    assert newest["action"] == "restore" and newest["secret_override"] == [sample.rule]


async def test_mcp_is_refused_with_a_next_step_and_cannot_override(hub: HubProcess, tmp_path: Path) -> None:
    sample = samples(3)[0]
    errlog = tmp_path / "mcp.log"
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, errlog) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert "allow_secret" not in json.dumps([t.input_schema for t in tools.values()])
            result = await call(session, "memory_upsert", path="m.md", content=note(sample).decode(),
                                expected_revision="absent")
            error = err(result, ErrorCode.SECRET_DETECTED)
            assert "1Password" in error["next_step"]
            assert [f["rule"] for f in error["data"]["findings"]] == [sample.rule]
            assert_no_leak(sample, json.dumps(result.structured_content), repr(result.content))
            for other in samples(13):  # every rule family, through MCP too
                refused = await call(session, "memory_upsert", path="m.md", content=note(other).decode(),
                                     expected_revision="absent")
                assert [f["rule"] for f in err(refused, ErrorCode.SECRET_DETECTED)["data"]["findings"]] == [
                    other.rule]
                assert_no_leak(other, json.dumps(refused.structured_content), repr(refused.content))
            # the argument does not exist for the tool: schema error, nothing written
            result = await session.call_tool("memory_upsert", {
                "path": "m.md", "content": note(sample).decode(), "expected_revision": "absent",
                "allow_secret": True})
            assert result.is_error
            assert_no_leak(sample, repr(result.content), json.dumps(result.structured_content))
            # a clean write works
            ok(await call(session, "memory_upsert", path="m.md", content=CLEAN.decode(), expected_revision="absent"))
    assert (hub.scope_dir / "m.md").read_bytes() == CLEAN
    assert len(versions(hub, "m.md")) == 1
    assert_no_leak(sample, errlog.read_text())
    # even a hand-built request under the MCP server's client name cannot pass the override
    with HubClient(hub.socket, client_name="amux-mcp") as client, pytest.raises(HubError) as raised:
        client.call("upsert", {"path": "m.md", "content": note(sample), "expected_revision": "absent",
                               "allow_secret": True})
    assert raised.value.code is ErrorCode.BAD_REQUEST and "allow_secret" in raised.value.message
    assert (hub.scope_dir / "m.md").read_bytes() == CLEAN


async def test_warn_writes_and_reports_redacted_findings(hub_factory: Any, tmp_path: Path) -> None:
    hub: HubProcess = hub_factory(settings={"memory.secret_scan": "warn"})
    sample = samples(4)[1]
    r = hub.cli("memory", "upsert", "w.md", "--expected-revision", "absent", input=note(sample))
    assert r.returncode == 0, r.stdout
    assert [f["rule"] for f in r.json["secret_findings"]] == [sample.rule]
    assert "memory.secret_scan is warn" in r.json["warnings"][0]
    assert (hub.scope_dir / "w.md").read_bytes() == note(sample)
    assert "secret_override" not in versions(hub, "w.md")[0]
    assert hub.log is not None
    log = hub.log.read_text()
    assert "memory.secret_scan = warn" in log and redact(sample.secret) in log
    assert_no_leak(sample, r.stdout, r.stderr, log)
    with trio.fail_after(TIMEOUT):
        async with mcp_session(hub.home, tmp_path / "mcp.log") as session:
            result = await call(session, "memory_upsert", path="agent.md", content=note(sample).decode(),
                                expected_revision="absent")
    answer = ok(result)
    assert [f["rule"] for f in answer["secret_findings"]] == [sample.rule]
    assert "Warning: it holds credentials" in repr(result.content)
    assert_no_leak(sample, json.dumps(answer), repr(result.content))


def test_off_does_not_look(hub_factory: Any) -> None:
    hub: HubProcess = hub_factory(settings={"memory.secret_scan": "off"})
    sample = samples(5)[2]
    r = hub.cli("memory", "upsert", "o.md", "--expected-revision", "absent", input=note(sample))
    assert r.returncode == 0 and "secret_findings" not in r.json and "warnings" not in r.json
    assert (hub.scope_dir / "o.md").read_bytes() == note(sample)


def test_allow_list_of_hashes_lets_exact_values_through(hub_factory: Any) -> None:
    allowed, other = samples(6)[0], samples(7)[0]
    digest = hashlib.sha256(allowed.secret.encode()).hexdigest()
    hub: HubProcess = hub_factory(settings={"memory.secret_allow": digest.upper()})
    r = hub.cli("memory", "upsert", "doc.md", "--expected-revision", "absent", input=note(allowed))
    assert r.returncode == 0 and "secret_findings" not in r.json, r.stdout
    r = hub.cli("memory", "upsert", "doc2.md", "--expected-revision", "absent", input=note(other))
    assert r.returncode == 18
    got = hub.cli("system", "config", "get", "memory.secret_allow")
    assert digest in got.stdout.decode()


def test_bad_settings_are_refused_with_a_clear_message(hub: HubProcess) -> None:
    r = hub.cli("system", "config", "set", "memory.secret_scan", "loud")
    assert r.returncode == 2 and "block, warn or off" in r.stderr
    r = hub.cli("system", "config", "set", "memory.secret_allow", "not-a-hash")
    assert r.returncode == 2 and "SHA-256" in r.stderr


def test_scan_finds_hand_placed_and_overridden_secrets_and_with_history_the_stored_versions(
        hub: HubProcess) -> None:
    by_hand, overridden = samples(8)[4], samples(9)[6]
    create(hub, "clean.md")
    (hub.scope_dir / "hand.md").write_bytes(note(by_hand))  # written to disk directly: no check ran
    r = hub.cli("memory", "upsert", "over.md", "--expected-revision", "absent", "--allow-secret",
                input=note(overridden))
    leaky = r.json["revision"]
    r = hub.cli("memory", "scan")
    assert r.returncode == 0, r.stderr
    found = {d["path"]: d for d in r.json["documents"]}
    assert sorted(found) == ["hand.md", "over.md"] and r.json["versions"] == []
    assert found["hand.md"]["findings"] == [{"rule": by_hand.rule, "line": 4, "preview": redact(by_hand.secret)}]
    assert any("amux memory upsert over.md" in c for c in found["over.md"]["commands"])
    assert_no_leak(by_hand, r.stdout, r.stderr)
    assert_no_leak(overridden, r.stdout, r.stderr)
    # clean the document, then the history still holds the old version: --history finds it with its purge
    r = hub.cli("memory", "upsert", "over.md", "--expected-revision", leaky, input=CLEAN)
    assert r.returncode == 0
    r = hub.cli("memory", "scan", "--history")
    assert [d["path"] for d in r.json["documents"]] == ["hand.md"]
    (stored,) = [v for v in r.json["versions"] if v["path"] == "over.md"]
    assert stored["revision"] == leaky and stored["findings"][0]["rule"] == overridden.rule
    purge = stored["commands"][0].split()
    assert purge == ["amux", "memory", "purge", "over.md", "--revision", leaky]
    r = hub.cli(*purge[1:])
    assert r.returncode == 0, r.stdout
    r = hub.cli("memory", "scan", "--history")
    assert [v["path"] for v in r.json["versions"]] == []
    assert overridden.secret.encode() not in (hub.home / "history" / "global" / "versions.log").read_bytes()


def test_prose_about_passwords_and_documented_placeholders_are_not_credentials() -> None:
    prose = (
        b"# Security notes\n\n"
        b"The password: rotate it monthly; the secret: never share it.\n"
        b"password = the one on the sticky note\n"
        b"Set `api_key = ${API_KEY}` or api_key: <your-key-here>.\n"
        b"Example: AKIAIOSFODNN7EXAMPLE and ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX.\n"
        b"Connect with postgres://user:password@localhost:5432/db.\n"
        b"The proxy expects the key in PKCS#8 (`-----BEGIN PRIVATE KEY-----`).\n"
        b"LINEAR_WEBHOOK_SECRET=wh_abc123def456...\n"
        b"secret_key = 0123456789abcdef\n"
    )
    assert find_secrets(prose) == []


def test_scan_answer_stays_within_the_response_budget_and_says_when_it_is_cut(hub: HubProcess) -> None:
    many = [s for seed in range(20, 24) for s in samples(seed)]  # 72 documents holding credentials
    for i, sample in enumerate(many):
        (hub.scope_dir / f"leak{i:02d}.md").write_bytes(note(sample) * 2)  # by hand: no check ran
    r = hub.cli("memory", "scan")
    assert r.returncode == 0, r.stderr
    assert r.json["truncated"] is True and 0 < len(r.json["documents"]) <= 40
    assert all(len(d["findings"]) <= 3 for d in r.json["documents"])
    for sample in many:
        assert_no_leak(sample, r.stdout)


def test_credentials_in_the_shapes_notes_use_are_refused(hub: HubProcess) -> None:
    """A value with text after it, Markdown labels and tables, spaced key names, tokens, URL and CLI forms."""
    rev = create(hub, "deploy.md")
    forms = note_forms()
    for sample in forms[:2]:  # through the CLI, as a person or a Pi agent writes
        r = hub.cli("memory", "upsert", "deploy.md", "--expected-revision", rev, input=note(sample))
        assert r.returncode == 18, (sample.line, r.stdout)
        assert [f["rule"] for f in r.json["error"]["data"]["findings"]] == [sample.rule]
        assert_no_leak(sample, r.stdout, r.stderr)
    with hub.client(timeout=60) as client:
        for sample in forms:
            with pytest.raises(HubError) as raised:
                client.call("upsert", upsert_params("deploy.md", note(sample), rev))
            assert raised.value.code is ErrorCode.SECRET_DETECTED, sample.line
            assert raised.value.data["findings"] == [{"rule": sample.rule, "line": 4,
                                                      "preview": redact(sample.secret)}], sample.line
            assert_no_leak(sample, raised.value.message, json.dumps(raised.value.data))
    assert (hub.scope_dir / "deploy.md").read_bytes() == CLEAN
    assert len(versions(hub, "deploy.md")) == 1


def test_notes_that_say_where_a_credential_lives_are_written(hub: HubProcess) -> None:
    body = ("# Where the credentials are\n\n" + "\n".join(f"- {line}" for line in REFERENCES) + "\n").encode()
    r = hub.cli("memory", "upsert", "where.md", "--expected-revision", "absent", input=body)
    assert r.returncode == 0, r.stdout
    assert "secret_findings" not in r.json
    for line in REFERENCES:  # each alone, too (a finding on one line must not hide behind another)
        assert find_secrets(f"# n\n{line}\n".encode()) == [], line


def test_long_lines_of_jwt_lookalikes_are_checked_without_backtracking(hub: HubProcess) -> None:
    """The reviewer's 63 KB line of ``eyJ`` took 2 s of CPU under the scope lock, and ``scan --history`` paid it
    again for each stored version: eight such versions must now be written and scanned inside a 10 s process
    timeout (not a timed assertion; the quadratic pattern needed about 20 s)."""
    rev = "absent"
    with hub.client(timeout=120) as client:
        for i, unit in enumerate(["eyJ", "eyJ=", "eyJa.", "eyJ", "eyJ=", "eyJa.", "eyJ", "eyJ"]):
            body = (f"# j{i}\n" + unit * (63_000 // len(unit)) + "\n").encode()
            rev = client.call("upsert", upsert_params("jwt.md", body, rev, allow_shrink=True))["revision"]
    assert len(versions(hub, "jwt.md")) == 8
    r = hub.cli("memory", "scan", "--history", timeout=10)
    assert r.returncode == 0 and r.json["documents"] == [] and r.json["versions"] == [], r.stdout
