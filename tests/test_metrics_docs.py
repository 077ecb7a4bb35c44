"""``docs/metrics.md``'s examples run as written, with TLS on and off (DESIGN.md §19.6's one rule).

In a network namespace of its own (so port 9464 and ``hub.example.lan``, named 127.0.0.1 in its
``/etc/hosts``, are the page's), with ``HOME`` a fresh folder (the home is ``~/.amux``, memory on):

- TLS on (``amux hub tls init``): the page's first block, line by line: the setting and restart, the
  ``curl`` of ``/metrics`` and of ``/readyz``, plain HTTP on loopback; a real Prometheus with the page's first
  scrape config finds ``amux_build_info``;
- TLS off: the same ``curl`` lines;
- ``hub.metrics_listen 0.0.0.0:9464`` with TLS: a real Prometheus with the page's second scrape config (its
  ``ca_file`` the home's ``tls/ca.pem``, the one substitution) scrapes it over HTTPS by name.

Skips with a message when not root or ``ip``, ``curl`` or Prometheus is missing, except under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, amux_argv
from tests.helpers import skip_or_fail, wait_until

pytestmark = pytest.mark.slow

PAGE = REPO / "docs" / "metrics.md"
PROMETHEUS = "/usr/bin/prometheus"


@pytest.fixture
def netns() -> Iterator[str]:
    """A network namespace with loopback up and ``hub.example.lan`` as 127.0.0.1, deleted afterwards."""
    if os.geteuid() != 0:
        skip_or_fail("not root: the network namespace needs root", "not root (CI=true: CI runs as root)")
    for tool in ("ip", "curl", PROMETHEUS):
        if shutil.which(tool) is None:
            skip_or_fail(f"{tool} is not installed", f"{tool} is missing (CI=true: .ci/run installs it)")
    name = f"amuxmd{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=30)
    if made.returncode != 0:
        skip_or_fail(f"ip netns add failed: {made.stderr.strip()}", f"ip netns add failed: {made.stderr.strip()}")
    hosts = Path("/etc/netns") / name
    try:
        hosts.mkdir(parents=True)
        (hosts / "hosts").write_text("127.0.0.1 localhost hub.example.lan\n")
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True, timeout=30)
        yield name
    finally:
        shutil.rmtree(hosts, ignore_errors=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def test_the_metrics_examples_run_as_written_with_tls_on_and_off(netns: str, tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    sh = re.findall(r"^```sh\n(.*?)^```$", text, re.S | re.M)[0].splitlines()
    loopback, remote = (yaml.safe_load(b) for b in re.findall(r"^```yaml\n(.*?)^```$", text, re.S | re.M))
    bin_dir = str(Path(amux_argv()[0]).parent)
    env = {"HOME": str(tmp_path), "PATH": f"{bin_dir}:{os.environ['PATH']}", "LANG": "C.UTF-8"}

    def run(line: str) -> str:
        done = subprocess.run(["ip", "netns", "exec", netns, "bash", "-c", line], env=env, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, f"{line}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def scrape(config: dict[str, object], name: str) -> None:
        """A real Prometheus with ``config`` (a 1 s interval added) finds ``amux_build_info`` through its API."""
        config = {"global": {"scrape_interval": "1s"}, **config}
        (tmp_path / f"{name}.yml").write_text(yaml.safe_dump(config))
        log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed below
        prom = subprocess.Popen(["ip", "netns", "exec", netns, PROMETHEUS, f"--config.file={tmp_path / name}.yml",
                                 f"--storage.tsdb.path={tmp_path / name}", "--web.listen-address=127.0.0.1:9090"],
                                stdout=log, stderr=log)
        try:
            def found() -> bool:
                q = urllib.parse.quote("amux_build_info")
                done = subprocess.run(["ip", "netns", "exec", netns, "curl", "-s",
                                       f"http://127.0.0.1:9090/api/v1/query?query={q}"], capture_output=True,
                                      text=True, timeout=30)
                try:
                    return bool(json.loads(done.stdout)["data"]["result"])
                except (ValueError, KeyError):
                    return False

            wait_until(found, 60, f"Prometheus to scrape the Hub ({name})", interval=0.5)
        finally:
            prom.terminate()
            prom.wait(15)
            log.close()

    run("amux system config set memory.enabled true")
    run("amux hub tls init --name hub.example.lan")
    try:
        outputs = [run(line) for line in sh]  # TLS on, a loopback listener: plain HTTP
        assert "# HELP" in outputs[1] and outputs[2] == "200\n", outputs
        scrape(loopback, "loopback")
        for key in ("hub.tls_cert", "hub.tls_key"):  # TLS off: the same lines
            run(f"amux system config set {key} ''")
        outputs = [run(line) for line in sh]
        assert "# HELP" in outputs[1] and outputs[2] == "200\n", outputs
        # Another address: HTTPS with the Hub's certificate; the page's second config, its CA the home's.
        run("amux hub tls init --force --name hub.example.lan")
        run("amux system config set hub.metrics_listen 0.0.0.0:9464 && amux hub restart")
        remote["scrape_configs"][0]["tls_config"]["ca_file"] = str(tmp_path / ".amux" / "tls" / "ca.pem")
        assert run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:9464/metrics || true") != "200"
        scrape(remote, "remote")
    finally:
        subprocess.run(["ip", "netns", "exec", netns, *amux_argv(), "hub", "stop"], env=env, capture_output=True,
                       timeout=60)
