"""What several adapters share.

- `missing_extra`: a clear ImportError naming the extra to install when a framework is missing.
- `command_line`: frameworks hand us argv lists, often wrapped as `sh -lc SCRIPT` (OpenAI Agents
  wraps every command so); our sandbox runs one command *line* per call, in its own bash, so we
  unwrap the shell and quote the rest instead of asking the guest for a login shell.
- `tar_folder` / `untar_into`: a portable tar of a sandbox folder, built and unpacked on the
  host through the files API (Python's `tarfile`), so no guest output is parsed and an archive
  is never trusted: absolute names, `..`, links leaving the folder and special files are refused
  or skipped, and the member count is bounded.
"""

from __future__ import annotations

import asyncio
import io
import posixpath
import shlex
import tarfile
import tempfile
from collections.abc import Collection, Sequence
from typing import IO, TYPE_CHECKING

from .. import CommandResult, FileType

if TYPE_CHECKING:
    from .. import AsyncSandbox
    from ..async_sandbox import AsyncCommandHandle  # a type only: not exported

SHELLS = frozenset({"sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash"})
# Spool archives in memory up to this size, then on disk.
SPOOL_BYTES = 32 * 1024 * 1024
MAX_MEMBERS = 100_000  # the default Limits.disk_files: more cannot fit in a sandbox anyway
MAX_BYTES = 1 << 30  # the default Limits.disk_bytes


def missing_extra(extra: str) -> ImportError:
    """The error for an adapter whose framework is not installed: it says which extra to add."""
    return ImportError(f"this adapter needs its framework: pip install 'declaw-wasm[{extra}]'")


def command_line(argv: Sequence[str]) -> str:
    """One shell line for an argv list: `sh -lc SCRIPT` becomes SCRIPT, `sh -c SCRIPT A B`
    keeps its positional arguments, `sudo -u USER --` is dropped (a sandbox has one user), and
    anything else is quoted word by word."""
    args = [str(a) for a in argv]
    if len(args) >= 4 and args[0] == "sudo" and args[1] == "-u" and args[3] == "--":
        args = args[4:]
    if not args:
        raise ValueError("empty command")
    if args[0] in SHELLS:
        flags = ""
        i = 1
        while i < len(args) and args[i].startswith("-") and len(args[i]) > 1 and \
                set(args[i][1:]) <= set("lic"):
            flags += args[i][1:]
            i += 1
        if "c" in flags and i < len(args):
            script, rest = args[i], args[i + 1:]
            return script if not rest else "sh -c " + shlex.join([script, *rest])
    return shlex.join(args)


def split_cd(line: str) -> tuple[str | None, str]:
    """(`DIR`, `REST`) for the `cd [--] DIR || exit` + newline prefix that OpenAI Agents and
    pydantic-ai put before a command to start it elsewhere, else (None, `line`). The caller runs
    REST with `cwd=DIR` (our shell's `cd` has no `--`)."""
    head, sep, rest = line.partition("\n")
    if sep and head.startswith("cd ") and head.endswith(" || exit"):
        try:
            words = shlex.split(head[3:-len(" || exit")])
        except ValueError:
            return None, line
        if words[:1] == ["--"]:
            words = words[1:]
        if len(words) == 1:
            return words[0], rest
    return None, line


def _member_name(name: str) -> str:
    """A tar member's path, relative and normalised; ValueError if it would leave the folder."""
    if name.startswith("/") or "\\" in name or "\x00" in name:
        raise ValueError(f"archive member {name!r}: absolute or invalid name")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"archive member {name!r}: '..' would leave the workspace")
    return "/".join(parts)


def _skipped(rel: str, skip: Collection[str]) -> bool:
    return any(rel == s or rel.startswith(s.rstrip("/") + "/") for s in skip)


