"""``amux hub tls init`` through the real CLI: a ``--name`` that is no IP address or DNS name is refused with
``bad_request`` and nothing written; a terminal gets readable lines, a pipe JSON; a home it makes is ``0700``;
``--help`` offers no ``--empty-name`` (DESIGN.md §7, §17).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import HubProcess, amux_argv, make_hub
from tests.terminal import run_in_terminal


@pytest.fixture
def home(tmp_path: Path) -> HubProcess:
    return make_hub(tmp_path, start=False)


@pytest.mark.parametrize("name", ["", "bad name!", "a" * 300, "x." + "a" * 64, "999.1.1.1", "1.2.3", "x\x1b[2Jy",
                                  "-lead.example", "trail-.example", "*.example.com", "a..b", "::1]", "h_x.lan"])
def test_a_bad_name_is_refused_and_nothing_written(home: HubProcess, name: str) -> None:
    before = (home.home / "config.toml").read_bytes()
    r = home.cli("hub", "tls", "init", f"--name={name}")
    assert r.returncode == 2, r.stdout
    assert r.json["error"]["code"] == "bad_request" and r.json["error"]["data"] == {"field": "name"}
    assert "nothing was written" in r.json["error"]["message"]
    assert "\x1b" not in r.stdout.decode() and "\x1b" not in r.stderr
    assert not (home.home / "tls").exists()
    assert (home.home / "config.toml").read_bytes() == before


def test_good_names_are_in_the_certificate_and_a_terminal_reads_lines(home: HubProcess) -> None:
    shown = run_in_terminal([*amux_argv(), "hub", "tls", "init", "--name", "hub.example.lan", "--name", "10.1.2.3",
                             "--name", "[fd00::1]", "--name", "Hub-1.example.lan."], env=home.env)
    assert shown.returncode == 0, shown.stderr
    assert not shown.plain.lstrip().startswith("{") and '"cert"' not in shown.plain, shown.plain
    assert "hub.example.lan, 10.1.2.3, fd00::1, Hub-1.example.lan" in shown.plain
    assert "amux hub restart" in shown.plain
    again = home.cli("hub", "tls", "init", "--force", "--name", "hub.example.lan")
    assert again.returncode == 0, again.stderr
    assert again.json["names"][0] == "hub.example.lan" and again.json["cert"].endswith("hub.pem")


def test_a_home_it_creates_is_private(tmp_path: Path) -> None:
    new = tmp_path / "fresh" / "home"
    r = subprocess.run([*amux_argv(), "hub", "tls", "init", "--home", str(new)], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert new.stat().st_mode & 0o777 == 0o700
    assert (new / "tls").stat().st_mode & 0o777 == 0o700


def test_help_offers_no_empty_name(home: HubProcess) -> None:
    r = home.cli("hub", "tls", "init", "--help")
    assert r.returncode == 0 and "--name" in r.stdout.decode()
    assert "--empty-name" not in r.stdout.decode()


def test_the_certificate_carries_the_machines_addresses_and_every_ip(home: HubProcess) -> None:
    """Another machine may reach the Hub by an IP address: the certificate names the addresses this machine's
    default routes leave from (read from the kernel here, as ``ip route get`` would) and every ``--ip``; a
    ``--ip`` that is no address is refused with nothing written."""
    import ipaddress
    import socket

    from cryptography import x509

    bad = home.cli("hub", "tls", "init", "--ip", "hub.example.lan")
    assert bad.returncode == 2 and bad.json["error"]["data"] == {"field": "ip"}, bad.stdout
    assert not (home.home / "tls").exists()
    r = home.cli("hub", "tls", "init", "--ip", "10.9.8.7", "--ip", "[fd00::7]")
    assert r.returncode == 0, r.stderr
    own = []
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as udp:
                udp.connect((probe, 9))
                own.append(udp.getsockname()[0])
        except OSError:
            pass
    cert = x509.load_pem_x509_certificate((home.home / "tls" / "hub.pem").read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    named = {str(a) for a in san.get_values_for_type(x509.IPAddress)}
    assert {"10.9.8.7", "fd00::7", "127.0.0.1", "::1"} <= named, named
    assert {str(ipaddress.ip_address(a)) for a in own} <= named, (own, named)
    assert set(r.json["names"]) >= named
