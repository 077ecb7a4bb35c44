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
    projects/IDENTITY/ in your scope and in every team mount (@TEAM/projects/IDENTITY/); amux launch names
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
              else "the root commit (no remote names a shared repository: it has none, or only paths on this "
              "machine)")
    print(f"{inert(found.path)}\n  identity {inert(found.identity)}, from {origin}\n"
          f"  work tree {inert(str(found.root))}")
    return 0


def cite(location: str, /, *, as_json: AsJson = False) -> int:
    """Print the citation of a file or of lines of it at HEAD, for a note: PATH#LSTART-LEND@COMMIT.

    LOCATION is PATH (the whole file: PATH@COMMIT), PATH:N or PATH:START-END, PATH relative to the current
    directory; the citation's path is relative to the repository's root and COMMIT is HEAD's short id. Put it
    in the note beside what the note says about that code; 'amux memory health --repo .' then tells when those
    lines change, move or go.

    When those lines have uncommitted changes it warns on stderr (the citation names HEAD's lines: commit,
    then cite again); uncommitted lines above them only shift the numbers, and the citation gives HEAD's.

    In a terminal: the citation alone. Piped or with --json: {"citation", "path", "start", "end", "commit",
    "root", "warning"}. A file HEAD does not hold, or lines past its end: not_found. What no note could check:
    bad_request (a directory; a file of a submodule, cited from there; a path with a blank, quote, bracket, '#',
    '@', '|' or '*', which a note would read only in part).

    Parameters
    ----------
    location
        PATH, PATH:N or PATH:START-END (1-based, inclusive).
    """
    from amux_memory.tools.cli.output.contract import say
    from amux_memory.tools.client.cite import cite as make_citation
    from amux_memory.tools.client.inert import inert

    try:
        found = make_citation(location)
    except HubError as exc:
        return fail(exc, as_json=as_json)
    if found["warning"]:
        say(f"warning: {found['warning']}")
    if human_output(as_json):
        print(inert(found["citation"]))
    else:
        emit(found)
    return 0
