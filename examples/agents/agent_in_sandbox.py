"""An agent's own loop inside a sandbox: the official openai client runs in the guest (template
`ai-agent`), the key stays on the host (injected into requests to api.openai.com only), the tool
the model asks for runs in the sandbox, and every call is in the audit log."""
import os

from declaw_wasm import ALL_TRAFFIC, Sandbox, Secret

AGENT = '''
import contextlib, io, json, openai
client = openai.OpenAI()  # reads OPENAI_API_KEY: in the sandbox, a placeholder
tools = [{"type": "function", "function": {"name": "run_python", "parameters": {
    "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}]
messages = [{"role": "user", "content": "# run this with run_python\\nprint(sum(range(101)))"}]
while True:
    reply = client.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools).choices[0].message
    messages.append(reply.dict(exclude_none=True))
    if not reply.tool_calls:
        break
    for call in reply.tool_calls:  # the tool runs here, in the sandbox
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(json.loads(call.function.arguments)["code"], {})
        messages.append({"role": "tool", "tool_call_id": call.id, "content": out.getvalue().strip()})
print(reply.content)
'''

key = Secret(os.environ["OPENAI_API_KEY"], hosts=["api.openai.com"])
with Sandbox.create(template="ai-agent", secrets={"OPENAI_API_KEY": key},
                    network={"allow_out": ["api.openai.com"], "deny_out": [ALL_TRAFFIC]}) as sbx:
    run = sbx.run_code(AGENT, timeout=300)
    print(run.error.traceback if run.error else "".join(run.logs.stdout), end="")
    for event in sbx.audit_events():
        if event.kind == "request":
            print(event.method, event.url, event.status_code, "key injected:", bool(event.secrets_injected))
