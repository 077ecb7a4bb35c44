"""The Hub's syscalls for one upsert, recorded with strace: write → fsync(file) → rename → fsync(dir),
and the parent of every directory a first write creates (the scope directory among them) fsynced before
the answer (DESIGN.md §4.5).

Needs ``strace`` (installed by .ci/run); skips outside CI when it is missing.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.conftest import amux_argv
from tests.strace_hub import need_strace, parse_trace, traced_hub


def test_upsert_syscall_order(tmp_path: Path) -> None:
    home, lines, _ = traced_hub(tmp_path, [{"path": "topics/durable.md", "content": b"# kept\n",
                                              "expected_revision": "absent"}])
    events: list[tuple[str, str]] = []
    tmp_fd = dir_fd = None
    for body in lines:
        m = re.match(r'openat\(.*"(\.[0-9a-f]+\.amux-tmp)", O_WRONLY\|O_CREAT\|O_EXCL.*\) = (\d+)', body)
        if m:
            tmp_fd = m.group(2)
            events.append(("open-temp", tmp_fd))
            continue
        if tmp_fd is None:
            continue
        if re.match(rf"write\({tmp_fd}, ", body):
            events.append(("write", tmp_fd))
        elif re.match(rf"f(data)?sync\({tmp_fd}\)", body) and dir_fd is None:
            events.append(("fsync-file", tmp_fd))
        m = re.match(r'rename(at2?)?\((\d+), "\.[0-9a-f]+\.amux-tmp", \d+, "durable\.md"', body)
        if m:
            dir_fd = m.group(2)
            events.append(("rename", dir_fd))
            continue
        if dir_fd is not None and re.match(rf"fsync\({dir_fd}\)", body):
            events.append(("fsync-dir", dir_fd))
            break
    kinds = [e for e, _ in events]
    assert kinds[:1] == ["open-temp"], lines[-40:]
    order = [kinds.index(k) for k in ("write", "fsync-file", "rename", "fsync-dir")]
    assert order == sorted(order), kinds
    assert (home / "memory" / "global" / "topics" / "durable.md").read_bytes() == b"# kept\n"


def _new_directories(lines: list[str], within: str) -> list[tuple[int, str]]:
    """``(line number, real path)`` of each directory a ``strace -y`` trace shows made at or under ``within``."""
    made: list[tuple[int, str]] = []
    for n, body in enumerate(lines):
        m = re.match(r'mkdirat\((-?\d+|AT_FDCWD)<([^>]*)>, "([^"]+)", [0-7]+\) = 0', body)
        m2 = re.match(r'mkdir\("([^"]+)", [0-7]+\) = 0', body)
        if m:
            made.append((n, os.path.realpath(os.path.join(m.group(2), m.group(3)))))
        elif m2:
            made.append((n, os.path.realpath(m2.group(1))))
    return [(n, p) for n, p in made if p == within or p.startswith(within + os.sep)]


def _assert_parents_fsynced(lines: list[str], made: list[tuple[int, str]], answered: int) -> None:
    """Each new directory's parent is fsynced after the mkdir and before line ``answered`` (DESIGN.md §4.5)."""
    for n, path in made:
        parent = os.path.dirname(path)
        fsynced = [k for k, body in enumerate(lines)
                   if n < k < answered and re.match(rf"f(data)?sync\(\d+<{re.escape(parent)}>\)\s*= 0", body)]
        assert fsynced, f"{parent} (parent of the new {path}) was never fsynced before the answer:\n" + \
            "\n".join(lines[n:answered + 1])


def test_first_write_into_a_new_scope_fsyncs_every_new_directory_parent(tmp_path: Path) -> None:
    """Under ``isolation = "user"`` the first upsert creates ``users/<key>/`` (and here ``topics/`` too), after
    the Hub made ``memory/``, ``global/`` and ``users/`` at start-up: each mkdir is followed by an fsync of the
    directory it was made in, before the answer."""
    home, lines, answers = traced_hub(
        tmp_path, [{"path": "topics/first.md", "content": b"# first\n", "expected_revision": "absent"}],
        isolation="user", syscalls="openat,fsync,fdatasync,rename,renameat,renameat2,mkdirat,mkdir,sendto,sendmsg",
        decode_fds=True)
    assert answers and answers[0]["revision"]
    memory = os.path.realpath(home / "memory")
    made = _new_directories(lines, memory)
    users = os.path.join(memory, "users")
    made_paths = [p for _, p in made]
    assert {memory, users} <= set(made_paths), made
    assert any(os.path.dirname(p) == users for p in made_paths), (made, lines[-60:])
    topics = next(p for p in made_paths if p.endswith(os.sep + "topics"))
    renamed = next(n for n, body in enumerate(lines) if re.match(r'rename(at2?)?\(.*"first\.md"', body))
    # The answer is the first frame sent after the rename (trio's one-byte wake-up writes are not frames).
    answered = next((n for n, body in enumerate(lines) if n > renamed
                     and re.match(r'send(to|msg)\(\d+<socket:\[\d+\]>, "\\0\\0', body)), len(lines))
    _assert_parents_fsynced(lines, made, answered)
    assert Path(topics, "first.md").read_bytes() == b"# first\n"


def test_first_write_into_a_project_library_fsyncs_every_new_directory_parent(tmp_path: Path) -> None:
    """``amux memory new ... --project P`` on a project without ``.agent/``: ``.agent/``, ``.agent/memory/`` and
    ``reference/`` are made, and each one's parent fsynced before the CLI prints its answer."""
    strace = need_strace()
    project, home, trace = tmp_path / "proj", tmp_path / "home", tmp_path / "trace.txt"
    project.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["AMUX_HOME"] = str(home)
    proc = subprocess.run(
        [strace, "-f", "-qq", "-y", "-e", "trace=mkdir,mkdirat,fsync,fdatasync,rename,renameat,renameat2,write",
         "-o", str(trace), *amux_argv(), "memory", "new", "reference", "durable", "--tags", "a",
         "--description", "kept", "--project", str(project)],
        env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = parse_trace(trace.read_text())
    made = _new_directories(lines, os.path.realpath(project))
    made_paths = [p for _, p in made]
    library = os.path.realpath(project / ".agent" / "memory")
    assert {os.path.dirname(library), library, os.path.join(library, "reference")} <= set(made_paths), made
    printed = next((n for n, body in enumerate(lines) if re.match(r"write\(1<", body)), len(lines))
    _assert_parents_fsynced(lines, made, printed)
    assert (project / ".agent" / "memory" / "reference" / "durable.md").is_file()


def test_parse_trace_joins_a_call_split_by_another_thread() -> None:
    """strace ``-f`` splits a call another thread interrupted; the parser joins the halves where it returned."""
    text = ("101 openat(AT_FDCWD, \"a\", O_RDONLY) = 13\n"
            "101 fsync(13 <unfinished ...>\n"
            "102 write(4, \"x\", 1)        = 1\n"
            "101 <... fsync resumed>)     = 0\n"
            "101 rename(\"a\", \"b\") = 0\n"
            "102 +++ exited with 0 +++\n"
            "103 fdatasync(7 <unfinished ...>\n")
    assert parse_trace(text) == ['openat(AT_FDCWD, "a", O_RDONLY) = 13', 'write(4, "x", 1)        = 1',
                                 "fsync(13) = 0", 'rename("a", "b") = 0', "+++ exited with 0 +++",
                                 "fdatasync(7 <unfinished ...>"]
