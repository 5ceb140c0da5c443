"""declaw's security API: its configuration models, and the guard engine's public names.

Config models (declaw 1.7.0's names, fields, defaults, validation and wire dicts): `SecurityPolicy`
and its parts, and `PIIHandler` (declaw's `security/pii_handler.py`: the guards' detectors for
agent code). The engine lives in declaw_wasm._guard; re-exported here: `GuardPipeline` (what the
egress door runs on each HTTP exchange), `TokenMap` (one per sandbox), `GuardPlugins` for the
engines declaw-wasm does not ship, and what they take and give. See docs/guardrails.md.
"""

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
