"""Helpers for the guard tests: they drive GuardPipeline as the egress door would."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Iterator, Sequence

import pytest

from declaw_wasm._guard.contract import Headers, RequestOutcome
from declaw_wasm._guard.response_filter import ResponseFilter
from declaw_wasm.security import GuardPipeline, PIIConfig, SecurityPolicy, TokenMap

JSON = [("content-type", "application/json")]
SSE = [("content-type", "text/event-stream")]

# Types we can enforce without a named-entity plug-in.
STRUCTURED = ["ssn", "credit_card", "email", "phone", "api_key", "ip_address"]


@pytest.fixture(scope="session")
def guest_path() -> str:
    """These tests start no sandbox: run them once, not once per guest path."""
    return "warm"


@pytest.fixture(autouse=True)
def _quiet_not_enforced() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def pii_pipe(**pii: object) -> GuardPipeline:
    pii.setdefault("types", STRUCTURED)
    return GuardPipeline(SecurityPolicy(pii=PIIConfig(enabled=True, **pii)), TokenMap())


def post_json(pipe: GuardPipeline, doc: object, host: str = "api.openai.com",
              headers: Headers | None = None) -> RequestOutcome:
    body = json.dumps(doc).encode()
    hdrs = list(headers or JSON) + [("content-length", str(len(body)))]
    return pipe.request(host, "POST", f"https://{host}/v1/x", hdrs, body)


def run_response(pipe: GuardPipeline, body: bytes | Iterable[bytes], headers: Headers | None = None,
                 host: str = "api.openai.com", status: int = 200) -> tuple[ResponseFilter, bytes]:
    """(filter, bytes the guest gets) for a response fed in the given chunks."""
    chunks = [body] if isinstance(body, bytes) else list(body)
    f = pipe.response(host, "POST", f"https://{host}/v1/x", status, list(headers or JSON))
    out = b"".join(f.feed(c) for c in chunks) + f.end()
    return f, out


def split_n(data: bytes, n: int) -> list[bytes]:
    k = max(1, -(-len(data) // n))
    return [data[i:i + k] for i in range(0, len(data), k)]


def sse(events: Sequence[object], event_names: list[str] | None = None) -> bytes:
    out = b""
    for i, e in enumerate(events):
        if event_names:
            out += f"event: {event_names[i]}\n".encode()
        out += b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n"
    return out


def openai_chunk(content: str | None, finish: str | None = None, index: int = 0) -> dict:
    delta = {} if content is None else {"content": content}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def openai_text(stream: bytes) -> str:
    text = ""
    for line in stream.decode().splitlines():
        if line.startswith("data: {"):
            for ch in json.loads(line[6:])["choices"]:
                text += ch["delta"].get("content") or ""
    return text


def anthropic_text(stream: bytes) -> str:
    text = ""
    for line in stream.decode().splitlines():
        if line.startswith("data: {"):
            obj = json.loads(line[6:])
            if obj.get("type") == "content_block_delta":
                text += obj["delta"].get("text", "")
    return text
