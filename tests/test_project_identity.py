"""A repository's identity and memory path (DESIGN.md §24): ``amux memory project``, the launch's project line,
and typed ``project`` topics filed under that path.

Real git repositories in temporary folders; the identity tests run the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from amux_memory.protocol.agent_protocol import project_sentence, render
from amux_memory.tools.client.project import normalize_remote
from tests.conftest import HubProcess, amux_argv


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` (fixed author and dates) and return its stdout."""
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_AUTHOR_DATE": "1700000000 +0000",
           "GIT_COMMITTER_DATE": "1700000000 +0000", "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def repo(path: Path, remote: str = "", text: str = "hello\n") -> Path:
    """A repository at ``path`` with one commit of README and ``remote`` as ``origin`` (none when empty)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text(text)
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "first")
    if remote:
        git(path, "remote", "add", "origin", remote)
    return path


def project_of(hub: HubProcess, directory: Path) -> dict[str, str]:
    r = hub.cli("memory", "project", str(directory), "--json")
    assert r.returncode == 0, r.stderr
    answer: dict[str, str] = json.loads(r.stdout)
    return answer


@pytest.mark.parametrize(("url", "identity"), [
    ("git@github.com:acme/web.git", "github.com/acme/web"),
    ("https://github.com/acme/web", "github.com/acme/web"),
    ("https://user:secret@GitHub.COM:443/acme/web.git/", "github.com/acme/web"),
    ("ssh://git@github.com:22/acme/web.git", "github.com/acme/web"),
    ("git://example.org/Group/Sub/Web", "example.org/Group/Sub/Web"),
    ("github.com:acme/web", "github.com/acme/web"),
    ("/srv/git/web.git", ""),
    ("file:///srv/git/web.git", ""),
    ("../web", ""),
    ("https://example.org/a b/c?x", "example.org/a-b/c-x"),
])
def test_remote_urls_normalize_to_host_and_path(url: str, identity: str) -> None:
    """Scheme, user, port, ``.git`` and the host's case go; a path on this machine names no shared repository."""
    assert normalize_remote(url) == identity


def test_two_clones_share_a_path_two_webs_do_not_and_no_remote_is_the_root_commit(hub: HubProcess,
                                                                                  tmp_path: Path) -> None:
    """The issue's identity cases through the real CLI: clones at different paths with ``git@`` and ``https://``
    remotes get one path; two repositories named ``web`` with different remotes get two; a repository without a
    remote gets its root commit, from any folder inside it."""
    one = repo(tmp_path / "a" / "web", "git@github.com:acme/web.git")
    two = repo(tmp_path / "elsewhere" / "clone", "https://github.com/acme/web")
    other = repo(tmp_path / "b" / "web", "git@gitlab.example.org:other/web.git")
    local = repo(tmp_path / "local" / "web")
    (local / "sub").mkdir()
    first, second = project_of(hub, one), project_of(hub, two / ".")
    assert first["path"] == second["path"] == "projects/github.com/acme/web/"
    assert first["source"] == "remote" and first["remote"] == "origin"
    assert project_of(hub, other)["path"] == "projects/gitlab.example.org/other/web/"
    root = git(local, "rev-list", "--max-parents=0", "HEAD").strip()
    got = project_of(hub, local / "sub")
    assert got["identity"] == root and got["path"] == f"projects/{root}/" and got["source"] == "root_commit"
    assert got["root"] == str(local)
    # Merging an unrelated history (whose root may sort first) keeps the identity: HEAD's first-parent root.
    for n in range(16):
        git(local, "checkout", "-q", "--orphan", f"vendored{n}")
        git(local, "commit", "-q", "--allow-empty", "-m", f"vendored {n}")
        if git(local, "rev-parse", "HEAD").strip() < root:
            break
    git(local, "checkout", "-q", "main")
    git(local, "merge", "-q", "--allow-unrelated-histories", f"vendored{n}", "-m", "merge vendored")
    assert min(git(local, "rev-list", "--max-parents=0", "HEAD").split()) < root  # the old rule's pick changes
    assert project_of(hub, local)["identity"] == root


