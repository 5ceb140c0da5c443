"""The local, dependency-free tier of prompt-injection defense.

declaw's first tier is an ML classifier with static signatures and normalisation in front. Ours
is the normalisation and a curated signature set; a classifier can be plugged in
(`GuardPlugins.injection_classifier`) and its score is max-ed with ours.

Normalisation, so that trivial obfuscation does not hide a known phrasing: NFKC (full-width and
compatibility forms), hidden characters removed, case folded, Cyrillic/Greek look-alikes mapped to
Latin, whitespace collapsed; then variants are scanned too: letters spaced out (`I G N O R E`),
leetspeak (`1gn0r3`), and the decoded text of base64 and hex runs.

Each signature has a weight; matched weights combine as 1 - prod(1 - w), and the message counts
as an injection when the score reaches the config's `threshold`. `sensitivity` and
`injection_mode` shift the weights a little (high/strict +0.03/+0.05, low/permissive -0.05).
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from .._re2 import compile_user_pattern
from .invisible_text import strip_invisible

_HOMOGLYPHS = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ɡ": "g", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "к": "k", "м": "m",
    "н": "h", "т": "t", "в": "b", "ո": "n", "ս": "u",
    "α": "a", "ε": "e", "ο": "o", "ρ": "p", "ι": "i", "κ": "k", "ν": "v", "τ": "t", "υ": "u",
    "χ": "x", "ϲ": "c", "ѵ": "v",
})
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a",
                       "$": "s", "!": "i", "|": "l"})
_SPACED = re.compile(r"\b(?:[a-z][ ._\-*]{1,3}){3,}[a-z]\b")
_B64 = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{24,}={0,2}(?![A-Za-z0-9+/=])")
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){12,}(?![0-9A-Fa-f])")
_WS = re.compile(r"\s+")

_SIGNATURES: list[tuple[str, float, str]] = [
    ("override-instructions", 0.99,
     (r"\b(?:ignore|disregard|forget|override|bypass|abandon|neglect)\s+(?:(?:all|any|the|your|of|"
      r"my|these|those|every)\s+)*(?:(?:previous|prior|above|earlier|preceding|system|original|"
      r"initial|existing|former|old|other)\s+)?(?:instructions?|prompts?|rules|directions|directives"
      r"|guidelines|context|messages|commands|constraints|orders|programming)\b")),
    ("ignore-above", 0.9, (r"\b(?:ignore|disregard|forget)\s+(?:the\s+|everything\s+)?"
                           r"(?:above|previous|prior|before)\b")),
    ("persona-unrestricted", 0.97,
     (r"\b(?:you are now|from now on,? you(?: are| will| must)?|act as|pretend (?:to be|you are)|"
      r"roleplay as)\b[^.\n]{0,40}\b(?:dan|jailbroken|unrestricted|unfiltered|uncensored|"
      r"developer mode|evil|without (?:any )?(?:restrictions|rules|limits|filters))")),
    ("jailbreak-names", 0.85, (r"\bdo anything now\b|\bdan mode\b|\bdeveloper mode (?:enabled|on)\b"
                               r"|\bjailbreak(?:ed|ing)?\b")),
    ("prompt-leak", 0.95,
     (r"\b(?:reveal|print|show|output|repeat|leak|disclose|display|tell me|give me)\b[^.\n]{0,30}"
      r"\b(?:system prompt|system message|hidden (?:instructions|prompt)|initial (?:instructions|"
      r"prompt)|original (?:instructions|prompt)|your (?:instructions|prompt|rules))")),
    ("new-instructions", 0.9, (r"\b(?:new|updated|revised|real|actual|true)\s+(?:system\s+)?"
                               r"instructions?\s*:|\bsystem (?:override|prompt|message)\s*:")),
    ("chat-markup", 0.93, (r"<\|im_start\|>\s*system|<\|(?:system|endoftext|im_end)\|>|\[/?inst\]"
                           r"|<<sys>>|\[system\]|</?system>|###\s*(?:system|instruction)")),
    ("disable-safety", 0.9,
     (r"\b(?:disable|turn off|deactivate|bypass|ignore|remove)\b[^.\n]{0,20}\b(?:safety|guardrails?"
      r"|content filters?|safety filters?|content polic(?:y|ies)|moderation|security (?:checks|"
      r"controls|policy))")),
    ("exfiltrate-secrets", 0.95,
     (r"\b(?:send|post|upload|exfiltrate|forward|leak|transmit|email)\b[^.\n]{0,40}\b(?:api keys?|"
      r"secrets?|credentials|passwords?|tokens?|env(?:ironment)? variables|private keys?|ssh keys?)"
      r"\b[^.\n]{0,40}\b(?:to|at)\s+(?:https?://|\S+@|\S+\.\S+)")),
    ("hide-from-user", 0.9, (r"\bdo not (?:tell|inform|alert|notify|mention (?:this )?to) the user\b"
                             r"|\bwithout (?:telling|informing|alerting) the user\b")),
    ("goal-hijack", 0.6,
     (r"\b(?:approve|authorize|transfer|wire|send|refund|release|grant)\s+(?:all|every|any)\b"
      r"[^.\n]{0,30}\b(?:refunds?|payments?|funds|money|transactions?|requests?|transfers?|access)\b")),
    ("authority-claim", 0.93, (r"\bthis is (?:an? )?(?:system|admin|administrator|developer|root)\s+"
                               r"(?:message|override|instruction|command|notice)")),
    ("new-task", 0.85, (r"\byour (?:new|real|actual) (?:task|goal|role|instructions?|objective)"
                        r"\s+(?:is|are)\b")),
    ("mentions-injection", 0.3, r"\bprompt injection\b"),
]
_COMPILED = [(name, w, re.compile(p)) for name, w, p in _SIGNATURES]

_SENSITIVITY = {"low": -0.05, "medium": 0.0, "high": 0.03}
_MODE = {"strict": 0.05, "permissive": -0.05}


@dataclass(frozen=True)
class InjectionVerdict:
    score: float
    signatures: tuple[str, ...]
    flagged: bool


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text, _ = strip_invisible(text)
    return _WS.sub(" ", text.casefold().translate(_HOMOGLYPHS))


def _decoded_runs(text: str) -> list[str]:
    out = []
    for m in _B64.finditer(text):
        s = m.group()
        try:
            raw = base64.b64decode(s + "=" * (-len(s) % 4), validate=False)
        except (binascii.Error, ValueError):
            continue
        out.append(raw)
    out.extend(bytes.fromhex(m.group()) for m in _HEX.finditer(text))
    texts = []
    for raw in out:
        t = raw.decode("utf-8", "ignore")
        if t and sum(c.isprintable() or c.isspace() for c in t) >= 0.9 * len(t):
            texts.append(t)
    return texts


def variants(text: str) -> str:
    """Everything the signatures are run on, joined by newlines."""
    base = normalize(text)
    parts = [base]
    spaced = _SPACED.sub(lambda m: re.sub(r"[ ._\-*]", "", m.group()), base)
    if spaced != base:
        parts.append(spaced)
    leet = base.translate(_LEET)
    if leet != base:
        parts.append(leet)
    parts.extend(normalize(t) for t in _decoded_runs(text))
    return "\n".join(parts)


class InjectionScanner:
    """Scores text against the signatures (and an optional classifier)."""

    def __init__(self, threshold: float, sensitivity: str = "medium", mode: str | None = None,
                 classifier: Any = None, extra_signatures: list[str] | None = None) -> None:
        self.threshold = threshold
        self.shift = _SENSITIVITY.get(sensitivity, 0.0) + _MODE.get(mode or "", 0.0)
        self.classifier = classifier
        self.extra = [(f"custom-{i}", 0.99, compile_user_pattern(p))
                      for i, p in enumerate(extra_signatures or [])]

    def scan(self, text: str) -> InjectionVerdict:
        if not text.strip():
            return InjectionVerdict(0.0, (), False)
        corpus = variants(text)
        keep = 1.0
        names = []
        for name, w, rx in (*_COMPILED, *self.extra):
            if rx.search(corpus):
                names.append(name)
                keep *= 1.0 - min(1.0, max(0.0, w + self.shift))
        score = 1.0 - keep
        if self.classifier is not None:
            cls = float(self.classifier(text))
            if cls > score:
                score = cls
                names.append("classifier")
        return InjectionVerdict(round(score, 4), tuple(names), score >= self.threshold)
