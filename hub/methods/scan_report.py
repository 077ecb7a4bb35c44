"""The ``scan`` report: which documents and stored versions hold credentials, and how to clean them up.

:func:`document_entries` and :func:`version_entries` check a scope's
documents and its history's stored versions (:func:`hub.methods.secrets.find_secrets`)
and describe each finding for a person: the redacted findings (never the
value) with their allow-list digests, the shell commands that clean it up
(each word :func:`shlex.quote` d, since a document path an agent chose is
hostile input) and ``advice`` for what no command can do.  :func:`report`
cuts the answer to its entry count and the response budget.  The dispatch
(``scan`` under the scope's lock) is :meth:`hub.methods.memory.MemoryMethods.call`'s;
the rules are DESIGN.md §16.5.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable
from typing import Any, Final

from amux_memory.hub.methods.secrets import Finding, find_secrets, rule_names, scrub
from amux_memory.hub.storage.history import Version
from amux_memory.hub.storage.store import revision_of
from amux_memory.protocol.limits import Limits
from amux_memory.protocol.messages import packed_size, response_room

Result = dict[str, Any]

SCAN_MAX_ENTRIES = 40
"""At most this many documents plus stored versions in one ``scan`` answer (it must fit the response budget)."""

SCAN_MAX_FINDINGS = 3
"""At most this many findings per document or version in a ``scan`` answer."""


DOCUMENT_ADVICE: Final = ("run the first command, remove the credential from doc.md (store where it lives "
                           "instead), then run the second; then scan --history for the stored versions")
"""The ``advice`` of a ``scan`` document entry: what to do between its two commands."""

PATH_ADVICE: Final = ("the file's name holds the credential: rename or delete it by hand in the memory folder "
                      "('amux memory list' shows it), then scan --history")
"""The ``advice`` of a ``scan`` entry whose path holds a credential (no command can name it without showing it)."""


VERSION_PATH_ADVICE: Final = ("the document's name holds the credential: erase its stored versions with "
                              "'amux memory purge --all PATH' ('amux memory log' shows the path)")
"""The ``advice`` of a ``scan`` version entry whose path holds a credential."""


def shell_command(words: list[str], path: str) -> str:
    """Shell-command text for a person to paste: ``amux WORDS... PATH``, each word :func:`shlex.quote` d and
    ``--`` before a path that starts with ``-`` (a document path an agent chose is hostile input: ``$(...)``,
    backticks, ``;`` and spaces stay inert, DESIGN.md §16.5).

    Not this installation's argv (that is ``tools.client.installation.amux_command``): the text names the
    ``amux`` command a person types.
    """
    tail = ["--", path] if path.startswith("-") else [path]
    return " ".join(shlex.quote(word) for word in ["amux", *words, *tail])


def clean_up_commands(path: str, revision: str) -> list[str]:
    """``scan``'s two commands for a document holding a credential: export it, then write the cleaned file."""
    return [shell_command(["memory", "export"], path) + " > doc.md",
            shell_command(["memory", "upsert", "--expected-revision", revision, "--file", "doc.md"], path)]


def purge_command(path: str, revision: str) -> str:
    """``scan``'s command that erases a stored version holding a credential."""
    return shell_command(["memory", "purge", "--revision", revision], path)


def scan_finding(finding: Finding) -> dict[str, Any]:
    """A ``scan`` finding: :meth:`Finding.wire` plus ``sha256``, the digest ``memory.secret_allow`` takes to let
    that exact value through (safe to show: it is a SHA-256 of a high-entropy value)."""
    return {**finding.wire(), "sha256": finding.sha256}


def path_findings(path: str) -> list[dict[str, Any]]:
    """The findings of a credential in ``path`` itself (placed by hand), at most :data:`SCAN_MAX_FINDINGS`,
    each with ``line`` 0 and ``"in": "path"``; ``[]`` when the path holds none."""
    return [{**f.wire(), "line": 0, "in": "path"}
            for f in find_secrets(path.encode("utf-8", "surrogatepass"))[:SCAN_MAX_FINDINGS]]


def document_entries(paths: Iterable[str], read: Callable[[str], bytes | None],
                     allowed: frozenset[str]) -> list[Result]:
    """``scan``'s ``documents``: one entry per document in ``paths`` (in that order) holding a credential.

    ``read`` returns a document's bytes (None: gone since the walk);
    ``allowed`` is ``memory.secret_allow``.  An entry is ``{path, revision,
    findings, commands, advice}``; a path holding a credential is shown
    redacted, with revision None and no command (none could name it without
    showing it, DESIGN.md §16.5).
    """
    documents: list[Result] = []
    for path in paths:
        in_path = path_findings(path)
        if in_path:  # placed by hand: the path is shown redacted, and no command can name it
            documents.append({"path": scrub(path), "revision": None, "findings": in_path,
                              "commands": [], "advice": PATH_ADVICE})
            continue
        data = read(path)
        found = [] if data is None else find_secrets(data, allowed)
        if found:
            rev = revision_of(data or b"")
            documents.append({"path": path, "revision": rev,
                              "findings": [scan_finding(f) for f in found[:SCAN_MAX_FINDINGS]],
                              "commands": clean_up_commands(path, rev), "advice": DOCUMENT_ADVICE})
    return documents


def version_entries(stored: Iterable[tuple[Version, bytes]], allowed: frozenset[str]) -> list[Result]:
    """``scan --history``'s ``versions``: one entry per stored version (``(version, bytes)``, in that order)
    holding a credential: ``{path, revision, time, action, findings, commands}`` with the ``purge`` command,
    or, for a path holding one, the path redacted, no command and ``advice`` (DESIGN.md §16.5)."""
    versions: list[Result] = []
    for v, body in stored:
        in_path = path_findings(v.path)
        if in_path:  # a hand-placed file's version, recorded as external: redacted, no command
            versions.append({"path": scrub(v.path), "revision": v.revision, "time": v.time,
                             "action": v.action, "findings": in_path,
                             "commands": [], "advice": VERSION_PATH_ADVICE})
            continue
        found = find_secrets(body, allowed)
        if found:
            versions.append({"path": v.path, "revision": v.revision, "time": v.time,
                             "action": v.action, "findings": [scan_finding(f) for f in found[:SCAN_MAX_FINDINGS]],
                             "commands": [purge_command(v.path, v.revision)]})
    return versions


def report(documents: list[Result], versions: list[Result], limits: Limits) -> Result:
    """The ``scan`` answer ``{documents, versions, truncated, rules}``: at most :data:`SCAN_MAX_ENTRIES`
    entries (documents first), then versions and documents dropped from the end until it fits the response
    budget (``limits.response_max_bytes`` less the envelope); ``truncated`` says entries were left out."""
    truncated = False
    if len(documents) + len(versions) > SCAN_MAX_ENTRIES:
        truncated = True
        documents = documents[:SCAN_MAX_ENTRIES]
        versions = versions[:max(0, SCAN_MAX_ENTRIES - len(documents))]
    result: Result = {"documents": documents, "versions": versions, "truncated": truncated,
                      "rules": rule_names()}
    budget = response_room(limits)
    while packed_size(result) > budget and (result["versions"] or result["documents"]):
        (result["versions"] or result["documents"]).pop()
        result["truncated"] = True
    return result
