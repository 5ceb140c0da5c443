"""The guard pipeline: one sandbox's content guards, as the egress relay's `ContentGuard`.

Order (declaw's, with hidden text first so a zero-width character cannot hide PII):

    request:  decode Content-Encoding -> split into units -> invisible text -> outbound
              transformations -> PII (session token map; secret placeholders never tokenised)
              -> injection scan (listed domains) -> toxicity / code security / content gate /
              custom policy plug-ins -> re-encode (identity, Content-Length recomputed)
    response: decode Content-Encoding -> [buffer + injection scan when it may block] -> inbound
              transformations -> PII rehydration -> re-frame (encoding and length dropped)

`GuardPipeline` implements the relay's hook (contract.py) itself: `request()` gives the
relay's `RequestOutcome` (a `BlockResponse` when a guard blocks; the counts named by
`COUNT_NAMES`), `response()` a `ResponseFilter` (response_filter.py) that the relay feeds the
decoded body. It fails closed: should a guard raise on some input (a bug of ours), the request
is blocked (502) or the answer cut, and the error logged; nothing passes unguarded.

`Sandbox.create(security=...)` builds one per sandbox (declaw_wasm/_egress/create.py); it owns
the sandbox's PII token map, so a value sent to two hosts gets one token and an answer from
either is rehydrated.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from .._codings import DecodedTooLarge, EncodingError, decode_all, narrow_accept_encoding
from .._printable import logger
from ..exceptions import InvalidArgumentException
from ..limits import Limits
from ._http import BINARY_PREFIXES, DIGEST_HEADERS, block_answer, header, without
from .bodies import Body, JsonBody, parse_body, parse_content_type
from .contract import Headers, RequestOutcome
from .detectors import Detection, PIIDetector
from .domains import in_scope
from .injection import InjectionScanner
from .invisible_text import strip_invisible
from .plugins import ContentRequest, GuardPlugins, JudgeRequest
from .response_filter import ResponseFilter
from .tokens import TokenMap

if TYPE_CHECKING:  # the configuration models (declaw_wasm.security, the layer above) are read,
    from ..security.policy import SecurityPolicy  # never imported, here

MiB = 1 << 20
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+\-]?[0-9]+)?")
PLUGIN_GUARDS = ("toxicity", "code_security", "content_gate", "custom_policy")
#: The counts a request's outcome carries (the relay's audit event has them all).
REQUEST_COUNTS = ("pii_redactions", "pii_detections", "injection_blocks", "injection_detections",
                  "transformations_applied", "invisible_chars")
log = logger("declaw_wasm.egress")


class GuardNotEnforcedWarning(UserWarning):
    """A guard in the policy is accepted but cannot be enforced here (no engine plugged in)."""


class GuardLimits(BaseModel):
    """Bounds on what the guards buffer and decode."""

    model_config = ConfigDict(frozen=True)

    max_request_body: int = Field(default=32 * MiB, gt=0, description="decoded request body a guard reads")
    max_response_body: int = Field(default=256 * MiB, gt=0, description="decoded response, in total")
    scan_buffer: int = Field(default=4 * MiB, gt=0, description="response held back for a blocking scan")

    @classmethod
    def of(cls, limits: Limits) -> "GuardLimits":
        """A sandbox's `Limits` (net_guard_body_bytes, net_guard_response_bytes, net_guard_scan_bytes)."""
        return cls(max_request_body=limits.net_guard_body_bytes,
                   max_response_body=limits.net_guard_response_bytes,
                   scan_buffer=limits.net_guard_scan_bytes)


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, GuardNotEnforcedWarning, stacklevel=4)


