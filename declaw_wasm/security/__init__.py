"""declaw's security API: its configuration models, and the guard engine's public names.

Config models (declaw 1.7.0's names, fields, defaults, validation and wire dicts): `SecurityPolicy`
and its parts, and `PIIHandler` (declaw's `security/pii_handler.py`: the guards' detectors for
agent code). The engine lives in declaw_wasm._guard; re-exported here: `GuardPipeline` (what the
egress door runs on each HTTP exchange), `TokenMap` (one per sandbox), `GuardPlugins` for the
engines declaw-wasm does not ship, and what they take and give. See docs/guardrails.md.

Names are imported when first used (a module `__getattr__`, as for `declaw_wasm` itself):
importing one config model, or `declaw_wasm.security.audit`, does not import the guard engine;
a sandbox created with no `security=` never imports it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE: dict[str, tuple[str, str]] = {  # name: (module, its name there)
    "ALL_TRAFFIC": (".network_policy", "ALL_TRAFFIC"),
    "AuditConfig": (".audit", "AuditConfig"),
    "AuditEntry": (".audit", "AuditEntry"),
    "BlockResponse": (".._guard.contract", "BlockResponse"),
    "CodeSecurityConfig": (".code_security", "CodeSecurityConfig"),
    "ContentGateConfig": (".content_gate", "ContentGateConfig"),
    "ContentRequest": (".._guard.plugins", "ContentRequest"),
    "CustomPolicyConfig": (".custom_policy", "CustomPolicyConfig"),
    "DecodedTooLarge": (".._codings", "DecodedTooLarge"),
    "EncodingError": (".._codings", "EncodingError"),
    "EnvSecurityConfig": (".env", "EnvSecurityConfig"),
    "GuardCut": (".._guard.contract", "GuardCut"),
    "GuardLimits": (".._guard.pipeline", "GuardLimits"),
    "GuardNotEnforcedWarning": (".._guard.pipeline", "GuardNotEnforcedWarning"),
    "GuardPipeline": (".._guard.pipeline", "GuardPipeline"),
    "GuardPlugins": (".._guard.plugins", "GuardPlugins"),
    "InjectionAction": (".injection", "InjectionAction"),
    "InjectionDefenseConfig": (".injection", "InjectionDefenseConfig"),
    "InjectionJudgeConfig": (".injection", "InjectionJudgeConfig"),
    "InjectionSensitivity": (".injection", "InjectionSensitivity"),
    "InvisibleTextConfig": (".invisible_text", "InvisibleTextConfig"),
    "JudgeRequest": (".._guard.plugins", "JudgeRequest"),
    "NetworkPolicy": (".network_policy", "NetworkPolicy"),
    "PIIConfig": (".pii", "PIIConfig"),
    "PIIHandler": (".pii_handler", "PIIHandler"),
    "PIIType": (".pii", "PIIType"),
    "RedactionAction": (".pii", "RedactionAction"),
    "RequestOutcome": (".._guard.contract", "RequestOutcome"),
    "ResponseCut": (".._guard.contract", "GuardCut"),
    "ResponseFilter": (".._guard.response_filter", "ResponseFilter"),
    "SandboxNetworkOpts": (".network_policy", "SandboxNetworkOpts"),
    "SecureEnvVar": (".env", "SecureEnvVar"),
    "SecurityPolicy": (".policy", "SecurityPolicy"),
    "TokenMap": (".._guard.tokens", "TokenMap"),
    "ToxicityConfig": (".toxicity", "ToxicityConfig"),
    "TransformDirection": (".transformations", "TransformDirection"),
    "TransformationRule": (".transformations", "TransformationRule"),
    "check_enforceable": (".._guard.pipeline", "check_enforceable"),
    "validate_network_entry": (".network_policy", "validate_network_entry"),
}

__all__ = [
    "ALL_TRAFFIC", "AuditConfig", "AuditEntry", "BlockResponse", "CodeSecurityConfig", "ContentGateConfig",
    "ContentRequest", "CustomPolicyConfig", "DecodedTooLarge", "EncodingError",
    "EnvSecurityConfig", "GuardCut", "GuardLimits", "GuardNotEnforcedWarning", "GuardPipeline",
    "GuardPlugins", "InjectionAction", "InjectionDefenseConfig", "InjectionJudgeConfig",
    "InjectionSensitivity", "InvisibleTextConfig", "JudgeRequest", "NetworkPolicy", "PIIConfig",
    "PIIHandler", "PIIType", "RedactionAction", "RequestOutcome", "ResponseCut", "ResponseFilter",
    "SandboxNetworkOpts", "SecureEnvVar", "SecurityPolicy", "TokenMap", "ToxicityConfig",
    "TransformDirection", "TransformationRule", "check_enforceable", "validate_network_entry",
]


def __getattr__(name: str) -> Any:
    found = _WHERE.get(name)
    if found is None:
        raise AttributeError(f"module 'declaw_wasm.security' has no attribute {name!r}")
    value = getattr(importlib.import_module(found[0], __name__), found[1])
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


if TYPE_CHECKING:
    from .._codings import DecodedTooLarge, EncodingError
    from .._guard.contract import BlockResponse, GuardCut, RequestOutcome
    from .._guard.contract import GuardCut as ResponseCut
    from .._guard.pipeline import GuardLimits, GuardNotEnforcedWarning, GuardPipeline, check_enforceable
    from .._guard.plugins import ContentRequest, GuardPlugins, JudgeRequest
    from .._guard.response_filter import ResponseFilter
    from .._guard.tokens import TokenMap
    from .audit import AuditConfig, AuditEntry
    from .code_security import CodeSecurityConfig
    from .content_gate import ContentGateConfig
    from .custom_policy import CustomPolicyConfig
    from .env import EnvSecurityConfig, SecureEnvVar
    from .injection import (InjectionAction, InjectionDefenseConfig, InjectionJudgeConfig,
                            InjectionSensitivity)
    from .invisible_text import InvisibleTextConfig
    from .network_policy import ALL_TRAFFIC, NetworkPolicy, SandboxNetworkOpts, validate_network_entry
    from .pii import PIIConfig, PIIType, RedactionAction
    from .pii_handler import PIIHandler
    from .policy import SecurityPolicy
    from .toxicity import ToxicityConfig
    from .transformations import TransformationRule, TransformDirection
