"""One `declaw-wasm serve`: where it is, a pooled httpx client carrying the API key, and server
errors turned back into the SDK's exceptions (the server names the class: wire/).

Why httpx: blocking and streamed requests with one connection pool, timeouts per request, and
the same library Starlette's test client uses. `DECLAW_DOMAIN` is `host:port` or a URL; without
a scheme it is http on loopback and https elsewhere.
"""

from __future__ import annotations

import ipaddress
import threading
from typing import Any, Iterator, Optional
from urllib.parse import quote, urlsplit

import httpx

from ..exceptions import InvalidArgumentException, SandboxException, TimeoutException
from ..wire import API_KEY_HEADER, exception_from

REQUEST_TIMEOUT = 60.0
CONNECT_TIMEOUT = 10.0


def base_url(domain: str) -> str:
    """`host:port` or a URL -> the server's base URL (http on loopback, https elsewhere)."""
    domain = domain.strip().rstrip("/")
    if "://" in domain:
        parts = urlsplit(domain)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidArgumentException(f"DECLAW_DOMAIN must be host:port or an http(s) URL, got {domain!r}")
        return domain
    host = urlsplit("//" + domain).hostname or ""
    if not host:
        raise InvalidArgumentException(f"DECLAW_DOMAIN must be host:port or an http(s) URL, got {domain!r}")
    return f"{'http' if _loopback(host) else 'https'}://{domain}"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def segment(value: str) -> str:
    """An id as one URL path segment."""
    return quote(str(value), safe="")


class Connection:
    """One server: a pooled httpx client with the API key, and error mapping. One per
    (server, key) in a process."""

    _cache: dict[tuple[str, Optional[str]], "Connection"] = {}
    _cache_lock = threading.Lock()

    def __init__(self, url: str, api_key: Optional[str]) -> None:
        self.url = url
        self.auth_headers = {API_KEY_HEADER: api_key} if api_key else {}
        self.client = httpx.Client(base_url=url, headers=self.auth_headers,
                                   timeout=httpx.Timeout(REQUEST_TIMEOUT, connect=CONNECT_TIMEOUT),
                                   limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))

    @classmethod
    def get(cls, domain: str, api_key: Optional[str]) -> "Connection":
        key = (base_url(domain), api_key)
        with cls._cache_lock:
            conn = cls._cache.get(key)
            if conn is None:
                conn = cls._cache[key] = Connection(*key)
            return conn

    def check_private(self, what: str) -> None:
        """Refuse to send secret values (`what`) to this server unless the connection is TLS or
        stays on this machine (loopback): a plain-HTTP hop elsewhere would carry them in clear."""
        parts = urlsplit(self.url)
        if parts.scheme != "https" and not _loopback(parts.hostname or ""):
            raise InvalidArgumentException(
                f"{what}: refusing to send secret values to {self.url} over plain HTTP (anyone on the "
                "way could read them); use an https:// server URL (declaw-wasm serve --tls-cert/"
                "--tls-key, or a TLS proxy in front), or a server on loopback")

    def _check(self, response: httpx.Response) -> httpx.Response:
        if response.status_code >= 400:
            response.read()
            try:
                body: Any = response.json()
            except ValueError:
                body = response.text
            raise exception_from(body, response.status_code)
        return response

    def _send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            response = self.client.request(method, path, **_typed(method, kw))
        except httpx.TimeoutException as exc:
            raise TimeoutException(f"request to the declaw server timed out: {exc}") from None
        except httpx.TransportError as exc:
            raise SandboxException(f"cannot reach the declaw server at {self.url}: {exc}") from None
        return self._check(response)

    def request(self, method: str, path: str, **kw: Any) -> Any:
        """One call; its JSON answer (None when empty)."""
        response = self._send(method, path, **kw)
        return response.json() if response.content else None

    def raw(self, method: str, path: str, **kw: Any) -> bytes:
        """One call; its body's bytes."""
        return self._send(method, path, **kw).content

    def open(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """A streamed response (checked); the caller closes it."""
        try:
            timeout = httpx.Timeout(None, connect=CONNECT_TIMEOUT)
            request = self.client.build_request(method, path, timeout=timeout, **_typed(method, kw))
            response = self.client.send(request, stream=True)
        except httpx.TransportError as exc:
            raise SandboxException(f"cannot reach the declaw server at {self.url}: {exc}") from None
        try:
            return self._check(response)
        except BaseException:
            response.close()
            raise


def _typed(method: str, kw: dict[str, Any]) -> dict[str, Any]:
    """A POST without a body says `Content-Type: application/json` (as declaw's SDK does): a keyless
    server refuses a POST without a type, which a web page could send cross-site (_webguard.py)."""
    if method != "POST" or any(kw.get(k) is not None for k in ("json", "content", "data", "files")):
        return kw
    headers = dict(kw.get("headers") or {})
    if not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "application/json"
    return {**kw, "headers": headers}


def lines(response: httpx.Response) -> Iterator[str]:
    """An NDJSON response's lines; a broken connection is a `SandboxException`."""
    try:
        for text in response.iter_lines():
            if text:
                yield text
    except httpx.TransportError as exc:
        raise SandboxException(f"the connection to the declaw server broke: {exc}") from None
