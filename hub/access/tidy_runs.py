"""Review-forced runs: every write of a tidy run's agent is a proposal, whatever ``memory.review`` says
(DESIGN.md §21).

``amux memory tidy`` (a person, not an agent) calls ``review_run`` before it starts the agent; the Hub records a
:class:`Run` for the launch's session and, from then on, marks as *review forced* every caller it can tie to that
run (:meth:`RunBook.mark`):

* a ``hello`` or MCP HTTP request carrying the run's session (``AMUX_SESSION_ID``, ``Amux-Session``);
* a caller authenticated by a token the run names (the launcher's own token, inherited by the agent), but not
  the launcher's own process by that token alone (:func:`is_launcher`: it ends the run, which frees the token);
* a Unix-socket caller whose process descends from the launcher's (``SO_PEERCRED`` pid, its parents read from
  ``/proc``, the launcher's start time checked so a reused pid matches nothing): an agent's shell that drops
  ``AMUX_SESSION_ID`` is still the run's.

A marked caller is an agent (:func:`hub.access.identity.agent_reason` ``"tidy"``: it cannot decide a review or override
the credential check), its session is the run's (so its proposals are one change set), and its writes are
proposals in every scope (:meth:`hub.methods.review.ReviewQueue.reviewed`).  A run ends when its launcher asks
(``review_run`` with ``end``) or :data:`RUN_TTL_SECONDS` after it began; a process already marked stays marked.

The Hub closes its own doors only: a process of the same OS account that leaves the launcher's process tree
(a daemon re-parented to init) is not recognised, and such a process can write the memory files directly anyway
(DESIGN.md §7.6).

On disk: ``<AMUX_HOME>/review/runs.json`` (0600, replaced durably before ``review_run`` answers), so a Hub
restart during a run keeps it forced.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

from amux_memory.hub.access.identity import Identity, Peer, agent_reason
from amux_memory.hub.access.registry import Registry
from amux_memory.hub.storage import fsio
from amux_memory.protocol.errors import ErrorCode, HubError

log = logging.getLogger("amux.hub")

RUNS_FILE = "runs.json"
"""The runs' file in the review folder."""

RUN_TTL_SECONDS = 12 * 3600
"""A run not ended by its launcher ends this long after it began (s; a launch's delegated token lives as long)."""

ANCESTRY_DEPTH = 64
"""How many parents of a caller's process are looked at for the launcher's pid (processes)."""


@dataclass(frozen=True)
class Run:
    """One review-forced run: its ``session``, the ``principal`` that began it, the launcher's ``uid``, ``pid`` and
    ``pid_start`` (``/proc/PID/stat`` start time in clock ticks; None over TCP), ``token_ids`` (the launcher's own
    token, and the delegated token the launch issued for the agent), ``began``/``expires`` (epoch seconds)."""

    session: str
    principal: str
    uid: int | None
    pid: int | None
    pid_start: int | None
    token_ids: list[str]
    began: float
    expires: float

    def public(self) -> dict[str, Any]:
        """The ``review_run`` answer's view: ``{session, principal, pid, expires}``."""
        return {"session": self.session, "principal": self.principal, "pid": self.pid, "expires": self.expires}


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot, ``/proc/PID/stat`` field 22), None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()  # the name may hold spaces and parentheses
    return int(fields[19]) if len(fields) > 19 else None


