"""The config models: declaw 1.7.0's names, defaults, validation and wire dicts."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import TypeVar

import pytest
from pydantic import ValidationError

from declaw_wasm.security import (
    ALL_TRAFFIC,
    AuditConfig,
    AuditEntry,
    CodeSecurityConfig,
    ContentGateConfig,
    CustomPolicyConfig,
    EnvSecurityConfig,
    InjectionAction,
    InjectionDefenseConfig,
    InjectionJudgeConfig,
    InjectionSensitivity,
    InvisibleTextConfig,
    NetworkPolicy,
    PIIConfig,
    PIIType,
    RedactionAction,
    SandboxNetworkOpts,
    SecureEnvVar,
    SecurityPolicy,
    ToxicityConfig,
    TransformationRule,
)
from declaw_wasm.security._model import ConfigModel

M = TypeVar("M", bound=ConfigModel)


def positional(model: type[M]) -> Callable[..., M]:
    """`model` called with fields positionally, as declaw's API allows (ConfigModel.__init__) and
    these tests do: pydantic's mypy plugin types each model's __init__ keyword-only."""
    return model


# Measured on declaw 1.7.0 (shared/declaw-reference.md 1.13.1).
DEFAULT_POLICY = {
    "pii": {"enabled": False, "types": ["ssn", "credit_card", "email", "phone", "person_name",
                                        "api_key", "address", "ip_address"],
            "action": "redact", "rehydrate_response": True},
    "injection_defense": {"enabled": False, "action": "log_only", "sensitivity": "medium",
                          "threshold": 0.95},
    "transformations": [],
    "audit": {"enabled": True},
    "env_security": {"mask_patterns": ["*_KEY", "*_SECRET", "*_TOKEN", "*_PASSWORD",
                                       "*_CREDENTIALS", "API_KEY", "SECRET_KEY"],
                     "auto_mask_in_audit": True},
}


def test_default_policy_dict_is_declaws() -> None:
    assert SecurityPolicy().to_dict() == DEFAULT_POLICY
    assert json.dumps(SecurityPolicy().to_dict()) == json.dumps(DEFAULT_POLICY)
    assert json.loads(SecurityPolicy().to_json()) == DEFAULT_POLICY


EVERY = [
    PIIConfig(enabled=True, types=["ssn", "email"], action="block", rehydrate_response=False,
              domains=["api.openai.com"]),
    InjectionDefenseConfig(enabled=True, action="block", sensitivity="high", threshold=0.5,
                           domains=["*.x.com", "~^a\\.b$"], injection_mode="agentic-tool",
                           judge=InjectionJudgeConfig(enabled=True, always=True, policy="p")),
    InjectionJudgeConfig(enabled=True), positional(TransformationRule)(r"\d{3}", "X", "both"),
    NetworkPolicy(allow_out=["api.openai.com", "*.pythonhosted.org", "10.0.0.0/8", "::1"],
                  deny_out=[ALL_TRAFFIC, "2001:db8::/32"], allow_public_traffic=False,
                  mask_request_host="h.example"),
    SandboxNetworkOpts(allow_out=["1.2.3.4"]), AuditConfig(enabled=False),
    AuditEntry(timestamp=datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
               method="POST", url="https://x/y", status_code=200, pii_redactions=2),
    EnvSecurityConfig(mask_patterns=["*_PAT"], auto_mask_in_audit=False),
    positional(SecureEnvVar)("K", "v", True), ToxicityConfig(enabled=True, threshold=0.5, domains=[]),
    CodeSecurityConfig(enabled=True, excluded_languages=["python"], domains=["a.com"]),
    InvisibleTextConfig(enabled=True, action="block", domains=["a.com"]),
    ContentGateConfig(enabled=True, domains=["a.com"]),
    CustomPolicyConfig(enabled=True, inline_rego="package x", inline_modules=["package y"],
                       policy_ref="owasp-agentic@v1", default_deny=True),
]


@pytest.mark.parametrize("obj", EVERY, ids=lambda o: type(o).__name__)
def test_every_class_round_trips(obj: ConfigModel) -> None:
    again = type(obj).from_dict(json.loads(json.dumps(obj.to_dict())))
    assert again == obj and again.to_dict() == obj.to_dict()


def test_full_policy_round_trips() -> None:
    p = SecurityPolicy(pii=EVERY[0], injection_defense=EVERY[1], transformations=[EVERY[3]],
                       network=EVERY[4], audit=False, env_security=EVERY[8], toxicity=EVERY[10],
                       code_security=EVERY[11], invisible_text=EVERY[12], content_gate=EVERY[13],
                       custom_policy=EVERY[14])
    assert SecurityPolicy.from_dict(json.loads(p.to_json())) == p
    assert SecurityPolicy.from_json(p.to_json()).to_dict() == p.to_dict()


def test_a_policy_written_for_declaw_loads_unchanged() -> None:
    # The workflows' PII + fintech transformation policy, as declaw serialises it.
    wire = {
        "pii": {"enabled": True, "types": ["ssn", "credit_card", "email", "phone", "person_name",
                                           "api_key", "ip_address", "address"],
                "action": "redact", "rehydrate_response": True},
        "injection_defense": {"enabled": True, "action": "log_only", "sensitivity": "medium",
                              "threshold": 0.8, "domains": ["api.openai.com"],
                              "judge": {"enabled": True, "policy": "Underwrite loans."},
                              "injection_mode": "data-egress-sensitive"},
        "transformations": [{"match": "[A-Z]{5}[0-9]{4}[A-Z]", "replace": "[REDACTED_PAN]",
                             "direction": "outbound"},
                            {"match": "[2-9][0-9]{3}[\\s-]?[0-9]{4}[\\s-]?[0-9]{4}",
                             "replace": "[REDACTED_AADHAAR]", "direction": "outbound"}],
        "audit": {"enabled": True},
        "env_security": DEFAULT_POLICY["env_security"],
        "network": {"allow_out": ["api.openai.com", "pypi.org", "*.pythonhosted.org"],
                    "deny_out": ["0.0.0.0/0"]},
        "custom_policy": {"enabled": True, "inline_rego": None, "policy_ref": "owasp-agentic@v1",
                          "default_deny": False},
    }
    p = SecurityPolicy.from_dict(wire)
    assert p.to_dict() == wire
    assert p.requires_tls_interception
    assert SecurityPolicy.full_injection_defense().to_dict()["custom_policy"]["policy_ref"] == \
        "prompt-injection@v3"


def test_full_injection_defense_matches_declaw() -> None:
    p = SecurityPolicy.full_injection_defense(agent_policy="Summarise docs.", domains=["a.com"])
    inj = p.injection_config
    assert (inj.enabled, inj.action, inj.threshold, inj.injection_mode) == (True, "block", 0.95,
                                                                            "balanced")
    assert inj.judge == InjectionJudgeConfig(enabled=True, always=False, policy="Summarise docs.")
    assert p.custom_policy == CustomPolicyConfig(enabled=True, policy_ref="prompt-injection@v3")
    assert "domains" not in SecurityPolicy.full_injection_defense().to_dict()["injection_defense"]


def test_properties() -> None:
    p = SecurityPolicy(injection_defense=True, audit=False)
    assert p.injection_config == InjectionDefenseConfig(enabled=True)
    assert p.audit_config == AuditConfig(enabled=False)
    assert not SecurityPolicy().requires_tls_interception
    assert SecurityPolicy(transformations=[TransformationRule(match="a", replace="b")]).requires_tls_interception
    assert SecurityPolicy(invisible_text=InvisibleTextConfig(enabled=True)).requires_tls_interception
    assert not SecurityPolicy(network=NetworkPolicy(allow_out=["a.com"])).requires_tls_interception


@pytest.mark.parametrize("make, field", [
    (lambda: PIIConfig(types=["ssn", "phone_number"]), "types"),
    (lambda: PIIConfig(action="mask"), "action"),
    (lambda: InjectionDefenseConfig(action="sanitize"), "action"),
    (lambda: InjectionDefenseConfig(sensitivity="extreme"), "sensitivity"),
    (lambda: InjectionDefenseConfig(threshold=1.5), "threshold"),
    (lambda: InjectionDefenseConfig(injection_mode="paranoid"), "injection_mode"),
    (lambda: positional(TransformationRule)(r"(a+)+", "x"), "match"),
    (lambda: positional(TransformationRule)("a" * 1001, "x"), "match"),
    (lambda: positional(TransformationRule)("(", "x"), "match"),
    (lambda: positional(TransformationRule)(r"(a)\1", "x"), "match"),  # Python re yes, RE2 no
    (lambda: positional(TransformationRule)("a", "x", direction="egress"), "direction"),
    (lambda: NetworkPolicy(deny_out=["evil.com"]), "deny_out"),
    (lambda: NetworkPolicy(allow_out=["~("]), "allow_out"),
    (lambda: NetworkPolicy(allow_out=["localhost"]), "allow_out"),
    (lambda: NetworkPolicy(deny_out=["~^evil"]), "deny_out"),
    (lambda: ToxicityConfig(action="log"), "action"),
    (lambda: CodeSecurityConfig(action="log"), "action"),
    (lambda: CodeSecurityConfig(threshold=-0.1), "threshold"),
    (lambda: InvisibleTextConfig(action="remove"), "action"),
    (lambda: SecurityPolicy(pii={"action": "nope"}), "pii.action"),
])
def test_validation_errors_name_the_field(make: Callable[[], object], field: str) -> None:
    with pytest.raises(ValueError) as e:  # pydantic's ValidationError is a ValueError, as declaw's
        make()
    assert isinstance(e.value, ValidationError)
    assert field in str(e.value)


def test_assignment_is_validated_too() -> None:
    cfg = PIIConfig()
    with pytest.raises(ValueError, match="action"):
        cfg.action = "bogus"


def test_enums_positional_args_and_deprecated_audit_action() -> None:
    assert positional(PIIConfig)(True, [PIIType.SSN], RedactionAction.BLOCK).to_dict()["types"] == ["ssn"]
    assert positional(InjectionDefenseConfig)(True, InjectionAction.BLOCK,
                                  InjectionSensitivity.HIGH).action == "block"
    with pytest.warns(DeprecationWarning):
        assert InjectionDefenseConfig(action="audit").action == "log_only"
    with pytest.raises(TypeError):
        positional(TransformationRule)("a", "b", "outbound", "extra")


def test_transformation_rule_apply_and_directions() -> None:
    r = positional(TransformationRule)(r"(\d+)-(\d+)", r"\2-\1", "inbound")
    assert r.apply("x 12-34") == "x 34-12"
    assert r.applies_to("inbound") and not r.applies_to("outbound")
    assert positional(TransformationRule)("a", "b", "both").applies_to("outbound")
    for ok in ("(a|b)*c", "[A-Z]{5}[0-9]{4}[A-Z]", "(a+)?", r"CIBIL[:\s]*[3-9][0-9]{2}"):
        positional(TransformationRule)(ok, "x")


def test_network_opts() -> None:
    opts = NetworkPolicy(allow_out=["api.openai.com"], deny_out=[ALL_TRAFFIC]).to_network_opts()
    assert opts.to_dict() == {"allow_out": ["api.openai.com"], "deny_out": ["0.0.0.0/0"]}
    assert opts.effective_allow_out == ["api.openai.com", "8.8.8.8"]
    assert SandboxNetworkOpts(allow_out=["1.2.3.4"]).effective_allow_out == ["1.2.3.4"]
    assert NetworkPolicy().to_dict() == {}
    p = SecurityPolicy(network={"allow_out": ["a.example.com"]})
    assert isinstance(p.network, NetworkPolicy)


def test_env_security_and_secure_env_var() -> None:
    env = EnvSecurityConfig()
    assert env.is_sensitive("openai_api_key") and env.is_sensitive("API_KEY")
    assert not env.is_sensitive("HOME")
    assert positional(SecureEnvVar)("K", "v", secret=True).to_safe_dict() == {"key": "K", "value": "***",
                                                                  "secret": True}
    assert positional(SecureEnvVar)("K", "v").to_safe_dict()["value"] == "v"


def test_pii_default_types_are_known_on_the_wire() -> None:
    assert PIIConfig().uses_default_types
    assert PIIConfig.from_dict(PIIConfig().to_dict()).uses_default_types
    assert not PIIConfig(types=["ssn", "person_name"]).uses_default_types
