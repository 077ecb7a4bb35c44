"""What the kill -9 tests (``test_history_crash.py``, ``test_team_crash.py``) know of the writes they sent, and
the checks of a document's history against it after a kill.

A writer owns its documents: :class:`Doc` holds what it sent, what the Hub acknowledged and what was in flight
when the Hub died; :func:`run_writer` is its thread (each step :func:`write_or_forget`, ended by
:func:`until_killed` when the Hub dies), and :func:`check_recorded` compares a document's history as the kill
left it with what was sent.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.client.blocking import HubClient

ABSENT = "absent"
"""The revision of no document (before the first write, after a forget)."""

FORGET_SHARE = 0.2
"""How often a writer forgets a document that exists instead of writing it again."""


@dataclass
class Doc:
    """One document a single writer owns: what was acknowledged, and what was sent without an answer."""

    revision: str = ABSENT
    acked: list[str] = field(default_factory=list)  # acknowledged revisions in order (absent = a forget)
    sent: set[str] = field(default_factory=lambda: {ABSENT})
    in_flight: str | None = None


def revision_of(file: Path) -> str:
    """The revision (SHA-256 of the bytes) of ``file`` as it is on disk, or :data:`ABSENT` when there is none."""
    return hashlib.sha256(file.read_bytes()).hexdigest() if file.exists() else ABSENT


def write_or_forget(client: HubClient, path: str, doc: Doc, rng: random.Random, body: Callable[[], bytes]) -> None:
    """One step of a writer on ``path``: a forget one time in five (:data:`FORGET_SHARE`) when the document
    exists, else an upsert of ``body()``.  ``doc`` records what is sent (and in flight) before the call and
    what was acknowledged after its answer; raises what the Hub answers."""
    if doc.revision != ABSENT and rng.random() < FORGET_SHARE:
        doc.in_flight = ABSENT
        client.call("forget", {"path": path, "expected_revision": doc.revision})
        new = ABSENT
    else:
        content = body()
        new = hashlib.sha256(content).hexdigest()
        doc.sent.add(new)
        doc.in_flight = new
        client.call("upsert", {"path": path, "content": content, "expected_revision": doc.revision,
                               "allow_shrink": True})
    doc.revision, doc.in_flight = new, None
    doc.acked.append(new)


@contextmanager
def until_killed(errors: list[str]) -> Iterator[None]:
    """Run a client thread's loop until the Hub dies: ``unavailable`` (the kill) ends it quietly; any other
    failure ends it and is appended to ``errors`` (a thread's failure must fail the test)."""
    try:
        yield
    except HubError as exc:
        if exc.code is not ErrorCode.UNAVAILABLE:
            errors.append(repr(exc))
    except BaseException as exc:
        errors.append(repr(exc))


def run_writer(connect: Callable[[], HubClient], docs: dict[str, Doc], stop: threading.Event, rng: random.Random,
               errors: list[str], body: Callable[[str, int, random.Random], bytes], *, prefix: str = "",
               acked: Callable[[], None] = lambda: None) -> None:
    """A writer thread on its own ``docs``: until ``stop`` is set or the Hub dies, :func:`write_or_forget` one of
    them at random (its Hub path ``prefix`` + its name; an upsert sends ``body(name, seq, rng)``, ``seq``
    counting the steps from 1), calling ``acked()`` after each acknowledged one.  A Hub that cannot be
    connected to (already killed) ends it at once; failures other than the kill go to ``errors``."""
    try:
        client = connect()
    except HubError:
        return
    seq = 0
    try:
        with until_killed(errors):
            while not stop.is_set():
                path = rng.choice(list(docs))
                seq += 1
                write_or_forget(client, prefix + path, docs[path], rng, partial(body, path, seq, rng))
                acked()
    finally:
        client.close()


def in_order(needle: list[str], hay: list[str]) -> bool:
    """Whether ``needle`` is a subsequence of ``hay`` (every item, in order, others between allowed)."""
    it = iter(hay)
    return all(any(x == y for y in it) for x in needle)


def first_missing(needle: list[str], hay: list[str]) -> str:
    """Where ``needle`` stops being a subsequence of ``hay`` (for the failure message); empty when it is one."""
    it = iter(hay)
    for i, x in enumerate(needle):
        if not any(x == y for y in it):
            return f"acknowledged #{i} {x[:12]} of {len(needle)} not recorded after #{i - 1}: " \
                   f"acked {[a[:8] for a in needle[max(0, i - 3):i + 3]]}, recorded {[r[:8] for r in hay[-12:]]}"
    return ""


def check_recorded(path: str, doc: Doc, recorded: list[str], on_disk: str, tail: int | None = None) -> int:
    """Check a writer's document after a kill against its ``recorded`` history (revisions, oldest first) and its
    revision ``on_disk``: nothing recorded that was never sent, every acknowledged revision recorded in order
    (with ``tail``, only the last ``tail`` of them), and the file is the newest recorded version or the write
    whose answer was lost.  Returns 1 for such a gap (the file durable, its record and answer lost), else 0."""
    assert set(recorded) <= doc.sent, (path, set(recorded) - doc.sent)  # nothing never sent
    acked = doc.acked if tail is None else doc.acked[-tail:]
    assert in_order(acked, recorded), (path, first_missing(acked, recorded))  # every acknowledged one, in order
    newest = recorded[-1] if recorded else ABSENT
    if on_disk == newest:
        return 0
    assert doc.in_flight == on_disk, (path, on_disk, newest)  # only a write whose answer was lost
    return 1