def check_enforceable(policy: SecurityPolicy, plugins: GuardPlugins | None = None) -> list[str]:
    """Refuse guards that are switched on explicitly but have no engine; return "not enforced"
    notes (and warn once) for the ones declaw's defaults or helpers switch on implicitly."""
    p = plugins or GuardPlugins()
    notes: list[str] = []

    def refuse(field: str, what: str) -> None:
        raise InvalidArgumentException(
            f"security.{field}: {what} is not available in declaw-wasm without a plug-in; "
            f"register one with GuardPlugins({what.split()[0].lower()}=...) or remove it")

    def not_enforced(note: str) -> None:
        _warn_once(note)
        notes.append(note)

    if policy.pii.enabled:
        for t, plugin in (("person_name", p.person_name), ("address", p.address)):
            if t in policy.pii.types and plugin is None:
                if policy.pii.uses_default_types:
                    not_enforced(f"pii: {t} not enforced (no named-entity detector plugged in)")
                else:
                    raise InvalidArgumentException(
                        f"security.pii.types: '{t}' needs a named-entity model, which "
                        f"declaw-wasm does not ship; register one with GuardPlugins({t}=...) or "
                        f"remove '{t}' from the list")
    inj = policy.injection_config
    pack = policy.custom_policy is not None and policy.custom_policy.enabled \
        and policy.custom_policy.is_injection_pack
    if inj.enabled and inj.judge is not None and inj.judge.enabled and p.injection_judge is None:
        if pack:
            not_enforced("injection: judge not enforced (no judge plugged in; the local tier runs)")
        else:
            refuse("injection_defense.judge", "injection_judge (an LLM judge)")
    if policy.custom_policy is not None and policy.custom_policy.enabled and p.custom_policy is None:
        if pack:
            not_enforced("custom_policy: prompt-injection@v3 pack not enforced (no Rego evaluator)")
        else:
            refuse("custom_policy", "custom_policy (a Rego evaluator)")
    for name in ("toxicity", "code_security", "content_gate"):
        cfg = getattr(policy, name)
        if cfg is not None and cfg.enabled and getattr(p, name) is None:
            refuse(name, f"{name} (a classifier)" if name != "content_gate"
                   else "content_gate (an OPA content gate)")
    return notes


