"""Secrets kept out of memory (DESIGN.md §16), through the real CLI, a real Hub and the real ``amux mcp``.

Every credential is fake and assembled at run time (:mod:`tests.secret_samples`).
A refused write leaves the document byte-identical and records no history
version; no answer, stream or log holds any credential or its middle third.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from amux_memory.hub.methods.secrets import find_secrets, redact
from amux_memory.protocol.errors import ERRORS, ErrorCode, HubError
from amux_memory.protocol.requests import upsert_params
from amux_memory.tools.client.blocking import HubClient
from amux_memory.tools.typed.hosts import claude_bucket
from tests.conftest import HubProcess, amux_argv
from tests.mcp_session import call, err, mcp_session, ok
from tests.secret_samples import REFERENCES, Sample, assert_no_leak, note_forms, samples
from tests.terminal import run_in_terminal

TIMEOUT = 60
CLEAN = b"# Deploy notes\n\nThe deploy token is in 1Password, item 'deploy'.\n"


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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    assert found["hand.md"]["findings"] == [{"rule": by_hand.rule, "line": 4, "preview": redact(by_hand.secret),
                                             "sha256": hashlib.sha256(by_hand.secret.encode()).hexdigest()}]
    assert any(c.startswith("amux memory upsert ") and c.endswith(" over.md") for c in found["over.md"]["commands"])
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
    assert purge == ["amux", "memory", "purge", "--revision", leaky, "over.md"]
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("line", [
    "password: vault/kv/prod/db2024 " + "a_" * 30_000,  # a key-shaped run after a keyword: once quadratic, 50 s
    "password: vault/kv/prod/db2024 " + "a." * 30_000,
    "token_" * 10_000,  # a literal hit every 6 characters, each once scanning the rest of the run: 15 s
    "-u" * 30_000,
    "pwd:::" * 10_000,  # detect-secrets' own keyword pattern scans to the end of the line at each keyword: 3 s
    "accountkey====" * 4_000,
    "://a:" * 12_000,
])
def test_long_adversarial_lines_are_checked_in_linear_time(hub: HubProcess, line: str) -> None:
    """A 60 KB line shaped to make a rule backtrack must be written inside a 10 s process timeout (no timed
    assertion: the quadratic forms took 15-50 s)."""
    r = hub.cli("memory", "upsert", "long.md", "--expected-revision", "absent", input=f"# l\n{line}\n".encode(),
                timeout=10)
    assert r.returncode == 0, r.stdout


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
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


def assert_not_even_lowercased(sample: Sample, *texts: str | bytes) -> None:
    """:func:`assert_no_leak`, and not lowercased either (the rewrite guard quotes lowercased text)."""
    assert_no_leak(sample, *texts)
    lowered = Sample(sample.rule, sample.line.lower(), sample.secret.lower())
    assert_no_leak(lowered, *(t.lower() for t in texts))


HOSTILE = "notes/$(touch pwned) ; rm -rf x `touch pwned2`.md"


@pytest.mark.slow
def test_scan_commands_quote_hostile_paths_and_a_shell_runs_them_as_written(hub: HubProcess,
                                                                            tmp_path: Path) -> None:
    sample = samples(31)[0]
    for path in (HOSTILE, "-rf.md"):
        r = hub.cli("memory", "upsert", "--expected-revision", "absent", "--allow-secret", "--", path,
                    input=note(sample))
        assert r.returncode == 0, r.stdout
    r = hub.cli("memory", "scan")
    found = {d["path"]: d for d in r.json["documents"]}
    assert sorted(found) == sorted([HOSTILE, "-rf.md"])
    work = tmp_path / "work"
    (work / "bin").mkdir(parents=True)
    wrapper = work / "bin" / "amux"  # the shell finds the real CLI as `amux`
    wrapper.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in amux_argv()) + ' "$@"\n')
    wrapper.chmod(0o755)
    env = {**hub.env, "PATH": f"{work / 'bin'}:{os.environ.get('PATH', '')}"}
    for path, entry in found.items():
        export, upsert = entry["commands"]
        assert "(" not in upsert.replace(HOSTILE, "") or shlex.quote(HOSTILE) in upsert
        words = shlex.split(export)
        assert words[-2:] == [">", "doc.md"] and path in words and words[:3] == ["amux", "memory", "export"]
        assert entry["advice"] and "doc.md" in entry["advice"]
        done = subprocess.run(["sh", "-c", export], cwd=work, env=env, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert (work / "doc.md").read_bytes() == note(sample)
        (work / "doc.md").write_bytes(CLEAN)  # the person removes the credential
        done = subprocess.run(["sh", "-c", upsert], cwd=work, env=env, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert (hub.scope_dir / path).read_bytes() == CLEAN
    r = hub.cli("memory", "scan", "--history")
    assert r.json["documents"] == []
    for stored in r.json["versions"]:
        (purge,) = stored["commands"]
        done = subprocess.run(["sh", "-c", purge], cwd=work, env=env, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert not (work / "pwned").exists() and not (work / "pwned2").exists()
    assert hub.cli("memory", "scan", "--history").json["versions"] == []


@pytest.mark.slow
def test_a_path_holding_a_credential_is_refused_and_never_echoed(hub: HubProcess) -> None:
    sample = samples(32)[0]  # a GitHub token
    path = f"creds/{sample.secret}.md"
    for extra in ([], ["--allow-secret"]):
        r = hub.cli("memory", "upsert", path, "--expected-revision", "absent", *extra, input=CLEAN)
        assert r.returncode == 18, r.stdout
        error = r.json["error"]
        assert error["data"]["findings"] == [{"rule": sample.rule, "line": 0, "preview": redact(sample.secret),
                                              "in": "path"}]
        assert error["data"]["path"] == f"creds/{redact(sample.secret)}.md"
        assert_no_leak(sample, r.stdout, r.stderr)
    assert not (hub.scope_dir / "creds").exists()
    r = hub.cli("memory", "get", f"bad/{sample.secret}/../x.md")
    assert r.returncode == ERRORS[ErrorCode.INVALID_PATH].exit_status, r.stdout
    assert r.json["error"]["code"] == "invalid_path" and redact(sample.secret) in r.json["error"]["message"]
    assert_no_leak(sample, r.stdout, r.stderr)
    # placed by hand: scan reports it, redacted, with advice and no command naming it
    (hub.scope_dir / "creds").mkdir()
    (hub.scope_dir / path).write_bytes(CLEAN)
    r = hub.cli("memory", "scan")
    (entry,) = r.json["documents"]
    assert entry["path"] == f"creds/{redact(sample.secret)}.md" and entry["commands"] == []
    assert entry["findings"][0]["in"] == "path" and "rename" in entry["advice"]
    assert_no_leak(sample, r.stdout, r.stderr)
    assert hub.cli("memory", "log").returncode == 0  # records the hand-placed file as an external version
    r = hub.cli("memory", "scan", "--history")
    (stored,) = r.json["versions"]
    assert stored["path"] == entry["path"] and stored["commands"] == [] and "purge --all" in stored["advice"]
    assert_no_leak(sample, r.stdout, r.stderr)
    assert hub.log is not None
    assert_no_leak(sample, hub.log.read_text())


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_an_agent_session_cannot_override_the_check(hub: HubProcess) -> None:
    sample = samples(33)[0]
    r = hub.cli("memory", "upsert", "pi.md", "--expected-revision", "absent", "--allow-secret",
                input=note(sample), env={"AMUX_SESSION_ID": "s-123"})
    assert r.returncode == ERRORS[ErrorCode.BAD_REQUEST].exit_status, r.stdout
    assert "person's override" in r.json["error"]["message"] and "agent session" in r.json["error"]["message"]
    assert not (hub.scope_dir / "pi.md").exists()
    assert_no_leak(sample, r.stdout, r.stderr)
    r = hub.cli("memory", "upsert", "pi.md", "--expected-revision", "absent", "--allow-secret", input=note(sample))
    assert r.returncode == 0, r.stdout  # a person at the command line still can


@pytest.mark.slow
def test_an_override_that_fails_is_not_logged_and_its_error_quotes_no_credential(hub: HubProcess) -> None:
    sample = samples(34)[0]
    long = b"# Deploy\n\n" + b"".join(b"- step %d of the deploy\n" % i for i in range(40))
    rev = create(hub, "deploy.md", long)
    cut = f"# Deploy\n\n- step one\n- step two\n(rest unchanged; token {sample.secret})\n".encode()
    r = hub.cli("memory", "upsert", "deploy.md", "--expected-revision", rev, "--allow-secret", input=cut)
    assert r.json["error"]["code"] == "destructive_rewrite", r.stdout
    assert_not_even_lowercased(sample, r.stdout, r.stderr)
    r = hub.cli("memory", "upsert", "deploy.md", "--expected-revision", "0" * 64, "--allow-secret",
                input=note(sample))
    assert r.json["error"]["code"] == "conflict", r.stdout
    assert (hub.scope_dir / "deploy.md").read_bytes() == long
    assert hub.log is not None
    log = hub.log.read_text()
    assert "wrote deploy.md" not in log
    assert_not_even_lowercased(sample, log)
    r = hub.cli("memory", "upsert", "deploy.md", "--expected-revision", rev, "--allow-secret",
                input=long + note(sample))
    assert r.returncode == 0, r.stdout
    assert "wrote deploy.md holding 1 credential (overridden by --allow-secret)" in hub.log.read_text()


def test_a_credential_given_as_an_allow_list_entry_is_not_echoed(hub: HubProcess) -> None:
    sample = samples(35)[0]
    r = hub.cli("system", "config", "set", "memory.secret_allow", sample.secret)
    assert r.returncode == 2 and "not shown" in r.stderr, r.stderr
    assert_no_leak(sample, r.stdout, r.stderr)


EDITOR = """import pathlib, sys
pathlib.Path(sys.argv[-1]).write_bytes(pathlib.Path(sys.argv[1]).read_bytes())
"""


@pytest.mark.slow
def test_edit_refused_for_a_credential_hints_the_override(hub: HubProcess, tmp_path: Path) -> None:
    sample = samples(36)[0]
    rev = create(hub, "ops.md")
    (tmp_path / "new.md").write_bytes(note(sample))
    (tmp_path / "editor.py").write_text(EDITOR)
    editor = f"{shlex.quote(sys.executable)} {tmp_path / 'editor.py'} {tmp_path / 'new.md'}"
    r = hub.cli("memory", "edit", "ops.md", env={"EDITOR": editor, "VISUAL": ""})
    assert r.json["error"]["code"] == "secret_detected", r.stdout
    assert r.stderr.count("nothing was written") == 1, r.stderr
    hint = next(line for line in r.stderr.splitlines() if "to write it anyway" in line)
    assert f"--expected-revision {rev[:12]}" in hint and hint.endswith("--allow-secret")
    assert_no_leak(sample, r.stdout, r.stderr)
    retry = hub.cli(*shlex.split(hint.split(": ", 2)[-1])[1:])  # the hinted command, as given
    assert retry.returncode == 0, retry.stdout
    assert versions(hub, "ops.md")[0]["secret_override"] == [sample.rule]


@pytest.mark.slow
def test_scan_in_a_terminal_shows_tables_and_history_and_log_mark_the_override(hub: HubProcess) -> None:
    sample = samples(37)[0]
    r = hub.cli("memory", "upsert", "ops.md", "--expected-revision", "absent", "--allow-secret", input=note(sample))
    assert r.returncode == 0, r.stdout
    shown = run_in_terminal([*amux_argv(), "memory", "scan"], env=hub.env)
    assert shown.returncode == 0, shown.stderr
    assert not shown.plain.lstrip().startswith("{")
    assert "ops.md" in shown.plain and sample.rule in shown.plain and redact(sample.secret) in shown.plain
    assert "amux memory export ops.md > doc.md" in shown.plain
    assert hashlib.sha256(sample.secret.encode()).hexdigest() in shown.plain
    assert_no_leak(sample, shown.screen, shown.stderr)
    as_json = run_in_terminal([*amux_argv(), "memory", "scan", "--json"], env=hub.env)
    assert json.loads(as_json.plain) == hub.cli("memory", "scan").json
    for argv in (["memory", "history", "ops.md"], ["memory", "log"]):
        shown = run_in_terminal([*amux_argv(), *argv], env=hub.env)
        assert f"[secret override: {sample.rule}]" in shown.plain, shown.plain
    r = hub.cli("memory", "upsert", "ops.md", "--expected-revision", r.json["revision"], input=CLEAN)
    assert "no credentials found" in run_in_terminal([*amux_argv(), "memory", "scan"], env=hub.env).plain


HOST_MEMORY = """---
name: {name}
description: {description}
metadata:
  type: reference
