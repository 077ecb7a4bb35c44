"""Every numeric bound of the product, here or named here with where it lives (DESIGN.md §6).

Sizes are in bytes of UTF-8 unless a name says otherwise; times are seconds.
Here: :class:`Limits` (the Hub's bounds, reported in ``hello``), the
connection bounds of the Hub (``hub/serve/connection.py``, ``hub/serve/listeners.py``),
how many unreadable paths an answer names (``hub/storage/faults.py``) and the
clients' socket timeouts (``tools/client/``). The modules that use them
import them from here.

Kept beside the one module they tune (``tests/test_layout.py`` checks that
every module-level upper-case numeric constant of the product is defined
here or listed below, with the module it lives in):

Hub
  * ``hub.storage.cache.RACY_NS`` (ns): a file changed more recently is re-read (§5.5).
  * ``hub.storage.cache.RAW_ENTRIES_FACTOR`` (times): raw entries a listing reads per entry of its bound.
  * ``hub.storage.watch.PENDING_MAX`` (events): change notifications kept for one scope between its searches;
    ``hub.storage.watch.WATCHES_MAX`` (folders): folders one Hub watches at most;
    ``hub.storage.watch.TRUST_SECONDS`` (s), ``hub.storage.watch.UNVISITED_SECONDS`` (s): how long a folder's
    documents are trusted before an ``lstat`` again, and how long an unvisited folder stays watched;
    ``hub.storage.watch.WATCH_MASK``, ``hub.storage.watch.FOLDER_GONE_MASK``, ``hub.storage.watch.OVERFLOW_MASK``:
    inotify's event bits (masks, not limits) (§5.5).
  * ``hub.serve.connection.RECEIVE_BYTES`` (bytes): most read from a stream at once.
  * ``hub.storage.fsio.CHUNK`` (bytes): read and copy size.
  * ``hub.storage.history.PREALLOCATE_BYTES`` (bytes): the history segment grows by this much at a time (§15.2).
  * ``hub.storage.history.COMPACT_MIN_DEAD_BYTES`` (bytes): dead bytes before compaction (§15.4).
  * ``hub.storage.history.GONE_HEADERS_PER_PATH`` (count): headers of pruned versions kept per path.
  * ``hub.storage.history.INDEX_MAX_VERSIONS`` (versions), ``hub.storage.history.ACTOR_MAPS_MAX`` (maps): the
    history indexes in memory, all scopes together, and the actor maps they share (§6).
  * ``hub.storage.proposals.DECIDED_SWEEP_SECONDS`` (s): how often a scope's old decided proposals are looked for.
  * ``hub.serve.heap.TRIM_SECONDS`` (s), ``hub.serve.heap.QUIET_POLL_SECONDS`` (s): how often freed memory is
    handed back to the OS, and how often a due trim looks for a moment with no call running (§6);
    ``hub.serve.heap.MMAP_THRESHOLD_BYTES`` (bytes): blocks this large get pages of their own, unmapped when freed;
    ``hub.serve.heap.M_MMAP_THRESHOLD``: glibc's ``mallopt`` parameter number (a name, not a limit).
  * ``hub.serve.home.LOCK_RETRY_SECONDS`` (s): how long a held home lock is retried.
  * ``hub.storage.backup.STALE_STAGING_SECONDS`` (s): a backup staging folder older than this is removed;
    ``hub.storage.backup.BACKUP_FORMAT_VERSION``: the archive format (a number, not a limit).
  * ``hub.serve.listeners.ACCEPT_RETRY_SECONDS`` (s): pause before accepting again when out of descriptors.
  * ``hub.serve.metrics.STATS_TTL_SECONDS`` (s), ``hub.serve.metrics.STATS_MAX_ENTRIES`` (entries),
    ``hub.serve.metrics.STATS_MAX_REVIEW_BYTES`` (bytes): the metrics' walk of the home (§19.6);
    ``hub.serve.metrics.READY_TTL_SECONDS`` (s), ``hub.serve.metrics.READY_TIMEOUT_SECONDS`` (s): ``/readyz``.
  * ``hub.access.registry.FORMAT_VERSION`` (version): of the registry file.
  * ``hub.access.registry.MAX_TOKEN_CHARS`` (characters): longest token accepted.
  * ``hub.access.registry.DELEGATED_DEFAULT_TTL`` (s): lifetime of a token issued with a binding (§7.4).
  * ``hub.access.registry.TOKEN_MAX_TTL_SECONDS`` (s): the longest lifetime of a token (§7.4).
  * ``hub.access.registry.INVITATION_DEFAULT_TTL`` (s), ``hub.access.registry.INVITATION_MAX_TTL_SECONDS`` (s),
    ``hub.access.registry.INVITED_TOKEN_TTL`` (s), ``hub.access.registry.MAX_LABEL_CHARS`` (characters): an
    invitation's lifetime, the token it becomes, a label (§7.4).
  * ``hub.access.tidy_runs.RUN_TTL_SECONDS`` (s), ``hub.access.tidy_runs.ANCESTRY_DEPTH`` (processes): how long a
    tidy run
    stays review-forced unless ended, and how many parents of a caller are looked at for its launcher (§21).
  * ``hub.storage.rewrite_guard.MIN_DROPPED_LINES`` (lines), ``hub.storage.rewrite_guard.MIN_DROPPED_BYTES`` (bytes),
    ``hub.storage.rewrite_guard._ASIDE_MAX`` (characters): the rewrite guard's floors (§12);
    ``hub.storage.rewrite_guard.LINE_MEMO_ENTRIES`` (lines), ``hub.storage.rewrite_guard.LINE_MEMO_MAX_CHARS``
    (characters):
    its memo of checked lines.
  * ``hub.methods.search.LISTING_WORK_FACTOR`` (times): candidate names listed per ``scan_max_total_entries`` (§5.4.1).
  * ``hub.methods.search.READ_POOL_THREADS`` (threads), ``hub.methods.search.READ_AHEAD`` (files),
    ``hub.methods.search.SLOW_READ_SECONDS`` (s), ``hub.methods.search.SLOW_READS_TO_POOL`` (reads),
    ``hub.methods.search.SLOW_READ_WINDOW`` (reads): the scan's read pool on a cold page cache (§5.4.1).
  * ``hub.methods.search.SAMPLE_BYTES`` (bytes), ``hub.methods.search.FREQUENT_HITS`` (count),
    ``hub.methods.search.GROUP_MIN`` (keywords):
    how the scan's keyword matcher picks one pass or per-keyword passes (§5.1).
  * ``hub.methods.secrets.MAX_FINDINGS`` (count), ``hub.methods.secrets.KEYWORD_MIN_LENGTH`` (characters),
    ``hub.methods.secrets.KEYWORD_MIN_ENTROPY`` (bits a character), ``hub.methods.secrets.TOKEN_MIN_LENGTH``
    (characters),
    ``hub.methods.secrets.TOKEN_MIN_ENTROPY`` (bits a character), ``hub.methods.secrets.ANALYZE_MAX_CHARS``
    (characters),
    ``hub.methods.secrets.URL_PASSWORD_CHARS`` (characters): the secret check's rules (§16.1).
  * ``hub.methods.scan_report.SCAN_MAX_ENTRIES`` (count), ``hub.methods.scan_report.SCAN_MAX_FINDINGS`` (count):
    the ``scan`` answer (§16.5).
  * ``hub.methods.health.PARAGRAPH_MIN_LINES`` (lines), ``hub.methods.health.PARAGRAPH_MIN_CHARS`` (characters),
    ``hub.methods.health.NEAR_DUPLICATE_SCORE`` (0-100), ``hub.methods.health.NEAR_ANCHOR_CHARS`` (characters),
    ``hub.methods.health.NEAR_BUCKET_MAX`` (paragraphs), ``hub.methods.health.NEAR_LIMIT_PERCENT`` (percent),
    ``hub.methods.health.HEALTH_MAX_FINDINGS`` (count), ``hub.methods.health.HEALTH_MAX_BYTES`` (bytes),
    ``hub.methods.health.SECONDS_A_DAY`` (s): the ``health`` findings and answer (§23).
  * ``hub.storage.store.USAGE_TTL`` (s), ``hub.storage.store.NEAR_LIMIT_FRACTION`` (1/N),
    ``hub.storage.store.COUNT_MAX_ENTRIES`` (entries),
    ``hub.storage.store.COUNT_MAX_CHECKED_FOLDERS`` (folders): the quota count (§4.7).

Protocol
  * ``protocol.agent_protocol.MAX_PROTOCOL_BYTES`` (bytes), ``protocol.agent_protocol.MAX_NAMED_MOUNTS`` (mounts):
    the agent protocol text (§9.1) and its team line (§7.8).
  * ``protocol.connection.INT_MIN``, ``protocol.connection.INT_MAX``: the integers msgpack carries.
  * ``protocol.messages.PROTOCOL_VERSION`` (version), ``protocol.messages._MAX_ID``: request ids (§3.2).
  * ``protocol.messages.MSGPACK_STR_HEADER_MAX``, ``protocol.messages.MSGPACK_INT_MAX``,
    ``protocol.messages.MSGPACK_ARRAY16_GROWTH``, ``protocol.messages.PAGE_RESERVE_BYTES``,
    ``protocol.messages.LIST_RESERVE_BYTES`` (bytes): what an answer keeps within the response budget
    (:func:`protocol.messages.response_room`).
  * ``protocol.params.REVISION_PREFIX_MIN`` (hex digits), ``protocol.params.REVISION_DIGITS`` (hex digits) (§4.3).

Clients and frontends
  * ``tools.client.base.RECEIVE_BYTES`` (bytes): one ``recv``.
  * ``tools.cli.tidy.TASK_MAX_BYTES`` (bytes): the longest tidy task on an agent's command line (§21).
  * ``tools.client.project.GIT_TIMEOUT_SECONDS`` (s), ``tools.client.source_check.DIFF_MAX_LINES`` (lines),
    ``tools.client.source_check.GIT_WORKERS`` (processes), ``tools.client.source_health.LAUNCH_CHECK_SECONDS`` (s):
    git beside a work tree, the citation check and how long a launch waits for it (§24).
  * ``tools.client.textdiff.CONTEXT_LINES`` (lines), ``tools.client.when.MAX_DURATION_SECONDS`` (s).
  * ``tools.lifecycle.spawn.POLL_INTERVAL_S`` (s): between ``hello`` attempts while a Hub starts.
  * ``tools.cli.login.CONNECT_SECONDS`` (s): each connection of ``amux login``/``logout`` (§7.4).
  * ``hub.serve.run.MCP_WARM_DELAY_SECONDS`` (s): when the Hub starts importing the MCP server after start (§22.1).
  * ``hub.serve.run.MCP_WARM_IDLE_SECONDS`` (s): how long the Hub is idle before each step of that import (§22.1).
  * ``tools.lifecycle.control.LOG_ROTATE_BYTES`` (bytes), ``tools.lifecycle.control.EXIT_WAIT_SECONDS`` (s),
    ``tools.lifecycle.control.LOG_TAIL_LINES`` (lines), ``tools.lifecycle.control.TIMEOUT_SECONDS`` (s),
    ``tools.lifecycle.control.TERMINATE_WAIT_SECONDS`` (s), ``tools.lifecycle.manager.SYSTEMCTL_TIMEOUT_SECONDS`` (s),
    ``tools.lifecycle.units.STOP_TIMEOUT_SECONDS`` (s): Hub life cycle (§19).
  * ``tools.cli.backup.MAX_ARCHIVE_MEMBERS`` (members), ``tools.cli.backup.STAGE_TIMEOUT_SECONDS`` (s).
  * ``tools.cli.output.pieces.SHORT_REVISION`` (hex digits), ``tools.cli.output.versions.SHORT_SESSION``
    (characters), ``tools.cli.output.versions.TIME_FLOOR`` (characters),
    ``tools.cli.output.versions.ACTION_FLOOR`` (characters): tables (§17).
  * ``tools.cli.output.contract.USAGE_STATUS`` (exit status), ``tools.cli.suggest.MIN_MISSPELT`` (characters),
    ``tools.cli.review.WIDTH`` (columns), ``tools.cli.agent.SHOW_HELLO_SECONDS`` (s).
  * ``tools.cli.tls.CA_DAYS`` (days), ``tools.cli.tls.SERVER_DAYS`` (days), ``tools.cli.tls.EXPIRY_WARNING_DAYS``
    (days): ``amux hub tls init``'s certificates and ``amux doctor``'s warning.
  * ``hub.mcp.catalog.MAX_NAME_ECHO`` (characters), ``hub.mcp.continuations.PAGE_BUDGET`` (bytes),
    ``hub.mcp.continuations.MAX_PAGED_RESULTS`` (count), ``hub.mcp.continuations.DEFAULT_PAGE_TTL`` (s),
    ``hub.mcp.session.INBOX`` (messages), ``hub.mcp.session.BUSY_CODE`` (JSON-RPC code): the MCP server in
    the Hub (§9.2).
  * ``tools.mcp.relay.CONNECT_DEADLINE`` (s), ``tools.mcp.relay.INITIALIZE_WAIT`` (s): ``amux mcp``, the relay
    (§9.2).
  * ``tools.ui.app.LINT_SUMMARY_ROWS`` (rows), ``tools.ui.hub_calls.OVERVIEW_LOG_LIMIT`` (changes),
    ``tools.ui.hub_calls.TEAM_LOG_LIMIT`` (changes),
    ``tools.ui.render.SHOWN_MAX_CHARS`` (characters), ``tools.ui.render.DIFF_MAX_ROWS`` (rows):
    the web page (§20).
  * ``launch.binding.HELLO_TIMEOUT`` (s), ``launch.codex_app_server.DEFAULT_TIMEOUT`` (s),
    ``launch.codex_app_server._MAX_ERROR_TEXT`` (characters), ``launch.isolation._PROBE_STARTUP`` (s) (§10).

Typed memories (§11)
  * ``tools.typed.archive.MAX_SUFFIX`` (count), ``tools.typed.create.MAX_KEYWORDS`` (count),
    ``tools.typed.create.INDEX_ATTEMPTS`` (count), ``tools.typed.index.LINE_MAX`` (characters).
  * ``tools.typed.hosts.base.MAX_FILES`` (files), ``tools.typed.hosts.base.MAX_TOTAL_BYTES`` (bytes),
    ``tools.typed.hosts.base.MAX_FILE_BYTES`` (bytes), ``tools.typed.hosts.base.MAX_DEPTH`` (levels),
    ``tools.typed.hosts.claude_code.BUCKET_MAX`` (characters).
  * ``tools.typed.importer.DESCRIPTION_MAX`` (characters), ``tools.typed.importer.TAGS_MAX`` (count),
    ``tools.typed.importer.SIMILAR_RATIO`` (fraction), ``tools.typed.importer.SIMILAR_MIN_WORDS`` (words),
    ``tools.typed.importer._COMPARE_WORDS`` (words).
  * ``tools.typed.library.PROJECT_INDEX_MAX_BYTES`` (bytes), ``tools.typed.library.PROJECT_INDEX_MAX_LINES``
    (lines), ``tools.typed.library.PROJECT_DOCUMENT_MAX_BYTES`` (bytes): project libraries.
  * ``tools.typed.model.FEEDBACK_DEFAULT_DAYS`` (days), ``tools.typed.model.SLUG_MAX`` (characters),
    ``tools.typed.model.MAX_NESTING`` (levels).

The benchmark's goals and sizes
  * ``bench.__main__.CLI_GOAL_MS`` (ms), ``bench.__main__.RG_RATIO_GOAL`` (ratio),
    ``bench.__main__.COMMON16_GOAL`` (ratio), ``bench.__main__.DISK_COLD_GOAL`` (ratio), ``bench.data.MIB`` (bytes),
    ``bench.data.SCAN_BYTES`` (bytes), ``bench.growth.EXPONENT_GOAL`` (exponent),
    ``bench.health.HEALTH_GOAL_SECONDS`` (s),
    ``bench.citations.CITATIONS_GOAL_SECONDS`` (s), ``bench.citations.FILE_LINES`` (lines),
    ``bench.history.THROUGHPUT_GOAL`` (ratio), ``bench.history.LATENCY_GOAL_MS`` (ms),
    ``bench.history.SIZE_GOAL_BYTES`` (bytes), ``bench.latency.LIMIT`` (results),
    ``bench.teams.MOUNTED_GOAL`` (ratio), ``bench.teams.LOAD_INTERVAL_SECONDS`` (s),
    ``bench.teams.REQUEST_TIMEOUT_SECONDS`` (s), ``bench.teams.LIMIT`` (results),
    ``bench.reach.TWO_TEAMS_NOTES`` (notes), ``bench.reach.RG_GOAL`` (ratio), ``bench.reach.DEADLINE_MS`` (ms),
    ``bench.reach.WARM_UP_TRIES`` (searches), ``bench.reach.SHARED_OWN_NOTES`` (notes),
    ``bench.reach.SHARED_WORKERS`` (threads), ``bench.reach.HIT_RATE_GOAL`` (share),
    ``bench.secrets.THROUGHPUT_GOAL`` (ratio), ``bench.startup.GOAL_MS`` (ms), ``bench.startup.RELAY_GOAL_MS``
    (ms), ``bench.startup.RELAY_GOAL_KIB`` (KiB), ``bench.review.PROPOSAL_THROUGHPUT_GOAL`` (ratio),
    ``bench.mcp_http.RATIO_GOAL`` (ratio), ``bench.mcp_http.CPU_GOAL_MS`` (ms),
    ``bench.capacity.P99_GOAL_MS`` (ms), ``bench.disk_cold.GOAL`` (ratio), ``bench.disk_cold.RG_CEILING_MS``
    (ms), ``bench.mcp_http.CAPACITY_SESSIONS`` (sessions), ``bench.mcp_http.CAPACITY_PRINCIPALS`` (principals),
    ``bench.capacity.MIN_SAMPLES`` (calls), ``bench.mcp_http.QUICK_CAPACITY_SAMPLES`` (calls),
    ``bench.mcp_http.SESSION_GOAL_MIB`` (MiB), ``bench.ops.RAW_GOAL``
    (ratio), ``bench.ops.SCOPES_GOAL`` (ratio), ``bench.ops.SCOPED_WRITERS`` (clients).
  * ``bench.soak.PRINCIPALS`` (principals), ``bench.soak.TEAMS`` (teams), ``bench.soak.SOCKET_WORKERS`` (threads),
    ``bench.soak.MCP_WORKERS`` (threads), ``bench.soak.MCP_SESSION_CALLS`` (calls), ``bench.soak.RATE``
    (requests/s), ``bench.soak.BACKUP_SECONDS`` (s), ``bench.soak.SAMPLE_SECONDS`` (s), ``bench.soak.OWN_NOTES``
    (notes), ``bench.soak.TEAM_NOTES`` (notes), ``bench.soak.START_TIMEOUT_SECONDS`` (s): the soak's load;
    ``bench.soak.LEVEL_MIB_PER_MINUTE`` (MiB a minute), ``bench.soak.BASE_MIB`` (MiB),
    ``bench.soak.INDEX_VERSION_BYTES`` (bytes): its verdict, against the Hub's RSS bound (§6).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

KIB = 1024
"""Bytes in a kibibyte."""
MIB = 1024 * KIB
"""Bytes in a mebibyte."""

# The Hub's connection bounds (DESIGN.md §3.5, §6), used by hub/serve/connection.py and hub/serve/listeners.py.
MAX_CONNECTIONS = 1024
"""Open connections the Hub serves at once; one more is answered ``busy`` and closed."""
MAX_IN_FLIGHT = 32
"""Requests one connection may have running at once; more are answered ``busy``."""
HELLO_TIMEOUT_SECONDS = 10.0
"""Seconds a new connection has to complete ``hello`` from being accepted, or it is closed.

