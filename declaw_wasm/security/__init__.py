"""declaw's security API and the host-side guard engine.

Config models (declaw 1.7.0's names, fields, defaults, validation and wire dicts): `SecurityPolicy`
and its parts. The engine: `GuardPipeline` (what the egress door runs on each plaintext HTTP
exchange), `TokenMap` (one per sandbox), `PIIHandler` (the same detectors for agent code), and
`GuardPlugins` for the engines declaw-wasm does not ship. See docs/guardrails.md.
"""

from .._codings import DecodedTooLarge, EncodingError
from ._http import ResponseCut
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
from .pipeline import (GuardLimits, GuardNotEnforcedWarning, GuardPipeline, RequestOutcome,
                       check_enforceable)
from .plugins import ContentRequest, GuardPlugins, JudgeRequest
from .policy import SecurityPolicy
from .response_filter import ResponseFilter
from .tokens import TokenMap
from .toxicity import ToxicityConfig
from .transformations import TransformationRule, TransformDirection

__all__ = [
    "ALL_TRAFFIC", "AuditConfig", "AuditEntry", "CodeSecurityConfig", "ContentGateConfig",
    "ContentRequest", "CustomPolicyConfig", "DecodedTooLarge", "EncodingError",
    "EnvSecurityConfig", "GuardLimits", "GuardNotEnforcedWarning", "GuardPipeline",
    "GuardPlugins", "InjectionAction", "InjectionDefenseConfig", "InjectionJudgeConfig",
    "InjectionSensitivity", "InvisibleTextConfig", "JudgeRequest", "NetworkPolicy", "PIIConfig",
    "PIIHandler", "PIIType", "RedactionAction", "RequestOutcome", "ResponseCut", "ResponseFilter",
    "SandboxNetworkOpts", "SecureEnvVar", "SecurityPolicy", "TokenMap", "ToxicityConfig",
    "TransformDirection", "TransformationRule", "check_enforceable", "validate_network_entry",
]
