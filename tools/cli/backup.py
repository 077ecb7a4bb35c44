"""``amux hub backup FILE``, ``amux hub backup --verify FILE`` and ``amux hub restore FILE --home DIR``
(DESIGN.md §15.8).

A backup is taken from the running Hub: the operator's method ``backup_stage`` copies each scope under its
lock into a staging folder of the home (:mod:`hub.storage.backup`); this module packs that folder into a gzip tar
(``manifest.json`` first, then every file in name order, owners and times normalised), writes it atomically
(a temporary file in FILE's folder, fsync, rename, fsync of the folder) and removes the staging folder.

An archive is untrusted input when verified or restored: only regular files and folders under
``memory/``, ``history/``, ``review/`` and the home's ``principals.toml``, ``config.toml`` and
``manifest.json`` are accepted, never an absolute name, ``..``, a link or a device; every file must match
the manifest's SHA-256 and size, and every file the manifest lists must be there.  Restore writes only into
a home that does not exist or is an empty folder; a non-empty one is refused and left untouched.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tarfile
import time
from pathlib import Path, PurePosixPath
from typing import IO, Annotated, Any

from cyclopts import Parameter

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.options import Home, resolve_home
from amux_memory.tools.cli.output.contract import fail
from amux_memory.tools.cli.output.plain import Json, show
from amux_memory.tools.client.wording import counted

MAX_ARCHIVE_MEMBERS = 2_000_000
"""More members than this is not a backup of a Hub (a hostile archive must not make verify run forever)."""
STAGE_TIMEOUT_SECONDS = 3600.0
"""How long the CLI waits for the Hub to stage a backup (a big home takes a while; nothing blocks meanwhile)."""
TOP_FILES = ("manifest.json", "principals.toml", "config.toml")
TOP_TREES = ("memory", "history", "review")


def _bad(message: str, **data: Any) -> HubError:
    return HubError(ErrorCode.BAD_REQUEST, message, data)


def _pack(staging: Path, target: Path) -> int:
    """Pack ``staging`` into ``target`` atomically (temporary file, fsync, rename, fsync of the folder);
    returns the archive's size in bytes.  Raises ``OSError``."""
    folder = target.parent
    temp = folder / f".{target.name}.{os.getpid()}.amux-tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
                names = ["manifest.json"] + sorted(
                    rel for rel in (p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
                    if rel != "manifest.json")
                for name in names:
                    path = staging / name
                    info = tar.gettarinfo(str(path), arcname=name)
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    info.mode = 0o600
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return target.stat().st_size


def _safe_name(member: tarfile.TarInfo) -> str | None:
    """Why ``member`` may not be in a backup (None: it may): only regular files and folders, relative names
    under the known trees, no ``..``, no links or devices."""
    name = member.name
    parts = PurePosixPath(name).parts
    if not (member.isfile() or member.isdir()):
        return "not a regular file or folder (a link or device)"
    if not name or name.startswith("/") or "\\" in name or any(p in ("..", ".", "") for p in parts):
        return "an absolute name or one with '..'"
    if any(not c.isprintable() for c in name):
        return "a name with control characters"
    if member.isfile() and not (name in TOP_FILES or (len(parts) > 1 and parts[0] in TOP_TREES)):
        return "not a file a backup holds"
    if member.isdir() and parts[0] not in TOP_TREES:
        return "not a folder a backup holds"
    return None


def _shown(name: str) -> str:
    from amux_memory.tools.client.inert import inert

    return inert(name[:200])


def check_archive(file: Path, extract: Path | None = None) -> dict[str, Any]:
    """Read the archive ``file`` and check it against its manifest; with ``extract``, also write each file
    under that folder (``0600`` files, ``0700`` folders, never following or replacing anything).

    Returns ``{file, ok, manifest: {created, hub_version, scopes, documents}, files, bytes, problems}``
    (``problems`` a list of ``{path, problem}``).  Raises ``bad_request`` when the file is not a gzip tar
    with a ``manifest.json`` of this format, ``not_found`` when it does not exist.
    """
    from amux_memory.hub.storage.backup import BACKUP_FORMAT_VERSION, FORMAT, MANIFEST_NAME

    problems: list[dict[str, str]] = []
    seen: dict[str, tuple[str, int]] = {}
    manifest: dict[str, Any] | None = None
    try:
        tar = tarfile.open(file, mode="r:gz")  # noqa: SIM115 - closed by the 'with tar' below
    except FileNotFoundError:
        raise HubError(ErrorCode.NOT_FOUND, f"no file {file}", {"file": str(file)}) from None
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise _bad(f"{file} is not a backup (not a gzip tar: {exc})", file=str(file)) from None
    with tar:
        try:
            for count, member in enumerate(tar):
                if count >= MAX_ARCHIVE_MEMBERS:
                    raise _bad(f"{file} has more than {MAX_ARCHIVE_MEMBERS} members: not a backup", file=str(file))
                why = _safe_name(member)
                if why is not None:
                    problems.append({"path": _shown(member.name), "problem": f"refused: {why}"})
                    continue
                if member.isdir():
                    continue
                if member.name in seen:
                    problems.append({"path": _shown(member.name), "problem": "refused: listed twice"})
                    continue
                source = tar.extractfile(member)
                assert source is not None
                if extract is not None and member.name != MANIFEST_NAME:
                    digest, size = _write_file(extract, member.name, source)
                else:
                    digest, size, data = _read_member(source, member.name == MANIFEST_NAME)
                    if member.name == MANIFEST_NAME:
                        manifest = _manifest(data, file)
                seen[member.name] = (digest, size)
        except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
            raise _bad(f"{file} is damaged: {exc}", file=str(file)) from None
    if manifest is None:
        raise _bad(f"{file} is not a backup: it has no {MANIFEST_NAME}", file=str(file))
    if manifest.get("format") != FORMAT or manifest.get("format_version") != BACKUP_FORMAT_VERSION:
        raise _bad(f"{file} is not an amux backup of format {BACKUP_FORMAT_VERSION}", file=str(file))
    listed = manifest.get("files")
    if not isinstance(listed, dict):
        raise _bad(f"{file}: its manifest lists no files", file=str(file))
    for name, entry in sorted(listed.items()):
        got = seen.get(name)
        if got is None:
            problems.append({"path": _shown(name), "problem": "missing: the manifest lists it"})
        elif not isinstance(entry, dict) or got != (entry.get("sha256"), entry.get("bytes")):
            problems.append({"path": _shown(name), "problem": "changed: its SHA-256 or size is not the manifest's"})
    problems += [{"path": _shown(name), "problem": "extra: the manifest does not list it"}
                 for name in sorted(seen) if name not in listed and name != MANIFEST_NAME]
    raw_scopes = manifest.get("scopes")
    scopes: dict[str, Any] = raw_scopes if isinstance(raw_scopes, dict) else {}
    documents = sum(len(s.get("documents") or {}) for s in scopes.values() if isinstance(s, dict))
    return {"file": str(file), "ok": not problems, "manifest": {"created": manifest.get("created"),
            "hub_version": manifest.get("hub_version"), "scopes": len(scopes), "documents": documents},
            "files": len(seen) - 1, "bytes": sum(size for name, (_, size) in seen.items() if name != MANIFEST_NAME),
            "problems": problems}


def _read_member(source: IO[bytes], keep: bool) -> tuple[str, int, bytes]:
    digest = hashlib.sha256()
    size = 0
    kept = bytearray()
    while chunk := source.read(1 << 20):
        digest.update(chunk)
        size += len(chunk)
        if keep:
            if size > 256 << 20:
                raise ValueError("manifest.json over 256 MiB")
            kept += chunk
    return digest.hexdigest(), size, bytes(kept)


def _manifest(data: bytes, file: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(data)
    except ValueError:
        raise _bad(f"{file}: its manifest.json is not JSON", file=str(file)) from None
    if not isinstance(manifest, dict):
        raise _bad(f"{file}: its manifest.json is not an object", file=str(file))
    return manifest


def _write_file(root: Path, name: str, source: IO[bytes]) -> tuple[str, int]:
    """Write one archive member under ``root`` and return its ``(sha256, bytes)``: folders made ``0700`` one by
    one without following links, the file created exclusively (``0600``) and fsynced."""
    parts = PurePosixPath(name).parts
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=fd)
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        out = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        digest = hashlib.sha256()
        size = 0
        with os.fdopen(out, "wb") as f:
            while chunk := source.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        return digest.hexdigest(), size
    finally:
        os.close(fd)


def backup(file: Path, /, *, verify: Annotated[bool, Parameter(
        name="--verify", negative="", help="Check FILE against its manifest instead of writing one.")] = False,
        home: Home = None, json: Json = False) -> int:
    """Back up the running Hub's home into FILE (a gzip tar with a manifest), or check one with --verify.

    Taken while the Hub serves: each scope (documents, history, review
    queue) is copied under that scope's lock, so a writer waits at most for
    one scope's copy and every write acknowledged before the backup began is
    in it; then the principal registry (token hashes only) and config.toml.
    The TLS key is not included. FILE is written atomically (it appears
    whole or not at all, mode 0600). Run it as the Hub's OS account on the
    Hub's host (no AMUX_TOKEN). Restore with 'amux hub restore FILE --home
    DIR'. --verify reads FILE and checks every file's SHA-256 against the
    manifest: exit status 0 when all match, bad_request's listing each
    problem otherwise. Piped or with --json, a JSON document.

    Parameters
    ----------
    file
        The archive to write (e.g. amux-$(date +%F).tar.gz), or to check with --verify.
    """
    if verify:
        return _verify(file, json)
    from amux_memory.protocol.requests import backup_stage_params
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.lifecycle.control import home_socket

    target = Path(os.path.abspath(file))
    started = time.monotonic()
    try:
        if not target.parent.is_dir():
            raise _bad(f"no folder {target.parent} to write {target.name} into; nothing was backed up",
                       file=str(target))
        if target.is_dir():
            raise _bad(f"{target} is a folder: name the archive file to write", file=str(target))
        with HubClient(home_socket(resolve_home(home)), token="", binding="", timeout=STAGE_TIMEOUT_SECONDS) as c:
            staged = c.call("backup_stage", backup_stage_params())
        staging = Path(staged["staging"])
        try:
            size = _pack(staging, target)
        except OSError as exc:
            raise HubError(ErrorCode.STORAGE_ERROR, f"cannot write {target}: {exc.strerror or exc}; nothing was "
                           "backed up", {"file": str(target)}) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except HubError as exc:
        return fail(exc, as_json=json)
    doc = {"file": str(target), "bytes": size, "scopes": staged["scopes"], "documents": staged["documents"],
           "files": staged["files"], "seconds": round(time.monotonic() - started, 3),
           "lock_max_ms": staged["lock_max_ms"]}

    def lines() -> list[str]:
        from amux_memory.tools.client.wording import counted

        return [f"backed up {counted(doc['documents'], 'document')} in {counted(doc['scopes'], 'scope')} "
                f"({counted(doc['files'], 'file')}, with history, review queue, registry and config) to "
                f"{_shown(doc['file'])}: {doc['bytes']} bytes in {doc['seconds']:g} s; writers waited at most "
                f"{doc['lock_max_ms']:g} ms", f"check it with 'amux hub backup --verify {_shown(doc['file'])}'"]

    show(doc, lines, json_flag=json)
    return 0


def _problem_lines(doc: dict[str, Any]) -> list[str]:
    return [f"  {p['path']}: {p['problem']}" for p in doc["problems"][:50]] + (
        [f"  ... and {len(doc['problems']) - 50} more"] if len(doc["problems"]) > 50 else [])


def _verify(file: Path, json: bool) -> int:
    try:
        doc = check_archive(file)
        if not doc["ok"]:
            raise HubError(ErrorCode.BAD_REQUEST, f"{file} does not match its manifest: "
                           f"{counted(len(doc['problems']), 'problem')}, first: {doc['problems'][0]['path']}: "
                           f"{doc['problems'][0]['problem']}", {"file": str(file), "problems": doc["problems"][:50]},
                           next_step="Do not restore from it; take a new backup.")
    except HubError as exc:
        return fail(exc, as_json=json)
    m = doc["manifest"]
    show(doc, [f"{_shown(str(file))}: OK, every one of its {doc['files']} files matches the manifest "
               f"({m['documents']} documents in {m['scopes']} scopes, {doc['bytes']} bytes, taken {m['created']} "
               f"by amux {m['hub_version']})"], json_flag=json)
    return 0


def restore(file: Path, /, *, home: Annotated[Path, Parameter(
        name="--home", help="The home to restore into: a folder that does not exist yet, or an empty one.")],
        json: Json = False) -> int:
    """Restore a backup written by 'amux hub backup' into a new home, then start a Hub on it.

    The archive is checked first (as --verify does, and every name: no
    absolute path, '..', link or device); nothing is written unless all of
    it matches its manifest. --home must not exist or be an empty folder: a
    home holding anything is refused and left untouched. The files land in
    a temporary folder beside it, renamed into place at the end, so an
    interrupted restore leaves no half home. Then: amux hub start --home
    DIR. The TLS key and certificate are not in a backup: copy them or run
    'amux hub tls init' again (config.toml names their paths). The restored
    config.toml keeps hub.socket_path and the listeners (hub.listen,
    hub.mcp_listen, ...): restoring on the same host while its Hub runs,
    change them before starting the second Hub (restore names them).

    Parameters
    ----------
    file
        The archive ('amux hub backup FILE').
    """
    target = Path(os.path.abspath(home))
    try:
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            raise _bad(f"--home {target} is not a folder; nothing was restored", field="home")
        if target.exists() and any(target.iterdir()):
            raise _bad(f"--home {target} is not empty; restore only into a new or empty home (nothing was "
                       "changed)", field="home")
        checked = check_archive(file)
        if not checked["ok"]:
            raise _bad(f"{file} does not match its manifest ({counted(len(checked['problems']), 'problem')}, first: "
                       f"{checked['problems'][0]['path']}: {checked['problems'][0]['problem']}); nothing was "
                       "restored", file=str(file), problems=checked["problems"][:50])
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.parent / f".{target.name}.amux-restore-{os.getpid()}"
        temp.mkdir(mode=0o700)
        try:
            again = check_archive(file, extract=temp)  # checked again as written: the file may have changed
            if not again["ok"]:
                raise _bad(f"{file} changed while it was restored; nothing was restored", file=str(file))
            if target.exists():
                target.rmdir()  # still empty (checked above): replaced by the restored home
            os.rename(temp, target)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
    except OSError as exc:
        return fail(HubError(ErrorCode.STORAGE_ERROR, f"cannot restore into {target}: {exc}", {"home": str(target)}),
                    as_json=json)
    except HubError as exc:
        return fail(exc, as_json=json)
    doc = {"home": str(target), "file": str(file), "documents": checked["manifest"]["documents"],
           "scopes": checked["manifest"]["scopes"], "files": checked["files"], "host_settings": host_settings(target)}
    lines = [f"restored {doc['documents']} documents in {doc['scopes']} scopes ({doc['files']} files) into "
             f"{_shown(doc['home'])}; start a Hub on it with 'amux hub start --home {_shown(doc['home'])}'"]
    if doc["host_settings"]:
        where = " ".join(f"{k} = {_shown(str(v))}" for k, v in doc["host_settings"].items())
        lines += ["", f"The restored config.toml keeps {where}. On the machine the backup came from, while its Hub "
                  "runs, change them first or the two Hubs collide, e.g. 'amux system config set KEY \"\" --home "
                  f"{_shown(doc['home'])}' for each (the socket back inside the home, listeners off)."]
    show(doc, lines, json_flag=json)
    return 0


HOST_SETTINGS = ("hub.socket_path",)
"""Settings naming a place on the host besides every ``*listen`` one (an address and port): two Hubs cannot share
them."""


def host_settings(home: Path) -> dict[str, str]:
    """The settings in ``home``'s ``config.toml`` that name this host's socket path or a listener's address
    (``hub.socket_path``, ``hub.listen`` and every ``hub.*_listen``, set to other than the default), key →
    value; empty when the file is unreadable (the Hub's start reports it).  DESIGN.md §15.8."""
    from amux_memory.protocol.settings import SETTINGS, default_value, get_value

    found: dict[str, str] = {}
    for key in SETTINGS:
        if key in HOST_SETTINGS or key.endswith("listen"):
            try:
                value = get_value(home, key)
            except (HubError, OSError):
                return {}
            if value != default_value(key):
                found[key] = str(value)
    return found