def test_a_remote_other_than_origin_and_a_folder_outside_a_repository(hub: HubProcess, tmp_path: Path) -> None:
    """Without ``origin`` the first remote by name counts; outside a work tree the command says why (not_found)."""
    r = repo(tmp_path / "r")
    git(r, "remote", "add", "zeta", "https://example.org/z/r")
    git(r, "remote", "add", "upstream", "https://example.org/u/r.git")
    assert project_of(hub, r)["identity"] == "example.org/u/r"
    plain = tmp_path / "plain"
    plain.mkdir()
    out = hub.cli("memory", "project", str(plain), "--json")
    assert out.returncode == 4
    error = json.loads(out.stdout)["error"]
    assert error["code"] == "not_found" and "not a git repository" in error["message"]
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert "no remote and no commit" in json.loads(hub.cli("memory", "project", str(empty)).stdout)["error"]["message"]


def launch_prompt(hub: HubProcess, cwd: Path) -> str:
    """The instructions ``amux launch --print-spec claude`` gives the agent when run in ``cwd``."""
    done = subprocess.run([*amux_argv(), "launch", "--print-spec", "claude", "-p", "hi"], cwd=cwd,
                          env={**hub.env, "AMUX_LAUNCH_CLAUDE": "/nonexistent/claude"}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    argv: list[str] = json.loads(done.stdout)["argv"]
    return argv[argv.index("--append-system-prompt") + 1]


def test_launch_adds_one_stable_line_in_a_work_tree_and_nothing_outside(hub: HubProcess, tmp_path: Path) -> None:
    """In a work tree the protocol is followed by the one project line naming its path (the protocol itself
    unchanged, the line the same on every launch); outside a repository the instructions are the protocol alone."""
    web = repo(tmp_path / "web", "git@github.com:acme/web.git")
    (web / "deep").mkdir()
    inside = launch_prompt(hub, web / "deep")
    assert inside == render("mcp") + "- " + project_sentence("projects/github.com/acme/web/") + "\n"
    assert inside.startswith(render("mcp"))
    assert launch_prompt(hub, web) == inside
    outside = tmp_path / "outside"
    outside.mkdir()
    assert launch_prompt(hub, outside) == render("mcp")


def test_the_project_line_names_only_a_project_path() -> None:
    """The line is built from a path only when it is ``projects/<identity>/`` in safe characters; with a team it
    says the same path holds the team's notes in its mount."""
    assert project_sentence("projects/github.com/acme/web/") == (
        "Notes about the repository you work in go under projects/github.com/acme/web/.")
    assert "@TEAM/projects/x/" in project_sentence("projects/x/", team=True)
    for bad in ("projects/../x/", "projects/x", "notes/x/", "projects/a b/", "projects/x/\nIgnore this./"):
        assert project_sentence(bad) == ""
    mounts = [{"mount": "@web/", "role": "writer"}]
    text = render("cli", mounts, "projects/x/")
    assert text.endswith("@TEAM/projects/x/).\n") and text.count("\n- ") == render("cli").count("\n- ") + 2


def test_a_typed_project_topic_is_filed_under_its_repositorys_path(hub: HubProcess, tmp_path: Path) -> None:
    """``amux memory new project NAME --repo DIR`` writes ``projects/<identity>/NAME.md`` with ``project:
    <identity>``; the index lists it under ``project`` and lint finds no error; another type refuses --repo."""
    web = repo(tmp_path / "web", "https://github.com/acme/web.git")
    r = hub.cli("memory", "new", "project", "deploy-web", "--description", "Deploy web with make deploy-web",
                "--tags", "deploy", "--repo", str(web), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["created"] == "projects/github.com/acme/web/deploy-web.md"
    text = hub.cli("memory", "export", "projects/github.com/acme/web/deploy-web.md").stdout.decode()
    assert "\ntype: project\nproject: github.com/acme/web\n" in text
    index = hub.cli("memory", "export", "index.md").stdout.decode()
    assert "## project (1/20)\n- [deploy-web](projects/github.com/acme/web/deploy-web.md)" in index
    lint = json.loads(hub.cli("memory", "lint", "--json").stdout)
    assert lint["errors"] == 0 and not [p for p in lint["problems"] if p["code"] == "unknown_field"], lint
    assert hub.cli("memory", "index", "--check").returncode == 0
    refused = hub.cli("memory", "new", "user", "x", "--description", "d", "--tags", "a", "--repo", str(web),
                      "--json")
    assert refused.returncode != 0 and json.loads(refused.stdout)["error"]["data"]["field"] == "repo"


@pytest.mark.parametrize(("command", "expected"), [
    (["memory", "project"], ["projects/IDENTITY/ in your scope", "@TEAM/projects/IDENTITY/"]),
    (["memory", "health"], ["notes under projects/IDENTITY/", "(projects/IDENTITY/ in your scope", "lint_CODE for"]),
    (["memory", "new"], ["projects/IDENTITY/NAME.md"]),
])
def test_help_shows_the_project_path_s_placeholder(command: list[str], expected: list[str]) -> None:
    """The help's renderer drops ``<word>`` as markup (``projects/<identity>/`` read ``projects//``): the
    placeholders are written as the other options' are, in capitals."""
    proc = subprocess.run([*amux_argv(), *command, "--help"], capture_output=True, timeout=60,
                          env={**os.environ, "COLUMNS": "400"})
    text = " ".join(proc.stdout.decode().split())
    assert proc.returncode == 0 and "projects//" not in text, text
    for words in expected:
        assert words in text, text


@pytest.mark.parametrize(("remote", "shown"), [
    ("https://x-access-token:ghp_S3CRETS3CRETS3CRET@github.com/acme/web.git",
     "https://x-access-token:***@github.com/acme/web.git"),
    ("https://ghp_S3CRETS3CRETS3CRET@github.com/acme/web", "https://***@github.com/acme/web"),
    ("ssh://git@github.com:22/acme/web.git", "ssh://git@github.com:22/acme/web.git"),
    ("git@github.com:acme/web.git", "git@github.com:acme/web.git"),
])
def test_project_shows_a_remote_without_its_credential(tmp_path: Path, remote: str, shown: str) -> None:
    """A token in the remote's URL (``https://TOKEN@host/...``, ``https://user:TOKEN@host/...``) was printed by
    ``amux memory project``, in the terminal and in its JSON; the identity never held it, and the URL shown now
    does not either (a user name for ssh stays)."""
    web = repo(tmp_path / "web", remote)
    for extra in (["--json"], []):
        done = subprocess.run([*amux_argv(), "memory", "project", str(web), *extra], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0 and "S3CRET" not in done.stdout + done.stderr, done.stdout
    answer = json.loads(done.stdout)
    assert answer["url"] == shown and answer["identity"] == "github.com/acme/web"


def test_a_repository_nothing_names_yet_a_bare_one_and_a_file_are_told_apart(tmp_path: Path) -> None:
    """They all read '... is not in a git repository: ...' with the next step 'run it inside a git work tree':
    for an empty repository (it is one; it needs a commit or a remote), a bare one (it has no work tree) and a
    file (it exists; it is not a directory) that contradicted the message or sent the person nowhere."""
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    bare = tmp_path / "bare.git"
    bare.mkdir()
    git(bare, "init", "-q", "--bare")
    web = repo(tmp_path / "web")
    cases = {empty: ("has no remote and no commit yet", "git remote add origin"),
             bare: ("bare repository", "git worktree add"),
             web / "README": ("is a file, not a directory", f"amux memory project {web}")}
    for directory, (said, step) in cases.items():
        done = subprocess.run([*amux_argv(), "memory", "project", str(directory), "--json"], capture_output=True,
                              text=True, timeout=60)
        error = json.loads(done.stdout)["error"]
        assert done.returncode == 4 and said in error["message"] and step in error["next_step"], error
        assert "is not in a git repository" not in error["message"], error


def test_a_remote_that_is_a_path_is_not_called_no_remote(tmp_path: Path) -> None:
    """A clone of a folder on this machine has a remote, a path, which names no shared repository: the identity is
    the root commit, and the terminal said 'the repository has no remote' of a repository that has one."""
    from tests.terminal import run_in_terminal

    web = repo(tmp_path / "web")
    git(tmp_path, "clone", "-q", str(web), "clone")
    shown = run_in_terminal([*amux_argv(), "memory", "project", str(tmp_path / "clone")],
                            env={**os.environ, "TERM": "dumb"})
    assert shown.returncode == 0 and "from the root commit" in shown.plain, shown.plain
    assert "has no remote" not in shown.plain and "no remote names a shared repository" in shown.plain, shown.plain
