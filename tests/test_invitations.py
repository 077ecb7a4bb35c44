"""Invitations (DESIGN.md §7.4): ``amux hub invite`` on the Hub host, ``amux login`` on a person's machine with an
empty home, and what is refused.

Real processes throughout: a Hub with TLS from ``amux hub tls init`` on a loopback ``hub.listen``, the operator's
CLI on its home, and each person's CLI with nothing but ``PATH`` and an empty ``HOME`` (no ``AMUX_*``).  A refused
invitation must leave the person's home empty and the Hub's registry byte for byte as it was.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from amux_memory.hub.access import registry as reg
from amux_memory.protocol.invitation import parse_invitation
from tests.cli_fork import run_cli
from tests.conftest import CliResult, HubProcess, amux_argv, make_hub
from tests.helpers import free_port


@dataclass
class Person:
    """A person's account on another machine: an empty home, no amux variable."""

    home: Path

    def cli(self, *args: str, input: bytes = b"") -> CliResult:
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(self.home), "LANG": "C.UTF-8"}
        code, out, err = run_cli([*amux_argv(), *args], input, env, 60)
        return CliResult(code, out, err.decode(errors="replace"))

    def files(self) -> list[str]:
        """Every file and folder under the home, relative."""
        return sorted(str(p.relative_to(self.home)) for p in self.home.rglob("*"))


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubProcess]:
    """A Hub with isolation per person, TLS (``amux hub tls init``) on a loopback ``hub.listen`` and ``hub.mcp_listen``,
    and team ``web`` (review off)."""
    h = make_hub(tmp_path, isolation="user", start=False,
                 settings={"hub.listen": f"127.0.0.1:{free_port()}", "hub.mcp_listen": f"127.0.0.1:{free_port()}"})
    assert h.cli("hub", "tls", "init", "--json").returncode == 0
    assert h.cli("hub", "team", "add", "web", "--review", "off", "--json").returncode == 0
    h.start()
    yield h
    h.stop()


def person(tmp_path: Path, name: str) -> Person:
    home = tmp_path / "people" / name
    home.mkdir(parents=True)
    return Person(home)


def invite(hub: HubProcess, name: str, *args: str) -> dict[str, object]:
    made = hub.cli("hub", "invite", name, *args, "--json")
    assert made.returncode == 0, made.stderr
    doc = made.json
    assert isinstance(doc, dict)
    return doc


def registry_bytes(hub: HubProcess) -> bytes:
    return reg.registry_path(hub.home).read_bytes()


