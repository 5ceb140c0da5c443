"""`grp` in the guest: the group database, read from the sandbox's /etc/group at each call as
glibc's `files` backend reads it (root and user, gid 1000). Errors are CPython's."""

from __future__ import annotations

from declaw_posix._structs import StructSequence

GROUP = "/etc/group"

class struct_group(StructSequence):  # noqa: N801 - CPython's name
    """One /etc/group entry."""

    __module__ = "grp"
    __slots__ = ()
    fields = ("gr_name", "gr_passwd", "gr_gid", "gr_mem")
    gr_name: str
    gr_passwd: str
    gr_gid: int
    gr_mem: list[str]


def _entries() -> list[struct_group]:
    found = []
    try:
        with open(GROUP, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read(1 << 20).splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split(":")
        if len(parts) != 4 or line.startswith(("#", "+", "-")):
            continue
        try:
            gid = int(parts[2])
        except ValueError:
            continue
        members = [member for member in parts[3].split(",") if member]
        found.append(struct_group((parts[0], parts[1], gid, members)))
    return found


def getgrgid(id: int, /) -> struct_group:  # noqa: A002 - CPython's name
    """The first group of `id`; KeyError if there is none (a gid_t: 2**32 - 1 is -1)."""
    if not isinstance(id, int):
        raise TypeError(f"gid should be integer, not {type(id).__name__}")
    if not -1 <= id <= 0xFFFFFFFF:
        raise OverflowError(f"gid is {'less than minimum' if id < -1 else 'greater than maximum'}")
    id = -1 if id == 0xFFFFFFFF else int(id)  # noqa: A001
    for entry in _entries():
        if entry.gr_gid == id:
            return entry
    raise KeyError(f"getgrgid(): gid not found: {id}")


def getgrnam(name: str, /) -> struct_group:
    """The group named `name`; KeyError if there is none."""
    if not isinstance(name, str):
        raise TypeError(f"getgrnam() argument must be str, not {type(name).__name__}")
    if "\0" in name:
        raise ValueError("embedded null byte")
    for entry in _entries():
        if entry.gr_name == name:
            return entry
    raise KeyError(f"getgrnam(): name not found: {name!r}")


def getgrall() -> list[struct_group]:
    """Every group, in the file's order."""
    return _entries()
