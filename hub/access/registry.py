"""The principal registry, ``<AMUX_HOME>/principals.toml`` (DESIGN.md §7).

It names who may use the Hub beyond the local OS users it already knows:

* **principals** — ``user`` or ``service`` kind.  A principal's name is its
  id: isolated memory lives in ``users/<sha256(name)>`` and its binding is
  ``principal:<name>``.
* **aliases** — ``os:<user name>`` or ``os-uid:<n>`` mapped to a principal, so
  several OS accounts (a person's CLI login, the account a chat bridge runs
  as, ...) share one isolated scope.  An OS user without an alias is the
  principal named like it (or ``uid:<n>``), as before.
* **teams** — named sets of principals, each member with a role
  (``reader``, ``writer`` or ``maintainer``), and the team's review rule
  (``off``, ``agents`` or ``all``).  A team's memory is a scope of its own,
  ``teams/<sha256(name)>``, mounted at ``@NAME/`` for every member
  (DESIGN.md §7.8).
* **tokens** — bearer credentials.  Only a SHA-256 hash of the secret is
  stored, with its id, principal, creation time, optional expiry, optional
  binding and optional label.  A token with a binding is a *delegated*
  credential: every ``hello`` made with it must carry that same binding.
* **invitations** — one-time codes ``amux hub invite`` hands out and ``amux
  login`` trades for a token (DESIGN.md §7.4): the code's SHA-256 only, with
  the principal, expiry, label, the lifetime of the token it becomes, and
  when it was used (and for which token) or revoked.

The CLI (``amux hub principal ...``, ``amux hub token ...``) changes the file
under an exclusive lock, atomically (temp file 0600, fsync, rename, fsync of
the directory); the Hub re-reads it whenever its inode, size or times change,
so a revocation applies to the very next call.  Parsing is strict: a file the
Hub cannot fully understand authenticates nobody until it is fixed.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import math
import os
import re
import secrets
import stat
import threading
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import tomli_w

from amux_memory.hub.storage import fsio
from amux_memory.hub.storage.faults import step
from amux_memory.protocol.config_file import REGISTRY_NAME as REGISTRY_NAME
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.invitation import check_code, code_id, hash_code
from amux_memory.protocol.wording import did_you_mean

LOCK_NAME = ".principals.lock"
FORMAT_VERSION = 1

KINDS = ("user", "service")
ROLES = ("reader", "writer", "maintainer")
"""A member's role in a team, weakest first (DESIGN.md §7.8): each may do what the one before it may."""
TEAM_REVIEW = ("off", "agents", "all")
"""A team's review rule (DESIGN.md §7.8): none, an agent's writes, or every write by a non-maintainer."""
TOKEN_PREFIX = "amux"
MAX_TOKEN_CHARS = 256
DELEGATED_DEFAULT_TTL = 12 * 3600
"""Lifetime of a token issued with a binding when no ``--ttl`` is given."""

TOKEN_MAX_TTL_SECONDS = 10 * 365 * 86400
"""The longest lifetime a token may be issued with (ten years): a longer ``--ttl`` is surely a typo."""

