"""The OpenAI and Anthropic wire formats, for the upstream that stands in for api.openai.com and
api.anthropic.com (upstream.py routes the official clients' POSTs to /v1/chat/completions,
/v1/responses and /v1/messages here, told by their User-Agent; other tests' requests to those
paths get the echo): non-streamed and streamed (SSE) answers, tool calls, structured output and
errors.

The "model" is deterministic: it answers `you said: <last user message>`; offered tools and no
tool result yet, it calls the first tool with `{"code": <last user message>}`; given a tool
result, it answers `the tool said: <result>`. The key the request must carry is `OPENAI_KEY` /
`ANTHROPIC_KEY` (the host injects it; the guest holds a placeholder): anything else is a 401
(anthropic 2.15 sends its key as `Authorization: Bearer`; `x-api-key` is accepted too).
"""

from __future__ import annotations

import json
from typing import Any, Callable

OPENAI_KEY = "sk-test-openai-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-test-0123456789abcdef"
PATHS = ("/v1/chat/completions", "/v1/responses", "/v1/messages")
SDK_AGENTS = ("OpenAI/Python", "Anthropic/Python")  # in the official clients' User-Agent (and Async...)


def is_sdk_call(method: str, path: str, user_agent: str | None) -> bool:
    """A call of the official clients (other tests' requests to the same paths get the echo)."""
    return method == "POST" and path.split("?")[0] in PATHS and any(agent in (user_agent or "") for agent in SDK_AGENTS)

Send = Callable[[int, bytes], None]  # (status, JSON body)
Stream = Callable[[list[bytes]], None]  # SSE events, each its own write


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks / parts
        return "".join(str(part.get("text") or part.get("content") or "") if isinstance(part, dict)
                       else str(part) for part in content)
    return json.dumps(content)


def handle(path: str, headers: dict[str, str], body: bytes, send: Send, stream: Stream) -> None:
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        request = {}
    lower = {k.lower(): v for k, v in headers.items()}
    if path.startswith("/v1/messages"):
        if ANTHROPIC_KEY not in (lower.get("x-api-key"), lower.get("authorization", "").removeprefix("Bearer ")):
            send(401, json.dumps({"type": "error", "error": {"type": "authentication_error",
                                                             "message": "invalid x-api-key"}}).encode())
        else:
            _anthropic(request, send, stream)
    elif lower.get("authorization") != f"Bearer {OPENAI_KEY}":
        send(401, json.dumps({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                        "param": None, "code": "invalid_api_key"}}).encode())
    elif path.startswith("/v1/responses"):
        _responses(request, send)
    else:
        _chat(request, send, stream)


def _sse(events: list[Any], done: bool = True) -> list[bytes]:
    lines = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
    return lines + ([b"data: [DONE]\n\n"] if done else [])


def _pieces(text: str, n: int = 4) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _example(schema: dict[str, Any], said: str) -> Any:
    """A value fitting a (simple) JSON schema: structured output."""
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {k: _example(v, said) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [_example(schema.get("items", {}), said)]
    return {"integer": 42, "number": 4.5, "boolean": True}.get(str(kind), said)


def _chat(request: dict[str, Any], send: Send, stream: Stream) -> None:
    messages = request.get("messages") or [{}]
    last = messages[-1]
    model = request.get("model", "gpt-4.1")
    message: dict[str, Any]
    if last.get("role") == "tool":
        message = {"role": "assistant", "content": f"the tool said: {_text(last.get('content'))}"}
        finish = "stop"
    elif request.get("tools"):
        name = request["tools"][0]["function"]["name"]
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": name, "arguments": json.dumps({"code": _text(last.get("content"))})}}]}
        finish = "tool_calls"
    elif (request.get("response_format") or {}).get("type") == "json_schema":
        schema = request["response_format"]["json_schema"]["schema"]
        message = {"role": "assistant", "content": json.dumps(_example(schema, _text(last.get("content"))))}
        finish = "stop"
    else:
        message = {"role": "assistant", "content": f"you said: {_text(last.get('content'))}"}
        finish = "stop"
    if not request.get("stream"):
        send(200, json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
                              "choices": [{"index": 0, "message": message, "finish_reason": finish,
                                           "logprobs": None}],
                              "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}).encode())
        return

    def chunk(delta: dict[str, Any], done: Any = None) -> dict[str, Any]:
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": done, "logprobs": None}]}

    events = [chunk({"role": "assistant", "content": ""})]
    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        events.append(chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        events += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]})
                   for p in _pieces(call["function"]["arguments"])]
    else:
        events += [chunk({"content": p}) for p in _pieces(message["content"])]
    stream(_sse([*events, chunk({}, finish)]))


def _responses(request: dict[str, Any], send: Send) -> None:
    given = request.get("input")
    said = given if isinstance(given, str) else _text((given or [{}])[-1].get("content"))
    send(200, json.dumps({
        "id": "resp_1", "object": "response", "created_at": 1, "model": request.get("model", "gpt-4.1"),
        "status": "completed", "output": [{"type": "message", "id": "msg_1", "status": "completed",
                                           "role": "assistant", "content": [{
                                               "type": "output_text", "text": f"you said: {said}",
                                               "annotations": []}]}],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
        "incomplete_details": None, "instructions": None, "metadata": {}, "temperature": 1.0,
        "top_p": 1.0, "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7,
                                "input_tokens_details": {"cached_tokens": 0},
                                "output_tokens_details": {"reasoning_tokens": 0}}}).encode())


def _anthropic(request: dict[str, Any], send: Send, stream: Stream) -> None:
    messages = request.get("messages") or [{}]
    last = messages[-1]
    content = last.get("content")
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
        if isinstance(content, list) else []
    block: dict[str, Any]
    if results:
        block, stop = {"type": "text", "text": f"the tool said: {_text(results[-1].get('content'))}"}, "end_turn"
    elif request.get("tools"):
        block = {"type": "tool_use", "id": "toolu_1", "name": request["tools"][0]["name"],
                 "input": {"code": _text(content)}}
        stop = "tool_use"
    else:
        block, stop = {"type": "text", "text": f"you said: {_text(content)}"}, "end_turn"
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": request.get("model", "claude"),
               "content": [block], "stop_reason": stop, "stop_sequence": None,
               "usage": {"input_tokens": 3, "output_tokens": 4}}
    if not request.get("stream"):
        send(200, json.dumps(message).encode())
        return
    start = {**message, "content": [], "stop_reason": None}
    named: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    if block["type"] == "text":
        named.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                              "content_block": {"type": "text", "text": ""}}))
        named += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": p}}) for p in _pieces(block["text"])]
    else:
        named.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                              "content_block": {**block, "input": {}}}))
        named += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "input_json_delta", "partial_json": p}})
                  for p in _pieces(json.dumps(block["input"]))]
    named += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
              ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": 4}}),
              ("message_stop", {"type": "message_stop"})]
    stream([f"event: {name}\ndata: {json.dumps(e)}\n\n".encode() for name, e in named])
