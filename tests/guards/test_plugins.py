"""Guards without a built-in engine: refused, noted, or enforced through plug-ins."""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import pytest

from declaw_wasm.exceptions import InvalidArgumentException
from declaw_wasm.security import (
    CodeSecurityConfig,
    ContentGateConfig,
    CustomPolicyConfig,
    GuardNotEnforcedWarning,
    GuardPipeline,
    GuardPlugins,
    InjectionDefenseConfig,
    InjectionJudgeConfig,
    PIIConfig,
    SecurityPolicy,
    TokenMap,
    ToxicityConfig,
    check_enforceable,
)

from .conftest import post_json


@pytest.mark.parametrize("policy, field", [
    (SecurityPolicy(pii=PIIConfig(enabled=True, types=["ssn", "person_name"])), "pii.types"),
    (SecurityPolicy(pii=PIIConfig(enabled=True, types=["address"])), "pii.types"),
    (SecurityPolicy(toxicity=ToxicityConfig(enabled=True)), "toxicity"),
    (SecurityPolicy(code_security=CodeSecurityConfig(enabled=True)), "code_security"),
    (SecurityPolicy(content_gate=ContentGateConfig(enabled=True)), "content_gate"),
    (SecurityPolicy(custom_policy=CustomPolicyConfig(enabled=True, policy_ref="owasp-agentic@v1")),
     "custom_policy"),
    (SecurityPolicy(injection_defense=InjectionDefenseConfig(
        enabled=True, judge=InjectionJudgeConfig(enabled=True, policy="p"))),
     "injection_defense.judge"),
])
def test_explicit_guard_without_engine_is_refused_naming_the_field(policy: SecurityPolicy, field: str) -> None:
    with pytest.raises(InvalidArgumentException, match=rf"security\.{re.escape(field)}.*GuardPlugins"):
        GuardPipeline(policy, TokenMap())


def test_implicit_ones_warn_once_and_are_noted() -> None:
    from declaw_wasm._guard import pipeline
    pipeline._WARNED.clear()
    policy = SecurityPolicy.full_injection_defense(domains=["a.example"])
    policy.pii = PIIConfig(enabled=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        notes = check_enforceable(policy)
        again = check_enforceable(SecurityPolicy.from_dict(policy.to_dict()))
    assert notes == again
    assert {n.split(":")[0] for n in notes} == {"pii", "injection", "custom_policy"}
    assert all("not enforced" in n for n in notes)
    assert len([w for w in caught if issubclass(w.category, GuardNotEnforcedWarning)]) == 4
    # Disabled guards need nothing.
    assert check_enforceable(SecurityPolicy(toxicity=ToxicityConfig(), pii=PIIConfig())) == []


def test_named_entity_plugin_enforces_person_name() -> None:
    names = re.compile(r"\bAarav Sharma\b")
    plugins = GuardPlugins(person_name=lambda t: [m.span() for m in names.finditer(t)])
    policy = SecurityPolicy(pii=PIIConfig(enabled=True, types=["person_name", "email"]))
    pipe = GuardPipeline(policy, TokenMap(), plugins=plugins)
    assert pipe.create_notes == []
    out = post_json(pipe, {"q": "Aarav Sharma <aarav@example.com>"})
    assert json.loads(out.body) == {"q": "[REDACTED_PERSON_NAME_1] <[REDACTED_EMAIL_1]>"}


def test_classifier_judge_and_custom_signatures() -> None:
    seen = []

    def judge(req: Any) -> bool:
        seen.append(req)
        return "wire" in req.text

    policy = SecurityPolicy(injection_defense=InjectionDefenseConfig(
        enabled=True, action="block", domains=["a.example"], threshold=0.9,
        judge=InjectionJudgeConfig(enabled=True, policy="only summarise")))
    pipe = GuardPipeline(policy, TokenMap(), plugins=GuardPlugins(
        injection_judge=judge, injection_classifier=lambda t: 0.95 if "pwned" in t else 0.0,
        injection_signatures=[r"(?i)\bsudo mode\b"]))
    assert post_json(pipe, {"q": "please wire the money"}, host="a.example").block is None
    assert post_json(pipe, {"q": "pwned, wire the money"}, host="a.example").block
    assert seen[-1].policy == "only summarise" and seen[-1].direction == "outbound"
    assert not post_json(pipe, {"q": "pwned but harmless"}, host="a.example").block  # judge clears
    plain = GuardPipeline(SecurityPolicy(injection_defense=InjectionDefenseConfig(
        enabled=True, action="block", domains=["a.example"])), TokenMap(),
        plugins=GuardPlugins(injection_signatures=[r"(?i)\bsudo mode\b"]))
    assert post_json(plain, {"q": "enter SUDO MODE"}, host="a.example").block


def test_toxicity_code_security_content_gate_custom_policy_plugins() -> None:
    policy = SecurityPolicy(
        toxicity=ToxicityConfig(enabled=True, threshold=0.8),
        code_security=CodeSecurityConfig(enabled=True, excluded_languages=["sql"]),
        content_gate=ContentGateConfig(enabled=True, domains=["api.openai.com"]),
        custom_policy=CustomPolicyConfig(enabled=True, inline_rego="package declaw.platform.content"))
    langs: list[list[str]] = []

    def code_security(text: str, excluded: list[str]) -> float:
        langs.append(excluded)
        return 0.7 if "rm -rf" in text else 0.0

    plugins = GuardPlugins(
        toxicity=lambda t: 0.9 if "idiot" in t else 0.1,
        code_security=code_security,
        content_gate=lambda r: [] if r.attributes.get("model") == "gpt-4.1" else ["model not allowed"],
        custom_policy=lambda r: ["no exports"] if "export" in r.text else [])
    pipe = GuardPipeline(policy, TokenMap(), plugins=plugins)
    ok = {"model": "gpt-4.1", "messages": [{"content": "hello"}]}
    assert not post_json(pipe, ok).block
    block = post_json(pipe, {**ok, "x": "you idiot"}).block
    assert block is not None and block.guard == "toxicity"
    out = post_json(pipe, {**ok, "x": "rm -rf /"})
    assert not out.block and any("code_security" in n for n in out.notes)  # log_only default
    assert langs[-1] == ["sql"]
    block = post_json(pipe, {**ok, "model": "gpt-3"}).block
    assert block is not None and block.guard == "content_gate"
    assert not post_json(pipe, {**ok, "model": "gpt-3"}, host="other.example").block
    block = post_json(pipe, {**ok, "x": "export data"}, host="other.example").block
    assert block is not None and block.guard == "custom_policy"
