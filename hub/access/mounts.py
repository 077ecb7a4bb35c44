"""A caller's view of memory: its own scope at the root and each of its teams at ``@NAME/`` (DESIGN.md §7.8).

A :class:`MountView` is computed for every data call from the registry in force at
that moment, so a member removed from a team loses the mount on its very next
call, on connections and MCP sessions that were already open.  This module is
pure: it resolves mounted paths and prefixes to ``(part, path inside it)``,
checks a caller's role against the one a method needs (its route's), and rewrites paths in answers and errors
between the two spellings.  :mod:`hub.methods.across_mounts` runs the calls.

The one rule about what a caller may learn: for a caller who is not a member,
``@web/…`` gets exactly the answer a team that does not exist gets
(:func:`no_mount`: same code, same message but for the name).  A first path
segment starting with ``@`` is reserved: it is never a document of a scope.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from amux_memory.hub.access.identity import Scope, team_scope
from amux_memory.hub.access.registry import ROLES, Registry
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.paths import MOUNT_MARK
from amux_memory.protocol.wording import did_you_mean

READ, WRITE, MAINTAIN = ROLES
"""The three roles, weakest first: ``reader``, ``writer``, ``maintainer``."""



@dataclass(frozen=True)
class Mount:
    """One team as a caller sees it: ``label`` (``@NAME/``), its scope (which carries the team's review rule and
    whether the caller maintains it), the caller's role."""

    name: str
    scope: Scope
    role: str

    @property
    def review(self) -> str:
        """The team's review rule (``off``, ``agents``, ``all``), as its scope carries it (DESIGN.md §7.8)."""
        return self.scope.review or "off"

    @property
    def label(self) -> str:
        """The mount's prefix in paths: ``@NAME/``."""
        return f"{MOUNT_MARK}{self.name}/"

    def allows(self, role: str) -> bool:
        """Whether the caller's role is ``role`` or stronger."""
        return ROLES.index(self.role) >= ROLES.index(role)


@dataclass(frozen=True)
class Part:
    """Where a call lands: the caller's root (``mount`` None) or one mount, and the path or prefix inside it."""

    scope: Scope
    mount: Mount | None
    inner: str

    @property
    def label(self) -> str:
        """``""`` for the root, else the mount's ``@NAME/``."""
        return "" if self.mount is None else self.mount.label


@dataclass(frozen=True)
class MountView:
    """A caller's root scope and its team mounts by name (DESIGN.md §7.8)."""

    root: Scope
    mounts: Mapping[str, Mount]

    def mounted(self) -> list[Mount]:
        """The mounts in name order."""
        return [self.mounts[name] for name in sorted(self.mounts)]

    def document(self, path: object, role: str) -> Part:
        """Where the document ``path`` lives, checked against ``role``, the role the method needs on a mount.

        A path not starting with ``@`` is the root's, unchanged (the service validates it).  ``@NAME/rest``
        is ``rest`` in mount ``NAME``.  Raises ``not_found`` (:func:`no_mount`) when the caller has no such
        mount, ``invalid_path`` for ``@NAME`` with nothing after it, ``unauthorized`` (reason ``role``) when
        the caller's role is weaker than ``role``.
        """
        if not isinstance(path, str) or not path.startswith(MOUNT_MARK):
            return Part(self.root, None, path if isinstance(path, str) else "")
        name, _, rest = path[1:].partition("/")
        mount = self.mounts.get(name)
        if mount is None:
            raise no_mount(name, self)
        if not rest:
            raise HubError(ErrorCode.INVALID_PATH, f"invalid path {path[:120]!r}: name a document inside the mount, "
                           f"such as {mount.label}notes.md", {"path": path[:120], "reason": "mount_only"})
        check_role(mount, role)
        return Part(mount.scope, mount, rest)

    def prefix(self, prefix: object, role: str) -> list[Part]:
        """The parts a ``path_prefix`` covers, root first, then mounts by name.

        ``""`` (or None) covers the root and every mount; ``@NAME/…`` that one mount (``not_found`` when the
        caller has none, as for a team that does not exist); ``@N`` without a slash the mounts whose label
        starts with it (possibly none); anything else the root alone.  Mounts whose role does not allow
        ``role`` (the role the method needs) are left out of a whole-view prefix; naming one explicitly raises
        ``unauthorized``.
        """
        if prefix is None or prefix == "":
            return [Part(self.root, None, "")] + [Part(m.scope, m, "") for m in self.mounted()
                                                    if m.allows(role)]
        if not isinstance(prefix, str) or not prefix.startswith(MOUNT_MARK):
            return [Part(self.root, None, prefix if isinstance(prefix, str) else "")]
        name, slash, rest = prefix[1:].partition("/")
        if not slash:
            return [Part(m.scope, m, "") for m in self.mounted()
                    if m.label.startswith(prefix) and m.allows(role)]
        mount = self.mounts.get(name)
        if mount is None:
            raise no_mount(name, self)
        check_role(mount, role)
        return [Part(mount.scope, mount, rest)]


