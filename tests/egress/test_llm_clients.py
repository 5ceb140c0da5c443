"""The official OpenAI and Anthropic Python clients running inside the guest (`ai-agent`), against
local TLS upstreams standing in for api.openai.com and api.anthropic.com (providers.py speaks
their wire formats), with keys injected by the host, PII guarded and every call audited.

One sandbox per backend (in-process, the process pool, `declaw-wasm serve`) does every check
(module-scoped: the clients' import is the slow part).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from declaw_wasm import Sandbox, Secret, Vault, VaultClient
from declaw_wasm.security import ALL_TRAFFIC, PIIConfig, SecurityPolicy
from declaw_wasm.server import serve_in_thread

from .providers import ANTHROPIC_KEY, OPENAI_KEY
from .upstream import Upstreams

pytestmark = [pytest.mark.guest, pytest.mark.timeout(600)]
SERVER_KEY = "llm-clients-served-key"

SDK_CALLS = r'''
import asyncio, json, os
import openai, anthropic, pydantic
out = {"env": os.environ["OPENAI_API_KEY"], "pydantic": pydantic.VERSION}
client = openai.OpenAI(max_retries=0)
chat = client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hello"}])
out["chat"] = chat.choices[0].message.content
stream = client.chat.completions.create(model="gpt-4.1", stream=True,
                                        messages=[{"role": "user", "content": "mail alice@example.com now"}])
out["stream"] = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
tools = [{"type": "function", "function": {"name": "run_python", "parameters": {
    "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}]
called = client.chat.completions.create(model="gpt-4.1", tools=tools,
                                        messages=[{"role": "user", "content": "print(6 * 7)"}])
call = called.choices[0].message.tool_calls[0]
out["tool_call"] = [call.function.name, json.loads(call.function.arguments)]
with client.chat.completions.stream(model="gpt-4.1", tools=tools,
                                    messages=[{"role": "user", "content": "print(1)"}]) as s:
    final = s.get_final_completion()  # tool-call arguments assembled by the SDK (jiter's from_json)
out["stream_tool_call"] = final.choices[0].message.tool_calls[0].function.arguments

class City(pydantic.BaseModel):
    name: str
    population: int

parsed = client.chat.completions.parse(model="gpt-4.1", response_format=City,
                                       messages=[{"role": "user", "content": "Paris"}])
city = parsed.choices[0].message.parsed
out["parsed"] = [type(city).__name__, city.name, city.population]
out["responses"] = client.responses.create(model="gpt-4.1", input="hi there").output_text

async def in_asyncio():
    aclient = openai.AsyncOpenAI(max_retries=0)
    got = await aclient.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "async"}])
    chunks = await aclient.chat.completions.create(model="gpt-4.1", stream=True,
                                                   messages=[{"role": "user", "content": "async stream"}])
    text = "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
    both = await asyncio.gather(*(aclient.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": f"n{i}"}]) for i in range(3)))
    claude = await anthropic.AsyncAnthropic(max_retries=0).messages.create(
        model="claude-sonnet-4-5", max_tokens=50, messages=[{"role": "user", "content": "async claude"}])
    return [got.choices[0].message.content, text, [b.choices[0].message.content for b in both],
            claude.content[0].text]
out["async"] = asyncio.run(in_asyncio())

claude = anthropic.Anthropic(max_retries=0)
msg = claude.messages.create(model="claude-sonnet-4-5", max_tokens=50,
                             messages=[{"role": "user", "content": "bonjour"}])
out["claude"] = msg.content[0].text
with claude.messages.stream(model="claude-sonnet-4-5", max_tokens=50,
                            messages=[{"role": "user", "content": "stream alice@example.com"}]) as s:
    out["claude_stream"] = "".join(s.text_stream)
used = claude.messages.create(model="claude-sonnet-4-5", max_tokens=50, tools=[{
    "name": "run_python", "input_schema": {"type": "object", "properties": {"code": {"type": "string"}}}}],
    messages=[{"role": "user", "content": "print(2)"}])
out["claude_tool"] = [used.stop_reason, used.content[0].name, used.content[0].input]

def error(fn):
    try:
        fn()
    except Exception as exc:
        return [type(exc).__module__.split(".")[0], type(exc).__name__, getattr(exc, "status_code", None)]
out["denied"] = error(lambda: openai.OpenAI(base_url="https://evil.com/v1", max_retries=0).models.list())
out["bad_key"] = error(lambda: openai.OpenAI(api_key="sk-wrong", max_retries=0).chat.completions.create(
    model="gpt-4.1", messages=[{"role": "user", "content": "x"}]))
out["claude_bad_key"] = error(lambda: anthropic.Anthropic(api_key="sk-wrong", max_retries=0).messages.create(
    model="claude", max_tokens=5, messages=[{"role": "user", "content": "x"}]))
print(json.dumps(out))
'''

AGENT_LOOP = r'''
import contextlib, io, json, openai
client = openai.OpenAI(max_retries=0)
tools = [{"type": "function", "function": {"name": "run_python", "parameters": {
    "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}]
messages = [{"role": "user", "content": "print(sum(range(10)))"}]
while True:
    reply = client.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools).choices[0].message
    messages.append(reply.dict(exclude_none=True))
    if not reply.tool_calls:
        break
    for call in reply.tool_calls:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(json.loads(call.function.arguments)["code"], {})
        messages.append({"role": "tool", "tool_call_id": call.id, "content": buffer.getvalue().strip()})
print(reply.content)
'''

# the key's bytes anywhere the guest's own objects reach (what an interpreter holds after the calls);
# the keys come in reversed, so only `needles` (skipped) ever holds them in the guest
MEMORY_SCAN = r'''
import gc
needles = [k[::-1].encode() for k in REVERSED]
found = []
def raw(value):
    if isinstance(value, str):
        return value.encode("utf-8", "replace")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return b""
for obj in gc.get_objects():
    if obj is needles:
        continue
    try:
        values = list(obj.values()) if isinstance(obj, dict) else list(obj) if isinstance(obj, (list, tuple)) else [obj]
    except Exception:
        continue
    found += [type(obj).__name__ for value in values for n in needles if n in raw(value)]
print(len(found), sorted(set(found))[:5])
'''


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # the clients run on the guest's network stack, the same on both paths


@pytest.fixture(scope="module")
def agent_server(upstreams: Upstreams) -> Iterator[str]:
    """`declaw-wasm serve` in a thread, inside the namespace (after the resolve hook and CA)."""
    with serve_in_thread(SERVER_KEY, vault=Vault()) as url:
        yield url


@pytest.fixture(scope="module", params=["in-process", "processes", "served"])
def agent(request: pytest.FixtureRequest, upstreams: Upstreams) -> Iterator[Sandbox]:
    where: dict[str, Any] = {}
    if request.param == "processes":
        where = {"backend": request.getfixturevalue("egress_pool")}
    elif request.param == "served":
        where = {"domain": request.getfixturevalue("agent_server"), "api_key": SERVER_KEY}
    sbx = Sandbox.create(
        template="ai-agent", timeout=600, **where,
        network={"allow_out": ["api.openai.com", "api.anthropic.com"], "deny_out": [ALL_TRAFFIC]},
        secrets={"OPENAI_API_KEY": Secret(OPENAI_KEY, hosts=["api.openai.com"]),
                 "ANTHROPIC_API_KEY": Secret(ANTHROPIC_KEY, hosts=["api.anthropic.com"])},
        security=SecurityPolicy(pii=PIIConfig(enabled=True, types=["email"])))
    yield sbx
    sbx.kill()


def test_the_official_clients_work_in_the_guest_through_the_egress_door(agent: Sandbox, upstreams: Upstreams) -> None:
    upstreams.clear()
    run = agent.run_code(SDK_CALLS, timeout=300)
    assert run.error is None, run.error.traceback if run.error else ""
    got = json.loads("".join(run.logs.stdout).strip().splitlines()[-1])
    assert got["env"].startswith("declaw-secret-") and got["pydantic"].startswith("1.10.")
    assert got["chat"] == "you said: hello"
    assert got["stream"] == "you said: mail alice@example.com now"  # redacted upstream, rehydrated here
    assert got["tool_call"] == ["run_python", {"code": "print(6 * 7)"}]
    assert json.loads(got["stream_tool_call"]) == {"code": "print(1)"}
    assert got["parsed"] == ["City", "Paris", 42]
    assert got["responses"] == "you said: hi there"
    assert got["async"] == ["you said: async", "you said: async stream",
                            ["you said: n0", "you said: n1", "you said: n2"], "you said: async claude"]
    assert got["claude"] == "you said: bonjour"
    assert got["claude_stream"] == "you said: stream alice@example.com"
    assert got["claude_tool"] == ["tool_use", "run_python", {"code": "print(2)"}]
    # the SDKs' own exception types: a policy denial is a connection error, a 401 an auth error
    assert got["denied"] == ["openai", "APIConnectionError", None]
    assert got["bad_key"] == ["openai", "AuthenticationError", 401]
    assert got["claude_bad_key"] == ["anthropic", "AuthenticationError", 401]
    # what reached the upstreams: the real keys (injected by the host), no e-mail address
    calls = [r for r in upstreams.records() if r.path.startswith("/v1/")]
    to_openai = [r for r in calls if r.header("Authorization") == f"Bearer {OPENAI_KEY}"]
    to_claude = [r for r in calls if ANTHROPIC_KEY in (r.header("x-api-key"), (r.header("Authorization") or "")[7:])]
    assert len(to_openai) == 11 and len(to_claude) == 4, [(r.path, r.header("Authorization")) for r in calls]
    assert all(b"alice@example.com" not in r.body for r in calls)
    assert any(b"[REDACTED_EMAIL_1]" in r.body for r in to_openai)
    # the audit shows each call, and the denial
    audited = [e for e in agent.audit_events() if e.kind == "request" and (e.url or "").split("?")[0].endswith(
        ("/chat/completions", "/responses", "/messages"))]
    assert len(audited) >= len(to_openai) + len(to_claude)
    assert any(e.secrets_injected for e in audited) and any(e.pii_redactions for e in audited)
    assert any(e.decision == "denied" and e.host == "evil.com" for e in agent.audit_events())


def test_an_agent_loop_runs_inside_one_sandbox_and_the_key_never_enters_it(agent: Sandbox,
                                                                          upstreams: Upstreams) -> None:
    upstreams.clear()
    run = agent.run_code(AGENT_LOOP, timeout=300)
    assert run.error is None, run.error.traceback if run.error else ""
    assert "".join(run.logs.stdout).strip() == "the tool said: 45"
    sent = [json.loads(r.body) for r in upstreams.records() if r.path == "/v1/chat/completions"]
    assert [m["role"] for m in sent[-1]["messages"]] == ["user", "assistant", "tool"]
    # the key: not in the guest's objects, environment, files or output (both runs' contexts)
    scan = agent.run_code(f"REVERSED = {[OPENAI_KEY[::-1], ANTHROPIC_KEY[::-1]]!r}\n" + MEMORY_SCAN, timeout=120)
    assert scan.error is None and "".join(scan.logs.stdout).startswith("0 []"), (scan.logs.stdout, scan.error)
    env = agent.commands.run("env; cat /proc/self/environ 2>/dev/null; grep -rl sk- /home/user /tmp || true")
    for key in (OPENAI_KEY, ANTHROPIC_KEY):
        assert key not in env.stdout + env.stderr
        assert key not in "".join(run.logs.stdout + run.logs.stderr)
        assert key not in "".join(e.model_dump_json() for e in agent.audit_events())


def test_the_agent_in_sandbox_example_runs_against_the_local_api(upstreams: Upstreams) -> None:
    """examples/agents/agent_in_sandbox.py, unchanged, in a process of its own (in the namespace,
    with this folder's resolve hook and CA in its environment)."""
    example = Path(__file__).resolve().parents[2] / "examples" / "agents" / "agent_in_sandbox.py"
    run = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OPENAI_API_KEY": OPENAI_KEY}, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0] == "the tool said: 5050", run.stdout
    assert lines[1:] == ["POST https://api.openai.com/v1/chat/completions 200 key injected: True"] * 2, run.stdout


def test_the_client_reads_a_vault_ref_placeholder_and_the_host_injects_the_key(upstreams: Upstreams) -> None:
    """declaw's `vault_refs`: the guest's `OpenAI()` reads `declaw:vault-managed`, the provider
    preset puts the vault's value into requests to api.openai.com."""
    vault = VaultClient()
    vault.create_secret(OPENAI_KEY, name="llm-clients-openai", provider="openai")
    sbx = Sandbox.create(template="ai-agent", timeout=300, vault_refs={"OPENAI_API_KEY": "llm-clients-openai"})
    try:
        upstreams.clear()
        run = sbx.run_code("import os, openai\nprint(os.environ['OPENAI_API_KEY'])\nprint(openai.OpenAI("
                           "max_retries=0).chat.completions.create(model='gpt-4.1', messages=[{'role': 'user', "
                           "'content': 'vault'}]).choices[0].message.content)", timeout=300)
        assert run.error is None, run.error.traceback if run.error else ""
        assert "".join(run.logs.stdout) == "declaw:vault-managed\nyou said: vault\n"
        sent = [r for r in upstreams.records() if r.path == "/v1/chat/completions"]
        assert [r.header("Authorization") for r in sent] == [f"Bearer {OPENAI_KEY}"]
    finally:
        sbx.kill()
        vault.delete_secret("llm-clients-openai")