async def tar_folder(sbx: AsyncSandbox, root: str, skip: Collection[str] = ()) -> IO[bytes]:
    """A tar (uncompressed) of `root`'s contents with root-relative names, as a readable
    stream positioned at 0. Symlinks whose target stays inside `root` are kept as relative
    links; others are left out (they would not mean the same elsewhere)."""
    out = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - returned
    root = posixpath.normpath(root)
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        pending = [""]
        while pending:
            rel_dir = pending.pop()
            for entry in await sbx.files.list(posixpath.join(root, rel_dir) if rel_dir else root):
                rel = posixpath.join(rel_dir, entry.name) if rel_dir else entry.name
                if _skipped(rel, skip):
                    continue
                info = tarfile.TarInfo(rel)
                info.mtime = int(entry.modified_time.timestamp()) if entry.modified_time else 0
                if entry.symlink_target:
                    target = posixpath.normpath(entry.symlink_target)
                    if target != root and not target.startswith(root + "/"):
                        continue
                    info.type = tarfile.SYMTYPE
                    info.linkname = posixpath.relpath(target, posixpath.dirname(entry.path))
                    tar.addfile(info)
                elif entry.type == FileType.DIR:
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                    pending.append(rel)
                else:
                    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as data:
                        stream = await sbx.files.read(entry.path, format="stream")
                        async for chunk in stream:
                            data.write(chunk)
                        info.size, info.mode = data.tell(), 0o644
                        data.seek(0)
                        tar.addfile(info, data)
    out.seek(0)
    return out


def _seekable(data: IO[bytes]) -> IO[bytes]:
    try:
        if data.seekable():
            return data
    except (AttributeError, ValueError):
        pass
    copy = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - returned
    while chunk := data.read(1024 * 1024):
        copy.write(chunk)
    copy.seek(0)
    return copy


async def untar_into(sbx: AsyncSandbox, root: str, data: IO[bytes] | bytes,
                     max_members: int = MAX_MEMBERS, max_bytes: int = MAX_BYTES) -> int:
    """Unpack a tar (plain, gz, bz2 or xz) into `root`; returns how many entries were written.
    Absolute names, `..`, more than `max_members` entries or `max_bytes` of file data raise
    ValueError before anything is written; hard links, devices and FIFOs are skipped; symlinks
    are made only when their target stays inside `root`."""
    stream = _seekable(io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data)
    written = 0
    with tarfile.open(fileobj=stream, mode="r:*") as tar:
        members = []
        total = 0
        for count, member in enumerate(tar, 1):
            total += max(member.size, 0)
            if count > max_members:
                raise ValueError(f"archive has more than {max_members} members")
            if total > max_bytes:
                raise ValueError(f"archive holds more than {max_bytes} bytes")
            members.append((_member_name(member.name), member))
        await sbx.files.make_dir(root)
        for rel, member in members:
            if not rel:
                continue
            path = posixpath.join(root, rel)
            if member.isdir():
                await sbx.files.make_dir(path)
            elif member.isfile():
                source = tar.extractfile(member)
                await sbx.files.write(path, source if source is not None else b"")
            elif member.issym():
                target = posixpath.normpath(posixpath.join(posixpath.dirname(path), member.linkname))
                if member.linkname.startswith("/") or not target.startswith(root + "/"):
                    continue
                await sbx.files.make_dir(posixpath.dirname(path))
                await sbx.commands.run(f"ln -sfn {shlex.quote(member.linkname)} {shlex.quote(path)}")
            else:
                continue
            written += 1
    return written


async def wait_or_kill(handle: AsyncCommandHandle) -> CommandResult:
    """Wait for a background command; if our caller is cancelled, kill the command and re-raise.
    (The async face waits in a worker thread, which a cancellation cannot interrupt.)"""
    import anyio

    from .. import CommandExitException, SandboxException

    async def result() -> CommandResult:  # a non-zero exit is a result here, not an error
        try:
            return await handle.wait()
        except CommandExitException as exc:
            return CommandResult(stdout=exc.stdout, stderr=exc.stderr, exit_code=exc.exit_code,
                                 error=exc.error)

    task = asyncio.ensure_future(result())
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with anyio.CancelScope(shield=True):
            try:
                await handle.kill()
            except SandboxException:
                pass
            await asyncio.gather(task, return_exceptions=True)
        raise
