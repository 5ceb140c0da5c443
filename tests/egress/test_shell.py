"""`curl` and `wget` in the sandbox's shell, over the same door and policy as Python code."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from declaw_wasm import ALL_TRAFFIC

from .upstream import Upstreams


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_curl_flags_agents_use(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make(network={"allow_out": ["api.openai.com"], "deny_out": [ALL_TRAFFIC]})
    sh = sbx.commands.run
    got = sh("curl -s https://api.openai.com/plain")
    assert got.exit_code == 0 and json.loads(got.stdout)["path"] == "/plain"
    got = sh("curl -s -o /dev/null -w '%{http_code}' https://api.openai.com/")
    assert got.stdout == "200"
    got = sh("curl -sS -f https://api.openai.com/status/404")
    assert got.exit_code == 22 and "404" in got.stderr
    got = sh("curl -sSL -o /tmp/r.json https://api.openai.com/redirect && cat /tmp/r.json")
    assert got.exit_code == 0 and json.loads(got.stdout)["path"] == "/final"
    got = sh("curl -s -X PUT -H 'Content-Type: application/json' -H 'X-Trace: 7' "
             "-d '{\"a\": 1}' https://api.openai.com/put")
    echo = json.loads(got.stdout)
    assert echo["method"] == "PUT" and echo["body"] == '{"a": 1}' and echo["headers"]["X-Trace"] == "7"
    sbx.files.write("/tmp/payload.bin", b"\x00\x01\x02line\n")
    got = sh("curl -s --data-binary @/tmp/payload.bin https://api.openai.com/bin")
    assert json.loads(got.stdout)["body"] == "\x00\x01\x02line\n"
    got = sh("curl -sI https://api.openai.com/head")
    assert got.stdout.startswith("HTTP/1.1 200 OK\r\n") and "Content-Length:" in got.stdout
    got = sh("cd /tmp && curl -sO https://api.openai.com/bytes/1234 && wc -c < /tmp/1234")
    assert got.stdout.strip() == "1234"
    got = sh("curl -sS https://evil.com/")
    assert got.exit_code == 6 and "network policy" in got.stderr
    got = sh("curl -s https://evil.com/")
    assert got.exit_code == 6 and got.stderr == ""
    got = sh("curl -s https://api.openai.com/x | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"path\"])'")
    assert got.stdout == "/x\n"


def test_wget(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make()
    got = sbx.commands.run("wget -q -O /tmp/w.json https://api.openai.com/w && cat /tmp/w.json")
    assert got.exit_code == 0 and json.loads(got.stdout)["path"] == "/w"
    got = sbx.commands.run("wget -q -O - http://api.openai.com/stdout")
    assert json.loads(got.stdout)["path"] == "/stdout"
    got = sbx.commands.run("wget -q -O /tmp/x https://api.openai.com/status/500")
    assert got.exit_code == 8
