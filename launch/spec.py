"""What a launch does, as plain data (DESIGN.md §10).

A :class:`LaunchSpec` is computed by :func:`launch.agents.plan` without any
I/O; ``amux launch`` (or a Runtime) executes it: create ``dirs``, write
``files``, start ``argv`` with the environment :meth:`LaunchSpec.environment`
gives (as ``run_as`` when set), wait, then remove ``cleanup``.  Everything
serialises to JSON with :meth:`LaunchSpec.to_json` and back with
:meth:`LaunchSpec.from_dict`; :func:`launch.runner.run` executes it.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class FileSpec:
    """A file to write before the agent starts.

    ``path`` is absolute; its bytes are ``content`` (UTF-8 text) or, when
    ``source`` names a file, a copy of that file's bytes (``content`` is then
    empty): an isolated launch copies the ``amux`` entry point this way.
    ``mode`` is its permission bits (e.g. ``0o700``); ``owner``/``group`` the
    uid/gid to ``chown`` it (and any directory created for it) to, ``None``
    for the launcher's own.
    """

    path: str
    content: str
    mode: int = 0o600
    owner: int | None = None
    group: int | None = None
    source: str | None = None


@dataclass(frozen=True)
class DirSpec:
    """A directory the agent needs, created (with ``mode``, owned by ``owner``/``group``) only when missing.

    An existing directory is left exactly as it is; a created one is not in
    ``cleanup`` unless the spec says so (e.g. an isolated user's ``~/.codex``
    stays: it is that user's own Codex home).
    """

    path: str
    mode: int = 0o700
    owner: int | None = None
    group: int | None = None


@dataclass(frozen=True)
class RunAs:
    """The account an isolated launch (``--as-user``) runs the agent as.

    ``uid``/``gid`` are numeric ids, ``groups`` the supplementary groups,
    ``name`` the account name (``None`` for a uid without one), ``home`` the
    home directory given to the agent, ``shell`` its login shell (``None``
    when unknown).
    """

    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    name: str | None = None
    home: str = ""
    shell: str | None = None


@dataclass(frozen=True)
class LaunchSpec:
    """One agent launch, as data.

    Fields:

    * ``agent``: ``claude``, ``codex`` or ``pi``.
    * ``argv``: the full command line, executable first.
    * ``env_set`` / ``env_unset``: environment changes for the launched process
      only (a key is never in both; ``env_unset`` lists every key the launch
      removes, whether or not the caller's environment has it).
    * ``env_inherit``: ``None`` to start from the launcher's whole environment,
      else the allow-list of names (``LC_*``-style patterns allowed) an isolated
      launch keeps from it; everything else is dropped.
    * ``dirs`` / ``files`` / ``cleanup``: directories to create when missing,
      files to write before, paths to remove after the run.
    * ``mcp_servers``: the MCP servers the agent is given, as data:
      ``{"amux": {"command", "args", "env"}}`` (plus ``env_vars``, names passed
      on from the environment, for Codex); ``{}`` without memory and for Pi.
    * ``system_prompt_append``: the text a Runtime passes to the Claude Agent
      SDK's ``systemPrompt.append`` (Claude and Pi: the merged append text; Codex:
      ``None``, its merged text is ``developer_instructions``).
    * ``developer_instructions``: Codex only, the merged text for
      ``thread/start``'s ``developerInstructions``.
    * ``binding``: the memory binding (``global`` / ``principal:<id>``) or ``None``.
    * ``memory``: whether memory tools and protocol are installed.
    * ``notices``: the one or two ``amux:`` lines to print on stderr.
    * ``session_id``, ``hub``: the launch session and the Hub address given to the agent.
    * ``run_as``: the account to run as (``--as-user``), else ``None``.
    * ``mcp_transport``: how Claude Code or Codex reaches the MCP tools:
      ``http`` (the Hub's own listener, ``mcp_servers.amux`` has ``type``,
      ``url`` and the headers with the token redacted) or ``relay`` (``amux
      mcp``); ``None`` without memory and for Pi (DESIGN.md §10).
    * ``token_id``: the delegated token issued for this launch, to revoke
      after the run (``amux hub token revoke ID``); ``None`` when none was.
    """

    agent: str
    argv: list[str]
    env_set: dict[str, str] = field(default_factory=dict)
    env_unset: list[str] = field(default_factory=list)
    env_inherit: list[str] | None = None
    dirs: list[DirSpec] = field(default_factory=list)
    files: list[FileSpec] = field(default_factory=list)
    cleanup: list[str] = field(default_factory=list)
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    system_prompt_append: str | None = None
    developer_instructions: str | None = None
    binding: str | None = None
    memory: bool = False
    notices: list[str] = field(default_factory=list)
    session_id: str | None = None
    hub: str | None = None
    run_as: RunAs | None = None
    mcp_transport: str | None = None
    token_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The spec as plain JSON-ready values (lists, dicts, str, int, bool, None)."""
        data = asdict(self)
        if self.run_as is not None:
            data["run_as"]["groups"] = list(self.run_as.groups)
        return data

    def to_json(self, *, indent: int | None = 2) -> str:
        """The spec as a JSON document (UTF-8 text, non-ASCII kept)."""
        return json.dumps(self.as_dict(), ensure_ascii=False, indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LaunchSpec:
        """The spec back from :meth:`as_dict` output (e.g. ``amux launch --print-spec``); unknown keys are ignored.

        Raises ``TypeError``/``KeyError`` for a document that is not a spec.
        """
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["dirs"] = [DirSpec(**d) for d in values.get("dirs") or []]
        values["files"] = [FileSpec(**f) for f in values.get("files") or []]
        if values.get("run_as") is not None:
            run_as = dict(values["run_as"])
            run_as["groups"] = tuple(run_as.get("groups") or ())
            values["run_as"] = RunAs(**run_as)
        return cls(**values)

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """The launched process's environment (a new dict).

        ``base`` (the launcher's environment) filtered by ``env_inherit`` when
        it is a list, minus ``env_unset``, plus ``env_set``.
        """
        allowed = self.env_inherit
        env = {k: v for k, v in base.items()
               if k not in self.env_unset and (allowed is None or inherits(k, allowed))}
        env.update(self.env_set)
        return env


def inherits(name: str, allowed: list[str]) -> bool:
    """Whether ``name`` matches the allow-list: an exact name or a ``PREFIX*`` pattern (case-sensitive)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in allowed)
