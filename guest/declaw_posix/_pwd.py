"""`pwd` in the guest: the password database, read from the sandbox's (read-only) /etc/passwd as
glibc's `files` backend reads it: root, and user (uid 1000, as the shell's `id` says). Errors are
CPython's."""

from __future__ import annotations

from declaw_posix._structs import StructSequence

PASSWD = "/etc/passwd"

class struct_passwd(StructSequence):  # noqa: N801 - CPython's name
    """One /etc/passwd entry."""

    __module__ = "pwd"
    __slots__ = ()
    fields = ("pw_name", "pw_passwd", "pw_uid", "pw_gid", "pw_gecos", "pw_dir", "pw_shell")
    pw_name: str
    pw_passwd: str
    pw_uid: int
    pw_gid: int
    pw_gecos: str
    pw_dir: str
    pw_shell: str


def _entries() -> list[struct_passwd]:
    found = []
    try:
        with open(PASSWD, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read(1 << 20).splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split(":")
        if len(parts) != 7 or line.startswith(("#", "+", "-")):
            continue
        try:
            uid, gid = int(parts[2]), int(parts[3])
        except ValueError:
            continue
        found.append(struct_passwd((parts[0], parts[1], uid, gid, parts[4], parts[5], parts[6])))
    return found


def getpwuid(uid: int, /) -> struct_passwd:
    """The first entry of `uid`; KeyError if there is none (a uid_t: 2**32 - 1 is -1)."""
    if not isinstance(uid, int):
        raise TypeError(f"uid should be integer, not {type(uid).__name__}")
    if not -1 <= uid <= 0xFFFFFFFF:
        raise KeyError("getpwuid(): uid not found")
    uid = -1 if uid == 0xFFFFFFFF else int(uid)
    for entry in _entries():
        if entry.pw_uid == uid:
            return entry
    raise KeyError(f"getpwuid(): uid not found: {uid}")


def getpwnam(name: str, /) -> struct_passwd:
    """The entry named `name`; KeyError if there is none."""
    if not isinstance(name, str):
        raise TypeError(f"getpwnam() argument must be str, not {type(name).__name__}")
    if "\0" in name:
        raise ValueError("embedded null byte")
    for entry in _entries():
        if entry.pw_name == name:
            return entry
    raise KeyError(f"getpwnam(): name not found: {name!r}")


def getpwall() -> list[struct_passwd]:
    """Every entry, in the file's order."""
    return _entries()
