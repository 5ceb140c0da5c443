"""Plug-in points for the guards declaw-wasm does not ship an engine for.

declaw runs named-entity recognition (Presidio), an injection classifier and an LLM judge, ML
toxicity and code-security classifiers, and OPA for `content_gate`/`custom_policy` on its
servers. declaw-wasm ships none of these models or engines; a caller who has one registers it
here and the guard is enforced through it, with the policy's thresholds and actions. A guard that
is switched on without its plug-in is refused when the pipeline is built (or, where declaw's own
helpers switch it on implicitly, accepted with a warning and an audit note "not enforced").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: text -> spans of one entity type (person names, addresses).
EntityDetector = Callable[[str], Iterable[tuple[int, int]]]
#: text -> score in [0, 1] (injection classifier, toxicity, code security).
TextScorer = Callable[[str], float]


@dataclass(frozen=True)
class JudgeRequest:
    """What the injection judge plug-in sees."""

    text: str
    host: str
    direction: str  # "outbound" (a request body) or "inbound" (a response)
    policy: str  # InjectionJudgeConfig.policy, the agent's natural-language policy
    score: float  # the local tier's score


@dataclass(frozen=True)
class ContentRequest:
    """What the content gate and custom policy plug-ins see for one outbound request."""

    host: str
    method: str
    url: str
    text: str  # the body's text units, joined by newlines
    attributes: Mapping[str, Any]  # e.g. {"model": "gpt-4.1"} from a JSON body


@dataclass
class GuardPlugins:
    """Engines for guards without a built-in one. All optional.

    - `person_name`, `address`: find entities (e.g. a Presidio or GLiNER wrapper).
    - `injection_classifier`: a score the local tier's score is max-ed with.
    - `injection_judge`: True if the text is an injection; called when the judge is enabled and
      either `always` is set or the local score reaches 0.5. Its verdict is final.
    - `toxicity`, `code_security`: scores compared with the configs' thresholds.
    - `content_gate`, `custom_policy`: return deny reasons (empty = allow).
    - `injection_signatures`: extra regular expressions (RE2) for the local tier, weight 0.99.
    """

    person_name: EntityDetector | None = None
    address: EntityDetector | None = None
    injection_classifier: TextScorer | None = None
    injection_judge: Callable[[JudgeRequest], bool] | None = None
    toxicity: TextScorer | None = None
    code_security: Callable[[str, list[str]], float] | None = None
    content_gate: Callable[[ContentRequest], list[str]] | None = None
    custom_policy: Callable[[ContentRequest], list[str]] | None = None
    injection_signatures: list[str] = field(default_factory=list)

    def entity_detectors(self) -> dict[str, EntityDetector]:
        out: dict[str, EntityDetector] = {}
        if self.person_name is not None:
            out["person_name"] = self.person_name
        if self.address is not None:
            out["address"] = self.address
        return out
