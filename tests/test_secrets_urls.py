"""URL passwords pasted unescaped are credentials whatever characters they hold (DESIGN.md §16.1).

``postgres://app:Tq7#…@db``, ``redis://ops:N8/…@cache``, ``amqp://svc:Hb4?…@mq`` and a raw ``%`` in the
password were stored without a word; they are refused with ``secret_detected`` through the real CLI and the
real ``amux mcp``, nothing written, the value in no answer.  The documented placeholders (``password``,
``changeme``, ``${VAR}``, ``<password>``, ``xxx…``, ``%VAR%``) and URLs whose ``@`` comes after a port and a
path are still written, and lines shaped against the widened pattern are checked in linear time.  Every
credential is built at run time (:mod:`tests.secret_samples`).
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest
import trio

from amux_memory.hub.methods.secrets import find_secrets, redact
from amux_memory.protocol.errors import EXIT_CODES, ErrorCode
from tests.conftest import HubProcess
from tests.mcp_session import call, err, mcp_session, ok
from tests.secret_samples import Sample, assert_no_leak, url_password_forms

PLACEHOLDERS = (
    "postgres://user:password@localhost:5432/db",
    "postgres://app:changeme@db.internal/app",
    "postgres://app:${DB_PASSWORD}@db/app",
    "postgres://app:$DB_PASSWORD@db/app",
    "postgres://app:<password>@db/app",
    "redis://:xxxxxxxxxxxxxxxx@cache:6379/0",
    "amqp://svc:%AMQP_PASSWORD%@mq.internal:5672/",
    "postgres://app:your-password-here@db/app",
    "postgres://%s:%s@%s/%s",
)
"""Connection strings as documentation and templates write them: no credential (docs/secrets.md)."""

NOT_PASSWORDS = (
    "https://cdn.jsdelivr.net:443/npm/marked@12.0.2/marked.min.js",
    "http://localhost:3000/@alice",
    "https://search.internal:8443/users?email=bob@example.com",
    "docker pull registry.internal:5000/team/api@sha256:" + "0123456789abcdef" * 4,
)
"""URLs with an ``@`` after a port and a path: what the widened password pattern must not take for one."""


def control() -> Sample:
    """The form refused before this change too: ``postgres://admin:<20 letters and digits>@db/app``."""
    rng = random.Random(5)
    secret = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(20))
    return Sample("url-password", f"postgres://admin:{secret}@db/app", secret)


def note(sample: Sample) -> bytes:
    return f"# Databases\n\nThe app connects with\n{sample.line}\n".encode()


@pytest.mark.parametrize("sample", [control(), *url_password_forms()], ids=lambda s: s.line.split(":", 1)[0])
def test_each_unescaped_password_is_found_with_a_redacted_preview(sample: Sample) -> None:
    assert [(f.rule, f.line, f.preview) for f in find_secrets(note(sample))] == [
        ("url-password", 4, redact(sample.secret))], sample.line


@pytest.mark.parametrize("line", [*PLACEHOLDERS, *NOT_PASSWORDS])
def test_placeholders_and_ports_before_an_at_are_not_credentials(line: str) -> None:
    assert find_secrets(f"# n\n{line}\n".encode()) == [], line


@pytest.mark.slow
def test_the_cli_refuses_each_and_writes_nothing(hub: HubProcess) -> None:
    for i, sample in enumerate([control(), *url_password_forms(17)]):
        path = f"db{i}.md"
        r = hub.cli("memory", "upsert", path, "--expected-revision", "absent", input=note(sample))
        assert r.returncode == EXIT_CODES[ErrorCode.SECRET_DETECTED] == 18, (sample.line, r.stdout)
        error = r.json["error"]
        assert error["code"] == "secret_detected", sample.line
        assert error["data"]["findings"] == [{"rule": "url-password", "line": 4, "preview": redact(sample.secret)}]
        assert_no_leak(sample, r.stdout, r.stderr)
        assert not (hub.scope_dir / path).exists()
        assert hub.cli("memory", "history", path).json["versions"] == []
    body = ("# Templates\n\n" + "\n".join(f"- `{line}`" for line in (*PLACEHOLDERS, *NOT_PASSWORDS)) + "\n").encode()
    r = hub.cli("memory", "upsert", "templates.md", "--expected-revision", "absent", input=body)
    assert r.returncode == 0, r.stdout
    assert (hub.scope_dir / "templates.md").read_bytes() == body


@pytest.mark.slow
async def test_the_mcp_server_refuses_them_too(hub: HubProcess, tmp_path: Path) -> None:
    errlog = tmp_path / "mcp.log"
    forms = url_password_forms(18)
    with trio.fail_after(60):
        async with mcp_session(hub.home, errlog) as session:
            for sample in forms:
                result = await call(session, "memory_upsert", path="db.md", content=note(sample).decode(),
                                    expected_revision="absent")
                error = err(result, ErrorCode.SECRET_DETECTED)
                assert [f["rule"] for f in error["data"]["findings"]] == ["url-password"], sample.line
                assert_no_leak(sample, json.dumps(result.structured_content), repr(result.content))
            ok(await call(session, "memory_upsert", path="db.md", content="# Databases\n\nsee 1Password\n",
                          expected_revision="absent"))
    assert (hub.scope_dir / "db.md").read_bytes() == b"# Databases\n\nsee 1Password\n"
    assert len(hub.cli("memory", "history", "db.md").json["versions"]) == 1
    for sample in forms:
        assert_no_leak(sample, errlog.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("line", [
    "://a:" + "#" * 60_000,  # a password run that never meets its @
    "://:" * 15_000,  # a match starting at every ://
    "://a:b/" * 8_500 + "@",  # each start runs to its bound before the @
    "x://" + "a" * 60_000 + ":b@",  # a user longer than its bound
])
def test_lines_shaped_against_the_url_rule_are_checked_in_linear_time(hub: HubProcess, line: str) -> None:
    """A 60 KB line must be written inside a 10 s process timeout (not a timed assertion)."""
    r = hub.cli("memory", "upsert", "long.md", "--expected-revision", "absent", input=f"# l\n{line}\n".encode(),
                timeout=10)
    assert r.returncode in (0, 18), r.stdout


def test_a_raw_at_in_the_password_is_refused_in_the_singular(hub: HubProcess) -> None:
    """``mysql://root:P@ssw…!@db`` was stored (the password was taken to end at its first ``@``, too short to
    count); now the whole password up to the last ``@`` is found, and the message counts ``1 credential``."""
    for i, sample in enumerate(url_password_forms()[-2:]):
        path = f"u{i}.md"
        r = hub.cli("memory", "upsert", path, "--expected-revision", "absent", input=note(sample))
        assert r.returncode == 18, (sample.line, r.stdout)
        error = r.json["error"]
        assert error["data"]["findings"] == [{"rule": "url-password", "line": 4, "preview": redact(sample.secret)}]
        assert "would hold 1 credential (url-password)" in error["message"], error["message"]
        assert_no_leak(sample, r.stdout, r.stderr)
        assert not (hub.scope_dir / path).exists()
