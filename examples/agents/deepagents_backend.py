"""LangChain Deep Agents: the file and shell tools a deep agent uses, on declaw-wasm."""
from declaw_wasm.integrations.deepagents import DeclawWasmSandbox

backend = DeclawWasmSandbox()  # create_deep_agent(model=..., backend=backend) for a real agent
try:
    backend.write("/home/user/app/main.py", "def greet():\n    return 'hello'\n")
    backend.edit("/home/user/app/main.py", "'hello'", "'hello, sandbox'")
    print(backend.read("/home/user/app/main.py").file_data["content"])
    print([m["path"] for m in backend.glob("**/*.py", path="/home/user").matches])
    print([(m["path"], m["line"]) for m in backend.grep("hello", path="/home/user/app").matches])
    print(backend.execute("cd /home/user/app && python3 -c 'import main; print(main.greet())'"))
finally:
    backend.close()
