"""Anthropic helpers: results as Anthropic's tool-result blocks, and the persistent shell."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from declaw_wasm import Sandbox, TimeoutException
from declaw_wasm.integrations.anthropic import (
    PersistentShell,
    bash_code_execution_result,
    code_execution_result,
    tool_result,
)


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


@pytest.fixture(scope="module")
def sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=600)
    yield sandbox
    sandbox.kill()


def test_code_execution_blocks(sbx: Sandbox) -> None:
    block = code_execution_result(sbx.run_code("print('hi')\n6 * 7"), "srvtoolu_1")
    assert block == {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_1",
                     "content": {"type": "code_execution_result", "stdout": "hi\n42\n",
                                 "stderr": "", "return_code": 0, "content": []}}
    failed = code_execution_result(sbx.run_code("1/0"), "t")["content"]
    assert failed["return_code"] == 1 and "ZeroDivisionError" in failed["stderr"]
    command = code_execution_result(sbx.commands.run("echo out; echo err >&2; exit 2"), "t")
    assert (command["content"]["stdout"], command["content"]["stderr"],
            command["content"]["return_code"]) == ("out\n", "err\n", 2)
    with pytest.raises(TimeoutException) as timed_out:
        sbx.commands.run("sleep 3", timeout=0.5)
    assert code_execution_result(timed_out.value, "t")["content"] == {
        "type": "code_execution_tool_result_error", "error_code": "execution_time_exceeded"}


def test_bash_code_execution_block(sbx: Sandbox) -> None:
    block = bash_code_execution_result(sbx.commands.run("ls /nope"), "srvtoolu_2", file_ids=["f1"])
    content = block["content"]
    assert block["type"] == "bash_code_execution_tool_result"
    assert content["type"] == "bash_code_execution_result" and content["return_code"] != 0
    assert "nope" in content["stderr"]
    assert content["content"] == [{"type": "bash_code_execution_output", "file_id": "f1"}]


def test_tool_result_with_a_chart(sbx: Sandbox) -> None:
    execution = sbx.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()")
    block = tool_result(execution, "toolu_3")
    assert block["type"] == "tool_result" and block["is_error"] is False
    text, image = block["content"]
    assert text["type"] == "text"
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    failing = tool_result(sbx.commands.run("exit 5"), "toolu_4")
    assert failing["content"][0]["text"] == "[exit code 5]" and failing["is_error"] is False


def test_persistent_shell_keeps_cwd_and_exports(sbx: Sandbox) -> None:
    shell = PersistentShell(sbx)
    assert shell.run("mkdir -p /tmp/work && cd /tmp/work && export MODE='fast lane'").exit_code == 0
    result = shell.run("pwd; echo $MODE; echo err >&2; false")
    assert (result.stdout, result.stderr, result.exit_code) == ("/tmp/work\nfast lane\n", "err\n", 1)
    shell.run("unset MODE; cd /")
    assert shell.run("pwd; echo ${MODE:-gone}").stdout == "/\ngone\n"
    shell.run("cd /tmp; exit 3")  # `exit` ends the line before the state is taken
    assert shell.cwd == "/"
    other = PersistentShell(sbx)  # sessions are independent
    assert other.run("pwd").stdout == "/home/user\n"
    reply = shell.bash_tool({"restart": True}, "toolu_5")
    assert reply["content"][0]["text"] == "tool has been restarted." and shell.cwd == "/home/user"
    reply = shell.bash_tool({"command": "cd /tmp && pwd"}, "toolu_6")
    assert reply["content"][0]["text"] == "/tmp\n"
    assert shell.bash_tool({"command": "pwd"}, "toolu_7")["content"][0]["text"] == "/tmp\n"
