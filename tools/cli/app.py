"""The ``amux`` command: the root app, its command groups, and :func:`main`.

This module is the command table.  Every command is registered by import
path (cyclopts' lazy registration), so ``amux memory search`` imports
:mod:`tools.cli.memory` and the blocking client only: no Trio, no ``mcp``,
no typed-memory machinery.  Command modules never import this one, so
there is no import cycle.  The output contract (JSON, terminal text,
errors, exit statuses) is :mod:`tools.cli.output.contract`; shared options are
:mod:`tools.cli.options`; what a mistyped command suggests is
:mod:`tools.cli.suggest` (DESIGN.md §2, §8, §17).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from cyclopts import App

from amux_memory.protocol.errors import ExitStatus, HubError
from amux_memory.protocol.version import package_version
from amux_memory.tools.cli.options import AsJson
from amux_memory.tools.cli.output.contract import exit_status_help

if TYPE_CHECKING:
    from cyclopts.exceptions import CycloptsError


def usage_error_panel(error: CycloptsError) -> Any:
    """What cyclopts prints for a usage error: :func:`tools.cli.suggest.format_usage_error`, imported only then."""
    from amux_memory.tools.cli.suggest import format_usage_error

    return format_usage_error(error)


app = App(
    name="amux",
    version=package_version,
    help="amux-memory: on-demand long-term memory for coding agents, kept as plain Markdown by one Hub.\n\n"
    "The CLI finds the Hub from AMUX_HUB (a socket path, tls://HOST:PORT or loopback tcp://HOST:PORT) or "
    "AMUX_HOME (default ~/.amux).\n"
    "In a terminal, data commands print readable text (search, show, list, history, log, upsert, forget, "
    "restore, purge) and an error once on stderr with its next step. Piped, with --json or with "
    "AMUX_OUTPUT=json they print JSON; on error, {\"error\": {code, message, data}} on stdout and one line "
    "on stderr. Exit status:\n\n" + exit_status_help(),
    error_formatter=usage_error_panel,
)
hub_app = App(name="hub", help="Run and inspect the Hub, the one process that owns the memory files.")
principal_app = App(
    name="principal",
    help="Principals: who owns isolated memory. A principal is a person or a service; OS accounts "
    "(aliases) and tokens resolve to it.",
)
token_app = App(
    name="token",
    help="Bearer tokens for callers the kernel cannot name (remote Runtimes, delegated agent credentials). "
    "Only a hash is stored; the token is shown once.",
)
team_app = App(
    name="team",
    help="Teams: principals sharing one memory, mounted at @TEAM/ for each member, with roles (reader, writer, "
    "maintainer) and a review rule for the team's writes.",
)
member_app = App(name="member", help="A team's members and their roles.")
invitation_app = App(name="invitation", help="Invitations 'amux hub invite' made: list them, withdraw one not used "
                     "yet.")
scope_app = App(name="scope", help="Whole scopes, for the Hub's operator: copy every document of one scope into "
                "another (after a change of memory.isolation, or into a team).")
memory_app = App(name="memory", help="Search, read, write, copy, move and delete memory documents through the Hub; "
                 "see and undo what changed (history, log, diff, restore, purge); find what rots (health); "
                 "keep typed memories in shape (new, remove, index, lint, archive, import — also on a project with "
                 "--project DIR).")
review_app = App(name="review", help="Memory changes agents proposed (memory.review = agents): list them, show one, "
                 "approve or reject.")
system_app = App(name="system", help="System settings.")
config_app = App(name="config", help="Read and change Hub settings (applied when the Hub next starts).")
service_app = App(name="service", help="Run the Hub under systemd (Linux) or launchd (macOS): write or remove "
                  "the service file; it says how to enable it.")
tls_app = App(name="tls", help="TLS for the Hub's listeners: a private CA and a server certificate.")
protocol_app = App(name="protocol", help="The agent memory protocol: the short, fixed instructions agents get.")

app.command(hub_app)
app.command(memory_app)
app.command(system_app)
app.command(protocol_app)
system_app.command(config_app)
hub_app.command(principal_app)
hub_app.command(token_app)
hub_app.command(team_app)
hub_app.command(invitation_app)
team_app.command(member_app)
hub_app.command(scope_app)
hub_app.command(service_app)
hub_app.command(tls_app)
tls_app.command("amux_memory.tools.cli.tls:tls_init", name="init")
hub_app.command("amux_memory.tools.cli.connect:connect", name="connect")
hub_app.command("amux_memory.tools.cli.backup:backup", name="backup")
hub_app.command("amux_memory.tools.cli.backup:restore", name="restore")

hub_app.command("amux_memory.tools.cli.hub:serve", name="serve")
hub_app.command("amux_memory.tools.cli.hub:status", name="status")
hub_app.command("amux_memory.tools.cli.hub:start", name="start")
hub_app.command("amux_memory.tools.cli.hub:stop", name="stop")
hub_app.command("amux_memory.tools.cli.hub:restart", name="restart")
hub_app.command("amux_memory.tools.cli.team_setup:setup", name="setup")
service_app.command("amux_memory.tools.cli.service:service_install", name="install")
service_app.command("amux_memory.tools.cli.service:service_uninstall", name="uninstall")
principal_app.command("amux_memory.tools.cli.admin:principal_add", name="add")
principal_app.command("amux_memory.tools.cli.admin:principal_remove", name="remove")
principal_app.command("amux_memory.tools.cli.admin:principal_alias", name="alias")
principal_app.command("amux_memory.tools.cli.admin:principal_unalias", name="unalias")
principal_app.command("amux_memory.tools.cli.admin:principal_list", name="list")
token_app.command("amux_memory.tools.cli.admin:token_issue", name="issue")
token_app.command("amux_memory.tools.cli.admin:token_list", name="list")
token_app.command("amux_memory.tools.cli.admin:token_revoke", name="revoke")
hub_app.command("amux_memory.tools.cli.invite:invite", name="invite")
invitation_app.command("amux_memory.tools.cli.invite:invitation_list", name="list")
invitation_app.command("amux_memory.tools.cli.invite:invitation_revoke", name="revoke")
team_app.command("amux_memory.tools.cli.admin:team_add", name="add")
team_app.command("amux_memory.tools.cli.admin:team_remove", name="remove")
team_app.command("amux_memory.tools.cli.admin:team_list", name="list")
team_app.command("amux_memory.tools.cli.admin:team_show", name="show")
member_app.command("amux_memory.tools.cli.admin:member_add", name="add")
member_app.command("amux_memory.tools.cli.admin:member_remove", name="remove")
scope_app.command("amux_memory.tools.cli.scope:scope_copy", name="copy")
config_app.command("amux_memory.tools.cli.config:config_get", name="get")
config_app.command("amux_memory.tools.cli.config:config_set", name="set")
config_app.command("amux_memory.tools.cli.config:config_list", name="list")

memory_app.command("amux_memory.tools.cli.memory:search", name="search")
memory_app.command("amux_memory.tools.cli.memory:show", name="show", alias="get")
memory_app.command("amux_memory.tools.cli.memory:upsert", name="upsert")
memory_app.command("amux_memory.tools.cli.memory:list_documents", name="list")
memory_app.command("amux_memory.tools.cli.memory:forget", name="forget")
memory_app.command("amux_memory.tools.cli.memory:export", name="export")
memory_app.command("amux_memory.tools.cli.memory:copy_document", name="copy")
memory_app.command("amux_memory.tools.cli.memory:move_document", name="move")
memory_app.command("amux_memory.tools.cli.edit:edit", name="edit")
memory_app.command("amux_memory.tools.cli.history:history", name="history")
memory_app.command("amux_memory.tools.cli.history:log", name="log")
memory_app.command("amux_memory.tools.cli.history:diff", name="diff")
memory_app.command("amux_memory.tools.cli.history:restore", name="restore")
memory_app.command("amux_memory.tools.cli.history:purge", name="purge")
memory_app.command("amux_memory.tools.cli.scan:scan", name="scan")
memory_app.command("amux_memory.tools.cli.health:health", name="health")
memory_app.command("amux_memory.tools.cli.code:project", name="project")
memory_app.command("amux_memory.tools.cli.code:cite", name="cite")
memory_app.command(review_app)


@review_app.default
def review_pending(*, path_prefix: str = "", as_json: AsJson = False) -> int:
    """The memory changes agents proposed, waiting for your review (memory.review = agents).

    In a terminal, a table fitting 80 columns (id, age, action, lines changed, session, path and
    proposer); piped or with --json, {"proposals": [...], "pending", "review"}.
    Then: amux memory review show ID; approve ID; reject ID.

    Parameters
    ----------
    path_prefix
        Only proposals whose path starts with this.
    """
    from amux_memory.tools.cli.review import review

    return review(path_prefix=path_prefix, as_json=as_json)


review_app.command("amux_memory.tools.cli.review:show", name="show")
review_app.command("amux_memory.tools.cli.review:approve", name="approve",
                   usage="Usage: amux memory review approve [OPTIONS] [PROPOSAL...]")
review_app.command("amux_memory.tools.cli.review:reject", name="reject",
                   usage="Usage: amux memory review reject [OPTIONS] [PROPOSAL...]")
memory_app.command("amux_memory.tools.cli.tidy:tidy", name="tidy",
                   usage="Usage: amux memory tidy [OPTIONS] AGENT [-- AGENT_ARGS...]")
memory_app.command("amux_memory.tools.cli.typed:memory_new", name="new")
memory_app.command("amux_memory.tools.cli.typed:memory_remove", name="remove")
memory_app.command("amux_memory.tools.cli.typed:memory_index", name="index")
memory_app.command("amux_memory.tools.cli.typed:memory_lint", name="lint")
memory_app.command("amux_memory.tools.cli.typed_ops:archive_command", name="archive")
memory_app.command("amux_memory.tools.cli.typed_ops:import_command", name="import")

protocol_app.command("amux_memory.tools.cli.agent:protocol_show", name="show")
app.command("amux_memory.tools.cli.agent:mcp_serve", name="mcp")
app.command("amux_memory.tools.cli.doctor:doctor", name="doctor")
app.command("amux_memory.tools.cli.login:login", name="login")
app.command("amux_memory.tools.cli.login:logout", name="logout")
app.command("amux_memory.tools.cli.ui:ui", name="ui")
# Its tokens go to tools.cli.launch raw: the agent's own --help, --version and -- must reach the agent.  The
# delimiter is a NUL (no argv token can contain one), not "": cyclopts would take an empty argument for it.
app.command("amux_memory.tools.cli.launch:launch", name="launch", help_flags=[], version_flags=[],
            end_of_options_delimiter="\0")



HELP_FLAGS = ("--help", "-h")
VERSION_FLAGS = ("--version",)
GROUP_PATHS = {(), ("hub",), ("hub", "principal"), ("hub", "token"), ("hub", "team"), ("hub", "team", "member"),
               ("hub", "invitation"),
               ("hub", "scope"), ("hub", "service"), ("hub", "tls"), ("memory",), ("system",), ("system", "config"),
               ("protocol",)}
"""Token lists that name a command group: cyclopts prints the group's help page for them."""


