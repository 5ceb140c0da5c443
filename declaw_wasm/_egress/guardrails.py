"""declaw's SecurityPolicy enforced at the egress door: the `ContentGuard` over `GuardPipeline`.

`Sandbox.create(security=...)` (a policy object, declaw's dict, or declaw's own SDK's JSON
through `declaw-wasm serve`) becomes one `PipelineGuard` per sandbox, built when the create
request is checked (so a guard that is switched on explicitly but has no engine is refused
there) and handed to the sandbox's `EgressSession`; the HTTP relay (http.py) calls it on every
request and response of every connection. The guard owns the sandbox's PII token map, so a
value sent to two hosts gets one token and an answer from either is rehydrated.

The pipeline (declaw_wasm.security) does the work; this module only translates: its outcomes
into the relay's (`RequestOutcome`, `BlockResponse`), its response filter into one that also
caps the decoded size (`Limits.net_guard_response_bytes`: a decompression bomb cuts that
response, never the host), reports when a block answer is complete (the relay then drops the
rest of the upstream's answer), and turns `ResponseCut` into the relay's `GuardCut`. It fails
closed: should the pipeline raise on some input (a bug of ours), the request is blocked or the
answer cut, and the error logged; nothing passes unguarded and the relay goes on.
"""

from __future__ import annotations

from typing import Any, Optional

from .._printable import logger
from ..exceptions import InvalidArgumentException
from ..limits import Limits
from ..security import (GuardLimits, GuardPipeline, GuardPlugins, ResponseCut, SecurityPolicy,
                        TokenMap)
from ..security._http import block_body, block_headers
from ..security.response_filter import ResponseFilter as PipelineResponse
from .guard import BlockResponse, GuardCut, Headers, RequestOutcome

PLUGIN_GUARDS = ("toxicity", "code_security", "content_gate", "custom_policy")
log = logger("declaw_wasm.egress")


def as_policy(security: Any) -> SecurityPolicy:
    """Our SecurityPolicy for what `create` carries: ours, or any object with declaw's
    `to_dict()` (declaw's own classes), through its wire form."""
    if isinstance(security, SecurityPolicy):
        return security
    try:
        return SecurityPolicy.from_dict(security.to_dict() if hasattr(security, "to_dict") else security)
    except (TypeError, ValueError, AttributeError) as exc:
        raise InvalidArgumentException(f"security: {exc}") from None


def enforces_anything(policy: SecurityPolicy) -> bool:
    """Whether any guard of the policy can act on traffic (else the relay stays untouched)."""
    inj = policy.injection_config
    invisible = policy.invisible_text
    return bool(policy.pii.enabled or policy.transformations or inj.enabled
                or (invisible is not None and invisible.enabled)
                or any(getattr(policy, n) is not None and getattr(policy, n).enabled
                       for n in PLUGIN_GUARDS))


