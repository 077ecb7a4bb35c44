"""Prometheus metrics and health probes (``hub.metrics_listen``, DESIGN.md §19.6).

Off unless ``hub.metrics_listen`` is set; then ``http(s)://HOST:PORT`` serves

* ``GET /metrics``: the Prometheus text format, from a registry of this Hub's
  own (never ``prometheus_client``'s global one) holding the series of
  :class:`HubMetrics` and the library's process collector;
* ``GET /healthz``: 200 ``ok`` while the Hub serves;
* ``GET /readyz``: 200 ``ready`` when memory is enabled and the memory root
  takes a write (a one-byte temporary written, fsynced and removed, as an
  interrupted write's temporary would be cleaned at start), else 503 with one
  word: ``disabled``, ``read_only``, ``full``, ``permission``, ``storage`` or
  ``unresponsive``.  The answer is kept :data:`READY_TTL_SECONDS`, so a
  probe storm costs one write a second.

Anything else is 404; a method other than GET or HEAD is 405.  One rule
(:func:`metrics_settings`): plain HTTP on a loopback address, whether or not
the Hub has TLS (a scrape from this machine needs no CA), HTTPS with
``hub.tls_cert`` on any other address (refused without it).  Served by Hypercorn's Trio
worker in the Hub's nursery, like the MCP listener.

Labels never carry a principal, team, path, token or content: ``method`` is
one of the protocol's method names, ``code`` ``ok`` or an error code of
:class:`protocol.errors.ErrorCode`, ``transport`` one of :data:`TRANSPORTS`,
``reason`` one of the search's incomplete reasons (else ``other``),
``version`` the package's.  Every data call is counted once, where
:meth:`hub.serve.hub.Hub.call` runs it, for every transport.

The gauges that need a walk (scopes, documents, bytes, history bytes, pending
proposals and the oldest one's age) come from :func:`walk_stats` in a worker
thread, at most once every :data:`STATS_TTL_SECONDS` and over at most
:data:`STATS_MAX_ENTRIES` entries (:data:`STATS_MAX_REVIEW_BYTES` of proposal
files read): a scrape never blocks the event loop, and once there are figures it does not wait for the next
walk either (:meth:`HubMetrics.refresh`).  Measured 2026-12 on the shared corpus (1,259 documents, 11 MiB): a
walk takes about 15 ms; over a soak's home with 21,000 decided proposals, 2.3 s under load before they were
remembered (:func:`walk_stats`), 0.23 s after.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import trio

from amux_memory.hub.access.config import HubConfig
from amux_memory.hub.serve.asgi import answer_lifespan, guard_hypercorn, hypercorn_config
from amux_memory.hub.serve.listeners import HttpListenerSettings, bind_http_socket, http_listener_settings
from amux_memory.hub.storage.fsio import TEMP_SUFFIX
from amux_memory.hub.storage.history import INDEX_MAX_VERSIONS
from amux_memory.hub.storage.proposals import DECIDED
from amux_memory.protocol.endpoint import is_loopback
from amux_memory.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

log = logging.getLogger("amux.hub")

TRANSPORTS = ("unix", "tcp", "tls", "mcp_http", "mcp_relay")
"""The ``transport`` label: the Unix socket, ``hub.listen`` without or with TLS, ``hub.mcp_listen``, and an
``amux mcp`` relay's session (a socket connection that sent ``mcp_open``)."""
INCOMPLETE_REASONS = ("time", "files", "bytes", "total entries", "directory entries", "unreadable",
                      "storage_error")
"""The search's ``incomplete_reasons`` (DESIGN.md §5.4), each a ``reason`` label; any other is ``other``."""
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Upper bounds (seconds) of ``amux_request_duration_seconds``' buckets: a ``get`` takes ~1 ms, a search
up to its time budget."""
STATS_TTL_SECONDS = 15.0
"""Seconds a walk's figures are served before a scrape walks again (Prometheus scrapes every 15-60 s)."""
STATS_MAX_ENTRIES = 200_000
"""Directory entries one walk visits at most; past it the figures are lower bounds (logged once)."""
STATS_MAX_REVIEW_BYTES = 64 << 20
"""Bytes of proposal files one walk reads at most (each is read to learn whether it is pending)."""
READY_TTL_SECONDS = 1.0
"""Seconds a ``/readyz`` answer is reused."""
READY_TIMEOUT_SECONDS = 2.0
"""Seconds the readiness write may take before ``/readyz`` says ``unresponsive``."""


