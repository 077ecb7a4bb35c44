"""Shared pieces of the bench: statistics, a Hub subprocess on a temporary home, RSS, the machine."""

from __future__ import annotations

import math
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amux_memory.hub.access.config import set_value
from amux_memory.protocol.errors import HubStartError
from amux_memory.tools.client.blocking import HubClient
from amux_memory.tools.client.installation import amux_command
from amux_memory.tools.lifecycle.spawn import spawn_serve, wait_until_answering

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus" / "files"


# -- statistics ----------------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear interpolation between closest ranks."""
    if not values:
        return math.nan
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    k = (len(s) - 1) * q / 100
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(values_ms: list[float]) -> dict[str, float]:
    """``{n, p50, p95, p99, min, max, mean}`` of a list of milliseconds."""
    if not values_ms:
        return {"n": 0}
    return {
        "n": len(values_ms),
        "p50": round(percentile(values_ms, 50), 3),
        "p95": round(percentile(values_ms, 95), 3),
        "p99": round(percentile(values_ms, 99), 3),
        "min": round(min(values_ms), 3),
        "max": round(max(values_ms), 3),
        "mean": round(sum(values_ms) / len(values_ms), 3),
    }


def alternating_upserts(c_on: Any, c_off: Any, path: str, doc: bytes, n: int, block: int,
                        **flags: bool) -> dict[str, Any]:
    """Upsert throughput of two Hubs measured side by side: the A/B loop of rows h and s.

    Each client first creates ``path`` with ``doc``, then they take turns, ``block`` upserts at a time (so a
    burst of load from elsewhere hits both alike), until ``c_on`` made ``n``; every write is ``doc`` plus one
    edited comment line, with ``flags`` (e.g. ``allow_shrink=True``) as extra params.  Returns
    ``{"on_per_s", "off_per_s", "ratio", "upsert_on", "upsert_off"}`` (writes per second; latency summaries in ms).
    """
    revs = {id(c): c.call("upsert", {"path": path, "content": doc, "expected_revision": "absent"})["revision"]
            for c in (c_on, c_off)}
    times: dict[str, list[float]] = {"on": [], "off": []}
    spent = {"on": 0.0, "off": 0.0}
    i = 0
    while len(times["on"]) < n:
        for label, c in (("off", c_off), ("on", c_on)):
            t_block = time.perf_counter()
            for _ in range(block):
                i += 1
                params = {"path": path, "content": doc + f"<!-- edit {i} -->\n".encode(),
                          "expected_revision": revs[id(c)], **flags}
                t0 = time.perf_counter()
                r = c.call("upsert", params)
                times[label].append(ms(time.perf_counter() - t0))
                revs[id(c)] = r["revision"]
            spent[label] += time.perf_counter() - t_block
    tp = {k: len(times[k]) / spent[k] for k in times}
    return {"on_per_s": round(tp["on"], 1), "off_per_s": round(tp["off"], 1), "ratio": round(tp["on"] / tp["off"], 3),
            "upsert_on": summary(times["on"]), "upsert_off": summary(times["off"])}


def linear_fit(xs: list[float], ys: list[float]) -> dict[str, float]:
    """Least-squares ``y = slope * x + intercept`` with R², and the log-log exponent ``b`` of ``y = a x^b``."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx if sxx else math.nan
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - (slope * x + intercept)) ** 2 for x, y in zip(xs, ys, strict=True))
    r2 = 1 - ss_res / ss_tot if ss_tot else 1.0
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-9)) for y in ys]
    mlx, mly = sum(lx) / n, sum(ly) / n
    slxx = sum((x - mlx) ** 2 for x in lx)
    exponent = sum((x - mlx) * (y - mly) for x, y in zip(lx, ly, strict=True)) / slxx if slxx else math.nan
    return {"slope": slope, "intercept": intercept, "r2": r2, "exponent": exponent}


def ms(seconds: float) -> float:
    return seconds * 1000.0


# -- the Hub as a subprocess ---------------------------------------------------------------------

def amux_argv() -> list[str]:
    """This installation's ``amux`` command (:func:`tools.client.installation.amux_command`)."""
    return amux_command()


