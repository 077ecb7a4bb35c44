"""The CLI's output contract: JSON on stdout, errors as JSON plus one stderr line, one exit status each.

Data commands print one JSON document on stdout (UTF-8 whatever the locale
says, with the Hub's field names).  On failure they print ``{"error": {code,
message, data}}`` on stdout, so a script can read e.g.
``data.observed_revision``, one ``amux: CODE: MESSAGE`` line on stderr, and
exit with the code's status from :data:`protocol.errors.ERRORS`.  Statuses
that are not an error's are :class:`protocol.errors.ExitStatus`.  DESIGN.md §8.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from protocol.errors import ERRORS, ExitStatus, HubError, encodable, encodable_value

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


def emit(obj: Any) -> None:
    """Print ``obj`` as indented JSON (UTF-8, non-ASCII kept) and a newline on stdout.

    Never fails on text that is not valid UTF-8 (a lone surrogate from a
    non-UTF-8 file name or argument): it is shown as the visible text
    ``\\udcff`` (JSON ``"\\\\udcff"``), as :class:`HubError` shows it.
    """
    text = json.dumps(encodable_value(obj), ensure_ascii=False, indent=2)
    write_bytes(text.encode("utf-8", "backslashreplace") + b"\n")


def say(message: str) -> None:
    """Print one ``amux: MESSAGE`` line on stderr (notices, warnings, the error line).

    Text that is not valid UTF-8 is written as backslash escapes, never an error.
    """
    print(f"amux: {encodable(message)}", file=sys.stderr)


def fail(exc: HubError) -> int:
    """Report ``exc`` the data-command way and return its exit status (that of its code).

    Prints ``{"error": exc.to_wire()}`` on stdout and one line on stderr.
    """
    emit({"error": exc.to_wire()})
    say(f"{exc.code.value}: {exc.message}")
    return exc.exit_code


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
    ExitStatus.PROBLEMS_FOUND: "a check found problems (memory lint found errors, memory index --check: out of date, "
                                "doctor: a check failed)",
    ExitStatus.HUB_START_FAILED: "hub serve or hub start could not start the Hub (another Hub serves the home, bad "
                                  "settings, ...)",
    ExitStatus.NOT_SAVED: "memory edit wrote nothing (the editor failed, conflict markers left); your text is kept",
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