def method_label(method: str, methods: Collection[str]) -> str:
    """``method`` when it is one of ``methods`` (the route table's names), else ``other`` (a label never carries
    what a caller typed)."""
    return method if method in methods else "other"


def code_label(code: ErrorCode | None) -> str:
    """``ok`` for a result, else the error code's value."""
    return "ok" if code is None else code.value


def reason_label(reason: object) -> str:
    """A search's incomplete reason as a label: one of :data:`INCOMPLETE_REASONS`, else ``other``."""
    return reason if isinstance(reason, str) and reason in INCOMPLETE_REASONS else "other"


@dataclass(frozen=True)
class Stats:
    """What a walk of the home found: scope folders, Markdown documents and their bytes, bytes of history
    files, pending proposals and the oldest one's ``time_ns`` (None: none), and whether the walk was whole."""

    scopes: int = 0
    documents: int = 0
    bytes: int = 0
    history_bytes: int = 0
    review_pending: int = 0
    review_oldest_ns: int | None = None
    complete: bool = True
    decided: frozenset[tuple[int, int, int]] = field(default=frozenset(), repr=False, compare=False)
    """The ``(inode, mtime_ns, size)`` of the proposal files the walk found decided (:func:`walk_stats`)."""


def _files(top: str, budget: list[int]) -> Iterator[os.DirEntry[str]]:
    """Regular files under ``top`` (symlinks not followed), depth first, while ``budget[0]`` entries remain."""
    stack = [top]
    while stack and budget[0] > 0:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    budget[0] -= 1
                    if budget[0] <= 0:
                        return
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            yield entry
        except OSError:
            continue


def scope_folders(memory_root: Path) -> list[str]:
    """Every scope folder of ``memory_root``: ``global``, ``users/*`` and ``teams/*`` that are directories."""
    folders = [str(memory_root / "global")] if (memory_root / "global").is_dir() else []
    for parent in ("users", "teams"):
        with contextlib.suppress(OSError), os.scandir(memory_root / parent) as it:
            folders += sorted(e.path for e in it if e.is_dir(follow_symlinks=False))
    return folders


def walk_stats(home: Path, max_entries: int = STATS_MAX_ENTRIES,
               max_review_bytes: int = STATS_MAX_REVIEW_BYTES,
               decided: frozenset[tuple[int, int, int]] = frozenset()) -> Stats:
    """Walk ``home``'s ``memory/``, ``history/`` and ``review/`` within ``max_entries`` entries and
    ``max_review_bytes`` bytes of proposals read; never raises for what it finds (an unreadable folder is
    passed over).  Blocking: run it in a worker thread.

    ``decided`` is the last walk's :attr:`Stats.decided`: the ``(inode, mtime_ns, size)`` of the proposal files
    it found decided.  A decided proposal never becomes pending again and every change replaces its file (a new
    inode), so such a file is not read again while it is unchanged.  This walk's :attr:`Stats.decided` holds
    the decided files it saw (one entry a decided file on disk, ~0.2 KiB; they are deleted after twice
    ``memory.review_max_days``).  A team server's 21,000 decided proposals cost a walk 2.1 s of reading under
    load without it (a scrape waited for it), a few ``stat`` calls each with it."""
    budget = [max_entries]
    folders = scope_folders(home / "memory")
    documents = size = 0
    for folder in folders:
        for entry in _files(folder, budget):
            if entry.name.endswith(".md") and not entry.name.endswith(TEMP_SUFFIX):
                documents += 1
                with contextlib.suppress(OSError):
                    size += entry.stat(follow_symlinks=False).st_size
    history = 0
    for entry in _files(str(home / "history"), budget):
        with contextlib.suppress(OSError):
            history += entry.stat(follow_symlinks=False).st_size
    pending, oldest, read = 0, None, 0
    still_decided: set[tuple[int, int, int]] = set()
    for entry in _files(str(home / "review"), budget):
        if not entry.name.endswith(".json") or read >= max_review_bytes:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key in decided:
            still_decided.add(key)
            continue
        try:
            with open(entry.path, "rb") as f:
                data = f.read(max_review_bytes - read + 1)
            read += len(data)
            obj = json.loads(data)
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict) and obj.get("status") == "pending" and isinstance(obj.get("time_ns"), int):
            pending += 1
            oldest = obj["time_ns"] if oldest is None else min(oldest, obj["time_ns"])
        elif isinstance(obj, dict) and obj.get("status") in DECIDED:
            still_decided.add(key)
    return Stats(len(folders), documents, size, history, pending, oldest,
                 complete=budget[0] > 0 and read < max_review_bytes, decided=frozenset(still_decided))


