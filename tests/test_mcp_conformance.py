"""The MCP conformance suite (``@modelcontextprotocol/conformance``) against a real Hub's ``/mcp``.

``tests/clients/conformance.sh`` installs a pinned suite and the Node 22 it
needs (npm's ``node`` package) from the npm registry.  The Hub serves
``hub.mcp_listen`` on loopback with a bearer token required on every
request (DESIGN.md §7); the suite sends no ``Authorization`` header and has
no option for one, so each scenario runs through :class:`BearerProxy`, a
loopback proxy that adds the token and maps its own ``Host``/``Origin`` to
the Hub's (a foreign ``Host`` passes through untouched, so the Hub's own
DNS-rebinding check is what the suite sees).  The Hub gets no test-only
mode.

Each applicable scenario runs in its own ``conformance server --scenario``
call with its own principal's token: the suite never ends its sessions
(no DELETE), and the Hub caps open sessions per principal.  Every check of
an applicable scenario must be ``SUCCESS``; the table of scenario, check and
status is printed (``pytest -s``) and put in the failure message.  Every
server scenario the pinned suite lists is either applicable here or named in
:data:`NOT_APPLICABLE` with the reason, so a new suite version forces a
decision.  Outside CI a missing npm skips; with ``CI=true`` it fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agent_clients import CLIENTS, unavailable
from tests.bearer_proxy import BearerProxy
from tests.conftest import HubProcess, make_hub
from tests.helpers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("mcp_conformance")]  # one worker: one module Hub

APPLICABLE = {
    "server-initialize": "initialize answers with a valid structure",
    "ping": "ping answers an empty result",
    "tools-list": "tools/list answers valid tool definitions",
    "server-sse-multiple-streams": "three concurrent POSTs on one session are all served",
    "dns-rebinding-protection": "a foreign Host/Origin is refused (4xx), the listener's own accepted",
}
"""The server scenarios a tools-only MCP server over streamable HTTP must pass, with what each checks."""

_FIXTURE_TOOLS = "calls a fixture tool of the suite's reference server ({}), which a memory server does not have"
NOT_APPLICABLE = {
    "logging-set-level": "the server declares no logging capability (logging/setLevel is -32601)",
    "completion-complete": "the server declares no completions capability (no prompts or resource templates)",
    "tools-call-simple-text": _FIXTURE_TOOLS.format("test_simple_text"),
    "tools-call-image": _FIXTURE_TOOLS.format("test_image_content"),
    "tools-call-audio": _FIXTURE_TOOLS.format("test_audio_content"),
    "tools-call-embedded-resource": _FIXTURE_TOOLS.format("test_embedded_resource"),
    "tools-call-mixed-content": _FIXTURE_TOOLS.format("test_multiple_content_types"),
    "tools-call-with-logging": _FIXTURE_TOOLS.format("test_tool_with_logging") + "; and no logging capability",
    "tools-call-error": _FIXTURE_TOOLS.format("test_error_handling"),
    "tools-call-with-progress": _FIXTURE_TOOLS.format("test_tool_with_progress"),
    "tools-call-sampling": _FIXTURE_TOOLS.format("test_sampling") + "; the Hub never asks the client to sample",
    "tools-call-elicitation": _FIXTURE_TOOLS.format("test_elicitation") + "; the Hub never elicits",
    "json-schema-2020-12": _FIXTURE_TOOLS.format("json_schema_2020_12_tool"),
    "elicitation-sep1034-defaults": "elicitation: the Hub never asks the user for input",
    "elicitation-sep1330-enums": "elicitation: the Hub never asks the user for input",
    "server-sse-polling": _FIXTURE_TOOLS.format("test_reconnection") + " (it closes the stream mid-call)",
    "resources-list": "the server offers no resources",
    "resources-read-text": "the server offers no resources",
    "resources-read-binary": "the server offers no resources",
    "resources-templates-read": "the server offers no resource templates",
    "resources-subscribe": "the server offers no resources",
    "resources-unsubscribe": "the server offers no resources",
    "prompts-list": "the server offers no prompts",
    "prompts-get-simple": "the server offers no prompts",
    "prompts-get-with-args": "the server offers no prompts",
    "prompts-get-embedded-resource": "the server offers no prompts",
    "prompts-get-with-image": "the server offers no prompts",
}
"""Server scenarios of the pinned suite that do not apply to the Hub's tools-only server, with the reason."""