def prints_help(tokens: list[str]) -> bool:
    """Whether cyclopts will print a help page or the version for ``tokens`` (through rich, on stdout)."""
    if tokens[:1] == ["launch"]:
        return False  # the agent's own --help and --version
    return tuple(tokens) in GROUP_PATHS or any(flag in tokens for flag in (*HELP_FLAGS, *VERSION_FLAGS))


def use_pipe_aware_console() -> None:
    """Make cyclopts' console exit with :attr:`ExitStatus.BROKEN_PIPE` when stdout's reader went away.

    rich's ``Console.on_broken_pipe`` points stdout at ``/dev/null`` and
    raises ``SystemExit(1)``, which would report ``amux --help | head -1`` as
    a failure.  Imports rich, so only called when help is printed.
    """
    from rich.console import Console

    class PipeAwareConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(int(ExitStatus.BROKEN_PIPE))

    app.console = PipeAwareConsole()


def resolve_commands(group: App) -> None:
    """Import every lazily registered command below ``group``, so a help page can show their descriptions.

    Only ``--help`` needs this: cyclopts lists an unresolved command without
    its docstring.  Running a command resolves just that command.
    """
    for name in list(group):
        if name in group.help_flags or name in group.version_flags:
            continue
        sub = group[name]
        if sub is not group:
            resolve_commands(sub)


def main(argv: list[str] | None = None) -> int:
    """Run ``amux`` on ``argv`` (default ``sys.argv[1:]``) and return the exit status.

    Called as the console script (``argv`` None) it exits the process with
    that status instead.  Statuses: the command's (0, an error code's 1-13,
    :class:`ExitStatus`), 2 for cyclopts' usage errors, and
    :attr:`ExitStatus.BROKEN_PIPE` (141) when stdout's reader went away.
    """
    tokens = sys.argv[1:] if argv is None else argv
    if any(flag in tokens for flag in HELP_FLAGS):
        resolve_commands(app)
    if prints_help(tokens):
        use_pipe_aware_console()
    try:
        result = app(tokens, result_action="return_value")
    except BrokenPipeError:
        # The reader went away (`| head`): not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = int(ExitStatus.BROKEN_PIPE)
    except SystemExit as exc:  # cyclopts' usage errors and --help
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except (HubError, OSError) as exc:  # one a command let through: reported once, never a traceback (§17)
        from amux_memory.tools.cli.output.contract import fail, os_failure

        code = fail(exc if isinstance(exc, HubError) else os_failure(exc))
    else:
        code = result if isinstance(result, int) else 0
    if argv is None:
        sys.exit(code)
    return code