INVITATION_DEFAULT_TTL = 7 * 86400
"""How long an invitation may be redeemed when ``amux hub invite`` is given no ``--ttl``."""
INVITATION_MAX_TTL_SECONDS = 90 * 86400
"""The longest an invitation may wait to be redeemed."""
INVITED_TOKEN_TTL = 180 * 86400
"""The lifetime of the token an invitation becomes, unless ``--token-ttl`` says otherwise (DESIGN.md §7.4)."""
MAX_LABEL_CHARS = 80
"""The longest label of a token or an invitation."""

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@+-]{0,63}$")
_OS_NAME = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.@$-]{0,63}$")
_TEAM = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
_TOKEN_ID = re.compile(r"^[0-9a-f]{12}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_BINDING = re.compile(r"^(global|principal:[A-Za-z0-9_][A-Za-z0-9._@+-]{0,63})$")

T = TypeVar("T")
_NEW_INVITATION = "Ask the Hub's operator for a new invitation ('amux hub invite NAME' on the Hub host)."


def _bad(message: str, **data: Any) -> HubError:
    return HubError(ErrorCode.BAD_REQUEST, message, data)


def check_name(name: str) -> str:
    """A principal name: 1–64 of letters, digits and ``_ . @ + -``, not starting with a punctuation mark.

    No ``:`` so that a registered name never looks like ``uid:<n>`` (the id of
    an OS user without a name) or a binding.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise _bad(
            f"invalid principal name {str(name)[:80]!r}: use 1-64 letters, digits, '_', '.', '@', '+' or '-' "
            "(no ':' or spaces), starting with a letter, digit or '_'",
            name=str(name)[:80],
        )
    return name


def check_alias(alias: str) -> str:
    """``os:<user name>`` or ``os-uid:<n>``; returned in canonical form."""
    if isinstance(alias, str):
        kind, sep, value = alias.partition(":")
        if sep and kind == "os" and _OS_NAME.fullmatch(value):
            return alias
        if sep and kind == "os-uid" and value.isdigit() and value.isascii() and int(value) < 2**32:
            return f"os-uid:{int(value)}"
    raise _bad(
        f"invalid alias {str(alias)[:80]!r}: use os:<user name> or os-uid:<number> "
        "(an OS account whose connections should act as this principal)",
        alias=str(alias)[:80],
    )


def check_team(name: object) -> str:
    """A team name: 1-40 characters, lower-case letters, digits, ``-`` and ``_``, not starting with ``-`` or
    ``_`` (it is a path segment, ``@NAME/``, on every file system).  Raises ``bad_request``."""
    if not isinstance(name, str) or not _TEAM.fullmatch(name):
        shown = name[:60] if isinstance(name, str) else type(name).__name__
        raise _bad(f"invalid team name {shown!r}: use 1-40 lower-case letters, digits, '-' or '_', starting "
                   "with a letter or digit (it is mounted as @NAME/)", field="team")
    return name


def check_binding(binding: str) -> str:
    """A scope binding a delegated token may be tied to: ``global`` or ``principal:<name>``."""
    if not isinstance(binding, str) or not _BINDING.fullmatch(binding):
        raise _bad(f"invalid binding {str(binding)[:80]!r}: expected 'global' or 'principal:<name>' "
                   "(the value of AMUX_MEMORY_BINDING)", binding=str(binding)[:80])
    return binding


def check_label(label: object) -> str:
    """A token's or an invitation's label: 1-80 printable characters (shown by ``token list``).  Raises
    ``bad_request`` (field ``label``)."""
    if not isinstance(label, str) or not 0 < len(label) <= MAX_LABEL_CHARS or not label.isprintable():
        raise _bad(f"a label is 1-{MAX_LABEL_CHARS} printable characters (no tabs or line breaks)", field="label")
    return label


def hash_token(token: str) -> str:
    """The stored form of a token: SHA-256 hex of its UTF-8 text (tokens carry 256 random bits)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def split_token(token: str) -> str | None:
    """The token id in ``amux_<id>_<secret>``, or None if the text is not shaped like a token."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        return None
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not _TOKEN_ID.fullmatch(parts[1]) or len(parts[2]) < 32:
        return None
    return parts[1]


@dataclass(frozen=True)
class Principal:
    """A registered principal: its name (its id), ``user`` or ``service`` kind, and creation time (epoch s)."""

    name: str
    kind: str
    created: int


@dataclass(frozen=True)
class Team:
    """A team (DESIGN.md §7.8): its name, review rule (:data:`TEAM_REVIEW`), creation time (epoch s) and
    members, principal name → role (:data:`ROLES`)."""

    name: str
    review: str
    created: int
    members: Mapping[str, str] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """What ``amux hub team show`` prints: ``{name, review, created (ISO 8601), members: [{principal,
        role}]}``, members sorted by name."""
        return {"name": self.name, "review": self.review, "created": _iso(self.created),
                "members": [{"principal": p, "role": r} for p, r in sorted(self.members.items())]}


@dataclass(frozen=True)
class Token:
    """A stored token: never the secret, only its hash."""

    id: str
    principal: str
    sha256: str
    created: int
    expires: int | None = None
    binding: str | None = None
    revoked: int | None = None
    label: str | None = None

    def expired(self, now: float) -> bool:
        """True when the token has an expiry and ``now`` (epoch seconds) is at or past it."""
        return self.expires is not None and now >= self.expires

    def public(self, now: float) -> dict[str, Any]:
        """What ``amux hub token list`` shows (no hash)."""
        state = "revoked" if self.revoked is not None else "expired" if self.expired(now) else "active"
        return {
            "id": self.id,
            "principal": self.principal,
            "label": self.label,
            "created": _iso(self.created),
            "expires": _iso(self.expires) if self.expires is not None else None,
            "binding": self.binding,
            "delegated": self.binding is not None,
            "state": state,
            "revoked": _iso(self.revoked) if self.revoked is not None else None,
        }


@dataclass(frozen=True)
class Invitation:
    """A stored invitation (DESIGN.md §7.4): never the code, only its hash.  ``token_ttl`` is the lifetime of the
    token it becomes; ``used`` when it was redeemed and ``token`` the id of that token; ``revoked`` when the
    operator withdrew it."""

    id: str
    principal: str
    sha256: str
    created: int
    expires: int
    token_ttl: int
    label: str | None = None
    used: int | None = None
    token: str | None = None
    revoked: int | None = None

    def state(self, now: float) -> str:
        """``used``, ``revoked``, ``expired`` or ``open``."""
        return ("used" if self.used is not None else "revoked" if self.revoked is not None
                else "expired" if now >= self.expires else "open")

    def public(self, now: float) -> dict[str, Any]:
        """What ``amux hub invitation list`` shows (no hash)."""
        return {"id": self.id, "principal": self.principal, "label": self.label, "created": _iso(self.created),
                "expires": _iso(self.expires), "token_ttl_seconds": self.token_ttl, "state": self.state(now),
                "used": _iso(self.used) if self.used is not None else None, "token": self.token,
                "revoked": _iso(self.revoked) if self.revoked is not None else None}


def _iso(t: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@dataclass(frozen=True)
class Registry:
    """An immutable snapshot of the registry file."""

    principals: Mapping[str, Principal] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    tokens: Mapping[str, Token] = field(default_factory=dict)
    teams: Mapping[str, Team] = field(default_factory=dict)
    invitations: Mapping[str, Invitation] = field(default_factory=dict)

    # -- lookups (used by the Hub) ---------------------------------------------

    def teams_of(self, principal: str) -> dict[str, tuple[Team, str]]:
        """The teams ``principal`` belongs to: team name → (team, role).  Empty for a non-member."""
        return {t.name: (t, t.members[principal]) for t in self.teams.values() if principal in t.members}

    def principal_for_os(self, uid: int, name: str | None) -> str | None:
        """The principal an OS account is aliased to (``os-uid:`` wins over ``os:``), or None."""
        found = self.aliases.get(f"os-uid:{uid}")
        if found is None and name is not None:
            found = self.aliases.get(f"os:{name}")
        return found

    def kind_of(self, principal: str) -> str:
        """``user`` or ``service``; an unregistered principal (a plain OS user) is a ``user``."""
        p = self.principals.get(principal)
        return p.kind if p is not None else "user"

    def verify_token(self, token: str, now: float) -> Token:
        """The record of a valid token; raises ``unauthorized`` for an unknown, revoked or expired one.

        The message names the token id (never the secret) when the text has
        the shape of a token.
        """
        token_id = split_token(token)
        record = self.tokens.get(token_id) if token_id is not None else None
        if record is None or not hmac.compare_digest(record.sha256, hash_token(token)):
            raise HubError(ErrorCode.UNAUTHORIZED, "the token is not valid for this Hub (unknown, mistyped or "
                           "removed); ask the Hub's administrator for a new one ('amux hub token issue')",
                           {"reason": "unknown_token"})
        return self.check_record(record, now)

    def check_record(self, record: Token, now: float) -> Token:
        """``record`` if it is still usable now; raises ``unauthorized`` if revoked, expired or orphaned."""
        data = {"token_id": record.id}
        if record.revoked is not None:
            raise HubError(ErrorCode.UNAUTHORIZED, f"token {record.id} was revoked at {_iso(record.revoked)}",
                           {**data, "reason": "revoked"})
        if record.expired(now):
            assert record.expires is not None
            raise HubError(ErrorCode.UNAUTHORIZED, f"token {record.id} expired at {_iso(record.expires)}",
                           {**data, "reason": "expired"})
        if record.principal not in self.principals:
            raise HubError(ErrorCode.UNAUTHORIZED, f"token {record.id} belongs to a removed principal",
                           {**data, "reason": "unknown_principal"})
        return record

    # -- edits (used by the CLI; each returns a new snapshot) -------------------

    def add_principal(self, name: str, kind: str, now: float) -> tuple[Registry, bool]:
        """Register ``name`` as a ``kind`` principal; returns the new snapshot and whether it was added.

        Adding an existing principal of the same kind changes nothing (False).
        Raises ``bad_request`` for an invalid name or kind, ``conflict`` when it
        exists with the other kind.
        """
        check_name(name)
        if kind not in KINDS:
            raise _bad(f"principal kind must be one of {', '.join(KINDS)}")
        existing = self.principals.get(name)
        if existing is not None:
            if existing.kind != kind:
                raise HubError(ErrorCode.CONFLICT, f"principal {name!r} already exists as a {existing.kind} principal",
                               {"name": name, "kind": existing.kind},
                               next_step="Choose another name, or remove that principal first with 'amux hub "
                               "principal remove NAME' ('amux hub principal list' shows them).")
            return self, False
        return replace(self, principals={**self.principals, name: Principal(name, kind, int(now))}), True

    def remove_principal(self, name: str, now: float) -> tuple[Registry, dict[str, Any]]:
        """Remove a principal with its aliases and tokens (its files stay); returns the ids removed.

        The second value is ``{"aliases": [...], "tokens": [...]}``, each sorted.

        Raises ``not_found`` for an unknown principal.
        """
        self._need(name)
        aliases = {a: p for a, p in self.aliases.items() if p != name}
        tokens = {t.id: t for t in self.tokens.values() if t.principal != name}
        principals = {n: p for n, p in self.principals.items() if n != name}
        teams = {t.name: replace(t, members={m: r for m, r in t.members.items() if m != name})
                 for t in self.teams.values()}
        removed = {"aliases": sorted(set(self.aliases) - set(aliases)),
                   "tokens": sorted(set(self.tokens) - set(tokens)),
                   "teams": sorted(t.name for t in self.teams.values() if name in t.members)}
        invitations = {i.id: i for i in self.invitations.values() if i.principal != name}
        return Registry(principals, aliases, tokens, teams, invitations), removed

    def add_alias(self, name: str, alias: str) -> tuple[Registry, str]:
        """Map ``os:USER`` / ``os-uid:N`` to principal ``name``; returns the new snapshot and the normalised alias.

        Raises ``not_found`` for an unknown principal, ``bad_request`` for a
        malformed alias, ``conflict`` when the alias names another principal.
        """
        self._need(name)
        alias = check_alias(alias)
        current = self.aliases.get(alias)
        if current is not None and current != name:
            raise HubError(ErrorCode.CONFLICT, f"{alias} already resolves to principal {current!r}; "
                           f"remove it first with 'amux hub principal unalias {alias}'",
                           {"alias": alias, "principal": current},
                           next_step="Remove the alias first with 'amux hub principal unalias ALIAS', then add it "
                           "again for the other principal.")
        return replace(self, aliases={**self.aliases, alias: name}), alias

    def remove_alias(self, alias: str) -> tuple[Registry, str]:
        """Drop an alias; returns the new snapshot and the principal it named. Raises ``not_found`` if absent."""
        alias = check_alias(alias)
        if alias not in self.aliases:
            raise HubError(ErrorCode.NOT_FOUND, f"no alias {alias}", {"alias": alias},
                           next_step="'amux hub principal list' shows every principal's aliases.")
        principal = self.aliases[alias]
        return replace(self, aliases={a: p for a, p in self.aliases.items() if a != alias}), principal

    def issue_token(self, name: str, now: float, ttl: int | None, binding: str | None,
                    label: str | None = None) -> tuple[Registry, str, Token]:
        """Add a new token; returns the new snapshot, the secret token text (shown once) and its record.

        It is valid for at least ``ttl`` seconds from ``now`` (expiry rounded up to a whole second); ``label``
        (:func:`check_label`) says what it is for in ``amux hub token list``.
        """
        self._need(name)
        if label is not None:
            check_label(label)
        if binding is not None:
            check_binding(binding)
            if binding != "global" and binding != f"principal:{name}":
                raise _bad(f"a token of principal {name!r} can only be bound to 'global' or 'principal:{name}', "
                           f"not {binding!r}", binding=binding)
            if ttl is None:
                ttl = DELEGATED_DEFAULT_TTL
        if ttl is not None and not 0 < ttl <= TOKEN_MAX_TTL_SECONDS:
            raise _bad("ttl must be more than 0 seconds and at most ten years", field="ttl")
        while True:
            token_id = secrets.token_hex(6)
            if token_id not in self.tokens:
                break
        text = f"{TOKEN_PREFIX}_{token_id}_{secrets.token_urlsafe(32)}"
        expires = None if ttl is None else math.ceil(now + ttl)
        record = Token(token_id, name, hash_token(text), int(now), expires, binding, label=label)
        return replace(self, tokens={**self.tokens, token_id: record}), text, record

    def revoke_token(self, token_id: str, now: float) -> tuple[Registry, Token]:
        """Mark a token revoked at ``now`` (kept, so listing shows it); returns the new snapshot and its record.

        Revoking twice keeps the first time.  Raises ``not_found`` for an unknown id.
        """
        record = self.tokens.get(token_id)
        if record is None:
            raise HubError(ErrorCode.NOT_FOUND,
                           f"no token with id {token_id[:40]!r} ('amux hub token list' shows them)",
                           {"id": token_id[:40]},
                           next_step="'amux hub token list' shows the token ids; use one of them.")
        if record.revoked is None:
            record = replace(record, revoked=int(now))
        return replace(self, tokens={**self.tokens, token_id: record}), record

    def revoke_presented(self, token: str, now: float) -> tuple[Registry, Token]:
        """Revoke the token whose text is ``token`` (``amux logout``: holding it is the right to end it); returns
        the new snapshot and its record.  Raises ``unauthorized`` (reason ``unknown_token``) for a text that is
        no token of this Hub; a token revoked or expired already is revoked again without complaint."""
        token_id = split_token(token)
        record = self.tokens.get(token_id) if token_id is not None else None
        if record is None or not hmac.compare_digest(record.sha256, hash_token(token)):
            raise HubError(ErrorCode.UNAUTHORIZED, "the token is not valid for this Hub (unknown, mistyped or "
                           "removed): there is nothing to revoke", {"reason": "unknown_token"})
        return self.revoke_token(record.id, now)

    # -- invitations (DESIGN.md §7.4) ---------------------------------------------

    def invite(self, name: str, now: float, ttl: int, token_ttl: int,
               label: str | None) -> tuple[Registry, str, Invitation]:
        """Add an invitation for principal ``name`` (registered); returns the new snapshot, the one-time code
        (``ID.SECRET``, shown once) and its record.  Raises ``not_found`` for an unknown principal,
        ``bad_request`` for a ``ttl`` or ``token_ttl`` out of range or an invalid label."""
        self._need(name)
        if label is not None:
            check_label(label)
        if not 0 < ttl <= INVITATION_MAX_TTL_SECONDS:
            raise _bad("an invitation's --ttl is more than 0 seconds and at most 90 days", field="ttl")
        if not 0 < token_ttl <= TOKEN_MAX_TTL_SECONDS:
            raise _bad("--token-ttl is more than 0 seconds and at most ten years", field="token_ttl")
        while True:
            inv_id = secrets.token_hex(6)
            if inv_id not in self.invitations:
                break
        code = f"{inv_id}.{secrets.token_urlsafe(32)}"
        record = Invitation(inv_id, name, hash_code(code), int(now), math.ceil(now + ttl), token_ttl, label)
        return replace(self, invitations={**self.invitations, inv_id: record}), code, record

    def redeem(self, code: str, now: float, device: str | None) -> tuple[Registry, tuple[str, Token]]:
        """Trade the one-time ``code`` for a token of its principal, labelled with the invitation's label (else
        ``amux login``) and ``device``; the invitation is marked used.  Returns the new snapshot and ``(token
        text, record)``.

        Raises ``unauthorized`` when the code is unknown or wrong (reason ``unknown_invitation``), or its
        invitation was used, revoked or expired, or its principal removed (the reason says which: only the
        holder of the right code learns it); nothing is changed then.
        """
        check_code(code)
        record = self.invitations.get(code_id(code))
        if record is None or not hmac.compare_digest(record.sha256, hash_code(code)):
            raise HubError(ErrorCode.UNAUTHORIZED, "this invitation is not valid for this Hub (unknown, mistyped "
                           "or removed); ask the Hub's operator for a new one ('amux hub invite NAME')",
                           {"reason": "unknown_invitation"}, next_step=_NEW_INVITATION)
        data = {"invitation": record.id}
        ask = "; ask the Hub's operator for a new one ('amux hub invite NAME')"
        if record.used is not None:
            raise HubError(ErrorCode.UNAUTHORIZED, f"invitation {record.id} was already used at {_iso(record.used)}"
                           f"{ask} (and tell them, if it was not you)", {**data, "reason": "used"},
                           next_step=_NEW_INVITATION)
        if record.revoked is not None:
            raise HubError(ErrorCode.UNAUTHORIZED, f"invitation {record.id} was revoked at {_iso(record.revoked)}"
                           f"{ask}", {**data, "reason": "revoked"},
                           next_step=_NEW_INVITATION)
        if now >= record.expires:
            raise HubError(ErrorCode.UNAUTHORIZED, f"invitation {record.id} expired at {_iso(record.expires)}{ask}",
                           {**data, "reason": "expired"},
                           next_step=_NEW_INVITATION)
        if record.principal not in self.principals:
            raise HubError(ErrorCode.UNAUTHORIZED, f"invitation {record.id} is for a removed principal{ask}",
                           {**data, "reason": "unknown_principal"},
                           next_step=_NEW_INVITATION)
        label = record.label or "amux login"
        if device:
            label = f"{label} ({device})"[:MAX_LABEL_CHARS]
        updated, text, token = self.issue_token(record.principal, now, record.token_ttl, None, label)
        used = replace(record, used=int(now), token=token.id)
        return replace(updated, invitations={**updated.invitations, record.id: used}), (text, token)

    def revoke_invitation(self, inv_id: str, now: float) -> tuple[Registry, Invitation]:
        """Withdraw an invitation not yet used; returns the new snapshot and its record (revoking twice keeps
        the first time).  Raises ``not_found`` for an unknown id, ``conflict`` for a used one (revoke its token
        instead)."""
        record = self.invitations.get(inv_id)
        if record is None:
            raise HubError(ErrorCode.NOT_FOUND, f"no invitation with id {inv_id[:40]!r}", {"id": inv_id[:40]},
                           next_step="'amux hub invitation list' shows the invitation ids.")
        if record.used is not None:
            raise HubError(ErrorCode.CONFLICT, f"invitation {record.id} was used at {_iso(record.used)}: revoke "
                           f"the token it became with 'amux hub token revoke {record.token}'",
                           {"id": record.id, "token": record.token})
        if record.revoked is None:
            record = replace(record, revoked=int(now))
        return replace(self, invitations={**self.invitations, inv_id: record}), record

    # -- teams (DESIGN.md §7.8) ---------------------------------------------------

    def add_team(self, name: str, review: str, now: float) -> tuple[Registry, bool]:
        """Create team ``name`` with review rule ``review``; returns the new snapshot and whether it was added.

        Adding an existing team with the same rule changes nothing (False).  Raises ``bad_request`` for an
        invalid name or rule, ``conflict`` when it exists with another rule (nothing changed).
        """
        check_team(name)
        if review not in TEAM_REVIEW:
            raise _bad(f"a team's review rule must be one of {', '.join(TEAM_REVIEW)}, not {review[:40]!r}",
                       field="review")
        existing = self.teams.get(name)
        if existing is not None:
            if existing.review != review:
                raise HubError(ErrorCode.CONFLICT, f"team {name!r} already exists with review {existing.review!r}",
                               {"team": name, "review": existing.review},
                               next_step="'amux hub team show NAME' shows it; remove it first to change its rule.")
            return self, False
        return replace(self, teams={**self.teams, name: Team(name, review, int(now))}), True

    def remove_team(self, name: str) -> tuple[Registry, Team]:
        """Drop team ``name`` and its memberships (its files stay); returns the new snapshot and the team.
        Raises ``not_found`` for an unknown team."""
        team = self.team(name)
        return replace(self, teams={n: t for n, t in self.teams.items() if n != name}), team

    def add_member(self, name: str, principal: str, role: str) -> tuple[Registry, str | None]:
        """Make ``principal`` (registered) a member of team ``name`` with ``role``; returns the new snapshot and
        the role it had before (None: it was not a member; the same role: nothing changed).  Raises
        ``not_found`` for an unknown team or principal, ``bad_request`` for an invalid role."""
        team = self.team(name)
        self._need(principal)
        if role not in ROLES:
            raise _bad(f"a member's role must be one of {', '.join(ROLES)}, not {role[:40]!r}", field="role")
        before = team.members.get(principal)
        team = replace(team, members={**team.members, principal: role})
        return replace(self, teams={**self.teams, name: team}), before

    def remove_member(self, name: str, principal: str) -> tuple[Registry, str]:
        """Take ``principal`` out of team ``name``; returns the new snapshot and the role it had.  Raises
        ``not_found`` for an unknown team or a principal that is not a member."""
        team = self.team(name)
        check_name(principal)
        role = team.members.get(principal)
        if role is None:
            raise HubError(ErrorCode.NOT_FOUND, f"{principal!r} is not a member of team {name!r}",
                           {"team": name, "principal": principal},
                           next_step="'amux hub team show NAME' lists the members.")
        team = replace(team, members={m: r for m, r in team.members.items() if m != principal})
        return replace(self, teams={**self.teams, name: team}), role

    def team(self, name: str) -> Team:
        """The team named ``name``; raises ``bad_request`` for an invalid name, ``not_found`` for no such team
        (on the Hub host: the registry is its operator's)."""
        check_team(name)
        team = self.teams.get(name)
        if team is None:
            near = did_you_mean(name, self.teams)  # the operator's registry: every team may be named
            create = (f" ('amux hub team add {name}' creates it)" if near
                      else f"; create it with 'amux hub team add {name}'")
            raise HubError(ErrorCode.NOT_FOUND, f"no team {name!r}{near}{create}",
                           {"team": name}, next_step="'amux hub team list' shows the teams.")
        return team

    def pruned(self, now: float) -> Registry:
        """Drop tokens and invitations that expired: they can never be valid again, and delegated ones pile up."""
        return replace(self, tokens={i: t for i, t in self.tokens.items() if not t.expired(now)},
                       invitations={i: v for i, v in self.invitations.items() if now < v.expires})

    def _need(self, name: str) -> Principal:
        check_name(name)
        p = self.principals.get(name)
        if p is None:
            near = did_you_mean(name, self.principals)
            add = (f" ('amux hub principal add {name}' adds it)" if near
                   else f"; add it with 'amux hub principal add {name}'")
            raise HubError(ErrorCode.NOT_FOUND, f"no principal {name!r}{near}{add}",
                           {"name": name}, next_step="Add the principal with 'amux hub principal add NAME', or "
                           "name one that 'amux hub principal list' shows.")
        return p

    # -- (de)serialisation -------------------------------------------------------

    def to_toml(self) -> dict[str, Any]:
        """The registry as the TOML document (``version``, ``principals``, ``aliases``, ``tokens``), stably ordered."""
        tokens: dict[str, Any] = {}
        for t in sorted(self.tokens.values(), key=lambda t: (t.created, t.id)):
            entry: dict[str, Any] = {"principal": t.principal, "sha256": t.sha256, "created": t.created}
            for key in ("expires", "binding", "revoked", "label"):
                if getattr(t, key) is not None:
                    entry[key] = getattr(t, key)
            tokens[t.id] = entry
        document: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "principals": {p.name: {"kind": p.kind, "created": p.created}
                           for p in sorted(self.principals.values(), key=lambda p: p.name)},
            "aliases": dict(sorted(self.aliases.items())),
            "tokens": tokens,
        }
        if self.teams:
            document["teams"] = {t.name: {"review": t.review, "created": t.created,
                                          "members": dict(sorted(t.members.items()))}
                                 for t in sorted(self.teams.values(), key=lambda t: t.name)}
        if self.invitations:
            invitations: dict[str, Any] = {}
            for i in sorted(self.invitations.values(), key=lambda i: (i.created, i.id)):
                entry = {"principal": i.principal, "sha256": i.sha256, "created": i.created, "expires": i.expires,
                         "token_ttl": i.token_ttl}
                for key in ("label", "used", "token", "revoked"):
                    if getattr(i, key) is not None:
                        entry[key] = getattr(i, key)
                invitations[i.id] = entry
            document["invitations"] = invitations
        return document

    @classmethod
    def from_toml(cls, raw: Mapping[str, Any]) -> Registry:
        """Validate a parsed file strictly; raises ``ValueError`` naming the first problem."""
        unknown = set(raw) - {"version", "principals", "aliases", "tokens", "teams", "invitations"}
        if unknown:
            raise ValueError(f"unknown top-level keys {sorted(unknown)}")
        if raw.get("version", FORMAT_VERSION) != FORMAT_VERSION:
            raise ValueError(f"format version {raw.get('version')!r} is not {FORMAT_VERSION}")
        principals: dict[str, Principal] = {}
        for name, entry in _table(raw, "principals").items():
            try:
                check_name(name)
            except HubError as exc:
                raise ValueError(exc.message) from None
            kind, created = entry.get("kind"), entry.get("created", 0)
            if kind not in KINDS or not _is_int(created) or set(entry) - {"kind", "created"}:
                raise ValueError(f"principal {name!r} needs kind = 'user'|'service' and an integer created")
            principals[name] = Principal(name, kind, created)
        aliases: dict[str, str] = {}
        for alias, name in _map(raw, "aliases").items():
            try:
                canonical = check_alias(alias)
            except HubError as exc:
                raise ValueError(exc.message) from None
            if canonical != alias or name not in principals:
                raise ValueError(f"alias {alias!r} must be canonical and name a principal in [principals]")
            aliases[alias] = name
        tokens: dict[str, Token] = {}
        for token_id, entry in _table(raw, "tokens").items():
            if not _TOKEN_ID.fullmatch(token_id) or set(entry) - {"principal", "sha256", "created", "expires",
                                                               "binding", "revoked", "label"}:
                raise ValueError(f"token {token_id[:40]!r} is malformed")
            principal, digest = entry.get("principal"), entry.get("sha256")
            created, expires = entry.get("created", 0), entry.get("expires")
            binding, revoked, label = entry.get("binding"), entry.get("revoked"), entry.get("label")
            if (principal not in principals or not _label_ok(label)
                    or not isinstance(digest, str) or not _SHA256.fullmatch(digest)
                    or not _is_int(created) or (expires is not None and not _is_int(expires))
                    or (revoked is not None and not _is_int(revoked))
                    or (binding is not None and not (isinstance(binding, str) and _BINDING.fullmatch(binding)))):
                raise ValueError(f"token {token_id!r} has a missing or invalid field (principal must be "
                                 "in [principals], sha256 64 hex digits, times integers)")
            tokens[token_id] = Token(token_id, principal, digest, created, expires, binding, revoked, label)
        teams: dict[str, Team] = {}
        for name, entry in _table(raw, "teams").items():
            if not _TEAM.fullmatch(name) or set(entry) - {"review", "created", "members"}:
                raise ValueError(f"team {name[:60]!r} is malformed (a name of lower-case letters, digits, '-' and "
                                 "'_'; keys review, created, members)")
            review, created, members = entry.get("review"), entry.get("created", 0), entry.get("members", {})
            if (review not in TEAM_REVIEW or not _is_int(created) or not isinstance(members, dict)
                    or any(m not in principals or r not in ROLES for m, r in members.items())):
                raise ValueError(f"team {name!r} needs review = 'off'|'agents'|'all', an integer created and "
                                 "members mapping principals in [principals] to 'reader'|'writer'|'maintainer'")
            teams[name] = Team(name, review, created, dict(members))
        return cls(principals, aliases, tokens, teams, _invitations(raw, principals))