class HubMetrics:
    """The series of one Hub in a registry of its own (:attr:`registry`), fixed names (DESIGN.md §19.6).

    Counted on the event loop (:meth:`observe`); the gauges of a walk are refreshed by :meth:`refresh`
    before a scrape renders (:meth:`render`, in a worker thread).  ``home`` is walked; ``version`` labels
    ``amux_build_info``; ``methods`` are the names a ``method`` label may carry (the Hub's route table);
    ``cache_counts`` gives the search cache's ``(hits, misses)`` so far
    (:meth:`hub.storage.cache.ContentCache.counts`), ``watched_folders`` how many folders the kernel watches
    for it (:attr:`hub.storage.watch.Watcher.watches`), ``cache_bytes`` the bytes it holds
    (:meth:`hub.storage.cache.ContentCache.held_bytes`) and ``history_versions`` the versions the history
    indexes hold (:meth:`hub.storage.history.HistoryStore.indexed_versions`), all read at scrape time: the
    Hub's two largest parts in memory beside their bounds (DESIGN.md §6).
    ``prometheus_client`` is imported here, so a Hub without the listener never
    imports it.
    """

    def __init__(self, home: Path, version: str, methods: Collection[str],
                 cache_counts: Callable[[], tuple[int, int]] = lambda: (0, 0),
                 watched_folders: Callable[[], int] = lambda: 0, cache_bytes: Callable[[], int] = lambda: 0,
                 history_versions: Callable[[], int] = lambda: 0) -> None:
        self.methods = methods
        self.cache_counts = cache_counts
        self.watched_folders = watched_folders
        self.cache_bytes = cache_bytes
        self.history_versions = history_versions
        from prometheus_client import (
            CollectorRegistry,
            Counter,
            Gauge,
            Histogram,
            ProcessCollector,
            disable_created_metrics,
        )

        # no *_created series: the Hub process is the registry's only user
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.home = home
        self.registry: CollectorRegistry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("amux_requests", "Data calls answered, by method, code (ok or the error code) "
                                "and transport", ["method", "code", "transport"], registry=self.registry)
        self.duration = Histogram("amux_request_duration_seconds", "Seconds from a data call's start to its answer",
                                  ["method", "transport"], buckets=DURATION_BUCKETS, registry=self.registry)
        self.incomplete = Counter("amux_search_incomplete", "Searches answered incomplete, by reason",
                                  ["reason"], registry=self.registry)
        for reason in INCOMPLETE_REASONS:
            self.incomplete.labels(reason)
        build = Gauge("amux_build_info", "The Hub's version (always 1)", ["version"], registry=self.registry)
        build.labels(version).set(1)
        ProcessCollector(registry=self.registry)
        self.stats = Stats()
        self.stats_at = -float("inf")
        self.mcp_sessions = 0
        self._refreshing = trio.Lock()
        self._walking = False
        self._warned = False
        self.registry.register(_WalkCollector(self))

    def observe(self, method: str, transport: str, code: ErrorCode | None, seconds: float,
                result: dict[str, Any] | None = None, scans: bool = False) -> None:
        """Count one answered data call: its ``method``, ``transport`` (one of :data:`TRANSPORTS`), error
        ``code`` (None: a result), duration, and, when the bounded scan answered it (``scans``, its route's),
        its incomplete reasons."""
        m = method_label(method, self.methods)
        self.requests.labels(m, code_label(code), transport).inc()
        self.duration.labels(m, transport).observe(seconds)
        if result is not None and scans and result.get("incomplete"):
            reasons = result.get("incomplete_reasons")
            for reason in {reason_label(r) for r in (reasons if isinstance(reasons, list) else [])} or {"other"}:
                self.incomplete.labels(reason).inc()

    async def refresh(self, mcp_sessions: int, background: trio.Nursery | None = None) -> None:
        """Take ``mcp_sessions`` (open MCP HTTP sessions) and walk again when the figures are older than
        :data:`STATS_TTL_SECONDS` (:func:`walk_stats` in a worker thread; scrapes at once share one walk).

        With ``background``, a scrape never waits for a walk once there are figures: it renders the last ones
        (at most :data:`STATS_TTL_SECONDS` plus one walk old) and the walk runs in that nursery.  A busy team
        server's walk took 10-20 s, past Prometheus' scrape timeout (``bench/soak.py``: one scrape in five
        failed).  The first scrape waits for the first walk."""
        self.mcp_sessions = mcp_sessions
        if time.monotonic() - self.stats_at < STATS_TTL_SECONDS:
            return
        if background is None or self.stats_at == -float("inf"):
            await self._walk()
        elif not self._walking:
            self._walking = True
            background.start_soon(self._walk)

    async def _walk(self) -> None:
        """One walk, unless another just took fresh figures (:meth:`refresh`)."""
        try:
            async with self._refreshing:
                if time.monotonic() - self.stats_at < STATS_TTL_SECONDS:
                    return
                self.stats = await trio.to_thread.run_sync(walk_stats, self.home, STATS_MAX_ENTRIES,
                                                           STATS_MAX_REVIEW_BYTES, self.stats.decided,
                                                           abandon_on_cancel=True)  # it only reads
                self.stats_at = time.monotonic()
        finally:
            self._walking = False
        if not self.stats.complete and not self._warned:
            self._warned = True
            log.warning("metrics: the home holds more than %d entries (or %d MiB of proposals); amux_documents, "
                        "amux_bytes and the review gauges are lower bounds", STATS_MAX_ENTRIES,
                        STATS_MAX_REVIEW_BYTES >> 20)

    def render(self) -> bytes:
        """The registry in the Prometheus text format (blocking: run it in a worker thread)."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _WalkCollector:
    """The gauges read at scrape time from :attr:`HubMetrics.stats` and :attr:`HubMetrics.mcp_sessions`, and the
    search cache's counters from :attr:`HubMetrics.cache_counts`."""

    def __init__(self, metrics: HubMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        s, m = self.metrics.stats, self.metrics
        hits, misses = m.cache_counts()
        yield CounterMetricFamily("amux_search_cache_hits", "Documents searches took from the content cache unchanged",
                                  value=hits)
        yield CounterMetricFamily("amux_search_cache_misses", "Documents searches read: not in the content cache, or "
                                  "changed since", value=misses)
        yield GaugeMetricFamily("amux_search_watched_folders", "Folders the kernel watches so searches can trust "
                                "unchanged documents without an lstat (hub.watch_files)", value=m.watched_folders())
        yield GaugeMetricFamily("amux_search_cache_bytes", "Bytes of documents (raw and folded) the search cache "
                                "holds, every scope (at most hub.cache_max_bytes)", value=m.cache_bytes())
        yield GaugeMetricFamily("amux_history_index_versions", "Versions the history indexes hold in memory, every "
                                f"scope (at most {INDEX_MAX_VERSIONS:,}, plus the scope a call is using)",
                                value=m.history_versions())
        age = 0.0 if s.review_oldest_ns is None else max(0.0, time.time() - s.review_oldest_ns / 1e9)
        for name, doc, value in (
            ("amux_review_pending", "Proposals waiting for review, every scope", s.review_pending),
            ("amux_review_oldest_age_seconds", "Age of the oldest pending proposal (0: none)", age),
            ("amux_mcp_http_sessions", "Open MCP streamable-HTTP sessions", m.mcp_sessions),
            ("amux_scopes", "Scope folders (global, each principal's, each team's)", s.scopes),
            ("amux_documents", "Markdown documents in every scope", s.documents),
            ("amux_bytes", "Bytes of the documents in every scope", s.bytes),
            ("amux_history_bytes", "Bytes of the history files", s.history_bytes),
        ):
            yield GaugeMetricFamily(name, doc, value=value)


# -- the listener ------------------------------------------------------------------------------------------


def metrics_settings(config: HubConfig) -> HttpListenerSettings | None:
    """Validate ``hub.metrics_listen`` with ``hub.tls_cert``/``hub.tls_key``; ``None`` when it is off.

    Raises :class:`HubStartError` for an invalid ``HOST:PORT``, only one of the TLS files, or a
    non-loopback address without TLS (:func:`hub.serve.listeners.http_listener_settings`).
    """
    settings = http_listener_settings(config, "hub.metrics_listen", config.metrics_listen, risk="",
                                      loopback_use="and scrape from this machine")
    if settings is not None and is_loopback(settings.host):  # one rule: plain HTTP on loopback, TLS or not
        return HttpListenerSettings(settings.host, settings.port, None)
    return settings


def bind_metrics_socket(settings: HttpListenerSettings) -> socket.socket:
    """A listening TCP socket for ``settings`` (port 0: a free one); checks the TLS pair loads first.
    Raises :class:`HubStartError` when the TLS files do not load or the address cannot be bound."""
    return bind_http_socket(settings, "hub.metrics_listen", 64)


class Served(Protocol):
    """What the listener needs of the running Hub (:class:`hub.serve.hub.Hub`): its settings, its series, and
    the count of open MCP HTTP sessions (``None`` until the MCP listener serves)."""

    config: HubConfig
    metrics: HubMetrics | None
    mcp_session_count: Callable[[], int] | None


def readiness(hub: Served) -> str:
    """``ready``, or the one word saying why the Hub does not take writes (see the module docstring).

    Blocking: writes, fsyncs and removes a one-byte temporary in the memory root."""
    if not hub.config.memory_enabled:
        return "disabled"
    root = str(hub.config.memory_root)
    name = os.path.join(root, f".{secrets.token_hex(8)}{TEMP_SUFFIX}")
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(name)
    except OSError as exc:
        word = {errno.EROFS: "read_only", errno.ENOSPC: "full", errno.EDQUOT: "full", errno.EACCES: "permission",
                errno.EPERM: "permission"}.get(exc.errno or 0, "storage")
        log.warning("readyz: the memory root does not take a write (%s): %s", word, exc)
        return word
    return "ready"


class Probes:
    """The ASGI app of the metrics listener: ``/metrics``, ``/healthz``, ``/readyz`` (module docstring)."""

    def __init__(self, hub: Served, metrics: HubMetrics, background: trio.Nursery | None = None) -> None:
        self.hub = hub
        self.metrics = metrics
        self.background = background
        """Where a scrape starts the walk of stale figures without waiting for it (:meth:`HubMetrics.refresh`)."""
        self._ready: tuple[float, str] = (-float("inf"), "")
        self._ready_lock = trio.Lock()

    async def ready(self) -> str:
        """:func:`readiness`, in a worker thread, reused for :data:`READY_TTL_SECONDS`."""
        async with self._ready_lock:
            at, word = self._ready
            if time.monotonic() - at < READY_TTL_SECONDS:
                return word
            word = "unresponsive"
            with trio.move_on_after(READY_TIMEOUT_SECONDS):
                word = await trio.to_thread.run_sync(readiness, self.hub, abandon_on_cancel=True)
            self._ready = (time.monotonic(), word)
            return word

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve one ASGI event: the lifespan protocol, or one HTTP request."""
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope.get("path"), scope.get("method")
        if path not in ("/metrics", "/healthz", "/readyz"):
            await _answer(send, 404, b"not found: /metrics, /healthz or /readyz\n")
            return
        if method not in ("GET", "HEAD"):
            await _answer(send, 405, b"method not allowed: use GET\n", [(b"allow", b"GET, HEAD")])
            return
        if path == "/healthz":
            await _answer(send, 200, b"ok\n")
        elif path == "/readyz":
            word = await self.ready()
            await _answer(send, 200 if word == "ready" else 503, f"{word}\n".encode())
        else:
            count = self.hub.mcp_session_count
            await self.metrics.refresh(count() if count is not None else 0, self.background)
            from prometheus_client import CONTENT_TYPE_LATEST

            body = await trio.to_thread.run_sync(self.metrics.render)
            await _answer(send, 200, body, content_type=CONTENT_TYPE_LATEST.encode())


async def _answer(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None,
                  content_type: bytes = b"text/plain; charset=utf-8") -> None:
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", content_type), (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


async def serve_metrics(hub: Served, settings: HttpListenerSettings, sock: socket.socket, stop: trio.Event,
                        grace: float, *,
                        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve :class:`Probes` on the bound ``sock`` until ``stop`` is set (then within ``grace`` s).

    ``task_status.started`` gets the base URL (``http://HOST:PORT``)."""
    from hypercorn.trio import serve

    guard_hypercorn()
    port = sock.getsockname()[1]
    config = hypercorn_config(sock, grace, settings.tls)
    shown = f"[{settings.host}]" if ":" in settings.host else settings.host
    assert hub.metrics is not None
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(serve, Probes(hub, hub.metrics, nursery), config,  # type: ignore[arg-type]
                                    shutdown_trigger=stop.wait))
        task_status.started(f"{settings.scheme}://{shown}:{port}")