def test_invite_then_login_with_an_empty_home_and_everything_works_without_a_variable(
        hub: HubProcess, tmp_path: Path) -> None:
    doc = invite(hub, "ana", "--team", "web", "--role", "writer", "--label", "ana laptop")
    line = parse_invitation(str(doc["invitation"]))
    assert line.hub == doc["hub"] and doc["principal_added"] is True
    assert doc["member_of"] == [{"team": "web", "role": "writer"}]
    # The fingerprint is the CA's that 'amux hub tls init' made, as openssl would show it (DER, SHA-256).
    import hashlib
    import ssl
    ca_der = ssl.PEM_cert_to_DER_cert((hub.home / "tls" / "ca.pem").read_text())
    assert line.fingerprint == hashlib.sha256(ca_der).hexdigest()
    stored = reg.read_registry(reg.registry_path(hub.home))[0].invitations[line.id]
    assert line.code.split(".")[1] not in registry_bytes(hub).decode()  # only the hash is kept
    assert stored.used is None and stored.principal == "ana"

    ana = person(tmp_path, "ana")
    logged = ana.cli("login", str(doc["invitation"]))
    assert logged.returncode == 0, logged.stderr
    assert logged.json["principal"] == "ana" and logged.json["hub"] == line.hub
    assert [(m["mount"], m["role"]) for m in logged.json["mounts"]] == [("@web/", "writer")]
    amux = ana.home / ".amux"
    assert sorted(p.name for p in amux.iterdir()) == ["hub-ca.pem", "hub-token", "login.toml"]
    assert stat.S_IMODE((amux / "hub-token").stat().st_mode) == 0o600
    assert stat.S_IMODE(amux.stat().st_mode) == 0o700
    assert (amux / "hub-ca.pem").read_text() == (hub.home / "tls" / "ca.pem").read_text()

    # From now on: no AMUX_HUB, AMUX_TOKEN or AMUX_HUB_CA.
    wrote = ana.cli("memory", "upsert", "@web/deploy.md", "--expected-revision", "absent", "--json",
                    input=b"# Deploy\n\nRun make deploy-web from main.\n")
    assert wrote.returncode == 0, wrote.stderr
    found = ana.cli("memory", "search", "deploy-web", "--json")
    assert found.returncode == 0, found.stderr
    assert [m["path"] for m in found.json["matches"]] == ["@web/deploy.md"]

    tokens = hub.cli("hub", "token", "list", "--json").json["tokens"]
    assert len(tokens) == 1 and tokens[0]["principal"] == "ana" and tokens[0]["label"].startswith("ana laptop (")
    assert tokens[0]["expires"] is not None
    invitations = hub.cli("hub", "invitation", "list", "--json").json["invitations"]
    assert [(i["id"], i["state"], i["token"]) for i in invitations] == [(line.id, "used", tokens[0]["id"])]

    status = ana.cli("hub", "status", "--json")
    assert status.returncode == 0, status.stderr
    assert (status.json["principal"], status.json["socket"], status.json["home"]) == ("ana", line.hub, None)

    # doctor knows it is a client of a remote Hub, and never suggests starting a private one.
    doctor = ana.cli("doctor", "--json")
    checks = {c["name"]: c for c in doctor.json["checks"]}
    assert checks["login"]["status"] == "ok" and line.hub in checks["login"]["summary"]
    assert checks["ca"]["status"] == "ok"
    assert checks["token"]["status"] == "ok" and "expires" in checks["token"]["summary"]
    assert checks["teams"]["status"] == "ok" and "@web/" in checks["teams"]["summary"]
    assert checks["hub"]["status"] == "ok"
    assert not any("hub start" in (c["fix"] or "") for c in doctor.json["checks"])

    # hub connect on this machine reads the login (nothing issued); connect env carries AMUX_URL.
    connect = ana.cli("hub", "connect", "env", "--json")
    assert connect.returncode == 0, connect.stderr
    assert any(line_.startswith("export AMUX_URL=https://") for line_ in connect.json["env"])
    assert connect.json["token"] is None
    assert len(hub.cli("hub", "token", "list", "--json").json["tokens"]) == 1

    # logout revokes the token on the Hub and forgets the Hub here.
    out_ = ana.cli("logout", "--json")
    assert out_.returncode == 0, out_.stderr
    assert out_.json["revoked"] is True
    assert ana.files() == [".amux"]
    assert hub.cli("hub", "token", "list", "--json").json["tokens"][0]["state"] == "revoked"


def refused(who: Person, invitation: str) -> CliResult:
    result = who.cli("login", invitation, "--json")
    assert result.returncode != 0
    assert who.files() == [], who.files()  # nothing stored, not even the folder
    return result


def test_refused_invitations_store_nothing_and_change_nothing_on_the_hub(hub: HubProcess, tmp_path: Path) -> None:
    used = str(invite(hub, "ben")["invitation"])
    assert person(tmp_path, "ben").cli("login", used).returncode == 0

    revoked_doc = invite(hub, "cy", "--team", "web", "--role", "reader")
    assert hub.cli("hub", "invitation", "revoke", str(revoked_doc["id"]), "--json").returncode == 0
    expired = str(invite(hub, "dee")["invitation"])
    expired_id = parse_invitation(expired).id
    fresh = str(invite(hub, "eve")["invitation"])
    line = parse_invitation(fresh)
    # dee's invitation expired a minute ago.  Written without modify(), which drops expired records on every
    # write (an invitation that expired after the last write is the one a person can still present).
    path = reg.registry_path(hub.home)
    current, _ = reg.read_registry(path)
    lapsed = dataclasses.replace(current.invitations[expired_id], expires=int(time.time()) - 60)
    reg.write_registry(path, dataclasses.replace(current, invitations={**current.invitations, expired_id: lapsed}))
    secret = line.code.split(".")[1]
    tampered = fresh.replace(secret, ("A" if secret[0] != "A" else "B") + secret[1:])
    wrong_fp = fresh.replace(line.fingerprint, "0" * 64)

    before = registry_bytes(hub)
    cases = {
        "used": (used, "already used"),
        "revoked": (str(revoked_doc["invitation"]), "revoked"),
        "expired": (expired, "expired"),
        "tampered": (tampered, "not valid for this Hub"),
        "fingerprint": (wrong_fp, "not the Hub that invited you"),
        "garbled": (fresh[:-30], "not a usable amux invitation"),
        "not one": ("hello", "not a usable amux invitation"),
    }
    for case, (text, says) in cases.items():
        result = refused(person(tmp_path, f"p-{case.replace(' ', '-')}"), text)
        error = json.loads(result.stdout)["error"]
        assert says in error["message"], (case, error)
        assert secret not in result.stdout.decode() + result.stderr  # a code is never echoed
        assert registry_bytes(hub) == before, case

    # The fresh invitation still works after all that.
    assert person(tmp_path, "eve").cli("login", fresh).returncode == 0
    assert registry_bytes(hub) != before


