"""What a mistyped command suggests: never a destructive command for what may be a read (DESIGN.md §17).

cyclopts answers an unknown command with ``Did you mean "X"?``, X being
the closest name by spelling (``difflib``): for ``amux memory get`` that was
``forget``, the delete command.  :func:`format_usage_error` is the root
app's ``error_formatter``: it replaces that sentence for unknown commands
and leaves every other usage error as cyclopts prints it.  Suggestions come
from :data:`SYNONYMS` (words people use for a command: ``read`` → ``show``,
``delete`` → ``forget``) and else from spelling, where a
:data:`DESTRUCTIVE` command is never a candidate: a destructive command is
offered only when the word typed already asks to destroy something.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cyclopts import App
    from cyclopts.exceptions import CycloptsError

DESTRUCTIVE = frozenset({"forget", "purge", "restore", "remove", "revoke", "unalias"})
"""Commands that delete, erase or overwrite: never suggested for a word that only resembles them."""

SYNONYMS = {
    **dict.fromkeys(("get", "read", "cat", "view", "open", "print", "display", "fetch", "load"), "show"),
    **dict.fromkeys(("find", "grep", "query", "lookup", "look"), "search"),
    **dict.fromkeys(("ls", "dir", "entries", "documents"), "list"),
    **dict.fromkeys(("write", "put", "save", "set", "update", "create", "add"), "upsert"),
    **dict.fromkeys(("delete", "del", "rm", "erase-document"), "forget"),
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

    A synonym first (``get`` → ``show``), then the closest spelling among
    the commands that are not :data:`DESTRUCTIVE`.
    """
    word = token.lower()
    target = SYNONYMS.get(word)
    if target in commands:
        return target
    safe = [name for name in commands if name not in DESTRUCTIVE]
    close = difflib.get_close_matches(word, safe, n=1, cutoff=0.6)
    return close[0] if close else None


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

    An unknown command gets :func:`unknown_command_message`; any other error
    cyclopts' own text.  Imports rich (cyclopts prints it through rich).
    """
    from cyclopts.exceptions import UnknownCommandError
    from cyclopts.panel import CycloptsPanel
    from rich.text import Text

    from tools.cli.human import inert

    if isinstance(error, UnknownCommandError) and error.unused_tokens and error.app is not None:
        token = inert(error.unused_tokens[0])
        return CycloptsPanel(Text(unknown_command_message(token, visible_commands(error.app))))
    return CycloptsPanel(error)
