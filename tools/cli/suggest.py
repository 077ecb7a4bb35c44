"""What a mistyped command suggests: never a destructive command for what may be a read (DESIGN.md §17).

cyclopts answers an unknown command with ``Did you mean "X"?``, X being
the closest name by spelling (``difflib``): for ``amux memory get`` that was
``forget``, the delete command.  :func:`format_usage_error` is the root
app's ``error_formatter``: it replaces that sentence for unknown commands
and leaves every other usage error as cyclopts prints it.  Suggestions come
from :data:`SYNONYMS` (words people use for a command: ``read`` → ``show``,
``delete`` → ``forget``), then a destructive command the word is a plain
misspelling of (``restor``, ``purg``, ``remov``: a person who typed that meant
to destroy), and else from spelling, where a :data:`DESTRUCTIVE` command is
never a candidate: a word that may be a read (``frget``, which holds ``get``)
never gets a destructive command.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cyclopts import App
    from cyclopts.exceptions import CycloptsError

DESTRUCTIVE = frozenset({"forget", "purge", "restore", "remove", "revoke", "unalias", "move"})
"""Commands that delete, erase or overwrite (``move`` forgets its source): never suggested for a word that only
resembles them."""

SYNONYMS = {
    **dict.fromkeys(("get", "read", "cat", "view", "open", "print", "display", "fetch", "load"), "show"),
    **dict.fromkeys(("find", "grep", "query", "lookup", "look"), "search"),
    **dict.fromkeys(("ls", "dir", "entries", "documents"), "list"),
    **dict.fromkeys(("write", "put", "save", "set", "update", "create", "add"), "upsert"),
    **dict.fromkeys(("delete", "del", "rm", "erase-document"), "forget"),
    **dict.fromkeys(("cp", "duplicate"), "copy"),
    **dict.fromkeys(("mv", "rename"), "move"),
    **dict.fromkeys(("undo", "revert", "rollback"), "restore"),
    **dict.fromkeys(("changes", "changelog"), "log"),
    **dict.fromkeys(("versions", "revisions"), "history"),
    **dict.fromkeys(("start", "run"), "serve"),
}
"""Words people type for a command → that command, when the group has it (``get`` is also an alias of ``show``)."""


def visible_commands(group: App) -> list[str]:
    """The names of the commands ``group`` lists in its help, in their order (help and version flags left out).

    Resolves lazily registered commands (imports their modules): only an
    unknown command, a usage error, comes here.
    """
    names = []
    for name in group:
        if name in group.help_flags or name in group.version_flags or name.startswith("-"):
            continue
        sub = group[name]
        if getattr(sub, "show", True):
            names.append(name)
    return names


def suggestion(token: str, commands: list[str]) -> str | None:
    """The command to suggest for the unknown ``token`` among ``commands``, or ``None``.

    A synonym first (``get`` → ``show``), then a destructive command the
    word is a plain misspelling of (:func:`misspells`: ``restor`` →
    ``restore``), then the closest spelling among the commands that are not
    :data:`DESTRUCTIVE`.
    """
    word = token.lower()
    target = SYNONYMS.get(word)
    if target in commands:
        return target
    misspelt = next((name for name in commands if name in DESTRUCTIVE and misspells(word, name, commands)), None)
    if misspelt is not None:
        return misspelt
    safe = [name for name in commands if name not in DESTRUCTIVE]
    close = difflib.get_close_matches(word, safe, n=1, cutoff=0.6)
    return close[0] if close else None


MIN_MISSPELT = 4
"""Fewest characters a word needs before it may be taken for a misspelt destructive command."""


def misspells(word: str, command: str, commands: list[str]) -> bool:
    """Whether ``word`` is ``command`` cut short, with one character left out, or with two neighbours swapped,
    and holds no other (non-destructive) command's name or a read word of :data:`SYNONYMS` (``frget`` holds
    ``get``: it may be a read).  At least :data:`MIN_MISSPELT` characters.
    """
    if len(word) < MIN_MISSPELT or word == command:
        return False
    reads = [name for name in commands if name not in DESTRUCTIVE and len(name) >= 3]
    reads += [w for w, target in SYNONYMS.items() if target not in DESTRUCTIVE and len(w) >= 3]
    if any(name in word for name in reads):
        return False
    if command.startswith(word):
        return True
    if len(word) == len(command) - 1 and any(command[:i] + command[i + 1:] == word for i in range(len(command))):
        return True
    return len(word) == len(command) and any(
        command[:i] + command[i + 1] + command[i] + command[i + 2:] == word for i in range(len(command) - 1))


def unknown_command_message(token: str, commands: list[str]) -> str:
    """``Unknown command "X". Did you mean "Y"? Available commands: ...`` (at most 8 listed)."""
    message = f'Unknown command "{token}".'
    suggested = suggestion(token, commands)
    if suggested is not None:
        message += f' Did you mean "{suggested}"?'
    if commands:
        shown = ", ".join(commands[:8]) + (", ..." if len(commands) > 8 else ".")
        message += f" Available commands: {shown}"
    return message


def format_usage_error(error: CycloptsError) -> Any:
    """The root app's ``error_formatter``: a rich panel for a usage error, as cyclopts draws it.

    An unknown command gets :func:`unknown_command_message`; ``--expected-revision``
    given without a value gets the hint its absence gets
    (:func:`tools.cli.memory.missing_revision`); text given to ``memory upsert``
    as an argument says where content comes from (:func:`upsert_text_message`); any other error cyclopts' own
    text.  Imports rich (cyclopts prints it through rich).
    """
    from cyclopts.exceptions import MissingArgumentError, UnknownCommandError, UnusedCliTokensError
    from cyclopts.panel import CycloptsPanel
    from rich.text import Text

    from amux_memory.tools.client.inert import inert

    if isinstance(error, UnknownCommandError) and error.unused_tokens and error.app is not None:
        token = inert(error.unused_tokens[0])
        return CycloptsPanel(Text(unknown_command_message(token, visible_commands(error.app))))
    called = tuple(error.command_chain or ())
    if isinstance(error, UnusedCliTokensError) and called[-2:] == ("memory", "upsert") and error.unused_tokens:
        return CycloptsPanel(Text(inert(upsert_text_message(str(error.unused_tokens[0])))))
    argument = getattr(error, "argument", None)
    if isinstance(error, MissingArgumentError) and argument is not None and REVISION_OPTION in argument.names:
        from amux_memory.tools.cli.memory import missing_revision

        chain = error.command_chain or ("memory", "upsert")
        hint = missing_revision(chain[-1], "PATH").message
        return CycloptsPanel(Text(f"{REVISION_OPTION} was given without a value. {hint[0].upper()}{hint[1:]}."))
    return CycloptsPanel(error)


REVISION_OPTION = "--expected-revision"
"""The option whose missing value gets the same hint as its absence (DESIGN.md §18)."""


def upsert_text_message(token: str) -> str:
    """The usage error for ``amux memory upsert PATH TEXT``: the content is read from standard input or
    ``--file``, never from an argument (a document is often long and multi-line; DESIGN.md §18.3)."""
    shown = token if len(token) <= 40 else token[:40] + "…"
    return (f"memory upsert takes one PATH; the content is not an argument (got {shown!r} after it). Pipe it in: "
            "echo 'TEXT' | amux memory upsert PATH --expected-revision REV, or pass --file FILE.")
