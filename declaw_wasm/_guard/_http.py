"""HTTP helpers shared by the request and response sides of the guard pipeline."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from .contract import BlockResponse

#: Headers that describe a body's bytes: wrong once a guard rewrites the body.
DIGEST_HEADERS = {"content-md5", "digest", "content-digest", "repr-digest"}
BINARY_PREFIXES = ("image/", "audio/", "video/", "font/")


def block_answer(guard: str, message: str, status: int = 403) -> BlockResponse:
    """The guest's answer when `guard` blocks: a JSON error both the OpenAI and Anthropic SDKs
    surface, naming the guard (also in `X-Declaw-Guard`)."""
    body = json.dumps({
        "type": "error",
        "error": {"type": "permission_error" if status == 403 else "invalid_request_error",
                  "code": "declaw_guard_blocked", "guard": guard, "message": message},
        "guard": guard, "message": message, "code": status,
    }).encode()
    headers = [("content-type", "application/json"), ("content-length", str(len(body))),
               ("cache-control", "no-store"), ("x-declaw-guard", guard)]
    return BlockResponse(status, headers, body, guard)


def header(headers: Sequence[tuple[str, str]], name: str) -> str | None:
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def without(headers: Iterable[tuple[str, str]], names: set[str]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in names]
