"""Running the CLI as other OS users (root only): free uids, a forked ``run_as``, a Python they can execute.

The tests that need these run as root.  An "other user" is an unnamed uid (its
principal id is ``uid:<n>``, DESIGN.md §7).  :func:`run_as` forks, drops to the
uid and runs the real CLI entry point in-process: exec'ing the venv's Python as
another uid is not possible when the interpreter lives under root's ``0700``
home.  :func:`readable_amux` writes an ``amux`` script another uid *can* exec,
for launches that must start a new process as that user.  Files they read go in
the ``shared_dir`` fixture (``tests/conftest.py``).
"""

from __future__ import annotations

import json
import os
import pwd
import sys
from pathlib import Path
from typing import Any

# Imported before fork: the child (another uid) cannot read root's site-packages.  The commands the
# children run are registered lazily, so their modules are imported here too.
import amux_memory.tools.cli.app  # noqa: F401
import amux_memory.tools.cli.hub  # noqa: F401
import amux_memory.tools.cli.memory  # noqa: F401
import amux_memory.tools.client  # noqa: F401
from tests.conftest import REPO


def free_uid(start: int) -> int:
    """The first uid ``>= start`` with no passwd entry (so the Hub names it ``uid:<n>``)."""
    uid = start
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


ALICE = free_uid(42001)
"""An unnamed uid for "Alice"."""
BOB = free_uid(ALICE + 1)
"""An unnamed uid for "Bob", different from :data:`ALICE`."""


def run_as(uid: int, socket: Path, *args: str, env: dict[str, str] | None = None,
           stdin_file: Path | None = None, groups: list[int] | None = None) -> tuple[int, Any, str]:
    """Run ``amux ARGS`` as ``uid`` (and gid ``uid``) in a forked child: ``(exit status, parsed stdout, stderr)``.

    The child's supplementary groups are exactly ``groups`` (group ids; none by default), as ``usermod -a -G``
    would give that account.
    The child gets ``AMUX_HUB=socket``, ``HOME=/nonexistent``, no other ``AMUX_*`` variable, then ``env``;
    stdin is ``stdin_file`` when given.  Stdout is parsed as JSON when it is JSON (``None`` when empty, the
    raw bytes otherwise).  A child that raises reports it on stderr and exits 70.
    """
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 70
        try:
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            if stdin_file is not None:
                fd = os.open(stdin_file, os.O_RDONLY)
                os.dup2(fd, 0)
            os.setgroups(groups or [])
            os.setgid(uid)
            os.setuid(uid)
            for key in [k for k in os.environ if k.startswith("AMUX_")]:
                del os.environ[key]
            os.environ["AMUX_HUB"] = str(socket)
            os.environ["HOME"] = "/nonexistent"
            os.environ.update(env or {})
            # pytest replaced sys.std*; the CLI must write to the real fds.
            sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - lives until os._exit
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            from amux_memory.tools.cli.app import main

            code = main(list(args))
        except BaseException as exc:  # noqa: BLE001 - report anything to the parent
            os.write(2, f"child failed: {exc!r}\n".encode())
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(out_w)
    os.close(err_w)
    with os.fdopen(out_r, "rb") as fo, os.fdopen(err_r, "rb") as fe:
        stdout = fo.read()
        stderr = fe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    try:
        parsed = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        parsed = stdout
    return code, parsed, stderr


def shared_input(shared_dir: Path, name: str, text: str) -> Path:
    """Write ``text`` to ``shared_dir/name`` readable by everyone (``0644``), for another uid's stdin."""
    p = shared_dir / name
    p.write_text(text)
    p.chmod(0o644)
    return p


def readable_python() -> str | None:
    """A Python of this version another user can execute (the venv's interpreter may live under root's 0700 home).

    ``/usr/bin/pythonX.Y`` or ``/usr/local/bin/pythonX.Y`` when it and every parent directory are
    world-readable and executable; ``None`` otherwise.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (Path(f"/usr/bin/python{version}"), Path(f"/usr/local/bin/python{version}")):
        chain = [candidate.resolve(), *candidate.resolve().parents]
        if candidate.exists() and all(p.stat().st_mode & 0o005 == 0o005 for p in chain):
            return str(candidate)
    return None


def readable_amux(shared: Path, python: str) -> Path:
    """Write ``shared/bin/amux``: an ``amux`` run by ``python`` importing this checkout and the venv's packages.

    ``shared/bin`` must not exist yet (it is created ``0755``); ``python`` comes from :func:`readable_python`.
    """
    site_packages = next(Path(sys.prefix).glob("lib/python3.*/site-packages"))
    script = shared / "bin" / "amux"
    script.parent.mkdir(mode=0o755)
    script.write_text(f"#!{python} -S\nimport site, sys\nsite.addsitedir({str(site_packages)!r})\n"
                      f"sys.path.insert(0, {str(REPO)!r})\n"
                      "from amux_memory.tools.cli.app import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return script