---

{body}
"""


@pytest.mark.slow
def test_import_skips_host_memories_holding_credentials_and_imports_the_rest(hub: HubProcess,
                                                                             tmp_path: Path) -> None:
    sample = samples(38)[0]
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    memory = home / ".claude" / "projects" / claude_bucket(str(work)) / "memory"
    memory.mkdir(parents=True)
    for name, body in (("a-clean", "The CI dashboard is at grafana, board ci-overview."),
                       ("b-token", f"The deploy token is {sample.secret}."),
                       ("c-clean", "The staging database is reached through the bastion host.")):
        (memory / f"{name}.md").write_text(HOST_MEMORY.format(name=name, description=f"about {name}", body=body))
    env = {k: v for k, v in hub.env.items() if k not in ("CLAUDE_CONFIG_DIR", "CLAUDE_CODE_REMOTE_MEMORY_DIR")}
    env["HOME"] = str(home)
    argv = ["memory", "import", "--from", "claude-code", "--cwd", str(work)]
    r = hub.cli(*argv, env=env)
    assert r.returncode == 0, r.stdout
    items = {Path(i["source"]).stem: i for i in r.json["items"]}
    assert items["b-token"]["action"] == "skip" and items["b-token"]["reason"].startswith("credential: ")
    assert sample.rule in items["b-token"]["reason"] and redact(sample.secret) in items["b-token"]["reason"]
    assert [items[n]["action"] for n in ("a-clean", "c-clean")] == ["create", "create"]
    assert_no_leak(sample, r.stdout, r.stderr)
    r = hub.cli(*argv, "--apply", env=env)
    assert r.returncode == 0, r.stdout
    assert_no_leak(sample, r.stdout, r.stderr)
    index = (hub.scope_dir / "index.md").read_text()
    assert "a-clean" in index and "c-clean" in index and "b-token" not in index
    assert not any(sample.secret.encode() in p.read_bytes() for p in hub.scope_dir.rglob("*.md"))


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_a_project_library_refuses_credentials_in_process(hub: HubProcess, tmp_path: Path) -> None:
    sample = samples(39)[0]
    project = tmp_path / "proj"
    project.mkdir()
    r = hub.cli("memory", "new", "reference", "deploy", "--tags", "gh", "--description", "the deploy token",
                "--body", f"token: {sample.secret}", "--project", str(project))
    assert r.returncode == 18, r.stdout
    assert r.json["error"]["data"]["findings"][0]["rule"] == sample.rule
    assert_no_leak(sample, r.stdout, r.stderr)
    assert not any(sample.secret.encode() in p.read_bytes() for p in project.rglob("*") if p.is_file())
    r = hub.cli("memory", "new", "reference", "deploy", "--tags", "gh", "--description", "the deploy token",
                "--body", "The deploy token is in 1Password, item 'deploy'.", "--project", str(project))
    assert r.returncode == 0, r.stdout


@pytest.mark.slow
def test_index_names_the_topic_a_credential_comes_from_and_lint_reports_it(hub: HubProcess) -> None:
    sample = samples(40)[0]
    r = hub.cli("memory", "new", "reference", "hand", "--tags", "ops", "--description", "the deploy notes",
                "--body", "The deploy token is in 1Password.")
    assert r.returncode == 0, r.stdout
    topic = hub.scope_dir / "reference" / "hand.md"
    topic.write_text(topic.read_text().replace("the deploy notes", f"deploy token {sample.secret}"))  # by hand
    r = hub.cli("memory", "index")
    assert r.returncode == 18, r.stdout
    error = r.json["error"]
    assert error["data"]["topics"] == ["reference/hand.md"] and "reference/hand.md" in error["message"]
    assert_no_leak(sample, r.stdout, r.stderr)
    r = hub.cli("memory", "lint", "--json")
    problems = [p for p in r.json["problems"] if p["code"] == "credential"]
    assert [(p["path"], p["severity"]) for p in problems] == [("reference/hand.md", "error")], r.stdout
    assert sample.rule in problems[0]["message"]
    assert_no_leak(sample, r.stdout, r.stderr)


def test_shell_command_quotes_every_word_and_puts_double_dash_before_a_dash_path() -> None:
    from amux_memory.hub.methods.scan_report import clean_up_commands, purge_command, shell_command

    hostile = "notes/$(touch x) ; rm -rf y.md"
    assert shell_command(["memory", "export"], hostile) == "amux memory export 'notes/$(touch x) ; rm -rf y.md'"
    assert shell_command(["memory", "export"], "-x.md") == "amux memory export -- -x.md"
    assert clean_up_commands("a.md", "9f" * 32) == [
        "amux memory export a.md > doc.md",
        f"amux memory upsert --expected-revision {'9f' * 32} --file doc.md a.md"]
    assert purge_command("-a b.md", "abc") == "amux memory purge --revision abc -- '-a b.md'"