def mount_entries(view: MountView) -> list[dict[str, str]]:
    """The caller's mounts as ``hello`` answers them (DESIGN.md §3.4): ``[{mount, role, review}]`` in name order
    (``mount`` the ``@NAME/`` label, ``role`` the caller's, ``review`` the team's rule); ``[]`` without a team."""
    return [{"mount": m.label, "role": m.role, "review": m.review} for m in view.mounted()]


def view_for(registry: Registry, principal: str, root: Scope) -> MountView:
    """The view of ``principal`` whose own scope is ``root``: one mount per team it belongs to."""
    mounts = {name: Mount(name, replace(team_scope(name), review=team.review, maintainer=role == MAINTAIN), role)
              for name, (team, role) in registry.teams_of(principal).items()}
    return MountView(root, mounts)


def no_mount(name: str, view: MountView) -> HubError:
    """The answer for ``@NAME/`` when the caller has no such mount: the same whether the team does not exist or
    the caller is not a member (the message differs only by ``name``; it lists the caller's own mounts and may
    suggest one of them, never another team), and saying that ``@`` names are reserved (``@todo.md``)."""
    shown = name[:60]
    own = ", ".join(m.label for m in view.mounted()) or "none"
    near = did_you_mean(f"{MOUNT_MARK}{name}/", [m.label for m in view.mounted()])
    return HubError(ErrorCode.NOT_FOUND, f"{MOUNT_MARK}{shown}/ is not one of your memory mounts (yours: {own})"
                    f"{near}{' ' if near else '. '}Names starting with '@' are reserved for team mounts (@TEAM/PATH)",
                    {"mount": f"{MOUNT_MARK}{shown}/", "reason": "no_mount"},
                    next_step="Use a path in your own memory or in one of your team mounts (the message lists them); "
                    "memory_search with no path_prefix covers them all.")


def check_role(mount: Mount, needs: str) -> None:
    """Raise ``unauthorized`` (``data.reason`` ``role``) when the caller's role in ``mount`` is weaker than
    ``needs``, the role the method needs (its route's, :mod:`hub.methods.routes`)."""
    if mount.allows(needs):
        return
    what = {READ: "read", WRITE: "write", MAINTAIN: "decide reviews or purge history"}[needs]
    raise HubError(ErrorCode.UNAUTHORIZED, f"your role in team {mount.name} is {mount.role}: it may not {what} in "
                   f"{mount.label}; nothing was changed. A team's roles are set on the Hub host ('amux hub team "
                   f"member add {mount.name} PRINCIPAL --role {needs}')",
                   {"reason": "role", "mount": mount.label, "role": mount.role, "needs": needs},
                   next_step=f"Your role in {mount.label} does not allow this; nothing was changed. Write to your "
                   "own memory instead, or tell the user to ask a maintainer of the team.")


def shown(result: dict[str, Any], label: str) -> dict[str, Any]:
    """``result`` (an answer's map) with every document path under the mount ``label``: each ``path`` member of a
    map, and the ``unreadable`` list, at any depth.  ``label`` ``""`` returns ``result`` unchanged."""
    if not label:
        return result
    out: dict[str, Any] = _under(result, label)
    return out


def _under(value: Any, label: str) -> Any:
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if key == "path" and isinstance(item, str):
                out[key] = label + item
            elif key == "unreadable" and isinstance(item, list):
                out[key] = [label + p if isinstance(p, str) else p for p in item]
            else:
                out[key] = _under(item, label)
        return out
    if isinstance(value, list):
        return [_under(item, label) for item in value]
    return value


def shown_error(exc: HubError, part: Part) -> HubError:
    """``exc`` as the caller should see it: the inner path, in ``data.path`` and in the message, spelled with the
    mount's label.  An error of the root is returned unchanged."""
    if part.mount is None or not part.inner:
        return exc
    mounted = part.label + part.inner
    pattern = re.compile(r"(?<![\w@/.-])" + re.escape(part.inner) + r"(?![\w/-])")
    data = dict(exc.data)
    if data.get("path") == part.inner:
        data["path"] = mounted
    message = pattern.sub(lambda _: mounted, exc.message)
    step = pattern.sub(lambda _: mounted, exc.refined) if exc.refined else None
    return HubError(exc.code, message, data, next_step=step)
