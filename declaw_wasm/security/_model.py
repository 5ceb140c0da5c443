"""The base of the security config models: pydantic, but built like declaw's dataclasses.

declaw 1.7.0's configs are dataclasses, so policies written for it pass fields by position
(`TransformationRule(r"\\d+", "X")`) and read `to_dict()`/`from_dict()`. The project keeps its
public data in pydantic; this base accepts positional arguments in field order, validates on
assignment too (a later `cfg.action = "bogus"` fails like a bad constructor call), and leaves each
class to write declaw's exact wire dict.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


class ConfigModel(BaseModel):
    """A declaw-compatible config object (positional or keyword fields, `to_dict`/`from_dict`)."""

    model_config = ConfigDict(validate_assignment=True, extra="forbid")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args:
            names = list(type(self).model_fields)
            if len(args) > len(names):
                raise TypeError(f"{type(self).__name__}() takes at most {len(names)} positional "
                                f"arguments ({len(args)} given)")
            for name, value in zip(names, args, strict=False):
                if name in kwargs:
                    raise TypeError(f"{type(self).__name__}() got multiple values for argument "
                                    f"'{name}'")
                kwargs[name] = value
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:  # pragma: no cover - likewise
        raise NotImplementedError


def check_range(name: str, value: float) -> float:
    """declaw's threshold rule: 0.0 <= value <= 1.0."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be between 0.0 and 1.0, got {value}")
    return value


def check_choice(what: str, value: str, valid: set[str]) -> str:
    if value not in valid:
        raise ValueError(f"Invalid {what}: '{value}'. Valid: {sorted(valid)}")
    return value


def check_member(what: str, value: Any, kind: type[Enum]) -> Any:
    """`value`, a member of `kind` or one's value, as the value (declaw's enums are str-valued)."""
    value = value.value if isinstance(value, kind) else value
    return check_choice(what, value, {member.value for member in kind})


class ScoredGuardConfig(ConfigModel):
    """A guard that scores text (toxicity, code security): `threshold` in 0.0-1.0, `action` block
    or log_only. The fields are each class's own, in declaw's order (they are positional)."""

    @field_validator("action", check_fields=False)
    @classmethod
    def _action(cls, value: str) -> str:
        return check_choice("action", value, {"block", "log_only"})

    @field_validator("threshold", check_fields=False)
    @classmethod
    def _threshold(cls, value: float) -> float:
        return check_range("threshold", value)