@dataclass
class HubProc:
    """A Hub serving ``home`` in a subprocess; ``env`` makes the CLI find it."""

    home: Path
    socket: Path
    isolation: str = "off"
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, base: Path, *, isolation: str = "off", shared_socket_dir: Path | None = None) -> HubProc:
        """Configure a home under ``base`` (memory on); with ``shared_socket_dir`` the socket is 0666 there."""
        home = base / "home"
        home.mkdir(parents=True, exist_ok=True)
        set_value(home, "memory.enabled", "true")
        set_value(home, "memory.isolation", isolation)
        sock = home / "hub.sock"
        if shared_socket_dir is not None:
            sock = shared_socket_dir / "hub.sock"
            set_value(home, "hub.socket_path", str(sock))
            set_value(home, "hub.socket_mode", "0666")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
        env["AMUX_HOME"] = str(home)
        env["AMUX_HUB"] = str(sock)
        return cls(home=home, socket=sock, isolation=isolation, env=env)

    @property
    def scope_dir(self) -> Path:
        return self.home / "memory" / "global"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 20.0) -> None:
        """Run ``amux hub serve`` for ``home`` (log in ``home/../hub.log``) and wait until it answers.

        Raises ``RuntimeError`` (with the log's last 2000 characters when the Hub exited) when it exits
        first or does not answer within ``timeout`` seconds (:func:`tools.lifecycle.spawn.wait_until_answering`).
        """
        log_path = self.home.parent / "hub.log"
        with open(log_path, "ab") as log:  # the child keeps its own copy of the descriptor
            self.proc = spawn_serve(self.home, env=self.env, stdout=log, stderr=log)
        try:
            wait_until_answering(self.proc, self.socket, timeout)
        except HubStartError as exc:
            if exc.exit_status is not None:
                raise RuntimeError(f"the Hub exited with {exc.exit_status}: "
                                   f"{log_path.read_text(errors='replace')[-2000:]}") from None
            raise RuntimeError(f"the Hub did not start within {timeout} s") from None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def client(self, timeout: float = 60.0) -> HubClient:
        c = HubClient(self.socket, timeout=timeout, binding="")
        c.connect()
        return c

    def __enter__(self) -> HubProc:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port() -> int:
    """A TCP port on 127.0.0.1 free at the time of asking, for a Hub's listener."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak) of a process, in KiB, from ``/proc``."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(value.split()[0])
    return out


# -- reference tools -----------------------------------------------------------------------------

def ripgrep() -> str | None:
    """Path of ``rg``, or None when ripgrep is not installed."""
    return shutil.which("rg") or (("/usr/bin/rg") if os.path.exists("/usr/bin/rg") else None)


def rg_version(rg: str | None) -> str:
    if rg is None:
        return "absent"
    try:
        return subprocess.run([rg, "--version"], capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


# -- the machine ---------------------------------------------------------------------------------

def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def _mount_of(path: Path) -> dict[str, str]:
    """Device, filesystem type and options of the mount holding ``path`` (longest mount-point prefix)."""
    best: dict[str, str] = {}
    best_len = -1
    target = str(path.resolve())
    for line in _read("/proc/mounts").splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        mnt = parts[1].replace("\\040", " ")
        if (target == mnt or target.startswith(mnt.rstrip("/") + "/") or mnt == "/") and len(mnt) > best_len:
            best = {"device": parts[0], "mount": mnt, "fstype": parts[2], "options": parts[3]}
            best_len = len(mnt)
    dev = best.get("device", "")
    name = os.path.basename(dev)
    base = re.sub(r"p?\d+$", "", name) if not os.path.exists(f"/sys/block/{name}") else name
    rotational = _read(f"/sys/block/{base}/queue/rotational").strip()
    model = _read(f"/sys/block/{base}/device/model").strip()
    if rotational:
        best["rotational"] = rotational
    if model:
        best["model"] = model
    if os.path.exists(f"/sys/block/{base}"):
        best["block_device"] = base
        sched = _read(f"/sys/block/{base}/queue/scheduler").strip()
        if sched:
            best["scheduler"] = sched
    return best


def machine(tmp: Path, rg: str | None) -> dict[str, Any]:
    """What the figures were measured on."""
    cpuinfo = _read("/proc/cpuinfo")
    model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")),
                 platform.processor() or "unknown")
    mhz = [float(ln.split(":", 1)[1]) for ln in cpuinfo.splitlines() if ln.startswith("cpu MHz")]
    cores: set[tuple[str, str]] = set()
    for block in cpuinfo.split("\n\n"):
        fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in block.splitlines())}
        if "core id" in fields:
            cores.add((fields.get("physical id", "0"), fields["core id"]))
    meminfo = {ln.split(":")[0]: ln.split(":")[1].strip() for ln in _read("/proc/meminfo").splitlines() if ":" in ln}
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count() or 0
    return {
        "cpu_model": model,
        "cpu_mhz": round(sum(mhz) / len(mhz)) if mhz else None,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": affinity,
        "physical_cores": len(cores) or None,
        "ram_total": meminfo.get("MemTotal", "unknown"),
        "ram_available": meminfo.get("MemAvailable", "unknown"),
        "kernel": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "virtualization": _virt(),
        "tmp_dir": str(tmp),
        "tmp_filesystem": _mount_of(tmp),
        "ripgrep": rg_version(rg),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "hostname_hash": _host_hash(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


def _virt() -> str:
    flags = next((ln for ln in _read("/proc/cpuinfo").splitlines() if ln.startswith("flags")), "")
    return "hypervisor (VM)" if " hypervisor" in flags else "bare metal or unknown"


def _host_hash() -> str:
    import hashlib

    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