def test_a_second_login_is_refused_until_logout(hub: HubProcess, tmp_path: Path) -> None:
    fay = person(tmp_path, "fay")
    assert fay.cli("login", str(invite(hub, "fay")["invitation"])).returncode == 0
    again = str(invite(hub, "fay")["invitation"])
    before = registry_bytes(hub)
    second = fay.cli("login", again, "--json")
    assert second.returncode != 0 and "already logged in" in second.json["error"]["message"]
    assert registry_bytes(hub) == before
    assert fay.cli("logout").returncode == 0
    assert fay.cli("login", again).returncode == 0


def test_invite_needs_tls_on_hub_listen_and_changes_nothing_without(tmp_path: Path) -> None:
    h = make_hub(tmp_path, isolation="user", start=False)
    made = h.cli("hub", "invite", "ana", "--json")
    assert made.returncode != 0 and "hub.listen is not set" in made.json["error"]["message"]
    assert not reg.registry_path(h.home).exists()
    h.configure("hub.listen", f"127.0.0.1:{free_port()}")
    assert h.cli("hub", "tls", "init", "--json").returncode == 0
    unknown_team = h.cli("hub", "invite", "ana", "--team", "nope", "--json")
    assert unknown_team.returncode != 0 and "no team 'nope'" in unknown_team.json["error"]["message"]
    assert not reg.registry_path(h.home).exists() or "ana" not in reg.registry_path(h.home).read_text()


def test_token_labels_and_connect_env_prints_amux_url(hub: HubProcess) -> None:
    assert hub.cli("hub", "principal", "add", "ci", "--service", "--json").returncode == 0
    issued = hub.cli("hub", "token", "issue", "ci", "--label", "CI deploy", "--json")
    assert issued.returncode == 0 and issued.json["label"] == "CI deploy"
    assert [t["label"] for t in hub.cli("hub", "token", "list", "--json").json["tokens"]] == ["CI deploy"]
    bad = hub.cli("hub", "token", "issue", "ci", "--label", "two\nlines", "--json")
    assert bad.returncode != 0 and bad.json["error"]["data"]["field"] == "label"
    env = hub.cli("hub", "connect", "env", "--principal", "ci", "--json")
    assert env.returncode == 0, env.stderr
    assert any(line.startswith("export AMUX_URL=https://127.0.0.1:") and line.endswith("/mcp")
               for line in env.json["env"])


def test_a_joined_hub_that_is_down_or_has_a_new_certificate_is_named_as_the_login(
        hub: HubProcess, tmp_path: Path) -> None:
    """The person set no variable: when the Hub joined with 'amux login' cannot be reached, the error names the
    login and says who can help, never AMUX_HUB or starting a Hub of one's own (DESIGN.md §7.4)."""
    gil = person(tmp_path, "gil")
    assert gil.cli("login", str(invite(hub, "gil", "--team", "web")["invitation"])).returncode == 0
    address = json.loads((gil.cli("hub", "status", "--json")).stdout)["socket"]

    assert hub.cli("hub", "tls", "init", "--force", "--json").returncode == 0  # a new CA: not the one gil pinned
    hub.stop()
    hub.start()
    changed = gil.cli("memory", "search", "deploy", "--json")
    error = json.loads(changed.stdout)["error"]
    assert changed.returncode == 11 and error["code"] == "unavailable", changed.stderr
    assert "you joined with 'amux login'" in error["message"] and "pinned at login" in error["message"]
    assert "new invitation" in error["next_step"] and "AMUX_HUB" not in error["message"] + error["next_step"]

    hub.stop()
    down = gil.cli("memory", "search", "deploy")
    assert down.returncode == 11
    text = down.stdout.decode() + down.stderr
    assert f"the Hub you joined with 'amux login' is not answering at {address}" in text
    assert "Ask whoever runs that Hub" in text
    assert "AMUX_HUB" not in text and "hub start" not in text
    hub.start()  # the fixture stops it