class PipelineGuard:
    """One sandbox's guards, as the relay's `ContentGuard`."""

    def __init__(self, pipeline: GuardPipeline, response_cap: int = Limits().net_guard_response_bytes) -> None:
        self.pipeline = pipeline
        self.response_cap = response_cap

    @classmethod
    def build(cls, security: Any, placeholders: frozenset[str] = frozenset(),
              plugins: Optional[GuardPlugins] = None) -> "PipelineGuard":
        """Raises InvalidArgumentException for a guard switched on without its engine."""
        if plugins is not None and not isinstance(plugins, GuardPlugins):
            raise InvalidArgumentException("guard_plugins must be a declaw_wasm.security.GuardPlugins")
        return cls(GuardPipeline(as_policy(security), TokenMap(), placeholders, plugins))

    @property
    def tokens(self) -> TokenMap:
        return self.pipeline.tokens

    @property
    def create_notes(self) -> list[str]:
        """Guards the policy names that nothing enforces ("not enforced" notes)."""
        return list(self.pipeline.create_notes)

    def apply_limits(self, limits: Limits) -> None:
        self.pipeline.limits = GuardLimits(max_request_body=limits.net_guard_body_bytes,
                                           max_response_body=limits.net_guard_response_bytes,
                                           scan_buffer=limits.net_guard_scan_bytes)
        self.response_cap = limits.net_guard_response_bytes

    # -- requests ----------------------------------------------------------------------------
    def wants_request_body(self, host: str, method: str, url: str, headers: Headers) -> bool:
        return self.pipeline.wants_request_body(host, method, url, headers)

    def request(self, host: str, method: str, url: str, headers: Headers, body: bytes) -> RequestOutcome:
        try:
            out = self.pipeline.request(host, method, url, headers, body)
        except Exception as exc:  # a bug of ours: block, never send unguarded
            log.exception("content guard failed on a request to %s", host)
            message = f"the sandbox's content guard failed on this request ({type(exc).__name__})"
            answer = block_body("guard", message, 502)
            return RequestOutcome(list(headers), body, BlockResponse(502, block_headers(answer, "guard"),
                                                                     answer, "guard"), notes=[message])
        counts = {"pii_redactions": out.pii_redactions, "pii_detections": out.pii_detections,
                  "injection_blocks": out.injection_blocks,
                  "injection_detections": out.injection_detections,
                  "transformations_applied": out.transformations_applied,
                  "invisible_chars": out.invisible_chars}
        block = None
        if out.blocked:
            block = BlockResponse(out.status, list(out.headers), out.body, out.guard or "")
        return RequestOutcome(list(out.headers), out.body, block, counts, list(out.notes))

    # -- responses ---------------------------------------------------------------------------
    def wants_response_body(self, host: str, method: str, url: str, status: int,
                            headers: Headers) -> bool:
        return self.pipeline.wants_response_body(host, method, url, status, headers)

    def response(self, host: str, method: str, url: str, status: int, headers: Headers) -> "GuardedResponse":
        return GuardedResponse(self.pipeline.response(host, method, url, status, headers),
                               self.response_cap)


class GuardedResponse:
    """The pipeline's response filter, as the relay's: bounded, with `done` for block answers."""

    def __init__(self, inner: PipelineResponse, cap: int) -> None:
        self.inner = inner
        self.cap = cap
        self.size = 0
        self.done = False  # a block answer was returned whole: the relay ends the message
        self._early = b""
        if inner.blocked:  # decided before any body (an encoding it cannot read): answer now
            self._early = inner.end()

    @property
    def status(self) -> int:
        return self.inner.status

    @property
    def headers(self) -> Headers:
        headers = list(self.inner.headers)
        return headers + [("connection", "close")] if self.inner.blocked else headers

    @property
    def head_ready(self) -> bool:
        return self.inner.head_ready

    @property
    def blocked(self) -> str:
        if not self.inner.blocked:
            return ""
        return next((v for k, v in self.inner.headers if k.lower() == "x-declaw-guard"), "guard")

    @property
    def notes(self) -> list[str]:
        return list(self.inner.notes)

    @property
    def held(self) -> int:
        """Bytes the filter holds back (the relay counts them against the sandbox's budget)."""
        return self.inner.held

    @property
    def counts(self) -> dict[str, int]:
        f = self.inner
        return {"pii_rehydrations": f.pii_rehydrations, "injection_blocks": f.injection_blocks,
                "injection_detections": f.injection_detections,
                "transformations_applied": f.transformations_applied}

    def feed(self, chunk: bytes) -> bytes:
        if self.inner.blocked:
            return self._answer()
        self.size += len(chunk)
        if self.size > self.cap:
            self.inner.notes.append(f"limits: response cut past {self.cap} decoded bytes")
            raise GuardCut(f"the decoded response is larger than {self.cap} bytes "
                           "(Limits.net_guard_response_bytes)", "limits")
        try:
            out = self.inner.feed(chunk)
        except ResponseCut as exc:
            raise GuardCut(str(exc), exc.guard) from None
        except Exception as exc:  # a bug of ours: cut, never release unguarded
            raise self._failed(exc) from None
        self.done = self.inner.blocked
        return out

    def end(self) -> bytes:
        if self.inner.blocked:
            return self._answer()
        try:
            return self.inner.end()
        except ResponseCut as exc:
            raise GuardCut(str(exc), exc.guard) from None
        except Exception as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: Exception) -> GuardCut:
        log.error("content guard failed on a response: %r", exc, exc_info=exc)
        return GuardCut(f"the sandbox's content guard failed on this answer ({type(exc).__name__})", "guard")

    def _answer(self) -> bytes:
        out, self._early = self._early, b""
        self.done = True
        return out
