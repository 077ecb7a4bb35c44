"""The CLI's output contract: JSON for scripts, readable text in a terminal, one exit status each.

Piped (or with ``--json``, or ``AMUX_OUTPUT=json``) data commands print one
JSON document on stdout (UTF-8 whatever the locale says, with the Hub's
field names).  On failure they print ``{"error": {code, message, data}}`` on
stdout, so a script can read e.g. ``data.observed_revision``, one
``amux: CODE: MESSAGE`` line on stderr, and exit with the code's status from
:data:`protocol.errors.ERRORS`.  Statuses that are not an error's are
:class:`protocol.errors.ExitStatus`.  DESIGN.md §8.

When stdout is a terminal and JSON was not asked for (:func:`human_output`),
a command that passes a :class:`tools.cli.output.renderer_choice.RendererChoice`
prints readable text instead (the renderers are :mod:`tools.cli.output.renderers`,
imported only then, with rich; :mod:`tools.cli.output.console` prints), and an
error is printed once, on stderr, with its next step
(:mod:`tools.cli.output.terminal_errors`); stdout stays empty.  No renderer
imports this module.  DESIGN.md §17.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from amux_memory.protocol.errors import ERRORS, ErrorCode, ExitStatus, HubError, encodable, encodable_value
from amux_memory.tools.cli.output.renderer_choice import RendererChoice

OUTPUT_ENV = "AMUX_OUTPUT"
"""``AMUX_OUTPUT=json`` makes every command print JSON even in a terminal, as ``--json`` does."""

USAGE_STATUS = 2
"""Exit status of a usage error (cyclopts' own, and the ones commands detect); same as ``bad_request``."""


def write_bytes(data: bytes) -> None:
    """Write raw bytes to stdout after whatever text is buffered, and flush.

    Raises ``BrokenPipeError`` when the reader went away (``main`` turns it
    into :attr:`ExitStatus.BROKEN_PIPE`).
    """
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def human_output(as_json: bool = False) -> bool:
    """Whether to print readable text: stdout is a terminal, no ``--json``, no ``AMUX_OUTPUT=json``.

    ``as_json`` is the command's ``--json`` flag (:data:`tools.cli.options.AsJson`).
    A stdout that is closed or not a real file counts as not a terminal.
    """
    if as_json or os.environ.get(OUTPUT_ENV, "").strip().lower() == "json":
        return False
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def emit(obj: Any, view: RendererChoice | None = None, *, as_json: bool = False) -> None:
    """Print ``obj`` on stdout: as indented JSON (UTF-8, non-ASCII kept) and a newline, or as ``view`` says.

    ``view``'s renderer shows it instead when :func:`human_output` says so
    (a terminal, no ``--json``); without one the output is JSON everywhere.
    Never fails on text that is not valid UTF-8 (a lone surrogate from a
    non-UTF-8 file name or argument): it is shown as the visible text
    ``\\udcff`` (JSON ``"\\\\udcff"``), as :class:`HubError` shows it.
    """
    if view is not None and human_output(as_json):
        from amux_memory.tools.cli.output.console import print_out
        from amux_memory.tools.cli.output.renderers import render

        print_out(render(view, obj))
        return
    text = json.dumps(encodable_value(obj), ensure_ascii=False, indent=2)
    write_bytes(text.encode("utf-8", "backslashreplace") + b"\n")


def write_shown(data: bytes, view: RendererChoice) -> None:
    """Write raw bytes (a document, a diff) to stdout; in a terminal (:func:`human_output`) show them via ``view``.

    Piped, the bytes are written unchanged (``export > backup.md``, ``diff |
    patch``); a person's terminal gets them decoded (invalid UTF-8 replaced)
    with control sequences made visible, never executed (DESIGN.md §17).
    """
    if human_output():
        from amux_memory.tools.cli.output.console import print_out
        from amux_memory.tools.cli.output.renderers import render

        print_out(render(view, data))
        return
    write_bytes(data)


def say(message: str) -> None:
    """Print one ``amux: MESSAGE`` line on stderr (notices, warnings, the error line).

    Text that is not valid UTF-8 is written as backslash escapes, never an error.
    """
    print(f"amux: {encodable(message)}", file=sys.stderr)


def fail(exc: HubError, *, as_json: bool = False) -> int:
    """Report ``exc`` the data-command way and return its exit status (that of its code).

    Prints ``{"error": exc.to_wire()}`` on stdout and one line on stderr; in
    a terminal without ``--json`` (:func:`human_output`) only stderr, once:
    the code, the message, the next step and the data (DESIGN.md §17).
    """
    if human_output(as_json):
        from amux_memory.tools.cli.output.terminal_errors import print_error

        print_error(exc)
        return exc.exit_code
    emit({"error": exc.to_wire()})
    say(f"{exc.code.value}: {exc.message}")
    return exc.exit_code


def os_failure(exc: OSError) -> HubError:
    """A file-system failure a command did not expect, as an error a person can act on: ``permission_denied`` (the
    path and the account this command runs as) for EACCES/EPERM, else ``storage_error``; ``data``: ``errno``,
    ``path`` (DESIGN.md §17: never a traceback)."""
    import errno as errnos
    import getpass

    name = errnos.errorcode.get(exc.errno or 0, "E?")
    path = exc.filename if exc.filename is not None else "?"
    data = {"errno": name, "path": str(path)}
    if exc.errno in (errnos.EACCES, errnos.EPERM):
        me = getpass.getuser()
        return HubError(ErrorCode.PERMISSION_DENIED, f"{path}: {exc.strerror} (this command runs as {me})", data,
                        next_step=f"Run it as an account that may use {path}, or give {me} access to it (its owner, "
                        "group or mode).")
    return HubError(ErrorCode.STORAGE_ERROR, f"{path}: {exc.strerror or exc}", data,
                    next_step="Check that path (it exists, the disk is not full), then run the command again.")


def fail_quietly(exc: HubError) -> int:
    """Report ``exc`` on stderr only (stdout stays empty) and return its exit status.

    For commands whose stdout is a document, not JSON (``amux memory export``):
    ``export x.md > backup.md`` must never write an error as the backup.
    """
    say(f"{exc.code.value}: {exc.message}")
    return exc.exit_code


def usage_error(command: str, message: str) -> int:
    """A usage error a command found itself: one stderr line, status :data:`USAGE_STATUS`."""
    print(encodable(f"amux {command}: {message} (see 'amux {command} --help')"), file=sys.stderr)
    return USAGE_STATUS


_OTHER_STATUSES = {
    ExitStatus.OK: "success",
    ExitStatus.PROBLEMS_FOUND: "a check found problems (memory health: findings, memory lint found errors, memory "
                                "index --check: out of date, doctor: a check failed)",
    ExitStatus.HUB_START_FAILED: "hub serve or hub start could not start the Hub (another Hub serves the home, bad "
                                  "settings, ...)",
    ExitStatus.NOT_SAVED: "memory edit wrote nothing (the editor failed, conflict markers left); your text is kept",
    ExitStatus.HUB_NOT_RUNNING: "hub status: no Hub runs for this home",
    ExitStatus.BROKEN_PIPE: "the reader of standard output went away (| head)",
}


def exit_status_help() -> str:
    """The exit-status table for ``amux --help``: one ``- N: meaning`` line per status, sorted by N.

    Generated from :data:`protocol.errors.ERRORS` and :class:`ExitStatus`,
    so it cannot drift from what the commands return.
    """
    rows = [(int(status), text) for status, text in _OTHER_STATUSES.items()]
    rows += [(spec.exit_status, code.value) for code, spec in ERRORS.items()]
    rows.sort()
    extra = {USAGE_STATUS: " (also usage errors)"}
    return "\n".join(f"- {status}: {text}{extra.get(status, '')}" for status, text in rows)