def _label_ok(label: object) -> bool:
    return label is None or (isinstance(label, str) and 0 < len(label) <= MAX_LABEL_CHARS and label.isprintable())


def _invitations(raw: Mapping[str, Any], principals: Mapping[str, Principal]) -> dict[str, Invitation]:
    """The ``[invitations]`` table, validated; raises ``ValueError`` naming the first bad entry."""
    found: dict[str, Invitation] = {}
    for inv_id, entry in _table(raw, "invitations").items():
        keys = {"principal", "sha256", "created", "expires", "token_ttl", "label", "used", "token", "revoked"}
        ints = [entry.get(k) for k in ("created", "expires", "token_ttl")]  # required
        optional = [entry.get(k) for k in ("used", "revoked")]
        token = entry.get("token")
        if (not _TOKEN_ID.fullmatch(inv_id) or set(entry) - keys or entry.get("principal") not in principals
                or not isinstance(entry.get("sha256"), str) or not _SHA256.fullmatch(entry["sha256"])
                or not all(_is_int(v) for v in ints) or not all(v is None or _is_int(v) for v in optional)
                or not _label_ok(entry.get("label"))
                or (token is not None and not (isinstance(token, str) and _TOKEN_ID.fullmatch(token)))):
            raise ValueError(f"invitation {inv_id[:40]!r} is malformed (principal in [principals], sha256 64 hex "
                             "digits, created, expires and token_ttl integers)")
        found[inv_id] = Invitation(inv_id, entry["principal"], entry["sha256"], entry["created"], entry["expires"],
                                   entry["token_ttl"], entry.get("label"), entry.get("used"), token,
                                   entry.get("revoked"))
    return found


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _table(raw: Mapping[str, Any], key: str) -> dict[str, dict[str, Any]]:
    value = raw.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ValueError(f"[{key}] must be a table of tables")
    return value