@pytest.fixture(scope="module")
def suite_bin() -> Path:
    """``node_modules/.bin`` holding Node 22 and ``conformance`` (``tests/clients/conformance.sh``, ~20 s once)."""
    if subprocess.run(["bash", "-c", "command -v npm"], capture_output=True).returncode != 0:
        unavailable("npm is not on PATH: cannot install the MCP conformance suite")
    proc = subprocess.run(["bash", str(CLIENTS / "conformance.sh")], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        unavailable(f"tests/clients/conformance.sh failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def suite_env(bins: Path) -> dict[str, str]:
    """This environment with the suite's Node 22 first on ``PATH`` and no ``AMUX_*``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["PATH"] = f"{bins}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def hub_port(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A real Hub with ``hub.mcp_listen`` on a free loopback port (plain HTTP, tokens required): ``(hub, port)``."""
    port = free_port()
    h = make_hub(tmp_path_factory.mktemp("conformance"), settings={"hub.mcp_listen": f"127.0.0.1:{port}"})
    yield h, port
    h.stop()


def token_for(h: HubProcess, principal: str) -> str:
    """A fresh principal and its token, through the real CLI."""
    assert h.cli("hub", "principal", "add", principal).returncode == 0
    r = h.cli("hub", "token", "issue", principal)
    assert r.returncode == 0, r.stderr
    return str(r.json["token"])


def run_scenario(bins: Path, url: str, scenario: str, out: Path) -> list[dict[str, Any]]:
    """Run one server scenario against ``url``; the checks it recorded (``checks.json``)."""
    proc = subprocess.run([str(bins / "conformance"), "server", "--url", url, "--scenario", scenario,
                           "-o", str(out)], env=suite_env(bins), capture_output=True, text=True, timeout=300)
    found = sorted(out.glob(f"server-{scenario}-*/checks.json"))
    assert found, f"no checks.json for {scenario} ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    checks: list[dict[str, Any]] = json.loads(found[-1].read_text())
    return checks


def table(rows: list[tuple[str, str, str, str]]) -> str:
    """Scenario, check, status and message as aligned text."""
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}" for a, b, c, d in rows)


def test_every_listed_server_scenario_is_classified(suite_bin: Path) -> None:
    """``conformance list`` names exactly the server scenarios this module runs or names as not applicable."""
    proc = subprocess.run([str(suite_bin / "conformance"), "list"], env=suite_env(suite_bin), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    server_part = proc.stdout.split("Client scenarios")[0]
    listed = set(re.findall(r"^\s*-\s+(\S+)", server_part, re.M))
    assert listed == set(APPLICABLE) | set(NOT_APPLICABLE), (
        f"new: {sorted(listed - set(APPLICABLE) - set(NOT_APPLICABLE))}, "
        f"gone: {sorted(set(APPLICABLE) | set(NOT_APPLICABLE) - listed)}")
    assert not set(APPLICABLE) & set(NOT_APPLICABLE)
    print("\n" + table([("scenario", "applies", "why", "")]
                       + [(s, "yes", w, "") for s, w in APPLICABLE.items()]
                       + [(s, "no", w, "") for s, w in NOT_APPLICABLE.items()]))


JSON_ANSWERED = {("INFO", "server-sse-streams-functional")}
"""The one check that is ``INFO`` rather than ``SUCCESS`` by design: the Hub answers each POST with one JSON body, as
the streamable-HTTP transport allows (the suite's own words: "SSE streams optional"), since no tool streams
(DESIGN.md §22.3)."""


@pytest.mark.parametrize("scenario", sorted(APPLICABLE))
def test_applicable_scenario_passes(scenario: str, suite_bin: Path, hub_port: Any, tmp_path: Path) -> None:
    """Every check of an applicable scenario is ``SUCCESS`` against the Hub, through the bearer proxy; the
    proxy saw the requests reach the Hub (no 401: the token was added)."""
    h, port = hub_port
    token = token_for(h, f"conf-{scenario}")
    with BearerProxy(port, token) as proxy:
        checks = run_scenario(suite_bin, proxy.url, scenario, tmp_path / "out")
    rows = [(scenario, str(c.get("id")), str(c.get("status")), str(c.get("errorMessage") or "")[:160])
            for c in checks]
    shown = table([("scenario", "check", "status", "message"), *rows])
    print("\n" + shown)
    assert checks and all(c.get("status") == "SUCCESS" or (c.get("status"), c.get("id")) in JSON_ANSWERED
                          for c in checks), shown
    assert proxy.log and all(status != 401 for _, _, status in proxy.log), proxy.log
    if scenario == "dns-rebinding-protection":  # the refusal was the Hub's own Host check, not the proxy's
        assert any(status == 421 for _, _, status in proxy.log), proxy.log


def test_without_the_proxy_the_suite_is_refused(suite_bin: Path, hub_port: Any, tmp_path: Path) -> None:
    """Straight to the Hub's ``/mcp`` (no token), ``server-initialize`` fails with the Hub's 401: the token
    the proxy adds is what lets the suite in, and the Hub has no unauthenticated mode."""
    _, port = hub_port
    checks = run_scenario(suite_bin, f"http://127.0.0.1:{port}/mcp", "server-initialize", tmp_path / "out")
    assert [c.get("status") for c in checks] == ["FAILURE"], checks
    assert "401" in str(checks[0].get("errorMessage")) or "unauthorized" in str(checks[0]).lower(), checks
