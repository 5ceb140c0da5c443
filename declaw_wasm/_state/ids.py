"""Ids and store keys, validated before they name anything in the store.

An id may arrive from a user, a URL route or a file we did not write (a manifest from an object
store someone else can write to), and it becomes part of a path or an object key. So it is held
to a fixed alphabet and length: no `/`, no `..`, no NUL, no leading `-` or `.`, nothing a path
join or a shell could read as more than one name.
"""

from __future__ import annotations

import re
import secrets

from ..exceptions import InvalidArgumentException

MAX_ID = 128
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
# A store key is a few ids and fixed names joined by "/": the same alphabet plus "." inside.
_PART_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
MAX_KEY_PARTS = 16


def check_id(value: object, what: str = "id") -> str:
    """`value` if it is a valid id ([A-Za-z0-9] then [A-Za-z0-9_-], at most 128), else
    `InvalidArgumentException` naming `what`."""
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        shown = value if isinstance(value, str) and len(value) <= 200 else type(value).__name__
        raise InvalidArgumentException(
            f"invalid {what} {shown!r}: use 1-{MAX_ID} characters from A-Z a-z 0-9 _ - "
            "(starting with a letter or digit)")
    return value


def new_id(prefix: str) -> str:
    """A fresh id: `prefix_` + 128 random bits (ids are capabilities once served)."""
    return check_id(f"{prefix}_{secrets.token_hex(16)}")


def check_key(key: object) -> str:
    """A store-relative key: 1-16 parts joined by "/", each [A-Za-z0-9_.-] not starting with
    "." or "-" (so never "." or ".."), at most 128 characters each."""
    if not isinstance(key, str) or not key:
        raise InvalidArgumentException(f"invalid store key {key!r}")
    parts = key.split("/")
    if len(parts) > MAX_KEY_PARTS or not all(_PART_RE.fullmatch(p) for p in parts):
        raise InvalidArgumentException(f"invalid store key {key[:300]!r}")
    return key