def _map(raw: Mapping[str, Any], key: str) -> dict[str, str]:
    value = raw.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"[{key}] must map strings to principal names")
    return value


# -- the file ------------------------------------------------------------------


def registry_path(home: Path) -> Path:
    """``<home>/principals.toml``."""
    return home / REGISTRY_NAME


class RegistryFileError(HubError):
    """The registry file exists but cannot be used (unreadable, invalid, or unsafe permissions)."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(ErrorCode.BAD_REQUEST, f"{path} cannot be used: {why}", {"file": str(path)})


def _check_owner(path: Path, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise RegistryFileError(path, "not a regular file")
    if st.st_uid != os.geteuid():
        raise RegistryFileError(path, f"owned by uid {st.st_uid}, not by the Hub's user (uid {os.geteuid()})")
    if st.st_mode & 0o022:
        raise RegistryFileError(path, f"writable by other users (mode {st.st_mode & 0o777:04o}); chmod 600 it")


def read_registry(path: Path) -> tuple[Registry, tuple[int, ...] | None]:
    """Load the file (absent = empty registry) and the stat signature it was read at.

    Raises :class:`RegistryFileError` if it is unreadable, invalid TOML, fails
    validation, is not owned by this process's user or is writable by others.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return Registry(), None
    except OSError as exc:
        raise RegistryFileError(path, exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        _check_owner(path, st)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(16 * 1024 * 1024 + 1)
    finally:
        os.close(fd)
    if len(data) > 16 * 1024 * 1024:
        raise RegistryFileError(path, "larger than 16 MiB")
    try:
        registry = Registry.from_toml(tomllib.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError) as exc:
        raise RegistryFileError(path, str(exc)) from None
    return registry, signature_of(st)


def signature_of(st: os.stat_result) -> tuple[int, ...]:
    """What tells a changed file: an atomic replace always brings a new inode; edits in place change times/size."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def stat_signature(path: Path) -> tuple[int, ...] | None:
    """:func:`signature_of` the file at ``path`` (not following a symlink), None when it does not exist."""
    try:
        return signature_of(os.stat(path, follow_symlinks=False))
    except FileNotFoundError:
        return None


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    # A read-only or full home is a storage error (storage_read_only, ...: DESIGN.md §4.8), not a traceback.
    lock = home / LOCK_NAME
    with step("create directory", str(home)):
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    with step("open", str(lock)):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_registry(path: Path, registry: Registry) -> None:
    """Replace the file atomically and durably; mode 0600."""
    fsio.replace_file(str(path), tomli_w.dumps(registry.to_toml()).encode("utf-8"))


def modify(home: Path, change: Callable[[Registry, float], tuple[Registry, T]], *,
           clock: Callable[[], float] = time.time) -> T:
    """Apply ``change(registry, now)`` under the registry lock and store the result.

    Tokens that have expired are dropped on every write.  Returns what
    ``change`` returned beside the new registry.
    """
    path = registry_path(home)
    with _locked(home):
        current, _ = read_registry(path)
        now = clock()
        updated, value = change(current, now)
        write_registry(path, updated.pruned(now))
    return value


# -- the Hub's view ----------------------------------------------------------------


class RegistryWatcher:
    """The Hub's current view of the registry, re-read as soon as the file changes.

    ``changed()`` costs one ``stat``; ``reload()`` reads and validates the file
    (serialised by a lock, so an older read can never replace a newer one) and
    returns the snapshot it settled on.  A file that cannot be used makes
    every authentication fail closed until it is fixed (the previous snapshot
    is *not* kept, so a hand edit that revokes something can never be
    silently ignored).
    """

    def __init__(self, home: Path) -> None:
        self.path = registry_path(home)
        self._state: tuple[Registry, RegistryFileError | None] = (Registry(), None)
        self._signature: tuple[int, ...] | None | bool = False  # False: read at the next check
        self._lock = threading.Lock()

    def changed(self) -> bool:
        """True when the file differs from the one last read (one ``stat``)."""
        try:
            return stat_signature(self.path) != self._signature
        except OSError:
            return True

    def reload(self) -> Registry:
        """Read the file again if it changed since the last read; the current snapshot (or ``unauthorized``)."""
        with self._lock:
            if self.changed():
                try:
                    registry, sig = read_registry(self.path)
                except RegistryFileError as exc:
                    # Read it again at the next check: it may be fixed any moment.
                    self._state, self._signature = (Registry(), exc), False
                else:
                    self._state, self._signature = (registry, None), sig
            return self.current()

    def current(self) -> Registry:
        """The last snapshot read, or raise ``unauthorized`` (fail closed) if the file was unusable."""
        registry, error = self._state
        if error is not None:
            raise HubError(ErrorCode.UNAUTHORIZED,
                           f"the Hub cannot verify identities: {error.message}; fix or restore the file",
                           {"reason": "registry_invalid"},
                           next_step="The Hub's registry file (principals.toml) is unusable: tell the user; the "
                           "Hub's operator must fix or restore it (the message says what is wrong).")
        return registry
