"""``config.toml`` read once, the same way, by the Hub and the CLI (``protocol/config_file.py``, DESIGN.md §13.2).

Every check runs the real ``amux`` as a subprocess, as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, ExitStatus
from tests.conftest import REPO, HubProcess, amux_argv


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["HOME"] = str(tmp_path / "user")
    env["AMUX_HOME"] = str(tmp_path / "home")
    (tmp_path / "user").mkdir(exist_ok=True)
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def _amux(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*amux_argv(), *args], capture_output=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


def test_a_tilde_socket_path_written_by_hand_is_where_the_cli_looks(tmp_path: Path) -> None:
    env = _env(tmp_path)
    home = Path(env["AMUX_HOME"])
    (home / "config.toml").write_text('[memory]\nenabled = true\n\n[hub]\nsocket_path = "~/h2.sock"\n')
    hub = HubProcess(home=home, socket=tmp_path / "user" / "h2.sock", log=tmp_path / "hub.log", env=env)
    hub.start()
    try:
        status = _amux(env, "hub", "status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert json.loads(status.stdout)["memory_enabled"] is True
        found = _amux(env, "memory", "search", "anything")
        assert found.returncode == 0, found.stdout + found.stderr
        assert not (home / "hub.sock").exists() and not (home / "~").exists()
    finally:
        hub.stop()


def test_a_section_that_is_not_a_table_is_bad_request_and_serve_exits_21(tmp_path: Path) -> None:
    env = _env(tmp_path)
    home = Path(env["AMUX_HOME"])
    (home / "config.toml").write_text('hub = "oops"\n')
    serve = _amux(env, "hub", "serve", "--home", str(home))
    assert serve.returncode == ExitStatus.HUB_START_FAILED, serve.stdout + serve.stderr
    error = json.loads(serve.stdout)["error"]
    assert error["code"] == "bad_request" and error["data"]["key"] == "hub", error
    assert "Traceback" not in serve.stderr.decode()
    for args in (("system", "config", "get", "hub.socket_path"),
                 ("system", "config", "set", "hub.socket_mode", "0600")):
        r = _amux(env, *args)
        assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST], r.stdout + r.stderr
        assert json.loads(r.stdout)["error"]["data"]["key"] == "hub"
    assert (home / "config.toml").read_text() == 'hub = "oops"\n'  # nothing was rewritten


def _imported(env: dict[str, str], *argv: str) -> set[str]:
    """Top-level packages a CLI run imports, from ``python -X importtime``."""
    code = f"import sys\nfrom amux_memory.tools.cli.app import main\nsys.exit(main({list(argv)!r}))\n"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, env=env,
                          cwd=REPO, timeout=60)
    names = set()
    for line in proc.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            names.add(name.split(".")[0])
    assert names, proc.stderr.decode()[-2000:]
    return names


def test_the_cli_reads_config_toml_without_the_hubs_imports(tmp_path: Path) -> None:
    env = _env(tmp_path)
    home = Path(env["AMUX_HOME"])
    heavy = {"tomli_w", "trio", "hub", "mcp"}
    without = _imported(env, "memory", "search", "x")  # no Hub runs: unavailable, but the socket was looked up
    assert not without & (heavy | {"tomllib"}), sorted(without & (heavy | {"tomllib"}))
    (home / "config.toml").write_text('[hub]\nsocket_path = "~/h2.sock"\n')
    with_file = _imported(env, "memory", "search", "x")
    assert "tomllib" in with_file and not with_file & heavy, sorted(with_file & heavy)


def test_hub_config_defaults_are_the_settings_table(tmp_path: Path) -> None:
    """:data:`protocol.settings.SETTINGS` is the one source of defaults: a Hub on a home without ``config.toml``
    runs with exactly :class:`hub.access.config.HubConfig`'s field defaults, and those are the table's, parsed."""
    from dataclasses import MISSING, fields

    from amux_memory.hub.access.config import HubConfig, allow_list, load
    from amux_memory.protocol.settings import SETTINGS, default_value

    loaded = load(tmp_path)
    required = {f.name: getattr(loaded, f.name) for f in fields(HubConfig)
                if f.default is MISSING and f.default_factory is MISSING}
    assert HubConfig(**required) == loaded  # every defaulted field: its default is what load() reads
    assert loaded.memory_enabled is default_value("memory.enabled") and loaded.isolation == "off"
    assert loaded.socket_mode == int(default_value("hub.socket_mode"), 8) == 0o600
    assert loaded.secret_allow == allow_list(default_value("memory.secret_allow")) == frozenset()
    for key, setting in SETTINGS.items():  # each default is a value its own parser accepts
        assert default_value(key) == setting.parse(str(setting.default).lower() if isinstance(setting.default, bool)
                                                   else str(setting.default)), key


def test_the_web_page_reads_settings_without_the_hub() -> None:
    """The settings table lives in ``protocol/`` (DESIGN.md §13.2): the web page and the CLI's reads import it
    from there; only writing ``config.toml`` durably is the Hub's (``hub.access.config.set_value``), and doctor's
    look at a home's scope folders (``hub.access.config.unreached_scopes``, DESIGN.md §7.8) is the Hub's too."""
    import ast

    allowed = {"tools/ui/app.py": {"amux_memory.hub.access.config"}, "tools/ui/serve.py": set(),
               "tools/cli/doctor.py": {"amux_memory.hub.access.config"}}
    for name, writes in allowed.items():
        tree = ast.parse((REPO / name).read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert {m for m in imported if m.startswith("amux_memory.hub")} == writes, name
        assert "amux_memory.protocol.settings" in imported, name