class GuardPipeline:
    """One sandbox's guards, as the relay's `ContentGuard`. Thread-safe: connections of a
    sandbox may share it. Raises InvalidArgumentException for a guard switched on explicitly
    without its engine (`check_enforceable`)."""

    def __init__(self, policy: SecurityPolicy, token_map: TokenMap | None = None,
                 secret_placeholders: frozenset[str] = frozenset(),
                 plugins: GuardPlugins | None = None, limits: GuardLimits | None = None) -> None:
        if plugins is not None and not isinstance(plugins, GuardPlugins):
            raise InvalidArgumentException("guard_plugins must be a declaw_wasm.security.GuardPlugins")
        self.policy = policy
        self.tokens = token_map if token_map is not None else TokenMap()
        self.plugins = plugins or GuardPlugins()
        self.limits = limits or GuardLimits()
        self.secret_placeholders = frozenset(secret_placeholders)
        self.create_notes = check_enforceable(policy, self.plugins)
        pii = policy.pii
        self._pii = PIIDetector(pii.types, self.plugins.entity_detectors(),
                                never=self.secret_placeholders)
        inj = policy.injection_config
        self._inj = InjectionScanner(inj.threshold, inj.sensitivity, inj.injection_mode,
                                     self.plugins.injection_classifier,
                                     self.plugins.injection_signatures)
        self._out_rules = [r for r in policy.transformations if r.applies_to("outbound")]
        self._in_rules = [r for r in policy.transformations if r.applies_to("inbound")]

    def apply_limits(self, limits: Limits) -> None:
        """The sandbox's bounds on what the guards buffer and decode."""
        self.limits = GuardLimits.of(limits)

    @property
    def enforces_anything(self) -> bool:
        """Whether any guard of the policy can act on traffic (else the relay stays untouched)."""
        policy = self.policy
        invisible = policy.invisible_text
        return bool(policy.pii.enabled or policy.transformations or policy.injection_config.enabled
                    or (invisible is not None and invisible.enabled)
                    or any(getattr(policy, n) is not None and getattr(policy, n).enabled
                           for n in PLUGIN_GUARDS))

    # scope ----------------------------------------------------------------------------------------
    def _pii_on(self, host: str) -> bool:
        return self.policy.pii.enabled and in_scope(self.policy.pii.domains, host,
                                                    empty_means_all=True)

    def _injection_on(self, host: str) -> bool:
        inj = self.policy.injection_config
        return inj.enabled and in_scope(inj.domains, host, empty_means_all=False)

    def _invisible_on(self, host: str) -> bool:
        cfg = self.policy.invisible_text
        return cfg is not None and cfg.enabled and in_scope(cfg.domains, host, empty_means_all=True)

    def _plugin_on(self, name: str, host: str) -> bool:
        cfg = getattr(self.policy, name)
        if cfg is None or not cfg.enabled or getattr(self.plugins, name) is None:
            return False
        if name == "custom_policy":
            return True
        return in_scope(cfg.domains, host, empty_means_all=name != "content_gate")

    def _rehydrate_on(self, host: str) -> bool:
        pii = self.policy.pii
        return (self._pii_on(host) and pii.action == "redact" and pii.rehydrate_response
                and len(self.tokens) > 0)

    def wants_request_body(self, host: str, method: str, url: str,
                           headers: Sequence[tuple[str, str]]) -> bool:
        """Must the door buffer this request's body and call `request()`?"""
        if not self._request_guards(host):
            return False
        length = header(headers, "content-length")
        return not (length is not None and length.strip() == "0"
                    and header(headers, "transfer-encoding") is None)

    def _request_guards(self, host: str) -> bool:
        return bool(self._out_rules or self._pii_on(host) or self._injection_on(host)
                    or self._invisible_on(host)
                    or any(self._plugin_on(n, host) for n in PLUGIN_GUARDS))

    def _response_guards(self, host: str) -> bool:
        return bool(self._in_rules or self._injection_on(host)
                    or (self._pii_on(host) and self.policy.pii.action == "redact"
                        and self.policy.pii.rehydrate_response))

    def wants_response_body(self, host: str, method: str, url: str, status: int,
                            headers: Sequence[tuple[str, str]]) -> bool:
        """Must the door pass this response through `response()`? (False: relay it untouched.)"""
        if method.upper() == "HEAD" or status < 200 or status in (204, 304):
            return False
        ctype, _ = parse_content_type(header(headers, "content-type"))
        binary = ctype.startswith(BINARY_PREFIXES)
        return bool(self._in_rules and not binary or self._injection_on(host)
                    or (self._rehydrate_on(host) and not binary))

    # request --------------------------------------------------------------------------------------
    def request_headers(self, host: str, method: str, url: str,
                        headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """The request's headers as they must go upstream even when its body streams untouched:
        when a guard will read the answer, `Accept-Encoding` lists only codings we can decode."""
        headers = list(headers)
        if self._response_guards(host):
            ae = narrow_accept_encoding(header(headers, "accept-encoding"))
            headers = without(headers, {"accept-encoding"}) + [("accept-encoding", ae)]
        return headers

    def request(self, host: str, method: str, url: str, headers: Headers,
                body: bytes) -> RequestOutcome:
        """Run the request guards on a whole (buffered) body: the headers and body to send on,
        or a `BlockResponse` for the guest. Fails closed (a 502 block) if a guard raises."""
        try:
            return self._request(host, method, url, headers, body)
        except Exception as exc:  # a bug of ours: block, never send unguarded
            log.exception("content guard failed on a request to %s", host)
            message = f"the sandbox's content guard failed on this request ({type(exc).__name__})"
            return RequestOutcome(list(headers), body, block_answer("guard", message, 502),
                                  notes=[message])

    def _request(self, host: str, method: str, url: str, headers: Headers,
                 body: bytes) -> RequestOutcome:
        headers = self.request_headers(host, method, url, headers)
        out = RequestOutcome(headers, body, counts=dict.fromkeys(REQUEST_COUNTS, 0))
        if not body or not self._request_guards(host):
            return out
        try:
            decoded = decode_all(header(headers, "content-encoding"), body, self.limits.max_request_body)
        except DecodedTooLarge as e:
            return self._block(out, "limits", f"request body too large to scan: {e}", 413)
        except EncodingError as e:
            return self._block(out, "content-encoding", f"cannot scan the request body: {e}", 415)
        parsed = parse_body(header(headers, "content-type"), decoded)
        fast = self._fast_json(out, host, parsed)
        if fast is not None:
            return fast
        units = list(parsed.units)
        if units:
            blocked = self._request_units(out, host, method, url, parsed, units)
            if blocked is not None:
                return blocked
        if units != parsed.units:
            out.body = parsed.rebuild(units)
            drop = {"content-encoding", "content-length", "transfer-encoding"} | DIGEST_HEADERS
            out.headers = without(headers, drop) + [("content-length", str(len(out.body)))]
        return out

    def _fast_json(self, out: RequestOutcome, host: str, parsed: Body) -> RequestOutcome | None:
        """PII alone on a JSON body without escapes: scan the document's text once instead of
        unit by unit (3-5x faster on a chat request). The result is checked to be valid JSON;
        anything unusual falls back to the unit path (None)."""
        if not (isinstance(parsed, JsonBody) and "\\" not in parsed.text and self._pii_on(host)
                and not self._out_rules and not self._invisible_on(host)
                and not self._injection_on(host) and not self.plugins.entity_detectors()
                and not any(self._plugin_on(n, host) for n in PLUGIN_GUARDS)):
            return None
        text = parsed.text
        dets = self._pii.find_json_text(text)
        if not dets:
            return out
        action = self.policy.pii.action
        kinds = sorted({d.type for d in dets})
        if action in ("block", "log_only"):
            out.counts["pii_detections"] += len(dets)
            if action == "block":
                return self._block(out, "pii", f"the request body contains PII ({', '.join(kinds)})")
            out.notes.append(f"pii: {len(dets)} found ({', '.join(kinds)}), log_only")
            return out
        # redaction: counted only once it is done here (a fall back to the unit path counts there)
        parts: list[str] = []
        pos = counted = quotes = 0
        for d in dets:
            value = text[d.start:d.end]
            quotes += text.count('"', counted, d.start)
            counted = d.start
            token = self.tokens.tokenize(d.type, value, rehydrate=d.rehydrate)
            if quotes % 2 == 0:  # outside a string: only a whole JSON number may be replaced
                if not _JSON_NUMBER.fullmatch(value):
                    return None
                token = f'"{token}"'
            elif '"' in value:
                return None
            parts += [text[pos:d.start], token]
            pos = d.end
        parts.append(text[pos:])
        result = "".join(parts)
        try:
            json.loads(result)
        except ValueError:
            return None
        out.body = result.encode("utf-8")
        out.counts["pii_detections"] += len(dets)
        out.counts["pii_redactions"] += len(dets)
        if self.tokens.overflowed:
            out.notes.append("pii: token map full; new values redacted without a token")
        drop = {"content-encoding", "content-length", "transfer-encoding"} | DIGEST_HEADERS
        out.headers = without(out.headers, drop) + [("content-length", str(len(out.body)))]
        return out

    def _request_units(self, out: RequestOutcome, host: str, method: str, url: str,  # noqa: C901 (the pipeline's order)
                       parsed: Body, units: list[str]) -> RequestOutcome | None:
        # 1. hidden characters
        if self._invisible_on(host):
            cfg = self.policy.invisible_text
            assert cfg is not None
            hidden = 0
            for i, u in enumerate(units):
                new, n = strip_invisible(u)
                if n:
                    hidden += n
                    if cfg.action == "strip":
                        units[i] = new
            out.counts["invisible_chars"] += hidden
            if hidden:
                if cfg.action == "block":
                    return self._block(out, "invisible_text", f"{hidden} hidden Unicode characters in the body")
                out.notes.append(f"invisible_text: {hidden} hidden characters "
                                 f"{'stripped' if cfg.action == 'strip' else 'found (log_only)'}")
        # 2. outbound transformations
        if self._out_rules:
            out.counts["transformations_applied"] += apply_rules(self._out_rules, units)
        # 3. PII
        if self._pii_on(host):
            found = self._pii.find_units(units, parsed.contexts)
            total = sum(map(len, found))
            out.counts["pii_detections"] += total
            if total:
                action = self.policy.pii.action
                kinds = sorted({d.type for ds in found for d in ds})
                if action == "block":
                    return self._block(out, "pii", f"the request body contains PII ({', '.join(kinds)})")
                if action == "log_only":
                    out.notes.append(f"pii: {total} found ({', '.join(kinds)}), log_only")
                else:
                    for i, ds in enumerate(found):
                        if ds:
                            units[i] = self._redact(units[i], ds)
                    out.counts["pii_redactions"] += total
                    if self.tokens.overflowed:
                        out.notes.append("pii: token map full; new values redacted without a token")
        # 4. injection
        text = None
        if self._injection_on(host):
            text = "\n".join(units)
            hit = self._injection(text, host, "outbound")
            if hit is not None:
                out.counts["injection_detections"] += 1
                if self.policy.injection_config.action == "block":
                    out.counts["injection_blocks"] += 1
                    return self._block(out, "injection_defense", f"prompt injection ({hit})")
                out.notes.append(f"injection_defense: detected ({hit}), log_only")
        # 5. plug-in guards
        return self._plugin_guards(out, host, method, url, parsed, units, text)

    def _plugin_guards(self, out: RequestOutcome, host: str, method: str, url: str, parsed: Body,
                       units: list[str], text: str | None) -> RequestOutcome | None:
        names = [n for n in PLUGIN_GUARDS if self._plugin_on(n, host)]
        if not names:
            return None
        text = text if text is not None else "\n".join(units)
        for name in ("toxicity", "code_security"):
            if name in names:
                cfg = getattr(self.policy, name)
                fn = getattr(self.plugins, name)
                score = float(fn(text) if name == "toxicity" else fn(text, cfg.excluded_languages or []))
                if score >= cfg.threshold:
                    if cfg.action == "block":
                        return self._block(out, name, f"{name} score {score:.2f}")
                    out.notes.append(f"{name}: score {score:.2f}, log_only")
        attrs: dict[str, Any] = {}
        if isinstance(parsed, JsonBody):
            try:
                doc = json.loads(parsed.text)
                if isinstance(doc, dict) and isinstance(doc.get("model"), str):
                    attrs["model"] = doc["model"]
            except ValueError:
                pass
        req = ContentRequest(host=host, method=method, url=url, text=text, attributes=attrs)
        for name in ("content_gate", "custom_policy"):
            if name in names:
                reasons = list(getattr(self.plugins, name)(req))
                if reasons:
                    return self._block(out, name, "; ".join(map(str, reasons)))
        return None

    def _redact(self, text: str, dets: list[Detection]) -> str:
        parts = []
        pos = 0
        for d in dets:
            parts.append(text[pos:d.start])
            parts.append(self.tokens.tokenize(d.type, text[d.start:d.end], rehydrate=d.rehydrate))
            pos = d.end
        parts.append(text[pos:])
        return "".join(parts)

    def _injection(self, text: str, host: str, direction: str) -> str | None:
        """A description of the hit, or None."""
        verdict = self._inj.scan(text)
        judge = self.policy.injection_config.judge
        flagged = verdict.flagged
        if (judge is not None and judge.enabled and self.plugins.injection_judge is not None
                and (judge.always or verdict.score >= 0.5)):
            flagged = bool(self.plugins.injection_judge(JudgeRequest(
                text=text, host=host, direction=direction, policy=judge.policy,
                score=verdict.score)))
            if flagged:
                return f"judge; score {verdict.score}"
        if not flagged:
            return None
        return f"score {verdict.score}: {', '.join(verdict.signatures)}"

    def _block(self, out: RequestOutcome, guard: str, message: str, status: int = 403) -> RequestOutcome:
        out.block = block_answer(guard, f"blocked by the sandbox's security policy: {message}", status)
        out.notes.append(f"{guard}: blocked ({message})")
        return out

    # response -------------------------------------------------------------------------------------
    def response(self, host: str, method: str, url: str, status: int,
                 headers: Headers) -> ResponseFilter:
        """The filter the relay feeds this answer's decoded body (response_filter.py)."""
        return ResponseFilter(self, host, method, url, status, list(headers))

    # helpers for ResponseFilter ---------------------------------------------------------------
    def _inbound_units(self, units: list[str]) -> int:
        return apply_rules(self._in_rules, units) if self._in_rules else 0


def apply_rules(rules: Sequence[Any], units: list[str]) -> int:
    """Apply transformation rules to each unit in place; return the replacements made."""
    count = 0
    joined = "\n".join(units)
    for rule in rules:
        if rule._compiled.search(joined) is None:  # no match anywhere: skip the per-unit pass
            continue
        for i, u in enumerate(units):
            new, n = rule.apply_count(u)
            if n:
                units[i] = new
                count += n
        joined = "\n".join(units)
    return count
