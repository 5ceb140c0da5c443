"""Regex rewrite rules on request and response bodies (declaw 1.7.0's `TransformationRule`).

A rule is validated as declaw validates it (at most 1000 characters, no nested quantifiers, must
compile with Python's `re`) and must also compile with RE2, the engine that applies it (see
`_re2.py`). `apply()` has `re.sub`'s replacement syntax (`\\1`, `\\g<name>`).
"""

from __future__ import annotations

import re
from enum import Enum
from functools import lru_cache
from typing import Any

from pydantic import field_validator

from ._model import ConfigModel, check_member
from .._re2 import compile_user_pattern

MAX_PATTERN_LENGTH = 1000

_QUANTIFIER_AFTER_GROUP = ("+", "*", "{")


def check_redos(pattern: str) -> None:
    """Refuse patterns longer than 1000 characters or shaped like `(a+)+` (nested quantifiers).

    The shape check is declaw's heuristic: a group whose body holds `+` or `*` and that is itself
    followed by `+`, `*` or a `{m,n}` repeat. RE2 would run such patterns safely; they are refused
    anyway so that a policy accepted here is accepted by declaw too.
    """
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"Regex pattern too long ({len(pattern)} chars, max {MAX_PATTERN_LENGTH}).")
    if _has_nested_quantifier(pattern):
        raise ValueError(f"Regex pattern '{pattern}' contains nested quantifiers which may cause "
                         "catastrophic backtracking (ReDoS). Simplify the pattern.")


def _has_nested_quantifier(pattern: str) -> bool:
    opens: list[int] = []
    quantified: list[bool] = []  # per open group: holds a + or * somewhere inside
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            opens.append(i)
            quantified.append(False)
        elif c in "+*":
            if quantified:
                quantified[-1] = True
        elif c == ")" and opens:
            opens.pop()
            inner = quantified.pop()
            if inner and quantified:
                quantified[-1] = True
            nxt = pattern[i + 1:i + 2]
            if inner and nxt in _QUANTIFIER_AFTER_GROUP and (
                    nxt != "{" or re.match(r"\{\d*,\d*\}|\{\d*[2-9]\d*\}", pattern[i + 1:])):
                return True
        i += 1
    return False


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    return compile_user_pattern(pattern)


class TransformDirection(str, Enum):
    OUTBOUND = "outbound"
    INBOUND = "inbound"
    BOTH = "both"


class TransformationRule(ConfigModel):
    match: str
    replace: str
    direction: str = TransformDirection.OUTBOUND.value

    @field_validator("direction", mode="before")
    @classmethod
    def _direction(cls, value: Any) -> Any:
        return check_member("direction", value, TransformDirection)

    @field_validator("match")
    @classmethod
    def _match(cls, value: str) -> str:
        check_redos(value)
        try:
            re.compile(value)
        except re.error as e:
            raise ValueError(f"Invalid regex pattern '{value}': {e}") from e
        compile_user_pattern(value)
        return value

    @property
    def _compiled(self) -> Any:
        return _compiled(self.match)

    def applies_to(self, direction: str) -> bool:
        return self.direction == TransformDirection.BOTH.value or self.direction == direction

    def apply(self, text: str) -> str:
        return str(self._compiled.sub(self.replace, text))

    def apply_count(self, text: str) -> tuple[str, int]:
        """`apply`, plus how many replacements were made."""
        new, n = self._compiled.subn(self.replace, text)
        return str(new), int(n)

    def to_dict(self) -> dict[str, Any]:
        return {"match": self.match, "replace": self.replace, "direction": self.direction}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TransformationRule:
        return cls(match=data["match"], replace=data["replace"],
                   direction=data.get("direction", TransformDirection.OUTBOUND.value))
