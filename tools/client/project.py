"""A git repository's identity and its memory path, derived beside the work tree (DESIGN.md §24).

The identity is the repository's remote URL normalized (``origin``, else the first remote by name; scheme, user,
port, ``.git`` and the host's case removed: ``git@github.com:acme/web.git`` and ``https://GitHub.com/acme/web``
are both ``github.com/acme/web``), or, for a repository with no remote (or only remotes on this machine's file
system), its root commit id.  Its notes live under ``projects/<identity>/`` in any scope or mount
(:func:`project_path`).  Only ``git`` is asked (:func:`git`), with the work tree's own configuration; the Hub
never sees a work tree.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.paths import normalize_prefix

PROJECTS_DIR = "projects"
"""The folder of a scope (or mount) that holds one sub-folder per project identity."""

GIT_TIMEOUT_SECONDS = 30.0
"""The longest one ``git`` command may run before it counts as failed."""

_SCP = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^/:]+):(?P<path>(?!/).*)$")
"""``user@host:path`` (git's scp-like syntax; ``host:path`` too, but never ``host:/abs`` or a Windows drive)."""
_URL = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://(?:[^@/]*@)?(?P<host>\[[^\]]*\]|[^/:]*)(?::\d*)?(?P<path>/.*)?$",
                  re.IGNORECASE)
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/]*)@(.*)$", re.DOTALL)
_UNSAFE = re.compile(r"[^A-Za-z0-9._~-]+")


class NotARepository(HubError):
    """``DIR`` is not in a git work tree (or git cannot tell): ``message`` says why, for a person (``message`` and
    ``next_step`` given for a case the general wording would contradict: a file, a bare or an empty repository)."""

    def __init__(self, directory: str, why: str, *, message: str = "", next_step: str = "") -> None:
        super().__init__(ErrorCode.NOT_FOUND, message or f"{directory} is not in a git repository: {why}",
                         {"directory": directory, "reason": why},
                         next_step=next_step or "Run it inside a git work tree, or name one: 'amux memory project "
                         "DIR'.")


@dataclass(frozen=True)
class Project:
    """A work tree's identity: ``root`` (the work tree's top folder), ``identity``, where it came from
    (``source``: ``remote`` or ``root_commit``), the remote's name and URL when from a remote (without its
    credential: :func:`without_credentials`)."""

    root: Path
    identity: str
    source: str
    remote: str = ""
    url: str = ""

    @property
    def path(self) -> str:
        """The memory path of this project's notes: ``projects/<identity>/``."""
        return project_path(self.identity)

    def as_dict(self) -> dict[str, str]:
        """The JSON of ``amux memory project --json``."""
        return {"root": str(self.root), "identity": self.identity, "path": self.path, "source": self.source,
                "remote": self.remote, "url": self.url}


