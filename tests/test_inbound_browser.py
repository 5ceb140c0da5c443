"""A real browser (Debian's chromium, driven by Playwright: the `browser` fixture) opens a page
served by a server in a sandbox through its preview URL and sees it render, script included:
in this process (`http://127.0.0.1:<host port>/`) and through `declaw-wasm serve` by the preview
name (`http://8000-<id>.localhost:<serve port>/`, which the browser resolves to loopback)."""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest

from declaw_wasm import Sandbox

pytestmark = pytest.mark.guest


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # what the browser sees does not depend on the guest path

PAGE_APP = r'''
from wsgiref.simple_server import make_server

PAGE = b"""<!doctype html><html><head><title>from the sandbox</title></head><body>
<h1 id="h">static</h1>
<form method="post" action="/hello"><input name="who" value="browser"><button id="go">go</button></form>
<script>document.getElementById("h").textContent = "rendered by script";</script>
</body></html>"""

def app(environ, start_response):
    if environ["REQUEST_METHOD"] == "POST":
        size = int(environ.get("CONTENT_LENGTH") or 0)
        who = environ["wsgi.input"].read(size).decode().split("=", 1)[1]
        start_response("200 OK", [("Content-Type", "text/html")])
        return [b"<p id='said'>hello " + who.encode() + b"</p>"]
    start_response("200 OK", [("Content-Type", "text/html")])
    return [PAGE]

make_server("0.0.0.0", 8000, app).serve_forever()
'''


def _open(browser: Any, url: str) -> Any:
    page = browser.new_page()
    deadline = time.monotonic() + 60
    while True:
        answer = page.goto(url)
        if answer is not None and answer.status != 502 or time.monotonic() > deadline:
            return page
        time.sleep(0.3)


@pytest.mark.parametrize("mode", ["in-process", "served"], indirect=True)
def test_a_browser_renders_a_page_served_in_the_sandbox(browser: Any, make: Callable[..., Sandbox],
                                                          mode: str) -> None:
    sbx = make(timeout=300)
    try:
        sbx.files.write("/home/user/app.py", PAGE_APP)
        sbx.commands.run("python3 /home/user/app.py", background=True)
        page = _open(browser, f"http://{sbx.get_host(8000)}/")
        try:
            assert page.title() == "from the sandbox"
            assert page.text_content("#h") == "rendered by script"
            page.click("#go")
            page.wait_for_selector("#said")
            assert page.text_content("#said") == "hello browser"
        finally:
            page.close()
    finally:
        sbx.kill()


def test_the_path_route_runs_no_guest_script_on_the_servers_origin(browser: Any, make_served: Callable[..., Sandbox],
                                                                   server_url: str,
                                                                   where: Callable[[str], dict[str, Any]]) -> None:
    """declaw's path route answers with `Content-Security-Policy: sandbox`: the guest's page is
    shown, its script does not run (it would run with the API's origin)."""
    sbx = make_served(timeout=300)
    try:
        sbx.files.write("/home/user/app.py", PAGE_APP)
        sbx.commands.run("python3 /home/user/app.py", background=True)
        context = browser.new_context(extra_http_headers={"X-API-Key": where("served")["api_key"]})
        try:
            page = _open(context, f"{server_url}/sandboxes/{sbx.sandbox_id}/ports/8000/")
            assert page.text_content("#h") == "static"  # shown, its script not run
        finally:
            context.close()
    finally:
        sbx.kill()
