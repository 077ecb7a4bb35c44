"""``amux doctor``: check the whole set-up and say how to fix each problem (DESIGN.md §19).

Checks, in order, each ``ok``, ``warn``, ``fail`` or ``skip`` with a one-line summary and, unless
``ok``, a fix command (its ``name`` in parentheses): the ``amux`` CLI on ``PATH`` (``cli``); the home
and socket (``home``); the Hub answering a ``hello`` (``hub``); memory enabled (``memory``); the
caller's principal and scope (``identity``); agents' proposals awaiting review (``review``, a
warning); documents nobody reaches (``scopes``, ``unreached_scope``, ``reserved_entry``: a scope left
behind by a change of ``memory.isolation``, hand-placed top-level ``@`` entries; DESIGN.md §7.8); when
``hub.mcp_listen`` is set, the MCP HTTP listener (``mcp_http``) and, with ``hub.tls_cert``, its
certificate (``tls_cert``, a warning before it expires); the ``amux`` MCP server registered in Claude
Code (``claude_mcp``: ``~/.claude.json``, ``~/.claude/settings.json``; ``$CLAUDE_CONFIG_DIR`` moves
both) and Codex (``codex_mcp``: ``$CODEX_HOME/config.toml``, default ``~/.codex``); and whether those
agents' own memory is on for a plain run (``claude_memory``, ``codex_memory``; a run not started by
``amux launch``, which switches it off, DESIGN.md §10); the same for OpenCode, Copilot CLI, Qwen Code and
Gemini CLI, with a token written into their file (:mod:`tools.cli.doctor_agents`).  Agent files are only
read, never written.
Exit status 0 when nothing failed (warnings allowed), ``ExitStatus.PROBLEMS_FOUND`` (20) otherwise.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from amux_memory.protocol.errors import ErrorCode, ExitStatus, HubError
from amux_memory.tools.cli.doctor_agents import read_json_object
from amux_memory.tools.cli.options import Home, resolve_home
from amux_memory.tools.cli.output.plain import Json, show
from amux_memory.tools.client.wording import counted

Status = Literal["ok", "warn", "fail", "skip"]

TRUE_TEXT = ("1", "true", "yes", "on")
"""Values of an environment switch such as ``CLAUDE_CODE_DISABLE_AUTO_MEMORY`` that mean "on"."""


@dataclass(frozen=True)
class Check:
    """One finding: ``name`` (stable, for scripts), ``status``, ``summary`` (one line) and ``fix`` (a command or
    an instruction; ``""`` when nothing needs doing)."""

    name: str
    status: Status
    summary: str
    fix: str = ""


@dataclass
class Context:
    """What the checks share: the home, the CLI command, the Hub's hello (``None`` when it did not answer)."""

    home: Path
    home_flag: str
    amux: str
    hello: dict[str, Any] | None = None
    endpoint: str = ""
    """The Hub being checked, as text: its socket path, or ``AMUX_HUB``'s address."""
    pin: dict[str, str] | None = None
    """The env a registration needs to reach the checked Hub (``{"AMUX_HOME": D}``), empty for the default."""
    login: Any = None
    """What ``amux login`` stored (:class:`tools.client.settings.Login`) when it chooses the Hub, else None."""


def _read_toml(path: Path) -> dict[str, Any] | None:
    """``path`` parsed as TOML; ``None`` when missing; raises ``ValueError`` when unreadable or invalid."""
    import tomllib

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid TOML ({exc})") from None


