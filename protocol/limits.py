"""Every numeric bound of the product, in one place (DESIGN.md §6).

Sizes are in bytes of UTF-8 unless a name says otherwise; times are seconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

KIB = 1024
MIB = 1024 * KIB


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
    # The Hub's in-memory cache of scanned documents (raw + folded bytes, all scopes).
    cache_max_bytes: int = 64 * MIB
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

ENTRY_NAME = "MEMORY.md"
"""The scope's small entry document, read once per new conversation."""
