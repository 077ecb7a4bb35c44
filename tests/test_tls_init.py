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
