"""Who is calling, and which scope that gives them (design record §7, basics).

The caller is identified by the kernel (``SO_PEERCRED`` on the Unix socket),
never by anything it sends.  The principal id is the peer's user name, or
``uid:<n>`` when the uid has no name.  Isolation ``off`` maps everyone to the
``global`` scope; isolation ``user`` gives each principal its own directory
``users/<sha256(principal id)>``, a key derived here and never named by a caller.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import socket
import struct
from dataclasses import dataclass

_UCRED = struct.Struct("3i")


@dataclass(frozen=True)
class Peer:
    """Kernel-reported credentials of a connected process."""

    pid: int
    uid: int
    gid: int


def peer_credentials(sock: socket.socket) -> Peer:
    """Read ``SO_PEERCRED`` from a connected Unix socket (Linux)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return Peer(pid, uid, gid)


def principal_for_uid(uid: int) -> str:
    """The principal id of an OS user: its name, or ``uid:<n>`` if it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid:{uid}"


@dataclass(frozen=True)
class Scope:
    """A memory scope: its binding string (what a conversation is frozen to) and its directory.

    ``binding`` is ``"global"`` or ``"principal:<id>"``; ``relpath`` is
    ``"global"`` or ``"users/<sha256 hex of the principal id>"``, relative to
    the memory root.
    """

    binding: str
    relpath: str
    kind: str

    def directory(self, memory_root: str) -> str:
        """Absolute directory of this scope under ``memory_root``."""
        return os.path.join(memory_root, self.relpath)


GLOBAL = Scope("global", "global", "global")


def scope_for(isolation: str, principal: str) -> Scope:
    """The scope a principal gets under an isolation policy (``off`` or ``user``)."""
    if isolation == "off":
        return GLOBAL
    key = hashlib.sha256(principal.encode("utf-8")).hexdigest()
    return Scope(f"principal:{principal}", f"users/{key}", "principal")
