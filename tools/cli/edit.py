"""``amux memory edit PATH``: one document in ``$VISUAL``/``$EDITOR``, written back with compare-and-swap.

The command exports the document whole (a missing one is empty, revision
``absent``), writes it to a ``0600`` file named after the document in a
private (``0700``) temporary folder, runs the editor on it and, if the bytes
changed, upserts them at the revision it read.  When someone else changed
the document meanwhile the Hub answers ``conflict``: the command shows what
changed (a unified diff, :mod:`tools.client.textdiff`) and either stops, keeping
the edited file, or re-opens the editor on a three-way merge of the version
read, the user's text and the current version (``merge3``, the merge of
Breezy), with git-style markers around the parts that clash.  The user's text
is never lost: whenever nothing is written the file is kept and its path
printed; the folder is removed only after a write, or when nothing changed.

Like :mod:`tools.cli.memory` it uses the blocking client (one connection to
read, a new one for each write, since an edit may outlast the Hub's idle
bound) and prints with :mod:`tools.cli.output.contract`.  DESIGN.md §18.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from amux_memory.protocol.errors import ErrorCode, ExitStatus, HubError
from amux_memory.protocol.params import ABSENT, EMPTY_CONTENT
from amux_memory.tools.cli.options import AsJson
from amux_memory.tools.cli.output.contract import emit, fail, human_output, say
from amux_memory.tools.cli.output.renderer_choice import RendererChoice

OnConflict = Literal["reopen", "abort"]
"""What ``--on-conflict`` may say: re-open the editor on the merge, or stop and keep the file."""

YOURS = b"yours (your edit)"
"""The label of the user's side in a merge's conflict markers."""

DEFAULT_EDITOR = "vi"
"""The editor when neither ``$VISUAL`` nor ``$EDITOR`` is set (as git does)."""

START_MARKER = b"<<<<<<<"
MID_MARKER = b"======="
END_MARKER = b">>>>>>>"

_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}


def terminal_text(data: bytes) -> str:
    """``data`` as text safe to show in a terminal: invalid UTF-8 as U+FFFD, control characters (ESC, CR,
    C1, ...; not newline or tab) as visible ``\\xNN`` escapes, so a document cannot drive the terminal."""
    return data.decode("utf-8", "replace").translate(_CONTROL)


def editor_command() -> list[str]:
    """The editor's argv: ``$VISUAL``, else ``$EDITOR``, else ``vi``, split like a shell would (:func:`shlex.split`).

    Raises ``bad_request`` when the variable does not split (an unbalanced quote).
    """
    for name in ("VISUAL", "EDITOR"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                argv = shlex.split(value)
            except ValueError as exc:
                raise HubError(ErrorCode.BAD_REQUEST, f"${name} cannot be split into a command ({exc}): "
                               f"fix it, e.g. {name}='code --wait'", {"field": name}) from None
            if argv:
                return argv
    return [DEFAULT_EDITOR]


def run_editor(file: Path) -> str | None:
    """Run the editor on ``file`` (inheriting the terminal) and wait; None when it succeeded, else why not.

    Blocks until the editor exits.  Ctrl-C reaches the editor too; if it
    ends this process's wait, the ``KeyboardInterrupt`` propagates.
    """
    argv = editor_command()
    if argv == [DEFAULT_EDITOR] and not any(os.environ.get(n, "").strip() for n in ("VISUAL", "EDITOR")):
        print(f"amux: opening {DEFAULT_EDITOR}, as neither $VISUAL nor $EDITOR is set (choose another with e.g. "
              "export EDITOR=nano, or EDITOR='code --wait'; in vi, ':wq' saves and quits, ':q!' quits unchanged)",
              file=sys.stderr, flush=True)
    try:
        done = subprocess.run([*argv, str(file)], check=False)
    except OSError as exc:
        return f"cannot run the editor {argv[0]!r} ({exc.strerror}); set $VISUAL or $EDITOR"
    if done.returncode != 0:
        from amux_memory.tools.client.wording import ended

        return f"the editor {argv[0]!r} {ended(done.returncode)}"
    return None



def merge_versions(base: bytes, yours: bytes, theirs: bytes, theirs_label: bytes,
                   yours_label: bytes = YOURS) -> tuple[bytes, int]:
    """Three-way merge of ``yours`` and ``theirs``, both edited from ``base``: ``(merged bytes, conflicts)``.

    Changes on one side only are taken as they are; where both sides changed
    the same lines, both are kept between ``<<<<<<< YOURS_LABEL``, ``=======`` and
    ``>>>>>>> THEIRS_LABEL`` lines, and counted in ``conflicts``.
    """
    from merge3 import Merge3

    from amux_memory.tools.client.textdiff import split_lines

    merger = Merge3(split_lines(base), split_lines(yours), split_lines(theirs))
    conflicts = sum(1 for region in merger.merge_regions() if region[0] == "conflict")
    lines = merger.merge_lines(name_a=yours_label, name_b=theirs_label, start_marker=START_MARKER,
                               mid_marker=MID_MARKER, end_marker=END_MARKER)
    return b"".join(lines), conflicts


def has_markers(data: bytes, yours: bytes = YOURS, theirs: bytes = b"theirs") -> bool:
    """Whether ``data`` still holds a conflict marker line that :func:`merge_versions` wrote (``yours`` and
    ``theirs``: the start of the two labels)."""
    return any(line.startswith((START_MARKER + b" " + yours, END_MARKER + b" " + theirs)) for line in data.split(b"\n"))


@dataclass
class Session:
    """One edit: the document, the version the edit started from, and the private file the editor works on.

    ``base``/``revision`` are the bytes and revision the next write is
    compared against (after a merge, the version merged with).
    """

    path: str
    base: bytes
    revision: str
    folder: Path
    file: Path
    merged: bool = False

    @classmethod
    def start(cls, path: str, base: bytes, revision: str) -> Session:
        """Write ``base`` to ``<private temp folder>/<document name>`` (folder ``0700``, file ``0600``)."""
        folder = Path(tempfile.mkdtemp(prefix="amux-edit-"))
        file = folder / path.rsplit("/", 1)[-1]
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(base)
        return cls(path, base, revision, folder, file)

    def finish(self) -> None:
        """Remove the temporary folder and the file (only once nothing of the user's is left unsaved)."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def retry_hint(self, exc: HubError | None = None) -> str:
        """The command that writes the kept file by hand, with the flag that gets past ``exc`` (if any)."""
        flag = ""
        if exc is not None and exc.code is ErrorCode.DESTRUCTIVE_REWRITE:
            flag = " --allow-shrink"
        elif exc is not None and exc.code is ErrorCode.BAD_REQUEST and exc.message == EMPTY_CONTENT:
            flag = " --allow-empty"
        elif exc is not None and exc.code is ErrorCode.SECRET_DETECTED:
            flag = " --allow-secret"  # a person's override (DESIGN.md §16.4), recorded in the history
        return (f"amux memory upsert {shlex.quote(self.path)} --expected-revision {self.revision[:12]} "
                f"--file {shlex.quote(str(self.file))}{flag}")

    def kept(self, reason: str, exc: HubError | None = None, current_rev: str | None = None) -> None:
        """Say on stderr that nothing was written, why, where the text is kept and how to write it anyway.

        ``current_rev`` (after a conflict: the document's revision now) makes
        the hint a write over that version, once merged by hand.
        """
        written = "" if "nothing was written" in reason else "; nothing was written"
        say(f"{reason}{written}. Your text is kept in {self.file}")
        if current_rev is None:
            say(f"to write it anyway: {self.retry_hint(exc)}")
            return
        self.revision = current_rev
        say(f"merge it with the current version, then write it with: {self.retry_hint(exc)}")


def ask(question: str) -> OnConflict:
    """Ask on the terminal whether to re-open the editor; anything but r/reopen (or end of input) is abort."""
    sys.stderr.write(f"amux: {question} [r]eopen the editor with both versions, or [a]bort and keep your text? ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    return "reopen" if answer in ("r", "reopen") else "abort"


def decide(on_conflict: OnConflict | None, question: str) -> OnConflict:
    """``--on-conflict`` when given; else ask when stdin and stderr are a terminal; else abort."""
    if on_conflict is not None:
        return on_conflict
    if sys.stdin.isatty() and sys.stderr.isatty():
        return ask(question)
    return "abort"


def show_changes(session: Session, current: bytes, current_rev: str) -> None:
    """Print on stderr what changed in memory since the edit started: a unified diff, terminal-safe."""
    from amux_memory.tools.client.textdiff import diff_hunks, render_unified

    if current_rev == ABSENT:
        say(f"{session.path} was deleted while you edited it (it had revision {session.revision[:12]})")
        return
    since = "did not exist" if session.revision == ABSENT else f"was at revision {session.revision[:12]}"
    say(f"{session.path} changed while you edited it: it {since}, it is now at {current_rev[:12]}. "
        "What changed meanwhile:")
    text = render_unified(diff_hunks(session.base, current), f"a/{session.path}\t{session.revision[:12]}",
                          f"b/{session.path}\t{current_rev[:12]}")
    sys.stderr.write(terminal_text(text))
    sys.stderr.flush()


def write_back(session: Session, content: bytes, allow_shrink: bool, allow_empty: bool) -> dict[str, Any]:
    """Upsert ``content`` at the session's revision over a new connection; the Hub's result, or raise."""
    from amux_memory.protocol.requests import upsert_params
    from amux_memory.tools.client.blocking import HubClient

    params = upsert_params(session.path, content, session.revision, allow_shrink=allow_shrink,
                           allow_empty=allow_empty)
    with HubClient() as client:
        return client.call("upsert", params)


def read_current(path: str) -> tuple[bytes, str]:
    """The document as it is now, whole: ``(bytes, revision)``; ``(b"", "absent")`` when it does not exist."""
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.paging import read_version

    with HubClient() as client:
        return read_version(client, path, None)


def kept_error(exc: HubError, session: Session) -> HubError:
    """``exc`` with ``data.kept_file``: the path of the file holding the user's text."""
    return HubError(exc.code, exc.message, {**exc.data, "kept_file": str(session.file)}, next_step=exc.refined)


def fail_kept(exc: HubError, session: Session | None, as_json: bool) -> int:
    """Finish a failed edit whose reason :meth:`Session.kept` already said on stderr; return ``exc``'s status.

    Piped (or ``--json``) stdout gets the error JSON of DESIGN.md §8 (with
    ``data.kept_file`` when a file is kept); stderr is not told a second
    time.  In a terminal nothing more is printed: the reason, where the text
    is and how to write it were said once (DESIGN.md §17, §18).
    """
    if not human_output(as_json):
        emit({"error": (kept_error(exc, session) if session is not None else exc).to_wire()})
    return exc.exit_code


def edit(
    path: str,
    /,
    *,
    on_conflict: OnConflict | None = None,
    allow_shrink: bool = False,
    allow_empty: bool = False,
    as_json: AsJson = False,
) -> int:
    """Edit a document in your editor and write it back, if nobody changed it meanwhile.

    Opens $VISUAL, else $EDITOR, else vi, on a private copy of the document
    (a new PATH starts empty and is created). Same bytes on exit: nothing is
    written. If the document changed meanwhile, shows what changed and, on a
    terminal, asks whether to re-open the editor on a merge of both versions
    (clashing parts marked <<<<<<< / ======= / >>>>>>>) or to stop. Whenever
    nothing is written (editor failed, conflict, rewrite guard, ...) your text
    is kept and its path printed, with the command that writes it. In a
    terminal, one line (saved, or no change); piped or with --json, the
    upsert result plus "changed": true, or {"path", "revision",
    "changed": false}. Exit status 22: the editor failed or conflict markers
    were left, nothing written.

    Parameters
    ----------
    path
        Logical path of the document, e.g. MEMORY.md.
    on_conflict
        When the document changed meanwhile: reopen (edit a merge of both
        versions, then write) or abort (keep your file, exit with conflict's
        status). Default: ask on a terminal, else abort.
    allow_shrink
        Let a deliberate cut through the rewrite guard (see 'amux memory upsert --help').
    allow_empty
        Allow saving an empty document (to delete one, use 'amux memory forget').
    """
    from amux_memory.protocol.paths import normalize_path

    try:
        path = normalize_path(path)
        base, revision = read_current(path)
    except HubError as exc:
        return fail(exc, as_json=as_json)
    session = Session.start(path, base, revision)
    try:
        return edit_loop(session, on_conflict, allow_shrink, allow_empty, as_json)
    except KeyboardInterrupt:
        session.kept("interrupted")
        return int(ExitStatus.NOT_SAVED)


def edit_loop(session: Session, on_conflict: OnConflict | None, allow_shrink: bool, allow_empty: bool,
              as_json: bool = False) -> int:
    """Editor, compare, write; on ``conflict``, diff and (re-open on a merge | stop).  Returns the exit status.

    Every outcome is printed once: a result line in a terminal or JSON
    (``as_json``, or stdout not a terminal), a failure's reason on stderr
    (:func:`fail_kept`).
    """
    while True:
        problem = run_editor(session.file)
        if problem is not None:
            session.kept(problem)
            return int(ExitStatus.NOT_SAVED)
        try:
            content = session.file.read_bytes()
        except FileNotFoundError:
            say(f"the editor removed {session.file}; nothing was written")
            session.finish()
            return int(ExitStatus.NOT_SAVED)
        if session.merged and has_markers(content):
            if decide(on_conflict if on_conflict == "abort" else None,
                      "the file still has conflict markers.") == "reopen":
                continue
            session.kept("conflict markers (<<<<<<< yours ... >>>>>>> theirs) are left in the file")
            return int(ExitStatus.NOT_SAVED)
        if content == session.base:
            session.finish()
            unchanged = {"path": session.path, "revision": session.revision, "changed": False}
            if human_output(as_json):
                emit(unchanged, RendererChoice("edit"))
                return 0
            exists = "" if session.revision != ABSENT else f"; {session.path} does not exist and was not created"
            say(f"no change: nothing written{exists}")
            emit(unchanged)
            return 0
        try:
            result = write_back(session, content, allow_shrink, allow_empty)
        except HubError as exc:
            if exc.code is ErrorCode.BAD_REQUEST and not content:
                session.finish()  # an empty file holds nothing worth keeping
                say(f"{exc.code.value}: {exc.message}; your text was empty, so no file is kept")
                return fail_kept(exc, None, as_json)
            if exc.code is not ErrorCode.CONFLICT:
                session.kept(f"{exc.code.value}: {exc.message}", exc)
                return fail_kept(exc, session, as_json)
            try:
                current, current_rev = read_current(session.path)
            except HubError as again:
                session.kept(f"{session.path} changed meanwhile and cannot be read now ({again.code.value})")
                return fail_kept(exc, session, as_json)
            show_changes(session, current, current_rev)
            if decide(on_conflict, "the document changed while you edited it.") == "abort":
                session.kept(f"conflict: {session.path} changed while you edited it", current_rev=current_rev)
                return fail_kept(exc, session, as_json)
            label = b"theirs (revision %s, in memory now)" % (current_rev[:12].encode("ascii"))
            merged, conflicts = merge_versions(session.base, content, current, label)
            session.file.write_bytes(merged)
            session.base, session.revision, session.merged = current, current_rev, True
            from amux_memory.tools.client.wording import counted, plural

            parts = f"{counted(conflicts, 'part')} where both changed the same lines {plural(conflicts, 'is')}"
            clash = (f"{parts} marked <<<<<<< yours ... >>>>>>> theirs: keep what you want and remove the markers"
                     if conflicts else "the changes did not overlap: check the result and save")
            say(f"re-opening {session.file}: your edit merged into revision {current_rev[:12]}; {clash}")
            continue
        session.finish()
        emit({**result, "changed": True}, RendererChoice("edit"), as_json=as_json)
        return 0
