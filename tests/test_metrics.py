"""The metrics listener (``hub.metrics_listen``, ``hub/serve/metrics.py``) and the per-token rate settings, through a
real Hub: calls over the Unix socket, TCP, MCP HTTP and the ``amux mcp`` relay are counted once each with their
transport; ``promtool check metrics`` accepts the scrape; no label carries a principal, a path or a token; a real
Prometheus (Debian's package, started here) scrapes the Hub and a series is read back through its query API;
``/healthz`` and ``/readyz`` answer as documented; a lowered ``hub.mcp_rate``/``hub.mcp_burst`` is enforced.
DESIGN.md §19.6, §13.2.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import MCP_HTTP_BURST, MCP_HTTP_RATE_PER_SECOND
from amux_memory.protocol.settings import default_value, get_value
from amux_memory.protocol.version import package_version
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import HubProcess, make_hub
from tests.helpers import free_port, mcp_url, skip_or_fail, wait_until
from tests.mcp_http_raw import INIT, bearer, issue, open_session, request, tool
from tests.mcp_session import call, mcp_session, ok

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
NAMES = ("amux_requests_total", "amux_request_duration_seconds", "amux_search_incomplete_total",
         "amux_review_pending", "amux_review_oldest_age_seconds", "amux_mcp_http_sessions", "amux_scopes",
         "amux_documents", "amux_bytes", "amux_history_bytes", "amux_build_info", "process_resident_memory_bytes",
         "amux_search_cache_hits_total", "amux_search_cache_misses_total", "amux_search_cache_bytes",
         "amux_history_index_versions")
ALERTS = Path(__file__).resolve().parent.parent / "docs" / "alerts.yml"
"""The alert rules docs/metrics.md offers operators: Prometheus must load them, and every series they name must be
one the Hub serves."""


def get(base: str, path: str, method: str = "GET") -> tuple[int, str]:
    """One request to the metrics listener: ``(status, body)``."""
    u = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request(method, path)
    resp = conn.getresponse()
    out = resp.status, resp.read().decode()
    conn.close()
    return out


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The exposition parsed: sample name -> ``[(labels, value)]``."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def value(scrape: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(v for ls, v in scrape.get(name, []) if all(ls.get(k) == w for k, w in labels.items()))


def metrics_hub(tmp_path: Path, **settings: str) -> tuple[HubProcess, str]:
    """A Hub with ``hub.metrics_listen`` on a free loopback port: ``(hub, base URL)`` (from its log)."""
    port = free_port()
    h = make_hub(tmp_path, settings={"hub.metrics_listen": f"127.0.0.1:{port}", **settings})
    assert h.log is not None
    wait_until(lambda: "/metrics" in h.log.read_text(), 10, "the Hub to log its metrics URL")
    return h, f"http://127.0.0.1:{port}"


@pytest.mark.slow  # a Hub, the relay and a real Prometheus: ~15 s
async def test_every_transport_counted_scraped_by_prometheus(tmp_path: Path) -> None:
    for tool_path in (PROMETHEUS, PROMTOOL):
        if not os.access(tool_path, os.X_OK):
            skip_or_fail(f"{tool_path} is not installed (apt-get install prometheus)", "install Debian's prometheus")
    tcp = free_port()
    h, base = metrics_hub(tmp_path, **{"hub.mcp_listen": f"127.0.0.1:{free_port()}",
                                       "hub.listen": f"127.0.0.1:{tcp}"})
    url = mcp_url(h)
    secret_path = "private/alice-plans.md"
    with h.client() as c:  # unix: one upsert, one get, one invalid path
        c.call("upsert", {"path": secret_path, "content": b"# plans\n", "expected_revision": "absent"})
        c.call("get", {"path": secret_path})
        with pytest.raises(HubError) as info:
            c.call("get", {"path": "../escape.md"})
        assert info.value.code is ErrorCode.INVALID_PATH
        c.call("search", {"query": "plans"})
    token, token_id = issue(h, "alice")
    with HubClient(endpoint=f"tcp://127.0.0.1:{tcp}", token=token) as c:  # tcp: two gets
        c.call("get", {"path": secret_path})
        c.call("get", {"path": "missing.md"})
    sid = open_session(url, token)  # mcp_http: one get through the tool
    status, result = tool(url, token, sid, arguments={"path": secret_path})
    assert status == 200 and not result["isError"], result
    async with mcp_session(h.home, tmp_path / "relay.log") as session:  # mcp_relay: one get
        assert "plans" in ok(await call(session, "memory_get", path=secret_path))["content"]

    status, text = get(base, "/metrics")
    assert status == 200
    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    scrape = samples(text)
    for name in NAMES:
        assert any(k == name or k.startswith(name + "_") for k in scrape), f"{name} missing from the scrape"
    assert value(scrape, "amux_requests_total", method="upsert", code="ok", transport="unix") == 1
    assert value(scrape, "amux_requests_total", method="get", code="ok", transport="unix") == 1
    assert value(scrape, "amux_requests_total", method="get", code="invalid_path", transport="unix") == 1
    assert value(scrape, "amux_requests_total", method="get", transport="tcp") == 2
    assert value(scrape, "amux_requests_total", method="get", code="ok", transport="mcp_http") == 1
    assert value(scrape, "amux_requests_total", method="get", code="ok", transport="mcp_relay") == 1
    assert value(scrape, "amux_requests_total", transport="tls") == 0
    assert value(scrape, "amux_request_duration_seconds_count", method="get", transport="unix") == 2
    assert value(scrape, "amux_documents") == 1 and value(scrape, "amux_bytes") == len(b"# plans\n")
    assert value(scrape, "amux_scopes") == 1 and value(scrape, "amux_history_bytes") > 0
    assert value(scrape, "amux_mcp_http_sessions") == 1
    assert value(scrape, "amux_review_pending") == 0
    assert [ls["version"] for ls, _ in scrape["amux_build_info"]] == [package_version()]
    # No label carries a principal, a path, a token or its id, the home, or content.
    for name, rows in scrape.items():
        for labels, _ in rows:
            for label in labels.values():
                for leak in ("alice", "plans", "private", token, token_id, str(h.home), "escape", "missing"):
                    assert leak not in label, (name, labels)

    status, body = get(base, "/healthz")
    assert (status, body) == (200, "ok\n")
    status, body = get(base, "/readyz")
    assert (status, body) == (200, "ready\n")
    assert get(base, "/nothing")[0] == 404
    assert get(base, "/metrics", "POST")[0] == 405
    assert not [n for n in os.listdir(h.home / "memory") if n.endswith(".amux-tmp")], "the readiness write stayed"

    named = set(re.findall(r"\b(?:amux|process)_[a-z_]+", ALERTS.read_text()))
    assert named and not [n for n in named if n not in scrape], sorted(named - set(scrape))

    # A real Prometheus scrapes the Hub, with the documented alert rules; the series comes back through its query
    # API, and every rule evaluates without an error.
    prom_port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                      f"rule_files: ['{ALERTS}']\nscrape_configs:\n  - job_name: amux\n"
                      f"    static_configs:\n      - targets: ['127.0.0.1:{urllib.parse.urlsplit(base).port}']\n")
    with open(tmp_path / "prometheus.log", "wb") as log:
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=log, stderr=log)
    try:
        def query() -> float | None:
            q = urllib.parse.quote('sum(amux_requests_total{method="get",transport="mcp_http"})')
            try:
                status, body = get(f"http://127.0.0.1:{prom_port}", f"/api/v1/query?query={q}")
            except OSError:
                return None
            answer: dict[str, Any] = json.loads(body) if status == 200 else {}
            found = answer.get("data", {}).get("result", [])
            return float(found[0]["value"][1]) if found else None

        got = wait_until(query, 60, "Prometheus to scrape the Hub", interval=0.5)
        assert got == 1.0

        def rules() -> list[tuple[str, str]] | None:
            status, body = get(f"http://127.0.0.1:{prom_port}", "/api/v1/rules")
            groups = json.loads(body)["data"]["groups"] if status == 200 else []
            found = [(r["name"], r.get("health", "")) for g in groups for r in g["rules"]]
            return found if found and all(h != "unknown" for _, h in found) else None

        evaluated = wait_until(rules, 30, "Prometheus to evaluate the alert rules", interval=0.5)
        assert len(evaluated) == ALERTS.read_text().count("- alert:") and {h for _, h in evaluated} == {"ok"}, evaluated
    finally:
        prom.terminate()
        prom.wait(15)
    h.stop()


@pytest.mark.slow  # two Hub starts
def test_readyz_says_why_and_a_bad_listener_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    h, base = metrics_hub(tmp_path / "a", **{"memory.enabled": "false"})
    assert get(base, "/readyz") == (503, "disabled\n")
    assert get(base, "/healthz") == (200, "ok\n")
    h.stop()
    bad = make_hub(tmp_path / "b", settings={"hub.metrics_listen": "0.0.0.0:9"}, start=False)
    r = bad.cli("hub", "serve")
    assert r.returncode == 21 and "refusing plaintext HTTP on hub.metrics_listen" in r.stderr, r.stderr
    assert not (bad.home / "hub.sock").exists()


@pytest.mark.slow  # a Hub start and the CLI
def test_lowered_mcp_rate_is_enforced(tmp_path: Path) -> None:
    """``hub.mcp_rate 1`` and ``hub.mcp_burst 3``: a token's fourth request at once is 429 with ``Retry-After``
    (as with the defaults, only sooner); another token is unaffected."""
    h = make_hub(tmp_path, settings={"hub.mcp_listen": f"127.0.0.1:{free_port()}", "hub.mcp_rate": "1",
                                     "hub.mcp_burst": "3"})
    url = mcp_url(h)
    a, _ = issue(h, "alice")
    b, _ = issue(h, "bob")
    statuses, retry = [], ""
    for _ in range(4):
        status, headers, _ = request(url, body=INIT, headers=bearer(a))
        statuses.append(status)
        retry = headers.get("retry-after", "")
    assert statuses == [200, 200, 200, 429], statuses
    assert int(retry) >= 1
    assert request(url, body=INIT, headers=bearer(b))[0] == 200
    assert (get_value(h.home, "hub.mcp_rate"), default_value("hub.mcp_rate")) == (1, MCP_HTTP_RATE_PER_SECOND)
    assert default_value("hub.mcp_burst") == MCP_HTTP_BURST
    h.stop()
