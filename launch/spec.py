"""What a launch does, as plain data (issue #6, design record §5).

A :class:`LaunchSpec` is computed by :func:`launch.agents.plan` without any
I/O; ``amux launch`` (or a Runtime) executes it: write ``files``, start
``argv`` with the inherited environment minus ``env_unset`` plus
``env_set`` (as ``run_as`` when set), wait, then remove ``cleanup``.
Everything serialises to JSON with :meth:`LaunchSpec.to_json`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class FileSpec:
    """A file to write before the agent starts.

    ``path`` is absolute; ``content`` is its UTF-8 text; ``mode`` its
    permission bits (e.g. ``0o700``); ``owner`` the uid to ``chown`` it (and
    any directory created for it) to, ``None`` for the launcher's own.
    """

    path: str
    content: str
    mode: int = 0o600
    owner: int | None = None


@dataclass(frozen=True)
class RunAs:
    """The account an isolated launch (``--as-user``) runs the agent as.

    ``uid``/``gid`` are numeric ids, ``groups`` the supplementary groups,
    ``name`` the account name (``None`` for a uid without one), ``home`` the
    home directory given to the agent.
    """

    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    name: str | None = None
    home: str = ""


@dataclass(frozen=True)
class LaunchSpec:
    """One agent launch, as data.

    Fields:

    * ``agent``: ``claude``, ``codex`` or ``pi``.
    * ``argv``: the full command line, executable first.
    * ``env_set`` / ``env_unset``: environment changes for the launched process
      only (a key is never in both).
    * ``files`` / ``cleanup``: files to write before, paths to remove after the run.
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
    """

    agent: str
    argv: list[str]
    env_set: dict[str, str] = field(default_factory=dict)
    env_unset: list[str] = field(default_factory=list)
    files: list[FileSpec] = field(default_factory=list)
    cleanup: list[str] = field(default_factory=list)
    system_prompt_append: str | None = None
    developer_instructions: str | None = None
    binding: str | None = None
    memory: bool = False
    notices: list[str] = field(default_factory=list)
    session_id: str | None = None
    hub: str | None = None
    run_as: RunAs | None = None

    def as_dict(self) -> dict[str, Any]:
        """The spec as plain JSON-ready values (lists, dicts, str, int, bool, None)."""
        data = asdict(self)
        if self.run_as is not None:
            data["run_as"]["groups"] = list(self.run_as.groups)
        return data

    def to_json(self, *, indent: int | None = 2) -> str:
        """The spec as a JSON document (UTF-8 text, non-ASCII kept)."""
        return json.dumps(self.as_dict(), ensure_ascii=False, indent=indent)

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        """The launched process's environment: ``base`` minus ``env_unset`` plus ``env_set`` (a new dict)."""
        env = {k: v for k, v in base.items() if k not in self.env_unset}
        env.update(self.env_set)
        return env
