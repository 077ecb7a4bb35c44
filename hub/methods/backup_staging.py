"""The Hub's side of an online backup: every scope staged under its own lock (DESIGN.md §15.8).

The operator's ``backup_stage`` route (:func:`handle_backup_stage`): :mod:`hub.storage.backup` does the file work,
this module takes each scope's lock through :meth:`hub.methods.memory.MemoryMethods.locked` while a scope is
copied, and cuts each history segment at its last record.
"""

from __future__ import annotations

import shutil
from typing import Any

import trio

from amux_memory.hub.access.identity import Scope
from amux_memory.hub.methods.calls import Call
from amux_memory.hub.methods.memory import MemoryMethods

Result = dict[str, Any]


async def handle_backup_stage(memory: MemoryMethods, call: Call) -> Result:
    """``backup_stage`` by the operator: :func:`backup_stage` (memory on or off)."""
    return await backup_stage(memory, )


async def backup_stage(memory: MemoryMethods) -> Result:
    """Stage an online backup of the whole home (DESIGN.md §15.8, :mod:`hub.storage.backup`): every scope's
    documents, history and review queue copied under that scope's lock, one scope at a time, then the
    registry and ``config.toml``, and ``manifest.json``; the operator's CLI packs the folder and removes it.

    Answer: ``{staging, scopes, documents, files, bytes, lock_max_ms, lock_total_ms}`` (``staging`` the
    folder's absolute path; ``lock_*`` how long scope locks were held, ms).  Works with memory disabled
    too (the files are kept).  Raises ``bad_request`` when the registry holds a raw token, a storage
    error when a file cannot be read or the staging folder written; the staging folder is removed then.
    """
    from amux_memory.hub.storage import backup
    from amux_memory.protocol.version import package_version

    home = memory.config.home
    staging = await trio.to_thread.run_sync(backup.new_staging, home)
    try:
        staged = []
        for relpath in await trio.to_thread.run_sync(backup.scope_relpaths, home):
            scope = Scope(relpath, relpath, relpath.partition("/")[0])
            linked = await memory.locked(scope, _stage_scope, memory, relpath, staging, False)
            await trio.to_thread.run_sync(backup.copy_prefixes, linked, staging)
            if await memory.locked(scope, _rewritten, memory, relpath, linked.rewrites):
                # A purge (or a torn tail cut) changed the linked segment in place: copy under the lock.
                await trio.to_thread.run_sync(backup.drop_scope, linked, staging)
                again = await memory.locked(scope, _stage_scope, memory, relpath, staging, True)
                again.held_ms = max(again.held_ms, linked.held_ms)
                linked = again
            staged.append(await trio.to_thread.run_sync(backup.finish_scope, linked, staging))
        home_files = await trio.to_thread.run_sync(backup.stage_home_files, home, staging)
        manifest = await trio.to_thread.run_sync(backup.write_manifest, staging, staged, home_files,
                                                 package_version())
    except BaseException:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(shutil.rmtree, staging, True)
        raise
    files = manifest["files"]
    return {"staging": str(staging), "scopes": len(staged),
            "documents": sum(len(s.documents) for s in staged), "files": len(files),
            "bytes": sum(f["bytes"] for f in files.values()),
            "lock_max_ms": round(max((s.held_ms for s in staged), default=0.0), 3),
            "lock_total_ms": round(sum(s.held_ms for s in staged), 3)}


def _stage_scope(memory: MemoryMethods, relpath: str, staging: Any, copy_appended: bool) -> Any:
    """:func:`backup_stage`'s staging of one scope (worker thread, its lock held,
    :func:`hub.storage.backup.stage_scope`); the history segment is cut at its last record when this Hub has it
    open."""
    from amux_memory.hub.storage import backup

    hist = memory.history.scope(relpath)
    with hist.lock:
        end, rewrites = (hist.end if hist.fd >= 0 else -1), hist.rewrites
        return backup.stage_scope(memory.config.home, relpath, staging, end, copy_appended, rewrites)


def _rewritten(memory: MemoryMethods, relpath: str, rewrites: int) -> bool:
    """Whether the scope's history segment changed in place since :func:`_stage_scope` saw ``rewrites``
    (worker thread, the scope's lock held)."""
    return bool(memory.history.scope(relpath).rewrites != rewrites)
