"""E2B's `download_url` / `upload_url` for in-process sandboxes: served by this process on
loopback, signed for a `secure` sandbox (the default), refused with E2B's 401 JSON when the
signature is missing, wrong or expired, unsigned for `secure=False`."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Iterator
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import anyio
import pytest

from declaw_wasm import AsyncSandbox, InvalidArgumentException, Sandbox


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


@pytest.fixture(scope="module")
def box(guest_path: str) -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=600)
    yield sandbox
    sandbox.kill()


def _refusal(url: str, data: bytes | None = None) -> tuple[int, dict[str, object]]:
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST" if data else "GET"))
    return info.value.code, json.loads(info.value.read())


def _with(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    query.update(changes)
    return urlunsplit(parts._replace(query=urlencode(query)))


def test_signed_download_and_upload(box: Sandbox) -> None:
    box.files.write("notes.txt", "hello from the sandbox")
    url = box.download_url("notes.txt")
    assert url.startswith("http://127.0.0.1:") and "signature=" in url
    with urllib.request.urlopen(url) as answer:
        assert answer.status == 200 and answer.read() == b"hello from the sandbox"
    with urllib.request.urlopen(box.download_url("/home/user/notes.txt", "user", 120)) as answer:
        assert answer.read() == b"hello from the sandbox"
    up = box.upload_url("/home/user/up/data.bin")
    with urllib.request.urlopen(urllib.request.Request(up, data=b"\x00\x01raw", method="PUT")) as answer:
        assert answer.status == 200
    assert box.files.read("/home/user/up/data.bin", format="bytes") == b"\x00\x01raw"
    form = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"
            b"Content-Type: text/plain\r\n\r\nfrom a form\r\n--XyZ--\r\n")
    request = urllib.request.Request(box.upload_url("/tmp/form.txt"), data=form, method="POST",
                                     headers={"Content-Type": "multipart/form-data; boundary=XyZ"})
    with urllib.request.urlopen(request) as answer:
        assert answer.status == 200
    assert box.files.read("/tmp/form.txt") == "from a form"


def test_signatures_are_checked(box: Sandbox) -> None:
    box.files.write("secret.txt", "s")
    expired = box.download_url("secret.txt", use_signature_expiration=-120)
    assert _refusal(expired) == (401, {"code": 401, "message": "signature is already expired"})
    url = box.download_url("secret.txt")
    assert _refusal(_with(url, signature="v1_forged"))[0] == 401
    assert _refusal(_with(url, path="/home/user/other.txt"))[0] == 401  # a signature is for one path
    assert _refusal(_with(url, signature=""))[1]["message"] == "missing signature"
    # a read URL does not write, and the expiry cannot be pushed back
    assert _refusal(url, data=b"overwrite")[0] == 401
    later = box.download_url("secret.txt", use_signature_expiration=60)
    assert _refusal(_with(later, signature_expiration="9999999999"))[0] == 401
    other = Sandbox.create(timeout=60)
    try:  # a signature made for one sandbox is worth nothing for another
        other.files.write("secret.txt", "o")
        assert _refusal(url.replace(box.sandbox_id, other.sandbox_id))[0] == 401
    finally:
        other.kill()
    assert _refusal(url.replace(box.sandbox_id, "sbx_" + "0" * 32))[0] == 404
    with pytest.raises(InvalidArgumentException):
        box.upload_url()


def test_unsecured_sandbox_urls_are_unsigned(guest_path: str) -> None:
    sandbox = Sandbox.create(timeout=60, secure=False)
    try:
        sandbox.files.write("open.txt", "open")
        url = sandbox.download_url("open.txt")
        assert "signature" not in url
        with urllib.request.urlopen(url) as answer:
            assert answer.read() == b"open"
        with pytest.raises(InvalidArgumentException, match="only when sandbox is created as secured"):
            sandbox.download_url("open.txt", use_signature_expiration=60)
    finally:
        sandbox.kill()


def test_async_download_url(guest_path: str) -> None:
    async def main() -> None:
        sandbox = await AsyncSandbox.create(timeout=60)
        try:
            await sandbox.files.write("a.txt", "async")
            url = sandbox.download_url("a.txt")  # not a coroutine (E2B's)
            data = await anyio.to_thread.run_sync(lambda: urllib.request.urlopen(url).read())
            assert data == b"async"
        finally:
            await sandbox.kill()

    anyio.run(main)


@pytest.mark.served
def test_file_urls_on_every_backend(sbx: Sandbox, mode: str) -> None:
    """A pool's worker serves its sandboxes' URLs on its own loopback (Ray's actors may be on
    other machines: refused); through a server, the URL is declaw's `/files/raw`, which takes the
    server's API key."""
    sbx.files.write("/tmp/url-backend.txt", mode)
    if mode == "ray":
        with pytest.raises(InvalidArgumentException, match="Ray"):
            sbx.download_url("/tmp/url-backend.txt")
        return
    url = sbx.download_url("/tmp/url-backend.txt")
    if mode == "served":
        from conftest import API_KEY  # noqa: E402 (tests/ is on sys.path)

        assert "/files/raw?" in url
        request = urllib.request.Request(url, headers={"X-API-Key": API_KEY})
        with urllib.request.urlopen(request) as answer:
            assert answer.read() == mode.encode()
        with pytest.raises(InvalidArgumentException):
            sbx.download_url("/tmp/url-backend.txt", use_signature_expiration=60)
        return
    with urllib.request.urlopen(url) as answer:
        assert answer.read() == mode.encode()