def _table(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def check_cli(ctx: Context) -> Check:
    """The ``amux`` on ``PATH`` (what MCP registrations naming ``amux`` start)."""
    found = shutil.which("amux")
    if found is None:
        return Check("cli", "warn", "no 'amux' on PATH: agents registered with a bare 'amux' cannot start it",
                     f"register the absolute path ({ctx.amux}), or add {Path(ctx.amux).parent} to PATH")
    if Path(found).resolve() != Path(ctx.amux).resolve():
        return Check("cli", "warn", f"'amux' on PATH is {found}, not this installation ({ctx.amux})",
                     f"put {Path(ctx.amux).parent} first on PATH, or register {ctx.amux} with your agents")
    return Check("cli", "ok", f"'amux' on PATH is {found}")


def check_hub(ctx: Context, socket: Path, remote: str | None) -> list[Check]:
    """The home and socket, the Hub answering, memory enabled, principal and scope."""
    from amux_memory.protocol.config_file import enable_command
    from amux_memory.protocol.settings import get_value
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.running import serving_hub

    where = remote or str(socket)
    if remote:  # a client of a Hub elsewhere: no private Hub to start here (DESIGN.md §19.4)
        checks = [Check("home", "ok", f"a client of the Hub at {remote} ({'amux login' if ctx.login else 'AMUX_HUB'})"
                        f"; no Hub of its own runs from {ctx.home}")]
    else:
        checks = [Check("home", "ok" if ctx.home.is_dir() else "warn",
                        f"home {ctx.home}, socket {where}" if ctx.home.is_dir()
                        else f"home {ctx.home} does not exist yet (socket {where})",
                        "" if ctx.home.is_dir() else f"amux hub start{ctx.home_flag}")]
    start = f"amux hub start{ctx.home_flag}"
    waiting: int | None = None
    found: dict[str, int] | None = None
    try:
        with (HubClient() if remote else HubClient(socket)) as client:
            ctx.hello = dict(client.hello)
            from amux_memory.tools.lifecycle.control import pending_review

            waiting = pending_review(client)
            found = _health_counts(client) if ctx.hello.get("memory_enabled") else None
    except HubError as exc:
        holder = None if remote else serving_hub(ctx.home)
        if exc.code is not ErrorCode.UNAVAILABLE:
            checks.append(Check("hub", "fail", f"the Hub at {where} refused this caller: {exc.code.value}: "
                                f"{exc.message}", RELOGIN if ctx.login else "ask the Hub's operator for access "
                                "(amux hub principal, amux hub token issue)"))
        elif remote:
            checks.append(Check("hub", "fail", f"no Hub answers at {where}: {exc.message}", "check the address and "
                                "the network from here; ask the Hub's operator whether it runs ('amux hub status' "
                                "on the Hub host)"))
        elif holder is not None:
            checks.append(Check("hub", "fail", f"a Hub (pid {holder.pid}) holds {ctx.home} but does not answer at "
                                f"{where}", f"amux hub restart{ctx.home_flag}"))
        else:
            checks.append(Check("hub", "fail", f"no Hub answers at {where}: {exc.message}" if remote else
                                f"no Hub is running for {ctx.home} (nothing answers at {where})",
                                f"amux hub start{ctx.home_flag}   (or: amux hub service install --user)"))
    else:
        checks.append(Check("hub", "ok", f"the Hub answers at {where} (version {ctx.hello.get('hub_version')})"))
    restart = f"amux hub restart{ctx.home_flag}"
    if ctx.hello is not None:
        if ctx.hello.get("memory_enabled"):
            checks.append(Check("memory", "ok", "memory is enabled"))
        else:
            checks.append(Check("memory", "fail", "memory is disabled on this Hub: every data call fails",
                                f"{enable_command(ctx.home)} && {restart}"))
        checks.append(Check("identity", "ok", f"you are principal {ctx.hello.get('principal')} "
                            f"({ctx.hello.get('principal_kind')}, by {ctx.hello.get('auth')}); scope "
                            f"{ctx.hello.get('scope')}, binding {ctx.hello.get('binding')}, isolation "
                            f"{ctx.hello.get('isolation')}"))
        if found:
            shown = ", ".join(f"{code} {n}" for code, n in sorted(found.items()))
            checks.append(Check("health", "warn", f"memory health: {sum(found.values())} findings ({shown})",
                                "amux memory health"))
        elif found is not None:
            checks.append(Check("health", "ok", "memory health: no findings"))
        if waiting:
            checks.append(Check("review", "warn", f"{waiting} memory changes proposed by agents await review",
                                "amux memory review"))
        return checks
    if remote:
        checks.append(Check("memory", "skip", "no answer from the Hub: whether memory is on is unknown"))
    else:
        try:
            enabled = get_value(ctx.home, "memory.enabled")
        except HubError as exc:
            checks.append(Check("memory", "fail", exc.message, f"fix {ctx.home / 'config.toml'}"))
        else:
            checks.append(Check("memory", "ok", "memory.enabled is true in the settings (the Hub is not running)")
                          if enabled else Check("memory", "fail", "memory.enabled is false: a Hub on this home "
                                                "would refuse every data call", f"{enable_command(ctx.home)} && "
                                                f"{start}"))
    checks.append(Check("identity", "skip", "no answer from the Hub: principal and scope unknown"))
    return checks


RELOGIN = "ask the Hub's operator for a new invitation ('amux hub invite NAME'), then 'amux logout' and 'amux login " \
          "INVITATION'"
"""The fix for a login whose token or CA no longer works."""


def check_login(ctx: Context, login: Any) -> list[Check]:
    """A client of a remote Hub by ``amux login`` (DESIGN.md §7.4): the address, the CA pinned then, the token
    (its file's mode; valid, and when it expires, from the Hub's ``hello``) and the teams ``hello`` names."""
    import datetime as dt
    import stat

    from amux_memory.protocol.invitation import fingerprint
    from amux_memory.tools.cli.tls import EXPIRY_WARNING_DAYS

    checks = [Check("login", "ok", f"logged in to {login.hub} as {login.principal} ({login.home / 'login.toml'})")]
    try:
        seen = fingerprint(login.ca_file.read_text(encoding="ascii"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        checks.append(Check("ca", "fail", f"the Hub's CA {login.ca_file} cannot be read ({exc})", RELOGIN))
    else:
        checks.append(Check("ca", "ok", f"the Hub's CA {login.ca_file} is the one pinned at login (SHA-256 "
                            f"{seen[:16]}…)") if seen == login.fingerprint else
                      Check("ca", "fail", f"{login.ca_file} is not the CA pinned at login (SHA-256 {seen[:16]}…, "
                            f"not {login.fingerprint[:16]}…)", RELOGIN))
    try:
        mode = stat.S_IMODE(login.token_file.stat().st_mode)
    except OSError as exc:
        checks.append(Check("token", "fail", f"the token file {login.token_file} cannot be read ({exc.strerror})",
                            RELOGIN))
        return checks
    if mode & 0o077:
        checks.append(Check("token", "warn", f"the token file {login.token_file} is readable by others (mode "
                            f"{mode:04o})", f"chmod 600 {login.token_file}"))
    elif ctx.hello is None:
        checks.append(Check("token", "skip", "no answer from the Hub: whether the token is valid is unknown"))
    elif ctx.hello.get("auth") != "token":
        checks.append(Check("token", "warn", f"the Hub did not take the login's token ({ctx.hello.get('auth')})",
                            "unset AMUX_TOKEN, or log in again"))
    else:
        expires = ctx.hello.get("expires")
        stamp = expires if isinstance(expires, int) else None
        left = None if stamp is None else (stamp - dt.datetime.now(dt.UTC).timestamp()) / 86400
        when = ("no expiry" if stamp is None or left is None else
                f"expires {dt.datetime.fromtimestamp(stamp, dt.UTC):%Y-%m-%d} ({left:.0f} days)")
        soon = left is not None and left <= EXPIRY_WARNING_DAYS
        checks.append(Check("token", "warn" if soon else "ok", f"token {ctx.hello.get('token_id')} is valid; {when}",
                            RELOGIN if soon else ""))
    if ctx.hello is not None:
        mounts = [m for m in ctx.hello.get("mounts") or [] if isinstance(m, dict)]
        shown = ", ".join(f"{m.get('mount')} ({m.get('role')}, review {m.get('review')})" for m in mounts)
        checks.append(Check("teams", "ok", f"member of {shown}" if mounts else "in no team yet (the Hub's operator "
                            "adds members: 'amux hub team member add TEAM NAME')"))
    return checks


def _health_counts(client: Any) -> dict[str, int] | None:
    """The Hub's ``health`` counts per code (DESIGN.md §23), or None when this Hub does not answer it."""
    from amux_memory.protocol.requests import health_params

    try:
        counts = client.call("health", health_params()).get("counts") or {}
    except HubError:
        return None
    return {str(code): int(n) for code, n in counts.items()}


def check_scopes(ctx: Context) -> list[Check]:
    """What the home's memory folder holds that nobody reaches (DESIGN.md §7.8), read in-process: a scope left
    behind by a change of ``memory.isolation`` (with the ``amux hub scope copy`` command that brings its
    documents over), and each top-level ``@`` entry of a scope (reserved for team mounts: search and list pass
    it over and no caller can name it; the fix is a shell ``mv`` to a name that is not reserved).  The isolation
    is the running Hub's, else the settings file's."""
    import pwd

    from amux_memory.hub.access.config import reserved_entries
    from amux_memory.protocol.settings import get_value
    from amux_memory.tools.cli.scope import unreached_line, unreached_report

    if ctx.hello is not None:
        isolation, operator = str(ctx.hello.get("isolation")), str(ctx.hello.get("principal"))
    else:
        try:
            isolation = str(get_value(ctx.home, "memory.isolation"))
        except HubError:
            return []  # the memory check already names an unreadable settings file
        try:
            operator = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            operator = f"uid:{os.getuid()}"
    memory = ctx.home / "memory"
    unreached = unreached_report(ctx.home, isolation, operator)
    try:
        reserved = reserved_entries(ctx.home)
    except OSError:
        reserved = None
    if unreached is None or reserved is None:
        return [Check("scopes", "skip", f"cannot read {memory} (the Hub runs as another user?): documents left "
                      "behind by a change of memory.isolation are not checked", f"run 'amux doctor{ctx.home_flag}' "
                      "as the Hub's user")]
    checks = [Check("unreached_scope", "warn", unreached_line(entry, isolation),
                    entry["command"] or ("amux hub team add NAME, then amux hub scope copy --move global team:NAME"
                                         if entry["binding"] == "global"
                                         else "amux hub scope copy --move principal:NAME global") + ctx.home_flag)
              for entry in unreached]
    checks += [Check("reserved_entry", "warn", f"{entry.path} starts with '@', which names team mounts: search and "
                     "list pass it over and no caller can read it; move it to a name without '@'", entry.command)
               for entry in reserved]
    if not checks:
        checks.append(Check("scopes", "ok", f"no documents left where nobody reaches them (isolation {isolation})"))
    return checks


PINNED = ("AMUX_HOME", "AMUX_HUB")
"""The environment variables of a registration that choose its Hub."""


def _server_env(server: Any) -> dict[str, str]:
    """A registration's ``env`` table as strings (``{}`` when it has none or it is not a table)."""
    env = server.get("env") if isinstance(server, dict) else None
    return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}


def _server_summary(server: Any) -> str:
    if not isinstance(server, dict):
        return "?"
    argv = [str(server.get("command", ""))] + [str(a) for a in server.get("args") or []]
    text = shlex.join(a for a in argv if a)
    pinned = [f"{k}={v}" for k, v in _server_env(server).items() if k in PINNED]
    if pinned:
        text += " (" + ", ".join(pinned) + ")"
    return text


def registered_hub(server: Any) -> str:
    """The Hub a registered server would talk to, as text (a socket path or an address).

    The server starts with the agent's environment (taken to be this
    process's) plus the registration's ``env``: ``AMUX_HUB``, else
    ``AMUX_HOME``'s socket, else ``~/.amux``'s (DESIGN.md §19).  A malformed
    ``AMUX_HUB`` is returned as it is written.
    """
    from amux_memory.tools.client.settings import HUB_ENV, resolve_endpoint

    environ = {**os.environ, **_server_env(server)}
    try:
        return normal_endpoint(str(resolve_endpoint(environ)))
    except HubError:
        return environ.get(HUB_ENV, "")


def normal_endpoint(endpoint: str) -> str:
    """A socket path made absolute and normalised (``~`` expanded), so two spellings compare equal; an address as
    it is."""
    return endpoint if "://" in endpoint else os.path.abspath(os.path.expanduser(endpoint))


def hub_answers(endpoint: str) -> bool:
    """Whether a Hub answers ``hello`` at ``endpoint`` (a socket path; an address counts as answering, unchecked:
    reaching it may need a token).  Waits at most 2 s."""
    from amux_memory.tools.lifecycle.spawn import serves

    return "://" in endpoint or serves(Path(endpoint))


def check_target(name: str, where: str, server: Any, ctx: Context, add: str) -> Check | None:
    """A ``fail``/``warn`` when the registered server's Hub (:func:`registered_hub`) is not the one checked:
    none answers there, or another one does; ``None`` when it is the checked Hub."""
    target = registered_hub(server)
    if target == ctx.endpoint:
        return None
    pinned = ", ".join(f"{k}={v}" for k, v in _server_env(server).items() if k in PINNED) or "no AMUX_HOME"
    if not hub_answers(target):
        return Check(name, "fail", f"amux is registered in {where} ({pinned}), but no Hub answers at {target}: "
                     f"its tools fail ('Connected' only means the server started); this check is for {ctx.endpoint}",
                     add)
    return Check(name, "warn", f"amux is registered in {where} ({pinned}) and talks to the Hub at {target}, not "
                 f"the one checked here ({ctx.endpoint})", f"check that one with 'amux doctor', or register this "
                 f"one: {add}")


def env_options(flag: str, env: dict[str, str]) -> str:
    """``env`` as ``FLAG K=V`` options of an ``mcp add`` command (shell-quoted), each with a leading space."""
    return "".join(f" {flag} {shlex.quote(f'{k}={v}')}" for k, v in env.items())


def wanted_env(server: Any, ctx: Context) -> dict[str, str]:
    """The env a new registration should carry: the old one's other variables, and the checked Hub's pin."""
    kept = {k: v for k, v in _server_env(server).items() if k not in PINNED}
    return {**kept, **(ctx.pin or {})}


def _command_problem(server: Any) -> str | None:
    """Why a registered MCP server's command cannot run, or ``None``."""
    if not isinstance(server, dict) or not server.get("command"):
        return None if isinstance(server, dict) and server.get("url") else "it has no command"
    command = str(server["command"])
    if os.sep in command:
        return None if os.access(command, os.X_OK) else f"{command} does not exist or is not executable"
    return None if shutil.which(command) else f"'{command}' is not on PATH"


def claude_files() -> tuple[Path, Path]:
    """Claude Code's user state file and user settings file: ``~/.claude.json`` and ``~/.claude/settings.json``
    (both under ``$CLAUDE_CONFIG_DIR`` when it is set)."""
    config_dir = os.environ.get("CLAUDE_CONFIG_DIR")
    if config_dir:
        return Path(config_dir) / ".claude.json", Path(config_dir) / "settings.json"
    return Path.home() / ".claude.json", Path.home() / ".claude" / "settings.json"


def check_claude(ctx: Context) -> list[Check]:
    """The ``amux`` server in Claude Code's user (or this project's) MCP servers; its auto memory for plain runs."""
    state_path, settings_path = claude_files()
    try:
        state = read_json_object(state_path)
        settings = read_json_object(settings_path)
    except ValueError as exc:
        return [Check("claude_mcp", "warn", str(exc), "fix or remove the file")]
    installed = shutil.which("claude") is not None
    if state is None and settings is None and not installed:
        return [Check("claude_mcp", "skip", "Claude Code not found (no claude on PATH, no ~/.claude.json)")]
    cwd = str(Path.cwd())
    found = [(f"{state_path} (user: every project)", _table(state, "mcpServers", "amux")),
             (f"{state_path} (project {cwd} only)", _table(state, "projects", cwd, "mcpServers", "amux")),
             (f"{settings_path} (user: every project)", _table(settings, "mcpServers", "amux"))]
    registered = [(where, server) for where, server in found if server is not None]
    http = _serves_mcp_http(ctx)

    def add(env: dict[str, str]) -> str:
        if http:  # the set-up 'amux hub connect claude' makes, never another (DESIGN.md §19.4)
            return f"amux hub connect claude{ctx.home_flag}"
        return f"claude mcp add -s user amux{env_options('-e', env)} -- {shlex.quote(ctx.amux)} mcp"

    checks = []
    if not registered:
        checks.append(Check("claude_mcp", "warn", "the amux MCP server is not registered in Claude Code for this "
                            "folder (fine if you only use 'amux launch claude')", add(ctx.pin or {})))
    elif isinstance(registered[0][1], dict) and registered[0][1].get("url"):
        checks.append(check_claude_http(*registered[0], f"amux hub connect claude{ctx.home_flag}"))
    else:
        where, server = registered[0]
        problem = _command_problem(server)
        again = f"claude mcp remove -s user amux && {add(wanted_env(server, ctx))}"
        if problem:
            checks.append(Check("claude_mcp", "fail", f"amux is registered in {where} but {problem}",
                                f"claude mcp remove -s user amux && {add(_server_env(server))}"))
        else:
            checks.append(check_target("claude_mcp", where, server, ctx, again) or
                          Check("claude_mcp", "ok", f"amux is registered in {where}: {_server_summary(server)}"))
    checks.append(check_claude_memory(settings_path, settings, bool(registered)))
    return checks


def _serves_mcp_http(ctx: Context) -> bool:
    """Whether the checked home's Hub serves MCP over HTTP (``hub.mcp_listen``): then ``amux hub connect claude``
    is the set-up doctor suggests, as the README does."""
    from amux_memory.protocol.settings import get_value

    try:
        return bool(str(get_value(ctx.home, "hub.mcp_listen")))
    except (HubError, OSError):
        return False


def check_claude_http(where: str, server: dict[str, Any], connect: str) -> Check:
    """An HTTP registration of amux in Claude Code: its URL, how the token is sent (a headersHelper, a variable, or
    a literal token in the file: a warning), and its reach (every project, or this folder only: a warning)."""
    url = str(server.get("url"))
    headers = server.get("headers") if isinstance(server.get("headers"), dict) else {}
    sent = str(headers.get("Authorization", headers.get("authorization", ""))) if headers else ""
    if server.get("headersHelper"):
        how = "token from a headersHelper"
    elif "${" in sent:
        how = f"token from {sent.split('${', 1)[1].split('}', 1)[0]} in Claude Code's environment"
    elif sent:
        return Check("claude_mcp", "warn", f"amux is registered over HTTP ({url}) in {where} with the token written "
                     "in that file in plain text", f"claude mcp remove -s user amux; {connect} (a headersHelper reads "
                     "it from a 0600 file)")
    else:
        how = "no token sent"
    summary = f"amux is registered over HTTP in {where}: {url}, {how}"
    if "only)" in where:
        return Check("claude_mcp", "warn", f"{summary}; other projects have no memory",
                     f"{connect} (registers it for every project)")
    return Check("claude_mcp", "ok", summary)


def claude_project_settings() -> list[Path]:
    """This folder's Claude Code project settings, the one that wins first: ``.claude/settings.local.json``,
    then ``.claude/settings.json`` (both outrank the user's settings)."""
    here = Path.cwd() / ".claude"
    return [here / "settings.local.json", here / "settings.json"]


def check_claude_memory(settings_path: Path, settings: dict[str, Any] | None, registered: bool) -> Check:
    """Whether Claude Code's auto memory is on for a plain run started here: the environment, then this
    folder's project settings (:func:`claude_project_settings`), then the user's settings, the first that says."""
    if os.environ.get("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "").strip().lower() in TRUE_TEXT:
        return Check("claude_memory", "ok", "Claude Code's own auto memory is off for plain runs "
                     "(CLAUDE_CODE_DISABLE_AUTO_MEMORY in this environment)")
    layers: list[tuple[Path, dict[str, Any] | None]] = []
    for path in claude_project_settings():
        try:
            layers.append((path, read_json_object(path)))
        except ValueError as exc:
            return Check("claude_memory", "warn", str(exc), "fix or remove the file")
    layers.append((settings_path, settings))
    decided: tuple[Path, bool, str] | None = None
    for path, layer in layers:
        env = _table(layer, "env", "CLAUDE_CODE_DISABLE_AUTO_MEMORY")
        if env is not None and str(env).strip().lower() in TRUE_TEXT:
            decided = (path, False, "env.CLAUDE_CODE_DISABLE_AUTO_MEMORY")
            break
        setting = _table(layer, "autoMemoryEnabled")
        if isinstance(setting, bool):
            decided = (path, setting, f"autoMemoryEnabled {str(setting).lower()}")
            break
    if decided is not None and not decided[1]:
        return Check("claude_memory", "ok", f"Claude Code's own auto memory is off for plain runs "
                     f"({decided[0]}: {decided[2]})")
    source = f" ({decided[0]}: {decided[2]})" if decided is not None else ""
    where = decided[0] if decided is not None else settings_path
    if registered:
        return Check("claude_memory", "warn", f"Claude Code's own auto memory is on for plain 'claude' runs here"
                     f"{source}: with amux registered it gets two competing memories", "use 'amux launch claude' "
                     f"(it switches it off), or set \"autoMemoryEnabled\": false in {where}")
    return Check("claude_memory", "ok", f"Claude Code's own auto memory is on for plain runs{source} (amux is not "
                 "registered there; 'amux launch claude' switches it off)")


def codex_config_path() -> Path:
    """Codex's user ``config.toml``: ``$CODEX_HOME/config.toml``, default ``~/.codex/config.toml``."""
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "config.toml"


def check_codex(ctx: Context) -> list[Check]:
    """The ``amux`` server in Codex's ``mcp_servers``; its native memories for plain runs."""
    path = codex_config_path()
    try:
        config = _read_toml(path)
    except ValueError as exc:
        return [Check("codex_mcp", "warn", str(exc), f"fix {path}")]
    if config is None and shutil.which("codex") is None:
        return [Check("codex_mcp", "skip", f"Codex not found (no codex on PATH, no {path})")]
    server = _table(config, "mcp_servers", "amux")

    def add(env: dict[str, str]) -> str:
        return f"codex mcp add amux{env_options('--env', env)} -- {shlex.quote(ctx.amux)} mcp"

    checks = []
    if server is None:
        checks.append(Check("codex_mcp", "warn", f"the amux MCP server is not registered in {path} (fine if you only "
                            "use 'amux launch codex')", add(ctx.pin or {})))
    else:
        problem = _command_problem(server)
        disabled = isinstance(server, dict) and server.get("enabled") is False
        if problem or disabled:
            checks.append(Check("codex_mcp", "fail", f"amux is registered in {path} but "
                                f"{problem or 'it is disabled (enabled = false)'}",
                                f"codex mcp remove amux && {add(_server_env(server))}"))
        else:
            again = f"codex mcp remove amux && {add(wanted_env(server, ctx))}"
            checks.append(check_target("codex_mcp", str(path), server, ctx, again) or
                          Check("codex_mcp", "ok", f"amux is registered in {path}: {_server_summary(server)}"))
    feature = _table(config, "features", "memories")
    use, generate = _table(config, "memories", "use_memories"), _table(config, "memories", "generate_memories")
    effective = codex_memories_feature()
    source = "codex features list" if effective is not None else str(path)
    enabled = effective if effective is not None else feature is True
    fix = (f"use 'amux launch codex' (it switches them off), or in {path} set memories = false under [features], "
           "and use_memories = false and generate_memories = false under [memories]")
    if not enabled or (use is False and generate is False):
        checks.append(Check("codex_memory", "ok", f"Codex's native memories are off for plain runs ({source})"))
    elif server is None:
        checks.append(Check("codex_memory", "ok", f"Codex's native memories are on ({source}), but amux is not "
                            "registered there ('amux launch codex' switches them off)"))
    else:
        checks.append(Check("codex_memory", "warn", f"Codex's native memories are on for plain 'codex' runs "
                            f"({source}): with amux registered it gets two competing memories", fix))
    return checks


def check_more_agents() -> list[Check]:
    """OpenCode, Copilot CLI, Qwen Code and Gemini CLI: amux registered, a literal token in the file, their own
    memory on (:mod:`tools.cli.doctor_agents`; files only read)."""
    from amux_memory.tools.cli.doctor_agents import check_more_agents as more

    return [Check(c.name, c.status, c.summary, c.fix) for c in more()]  # type: ignore[arg-type]


def check_team_setup(ctx: Context) -> list[Check]:
    """On the Hub host, what 'amux hub setup --team' set up (:func:`tools.cli.team_setup.team_checks`): isolation,
    the socket's folder, the TLS listener, metrics, the unit and the backup timer; none for a home without
    ``hub.socket_group``."""
    from amux_memory.tools.cli.team_setup import team_checks

    return [Check(name, status, summary, fix) for name, status, summary, fix in team_checks(ctx.home)]


def codex_memories_feature() -> bool | None:
    """Whether Codex's ``memories`` feature is on, as ``codex features list`` reports it (its default, the user's
    ``config.toml`` and profile applied); ``None`` when ``codex`` is not on ``PATH`` or does not say within 10 s."""
    import subprocess

    codex = shutil.which("codex")
    if codex is None:
        return None
    try:
        proc = subprocess.run([codex, "features", "list"], capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    for line in proc.stdout.splitlines():
        words = line.split()
        if words and words[0] == "memories" and words[-1] in ("true", "false"):
            return words[-1] == "true"
    return None


MARK: dict[str, str] = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "--  "}


def check_mcp_http(ctx: Context) -> list[Check]:
    """When ``hub.mcp_listen`` is set: something listens there, and with TLS the certificate names the listener's
    host and does not expire within ``tools.cli.tls.EXPIRY_WARNING_DAYS`` (a warning) or is not expired."""
    import socket as stdlib_socket

    from amux_memory.protocol.settings import get_value, parse_listen
    from amux_memory.tools.cli.tls import EXPIRY_WARNING_DAYS, certificate_problems

    try:
        listen, cert = str(get_value(ctx.home, "hub.mcp_listen")), str(get_value(ctx.home, "hub.tls_cert"))
    except (HubError, OSError):
        return []  # the memory check already names an unreadable settings file
    if not listen:
        return []
    host, port = parse_listen(listen)
    if port == 0:
        return [Check("mcp_http", "skip", f"hub.mcp_listen {listen} takes a free port at each start: not checked")]
    probe = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    checks = []
    try:
        with stdlib_socket.create_connection((probe, port), timeout=2):
            pass
        checks.append(Check("mcp_http", "ok", f"the MCP HTTP listener answers on {listen}"))
    except OSError as exc:
        checks.append(Check("mcp_http", "fail", f"nothing listens on hub.mcp_listen {listen} ({exc.strerror or exc})",
                            f"amux hub restart{ctx.home_flag}"))
    if cert:
        names = ["localhost"] if host in ("0.0.0.0", "::", "") else [host]
        problems = certificate_problems(cert, names)
        if not problems:
            checks.append(Check("tls_cert", "ok", f"{cert} names {', '.join(names)} and is valid for "
                                f"{EXPIRY_WARNING_DAYS} days or more"))
        else:
            soon = all("expires on" in p for p in problems)
            checks.append(Check("tls_cert", "warn" if soon else "fail", "; ".join(problems),
                                "amux hub tls init --force (then give the other machines the new ca.pem)"))
    return checks


def doctor(*, home: Home = None, json: Json = False) -> int:
    """Check the set-up: the CLI, the Hub, memory, who you are, documents nobody reaches, and the agents' MCP and
    own-memory settings.

    Each check says ok, WARN, FAIL or skipped, with the command that fixes
    it.  Without --home the Hub is the one the data commands use (AMUX_HUB,
    else the Hub of 'amux login', else AMUX_HOME's socket); after 'amux login'
    it also checks the login: the address, the CA, the token and the teams.  Agent configuration files are only read.
    JSON ({"ok", "checks": [{name, status, summary, fix}]}) with --json or
    when stdout is not a terminal.  Exit status 0 when nothing failed
    (warnings allowed), 20 when a check failed.
    """
    from amux_memory.protocol.config_file import home_option
    from amux_memory.tools.client.inert import inert
    from amux_memory.tools.client.installation import amux_command
    from amux_memory.tools.client.settings import HUB_ENV, configured_hub, read_login
    from amux_memory.tools.lifecycle.control import home_socket

    target = resolve_home(home)
    remote = None if home is not None else configured_hub()
    login = read_login(target) if remote else None
    if login is not None and os.environ.get(HUB_ENV) not in (None, "", login.hub):
        login = None  # AMUX_HUB names another Hub: the login is not the one checked
    command = amux_command()
    socket = home_socket(target)
    if remote:
        endpoint, pin = registered_hub({}), {HUB_ENV: remote}
    else:
        endpoint = normal_endpoint(str(socket))
        default = normal_endpoint(str(home_socket(Path.home() / ".amux")))
        pin = {} if endpoint == default else {"AMUX_HOME": str(target)}
    ctx = Context(home=target, home_flag=home_option(target), amux=command[0] if len(command) == 1
                  else shlex.join(command), endpoint=endpoint, pin=pin, login=login)
    checks = [check_cli(ctx), *check_hub(ctx, socket, remote), *([] if login is None else check_login(ctx, login)),
              *([] if remote else check_scopes(ctx)),
              *([] if remote else check_mcp_http(ctx)), *([] if remote else check_team_setup(ctx)),
              *check_claude(ctx), *check_codex(ctx), *check_more_agents()]
    healthy = all(c.status != "fail" for c in checks)
    doc = {"ok": healthy, "checks": [asdict(c) for c in checks]}
    lines = []
    for c in checks:
        lines.append(f"{MARK[c.status]}  {c.name:<14} {inert(c.summary)}")
        if c.fix and c.status != "ok":
            lines.append(f"{'':6}{'':<14} fix: {inert(c.fix)}")
    warnings = sum(1 for c in checks if c.status == "warn")
    if not healthy:
        lines.append("problems found: run the fix commands above")
    else:
        lines.append(f"no failures, {counted(warnings, 'warning')}: see the fixes above" if warnings else "all good")
    show(doc, lines, json_flag=json)
    return 0 if healthy else ExitStatus.PROBLEMS_FOUND