One deadline from accept (TLS handshake included): refused requests and failed hellos do not extend it."""
IDLE_TIMEOUT_SECONDS = 600.0
"""Seconds a connection with nothing in flight and nothing received is kept before it is closed."""
FRAME_TIMEOUT_SECONDS = 30.0
"""Seconds a frame that has started arriving has to be complete (slow sender), or the connection is closed."""
SEND_TIMEOUT_SECONDS = 30.0
"""Seconds the peer has to take an answer (slow reader) before the connection is closed."""
TLS_HANDSHAKE_TIMEOUT_SECONDS = 10.0
"""Seconds a TLS connection has to finish its handshake, or it is closed."""

# The MCP streamable-HTTP listener (hub.mcp_listen, DESIGN.md §6, §7), used by hub/mcp/http_listener.py.
MCP_HTTP_MAX_BODY_BYTES = 1 * MIB
"""Bytes of one HTTP request body; a longer one is answered 413 before it is parsed (the SDK's check)."""
MCP_HTTP_BODY_TIMEOUT_SECONDS = 30.0
"""Seconds each chunk of an unfinished request body has to arrive; a stalled body is dropped."""
MCP_HTTP_RATE_PER_SECOND = 20.0
"""Requests a second one token may make on average (token bucket); more are answered 429 with Retry-After.
The default of ``hub.mcp_rate``, which sets it per Hub (a CI runner sharing one token may raise it)."""
MCP_HTTP_BURST = 60.0
"""Requests one token may make at once before the rate applies: the default of ``hub.mcp_burst``."""
MCP_HTTP_SESSIONS_PER_PRINCIPAL = 16
"""Open MCP sessions one principal may hold; one more is answered 429 until one ends or expires."""

# Unreadable paths named in one answer (DESIGN.md §4.8, §6), used by hub/storage/faults.py and the walkers.
MAX_REPORTED_PATHS = 8
"""At most this many unreadable paths are named in one answer (``data.unreadable``, search, list)."""
MAX_REPORTED_PATH_CHARS = 120
"""Characters of a reported path; a longer one is cut (with ``…``), so a hostile tree cannot fill an answer."""

# The client's timeout (DESIGN.md §3.6), used by tools/client/base.py.
CLIENT_TIMEOUT_SECONDS = 30.0
"""Seconds one socket operation of the client may take before the Hub counts as not answering."""

# MCP sessions in the Hub (DESIGN.md §9.2), used by protocol/params.py and hub/mcp/.
MCP_MAX_PAGE_TTL = 86400
"""Most seconds an MCP session may ask its paged results to be kept (``mcp_open``'s ``page_ttl``)."""


@dataclass(frozen=True)
class Limits:
    """The Hub's bounds; the Hub reports them to clients in the ``hello`` reply."""

    # Framing.
    max_frame_bytes: int = 1 * MIB
    # Logical paths.
    max_path_bytes: int = 1024
    max_path_segments: int = 20
    max_segment_bytes: int = 255
    # Documents and scopes (quotas).
    entry_max_bytes: int = 2 * KIB
    entry_max_lines: int = 64
    document_max_bytes: int = 64 * KIB
    scope_max_documents: int = 1024
    scope_max_bytes: int = 16 * MIB
    # Responses: the whole response frame body, envelope included.
    response_max_bytes: int = 8 * KIB
    response_envelope_bytes: int = 64
    # Search.
    query_max_bytes: int = 512
    query_max_keywords: int = 16
    search_default_limit: int = 5
    search_max_limit: int = 20
    scan_max_files: int = 1024
    scan_max_bytes: int = 8 * MIB
    scan_budget_seconds: float = 0.250
    scan_max_dir_entries: int = 4096
    scan_max_total_entries: int = 16384
    snippet_max_bytes: int = 240
    # The Hub's in-memory cache of scanned documents (raw + folded bytes, all scopes): the default of
    # ``hub.cache_max_bytes``, which the Hub reports here. 16 scopes' scan budgets (8 MiB raw + 8 folded),
    # so a team server's team scopes and its active people's stay warm.
    cache_max_bytes: int = 256 * MIB
    # Scans running at once, each in a worker thread: scans hold the GIL, so more would only queue
    # inside Python and take worker threads from writes.
    search_threads: int = 4
    # Seconds a data request may wait for its scope's lock or a worker thread before it is answered
    # ``busy`` with nothing done; once its file work has started it finishes.
    request_start_seconds: float = 30.0
    # Seconds the requests already running get to finish and answer after a stop signal.
    shutdown_grace_seconds: float = 10.0

    def as_dict(self) -> dict[str, Any]:
        """The limits as a plain map (for the ``hello`` reply and JSON output)."""
        return asdict(self)


LIMITS = Limits()

REVIEW_MAX_PENDING_CEILING = 1000
"""The largest ``memory.review_max_pending`` accepted (count): ``review_list`` pages them (§21)."""

ENTRY_NAME = "MEMORY.md"
"""The scope's small entry document, read once per new conversation."""
