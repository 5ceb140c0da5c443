"""declaw's host-side PII helpers (`PIIHandler`), on the built-in detectors.

declaw's `PIIHandler` sends texts to a Guardrails service (Presidio) and keeps a redaction map;
ours runs the same detectors as the egress guards, in process, with the same token format. The
signatures are declaw's: `anonymize(texts) -> (texts, {token: original})`, static
`deanonymize(text, map)` and `deanonymize_stream(chunks, map)`. Differences: every text is
anonymized (declaw only rewrites the first), `confidence_threshold` is accepted and ignored (the
detectors are rules, not scores), and `entities` takes `PIIType` values (or Presidio names such as
`US_SSN`, `EMAIL_ADDRESS`, which are mapped).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Self

from .._guard.detectors import PIIDetector
from .pii import ALL_PII_TYPES
from .._guard.plugins import GuardPlugins
from .._guard.rehydrate import partial_start
from .._guard.tokens import TOKEN_RE, TokenMap

RedactionMap = dict[str, str]

_PRESIDIO = {"US_SSN": "ssn", "CREDIT_CARD": "credit_card", "EMAIL_ADDRESS": "email",
             "PHONE_NUMBER": "phone", "PERSON": "person_name", "IP_ADDRESS": "ip_address",
             "LOCATION": "address", "ADDRESS": "address", "API_KEY": "api_key"}


def _types(entities: Iterable[str] | None, plugins: GuardPlugins) -> list[str]:
    if entities is None:
        have = plugins.entity_detectors()
        return [t for t in ALL_PII_TYPES if t not in ("person_name", "address") or t in have]
    out = []
    for e in entities:
        t = _PRESIDIO.get(e, e)
        if t not in ALL_PII_TYPES:
            raise ValueError(f"Invalid PII type: '{e}'. Valid types: {sorted(ALL_PII_TYPES)}")
        if t in ("person_name", "address") and t not in plugins.entity_detectors():
            raise ValueError(f"entities: '{e}' needs a named-entity detector; register one with "
                             f"GuardPlugins({t}=...)")
        out.append(t)
    return out


class PIIHandler:
    """Anonymize texts before they leave, and put the values back in the answers."""

    def __init__(self, guardrails_url: str | None = None, confidence_threshold: float = 0.7,
                 entities: list[str] | None = None, *, token_map: TokenMap | None = None,
                 plugins: GuardPlugins | None = None) -> None:
        self.guardrails_url = guardrails_url  # accepted for declaw compatibility; unused
        self.confidence_threshold = confidence_threshold
        self.plugins = plugins or GuardPlugins()
        self.entities = entities
        self.token_map = token_map or TokenMap()

    def anonymize(self, texts: list[str], confidence_threshold: float | None = None,
                  entities: list[str] | None = None) -> tuple[list[str], RedactionMap]:
        """(texts with PII replaced by tokens, {token: original} for the tokens used)."""
        detector = PIIDetector(_types(entities or self.entities, self.plugins),
                               self.plugins.entity_detectors())
        found = detector.find_units(texts, [None] * len(texts))
        out: list[str] = []
        used: RedactionMap = {}
        for text, dets in zip(texts, found, strict=False):
            parts, pos = [], 0
            for d in dets:
                value = text[d.start:d.end]
                token = self.token_map.tokenize(d.type, value, rehydrate=d.rehydrate)
                if d.rehydrate:
                    used[token] = value
                parts += [text[pos:d.start], token]
                pos = d.end
            parts.append(text[pos:])
            out.append("".join(parts))
        return out, used

    @staticmethod
    def deanonymize(text: str, redaction_map: RedactionMap) -> str:
        """Replace known tokens with their originals (unknown tokens stay)."""
        if "[REDACTED_" not in text and not any(t in text for t in redaction_map):
            return text
        if all(TOKEN_RE.fullmatch(t) for t in redaction_map):
            return TOKEN_RE.sub(lambda m: redaction_map.get(m.group(), m.group()), text)
        for token in sorted(redaction_map, key=len, reverse=True):  # declaw-style free-form keys
            text = text.replace(token, redaction_map[token])
        return text

    @staticmethod
    def deanonymize_stream(chunks: Iterable[str],
                           redaction_map: RedactionMap) -> Generator[str, None, None]:
        """Yield deanonymized text as chunks arrive, holding back only a possible partial token."""
        held = ""
        for chunk in chunks:
            text = held + chunk
            cut = partial_start(text)
            held = text[cut:]
            if cut:
                yield PIIHandler.deanonymize(text[:cut], redaction_map)
        if held:
            yield PIIHandler.deanonymize(held, redaction_map)

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()
