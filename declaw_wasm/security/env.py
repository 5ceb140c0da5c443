"""Which environment variables are secrets (declaw 1.7.0's `EnvSecurityConfig`, `SecureEnvVar`)."""

from __future__ import annotations

import fnmatch
from typing import Any

from pydantic import Field

from ._model import ConfigModel

DEFAULT_SENSITIVE_PATTERNS: tuple[str, ...] = (
    "*_KEY", "*_SECRET", "*_TOKEN", "*_PASSWORD", "*_CREDENTIALS", "API_KEY", "SECRET_KEY",
)


class SecureEnvVar(ConfigModel):
    """A client-side helper: an env var that prints as `***` when `secret`."""

    key: str
    value: str
    secret: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "secret": self.secret}

    def to_safe_dict(self) -> dict[str, Any]:
        return {"key": self.key, "value": "***" if self.secret else self.value,
                "secret": self.secret}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SecureEnvVar:
        return cls(key=data["key"], value=data["value"], secret=data.get("secret", False))


class EnvSecurityConfig(ConfigModel):
    """Env var names whose values are masked in audit records (`fnmatch` on the upper-cased name)."""

    mask_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_SENSITIVE_PATTERNS))
    auto_mask_in_audit: bool = True

    def is_sensitive(self, key: str) -> bool:
        return any(fnmatch.fnmatchcase(key.upper(), pat) for pat in self.mask_patterns)

    def to_dict(self) -> dict[str, Any]:
        return {"mask_patterns": list(self.mask_patterns),
                "auto_mask_in_audit": self.auto_mask_in_audit}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnvSecurityConfig:
        return cls(mask_patterns=data.get("mask_patterns", list(DEFAULT_SENSITIVE_PATTERNS)),
                   auto_mask_in_audit=data.get("auto_mask_in_audit", True))
