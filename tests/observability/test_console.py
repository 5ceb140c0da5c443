"""The console in a real browser (Debian's chromium through Playwright: the `browser` fixture):
it follows a live sandbox on `declaw-wasm serve`, shows a chart, marks an egress denial, and
shows what the guest printed or returned — a `<script>`, an HTML result with a script, an SVG
with an embedded script — as inert text: no dialog opens, nothing the guest wrote runs. The
journal console shows a journal folder. Screenshots go to the test's tmp folder."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from declaw_wasm import Sandbox
from declaw_wasm.server import serve_in_thread
from declaw_wasm.server.console import CSP, journal_app

pytestmark = pytest.mark.guest
KEY = "console-key-" + "k" * 8
MARK = "pwned-by-guest"
CELL_HTML = f"""
from IPython.display import HTML, SVG, display
display(HTML("<b>bold</b><script>alert('{MARK}-html'); console.log('{MARK}-html')</script>"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert("{MARK}-svg")</script>'
            '<circle r="4"/></svg>'))
"""


def watch(page: Any) -> list[str]:
    """Everything the page says: dialogs (dismissed) and console messages, and errors."""
    seen: list[str] = []

    def dialog(opened: Any) -> None:
        seen.append("dialog: " + opened.message)
        opened.dismiss()

    page.on("dialog", dialog)
    page.on("console", lambda message: seen.append("console: " + message.text))
    page.on("pageerror", lambda error: seen.append("pageerror: " + str(error)))
    return seen


@pytest.mark.timeout(180)
def test_the_console_follows_a_live_sandbox_and_keeps_guest_content_inert(browser: Any, tmp_path: Path) -> None:
    with serve_in_thread(api_key=KEY) as url:
        answer = httpx.get(f"{url}/console")  # the page: no key needed, no data in it, a strict CSP
        assert answer.status_code == 200 and answer.headers["content-security-policy"] == CSP
        assert httpx.get(f"{url}/declaw-wasm/console/sandboxes").status_code == 401
        sbx = Sandbox.create(domain=url, api_key=KEY)
        page = browser.new_page()
        seen = watch(page)
        try:
            page.goto(f"{url}/console")
            page.fill("#key", KEY)
            page.click("#connect button")
            page.click(f"nav button[data-id='{sbx.sandbox_id}']")
            page.wait_for_selector("text=sandbox created")
            # the sandbox works while the page follows it
            sbx.commands.run(f"echo \"<script>alert('{MARK}-stdout')</script><img src=x onerror=alert(1)>\"")
            sbx.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()")
            sbx.run_code(CELL_HTML)
            sbx.commands.run("python3 -c \"import socket; socket.create_connection(('127.0.0.1', 9), 2)\"")
            page.wait_for_selector("img.chart[src^='data:image/png;base64,']", timeout=30_000)
            page.wait_for_selector(".kind-egress.denied .badge.denied", timeout=30_000)
            page.wait_for_selector(f"text=alert('{MARK}-html')", timeout=30_000)
            page.wait_for_selector(f"text=alert(\"{MARK}-svg\")", timeout=30_000)
            page.wait_for_selector(f"text=alert('{MARK}-stdout')", timeout=30_000)
            time.sleep(0.5)  # anything scheduled by an injected script would have run by now
            page.screenshot(path=str(tmp_path / "console.png"), full_page=True)
            # the guest's markup is text: no element of it exists, nothing ran, no key was stored
            assert page.locator("script").count() == 1  # the console's own
            assert page.locator("b, svg, circle, iframe, img[src='x']").count() == 0
            assert not [s for s in seen if MARK in s or s.startswith(("dialog", "pageerror"))], seen
            assert page.evaluate("document.cookie") == ""
            assert page.evaluate("localStorage.length + sessionStorage.length") == 0
            denied = page.locator(".kind-egress.denied").first.inner_text()
            assert "127.0.0.1" in denied and "DENIED" in denied
            sbx.kill()
            page.wait_for_selector("text=sandbox killed", timeout=30_000)
        finally:
            page.close()
    assert (tmp_path / "console.png").stat().st_size > 10_000


@pytest.mark.timeout(120)
def test_the_journal_console_shows_a_journal_folder_on_loopback(browser: Any, tmp_path: Path) -> None:
    import uvicorn

    folder = tmp_path / "journal"
    sbx = Sandbox.create(journal=folder)
    sbx.commands.run("echo from-the-journal")
    sbx.kill()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(journal_app(folder), log_level="warning", http="h11"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    page = browser.new_page()
    seen = watch(page)
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/console", headers={"Host": "attacker.example"}).status_code >= 400
        assert httpx.get(f"{base}/declaw-wasm/console/sandboxes",
                         headers={"Origin": "https://attacker.example"}).status_code == 403
        page.goto(f"{base}/console")
        page.click(f"nav button[data-id='{sbx.sandbox_id}']")
        page.wait_for_selector("text=from-the-journal", timeout=20_000)
        page.wait_for_selector("text=sandbox killed")
        page.screenshot(path=str(tmp_path / "journal-console.png"), full_page=True)
        assert not [s for s in seen if s.startswith(("dialog", "pageerror"))], seen
    finally:
        page.close()
        server.should_exit = True
        thread.join(10)
        sock.close()