def parent_of(pid: int) -> int | None:
    """The parent pid of ``pid`` (``/proc/PID/stat`` field 4), None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()
    return int(fields[1]) if len(fields) > 1 else None


def descends_from(pid: int, ancestor: int, ancestor_start: int | None) -> bool:
    """Whether process ``pid`` is a strict descendant of ``ancestor`` (started at ``ancestor_start``), walking at
    most :data:`ANCESTRY_DEPTH` parents.  Blocking (reads ``/proc``)."""
    if ancestor_start is None or process_start(ancestor) != ancestor_start:
        return False
    current: int | None = pid
    for _ in range(ANCESTRY_DEPTH):
        current = parent_of(current) if current is not None else None
        if current is None or current <= 1:
            return False
        if current == ancestor:
            return True
    return False


class RunBook:
    """The Hub's review-forced runs, loaded from ``<review_root>/runs.json``; thread-safe (a lock of its own: it
    is used from ``hello``'s worker thread and the MCP HTTP listener)."""

    def __init__(self, review_root: str) -> None:
        self.path = os.path.join(review_root, RUNS_FILE)
        self.directory = review_root
        self.lock = threading.Lock()
        self.runs: dict[str, Run] = {}
        try:
            with open(self.path, "rb") as f:
                data = json.load(f)
            self.runs = {r["session"]: Run(**r) for r in data.get("runs", [])}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            # Fail closed for what can be told: keep nothing, but say so loudly; new runs rewrite the file.
            log.error("cannot read %s (%s): runs begun before this start are no longer forced", self.path, exc)

    def _save(self) -> None:
        fsio.make_directories(self.directory)
        data = {"runs": [dataclasses.asdict(r) for r in self.runs.values()]}
        fsio.replace_file(self.path, json.dumps(data, separators=(",", ":")).encode("utf-8") + b"\n")

    def _live(self, now: float) -> list[Run]:
        return [r for r in self.runs.values() if r.expires > now]

    def begin(self, identity: Identity, session: str, token_id: str | None, registry: Registry,
              now: float) -> dict[str, Any]:
        """Record a run for ``session`` begun by ``identity`` (a person: an agent is refused with ``unauthorized``,
        reason ``agent_caller``) from its process (``identity.pid``, the kernel's, on the Unix socket), with the
        caller's own token and ``token_id`` (the agent's delegated token: ``bad_request`` unless ``registry`` holds it
        for the same principal) forced too, and return ``{session,
        principal, pid, expires, began: true}``.  A session of another principal's live run is ``conflict``.
        Blocking (reads ``/proc``, writes the file)."""
        require_person_run(identity)
        tokens = [t for t in (identity.token_id, token_id) if t is not None]
        if token_id is not None:
            record = registry.tokens.get(token_id)
            if record is None or record.principal != identity.principal:
                raise HubError(ErrorCode.BAD_REQUEST, f"token {token_id[:40]!r} is not one of {identity.principal}'s "
                               "tokens; no run was begun", {"field": "token_id"})
        with self.lock:
            self.runs = {s: r for s, r in self.runs.items() if r.expires > now}
            other = self.runs.get(session)
            if other is not None and other.principal != identity.principal:
                raise HubError(ErrorCode.CONFLICT, f"session {session} already is another caller's tidy run; "
                               "start the run with a new session", {"session": session})
            pid = identity.pid if identity.pid is not None and identity.pid > 1 else None
            run = Run(session, identity.principal, identity.uid, pid,
                      None if pid is None else process_start(pid), tokens, now, now + RUN_TTL_SECONDS)
            self.runs[session] = run
            self._save()
        log.info("review-forced run %s begun by %s (pid %s)", session, identity.principal, run.pid)
        return {**run.public(), "began": True}

    def end(self, identity: Identity, session: str, now: float) -> dict[str, Any]:
        """End the run of ``session`` (a person of its principal; an agent is refused) and return ``{session,
        ended}`` (``ended`` false when there was none live).  Blocking (writes the file)."""
        require_person_run(identity)
        with self.lock:
            run = self.runs.get(session)
            if run is None or run.principal != identity.principal or run.expires <= now:
                return {"session": session, "ended": False}
            del self.runs[session]
            self._save()
        log.info("review-forced run %s ended by %s", session, identity.principal)
        return {"session": session, "ended": True}

    def mark(self, identity: Identity, peer: Peer | None, now: float) -> Identity:
        """``identity`` with ``review_forced`` and the run's session when it belongs to a live run (this module's
        docstring says how it is told), else unchanged.  Blocking only with a ``peer`` (reads ``/proc``)."""
        with self.lock:
            live = self._live(now)
        if not live:
            return identity
        for run in live:
            if run.principal != identity.principal:
                continue
            if ((identity.session is not None and identity.session == run.session)
                    or (identity.token_id is not None and identity.token_id in run.token_ids
                        and not is_launcher(peer, run))
                    or (peer is not None and run.pid is not None and peer.uid == run.uid
                        and descends_from(peer.pid, run.pid, run.pid_start))):
                return dataclasses.replace(identity, session=run.session, review_forced=True)
        return identity


def is_launcher(peer: Peer | None, run: Run) -> bool:
    """Whether ``peer`` is the process that began ``run`` (same uid, pid and start time): the person running
    ``amux memory tidy``, never marked, though the agent inherits its token (``AMUX_TOKEN``), so that it can end
    its run and the person's token is free again.  Blocking (reads ``/proc``)."""
    return (peer is not None and run.pid is not None and peer.pid == run.pid and peer.uid == run.uid
            and run.pid_start is not None and process_start(peer.pid) == run.pid_start)


def require_person_run(identity: Identity) -> None:
    """Refuse an agent caller ``review_run`` (``unauthorized``, reason ``agent_caller``): an agent may neither
    end its own run nor begin one for another session (DESIGN.md §21)."""
    reason = agent_reason(identity)
    if reason is not None:
        raise HubError(ErrorCode.UNAUTHORIZED, "an agent cannot begin or end a tidy run: a person runs 'amux "
                       f"memory tidy' (this caller is an agent: {reason}); nothing was changed",
                       {"reason": "agent_caller", "agent": reason},
                       next_step="Tell the user; 'amux memory tidy' is run by a person outside an agent session.")
