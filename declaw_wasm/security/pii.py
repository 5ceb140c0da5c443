"""PII redaction config (declaw 1.7.0's `PIIConfig`, `PIIType`, `RedactionAction`)."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import Field, field_validator

from ._model import ConfigModel


class PIIType(str, Enum):
    SSN = "ssn"
    CREDIT_CARD = "credit_card"
    EMAIL = "email"
    PHONE = "phone"
    PERSON_NAME = "person_name"
    API_KEY = "api_key"
    ADDRESS = "address"
    IP_ADDRESS = "ip_address"


class RedactionAction(str, Enum):
    REDACT = "redact"
    BLOCK = "block"
    LOG_ONLY = "log_only"


ALL_PII_TYPES: tuple[str, ...] = tuple(t.value for t in PIIType)


def _default_types() -> list[str]:
    return list(ALL_PII_TYPES)


class PIIConfig(ConfigModel):
    """Which PII to find in outbound request bodies and what to do with it.

    `domains=None` (or an empty list) means every egress destination.
    """

    enabled: bool = False
    types: list[str] = Field(default_factory=_default_types)
    action: str = RedactionAction.REDACT.value
    rehydrate_response: bool = True
    domains: list[str] | None = None

    @field_validator("types", mode="before")
    @classmethod
    def _types(cls, value: Any) -> Any:
        if not isinstance(value, (list, tuple)):
            return value
        valid = set(ALL_PII_TYPES)
        out = []
        for t in value:
            t = t.value if isinstance(t, PIIType) else t
            if t not in valid:
                raise ValueError(f"Invalid PII type: '{t}'. Valid types: {sorted(valid)}")
            out.append(t)
        return out

    @field_validator("action", mode="before")
    @classmethod
    def _action(cls, value: Any) -> Any:
        value = value.value if isinstance(value, RedactionAction) else value
        valid = {a.value for a in RedactionAction}
        if value not in valid:
            raise ValueError(f"Invalid redaction action: '{value}'. Valid actions: {sorted(valid)}")
        return value

    @property
    def uses_default_types(self) -> bool:
        """True when `types` is the full default list (as `PIIConfig()` and its wire form have it).

        The wire cannot tell `PIIConfig()` from a policy that lists all eight types, so both count
        as "the default": types we cannot enforce are then reported, not refused.
        """
        return set(self.types) == set(ALL_PII_TYPES)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "enabled": self.enabled,
            "types": list(self.types),
            "action": self.action,
            "rehydrate_response": self.rehydrate_response,
        }
        if self.domains is not None:
            d["domains"] = list(self.domains)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PIIConfig:
        return cls(
            enabled=data.get("enabled", False),
            types=data.get("types", _default_types()),
            action=data.get("action", RedactionAction.REDACT.value),
            rehydrate_response=data.get("rehydrate_response", True),
            domains=data.get("domains"),
        )