def git(root: Path | str, args: Sequence[str], *, input: bytes | None = None,
        timeout: float = GIT_TIMEOUT_SECONDS, env: Mapping[str, str] | None = None
        ) -> subprocess.CompletedProcess[bytes]:
    """Run ``git -C root ARGS`` without a pager, prompts or colour, with ``env`` added to the environment; raises
    :class:`HubError` (``unavailable``) when git is missing or runs past ``timeout``.  The caller reads the return
    code."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0",
           "GIT_LITERAL_PATHSPECS": "1", **(env or {})}
    try:
        return subprocess.run(["git", "-C", str(root), "-c", "core.quotePath=false", *args], input=input,
                              capture_output=True, timeout=timeout, env=env, check=False)
    except FileNotFoundError:
        raise HubError(ErrorCode.UNAVAILABLE, "git is not installed (or not on PATH)",
                       next_step="Install git (or put it on PATH), then run the command again.") from None
    except subprocess.TimeoutExpired:
        raise HubError(ErrorCode.UNAVAILABLE, f"git {' '.join(args[:2])} ran past {timeout:g} s in {root}",
                       {"timeout": timeout}, next_step="Run 'git status' in that work tree to see what git is slow or "
                       "stuck on, then run the command again.") from None


def safe_segments(text: str) -> str:
    """``text`` as memory path segments: each run of characters other than ``A-Za-z0-9._~-`` becomes ``-``;
    empty, dot-only segments are dropped."""
    segments = [_UNSAFE.sub("-", seg).strip("-") for seg in text.split("/")]
    return "/".join(seg for seg in segments if seg.strip(".") and seg.strip("-"))


def normalize_remote(url: str) -> str:
    """A remote URL as an identity: ``host/path``, the host lower-case, no scheme, user, port, ``.git`` or trailing
    ``/``; ``""`` for a URL of this machine's file system (a path, ``file://``), which names no shared repository.
    """
    url = url.strip()
    host, path = "", ""
    match = _URL.match(url)
    if match:
        if match["scheme"].lower() == "file":
            return ""
        host, path = match["host"], match["path"] or ""
    else:
        scp = _SCP.match(url)
        if scp is None or "/" in scp["host"] or scp["host"] in ("", "."):
            return ""  # a local path (/srv/git/web.git, ../web)
        host, path = scp["host"], scp["path"]
    path = path.strip("/")
    if path.lower().endswith(".git"):
        path = path[:-4].rstrip("/")
    identity = safe_segments(f"{host.strip('[]').lower()}/{path}")
    return identity if "/" in identity else ""


def without_credentials(url: str) -> str:
    """A remote's URL as it may be shown: in a URL with a scheme, a password becomes ``***`` and so does an http(s)
    user name (where a token goes: ``https://TOKEN@host/...``); an ssh user name (``git@``), an scp-like
    address and a path are unchanged."""
    match = _USERINFO.match(url)
    if match is None:
        return url
    scheme, user, rest = match.groups()
    if ":" in user:
        user = user.partition(":")[0] + ":***"
    elif scheme.lower().startswith("http"):
        user = "***"
    return f"{scheme}{user}@{rest}"


def project_path(identity: str) -> str:
    """``projects/<identity>/``, the folder of a project's notes in any scope or mount."""
    return f"{PROJECTS_DIR}/{identity}/"


def work_tree_root(directory: Path | str) -> Path:
    """The top folder of the work tree ``directory`` is in; raises :class:`NotARepository` saying why not."""
    shown = str(directory)
    if Path(directory).exists() and not Path(directory).is_dir():
        parent = Path(directory).parent
        raise NotARepository(shown, "not a directory", message=f"{shown} is a file, not a directory",
                             next_step=f"Name the folder it is in: amux memory project {parent}")
    if not Path(directory).is_dir():
        raise NotARepository(shown, "no such directory")
    done = git(directory, ["rev-parse", "--show-toplevel"])
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        text = (why[-1] if why else "git rev-parse failed").removeprefix("fatal: ")
        if "must be run in a work tree" in text:
            raise NotARepository(shown, text, message=f"{shown} is a bare repository: it has no work tree, whose "
                                 "files a citation names", next_step="Run it in a clone or a worktree of it (git "
                                 "worktree add DIR), or name one: 'amux memory project DIR'.")
        raise NotARepository(shown, text)
    return Path(done.stdout.decode("utf-8", "surrogateescape").strip())


def find_project(directory: Path | str = ".") -> Project:
    """The :class:`Project` of the work tree ``directory`` is in.  Raises :class:`NotARepository` outside a work
    tree, or in a repository with neither a remote nor a commit (nothing names it yet)."""
    root = work_tree_root(directory)
    names = git(root, ["remote"]).stdout.decode("utf-8", "replace").split()
    ordered = (["origin"] if "origin" in names else []) + sorted(n for n in names if n != "origin")
    for name in ordered:
        url = git(root, ["remote", "get-url", name]).stdout.decode("utf-8", "replace").strip()
        identity = normalize_remote(url)
        if identity and checked(identity):
            return Project(root=root, identity=identity, source="remote", remote=name, url=without_credentials(url))
    # The root of HEAD's first-parent line: merging an unrelated history later (a second parent) keeps the identity.
    roots = git(root, ["rev-list", "--first-parent", "--max-parents=0", "HEAD"])
    commits = roots.stdout.decode().split() if roots.returncode == 0 else []
    if not commits:
        raise NotARepository(str(directory), "the repository has no remote and no commit yet, so nothing names it; "
                             "commit once or add a remote", message=f"the repository of {directory} has no remote and "
                             "no commit yet, so nothing names it", next_step="Commit once, or add its remote (git "
                             "remote add origin URL), then run the command again.")
    return Project(root=root, identity=commits[0], source="root_commit")


def checked(identity: str) -> bool:
    """Whether ``projects/<identity>/`` is a valid memory path prefix (DESIGN.md §4.2)."""
    try:
        normalize_prefix(project_path(identity))
    except HubError:
        return False
    return True
