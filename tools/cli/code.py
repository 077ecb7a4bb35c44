"""``amux memory project`` and ``amux memory cite``: a repository's memory path, and citations of its code
(DESIGN.md §24).  Both ask only ``git`` in the work tree, never the Hub."""

from __future__ import annotations

from pathlib import Path

from amux_memory.protocol.errors import HubError
from amux_memory.tools.cli.options import AsJson
from amux_memory.tools.cli.output.contract import emit, fail, human_output


def project(directory: Path = Path("."), /, *, as_json: AsJson = False) -> int:
    """Print the identity and memory path of the git repository DIR is in (default: here).

    The identity is the remote URL normalized (origin, else the first remote; scheme, user, port, .git and the
    host's case removed: git@github.com:acme/web.git and https://github.com/acme/web are both
    github.com/acme/web), or, with no remote, the root commit id. The project's notes live under
    projects/<identity>/ in your scope and in every team mount (@TEAM/projects/<identity>/); amux launch names
    that path to the agent.

    In a terminal: the path, then the identity and where it came from. Piped or with --json: {"root",
    "identity", "path", "source" (remote or root_commit), "remote", "url"}. Outside a repository: not_found,
    saying why.

    Parameters
    ----------
    directory
        A directory in the work tree (default: the current one).
    """
    from amux_memory.tools.client.inert import inert
    from amux_memory.tools.client.project import find_project

    try:
        found = find_project(directory)
    except HubError as exc:
        return fail(exc, as_json=as_json)
    if not human_output(as_json):
        emit(found.as_dict())
        return 0
    origin = (f"remote {inert(found.remote)} ({inert(found.url)})" if found.source == "remote"
              else "the root commit (the repository has no remote)")
    print(f"{inert(found.path)}\n  identity {inert(found.identity)}, from {origin}\n"
          f"  work tree {inert(str(found.root))}")
    return 0
