"""asyncio over the sandbox's network.

The event loop already runs on a selector that knows sandbox sockets (readiness.py), so
`asyncio.open_connection`, `loop.sock_connect/recv/sendall` and transports work unchanged. Two
things need the door instead:

* name lookups: asyncio runs `getaddrinfo` in a thread pool, and the guest has no threads; here
  the lookup is one door call (it blocks the loop for that long, as a cached answer would not).
* TLS (`ssl=` on create_connection / open_connection, so aiohttp's https): asyncio's SSL
  transport drives an in-memory TLS object, which the stub ssl cannot provide. The host runs
  TLS on the connection instead (one blocking door call for the handshake), and the transport
  is a plain one over the now-plaintext socket, with the TLS details as extra info. Upgrading a
  live connection (`loop.start_tls`) is not available.
"""

from __future__ import annotations

import socket

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: start-up stays free
    import asyncio
    from typing import Any


class _TLSInfo:
    """What `transport.get_extra_info("ssl_object")` returns."""

    def __init__(self, info: dict[str, Any], server_hostname: str | None, context: object) -> None:
        self._info = info
        self.server_hostname = server_hostname
        self.context = context
        self.server_side = False

    def getpeercert(self, binary_form: bool = False) -> Any:
        from ._ssl import _plain_cert

        if binary_form:
            return self._info.get("peercert_der")
        return _plain_cert(self._info.get("peercert") or {})

    def cipher(self) -> tuple[Any, ...] | None:
        cipher = self._info.get("cipher")
        return tuple(cipher) if cipher else None

    def version(self) -> str | None:
        return self._info.get("version")

    def selected_alpn_protocol(self) -> str | None:
        return self._info.get("alpn")

    def compression(self) -> None:
        return None

    def get_channel_binding(self, cb_type: str = "tls-unique") -> None:
        return None


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def patch(selector_events: Any) -> None:
    """Patch asyncio (given its selector_events module, loaded with base_events)."""
    import sys

    base_events: Any = sys.modules["asyncio.base_events"]  # its classes get our methods
    loop_class = base_events.BaseEventLoop
    if getattr(loop_class, "_declaw_net", False):
        return
    loop_class._declaw_net = True
    ssl_module = sys.modules.get("ssl")
    module: Any
    for module in (base_events, selector_events, sys.modules.get("asyncio.sslproto")):
        if module is not None and getattr(module, "ssl", None) is None:
            module.ssl = ssl_module

    async def getaddrinfo(self: asyncio.AbstractEventLoop, host: str | None, port: str | int | None, *, family: int = 0,
                          type: int = 0, proto: int = 0, flags: int = 0) -> list[Any]:
        return socket.getaddrinfo(host, port, family, type, proto, flags)

    async def getnameinfo(self: asyncio.AbstractEventLoop, sockaddr: tuple[Any, ...],
                          flags: int = 0) -> tuple[str, str]:
        return socket.getnameinfo(sockaddr, flags)

    loop_class.getaddrinfo = getaddrinfo
    loop_class.getnameinfo = getnameinfo

    def _make_ssl_transport(self: Any, rawsock: Any, protocol: asyncio.BaseProtocol, sslcontext: object,
                            waiter: asyncio.Future[Any] | None = None, *, server_side: bool = False,
                            server_hostname: str | None = None, extra: dict[str, Any] | None = None,
                            server: object = None, ssl_handshake_timeout: float | None = None,
                            **more: Any) -> asyncio.Transport:
        if server_side:
            raise NotImplementedError("TLS servers are not available in the sandbox")
        info = rawsock._door_start_tls(server_hostname, timeout=ssl_handshake_timeout or 60.0)
        tls = _TLSInfo(info, server_hostname, sslcontext)
        extra = dict(extra or {})
        extra.update(sslcontext=sslcontext, ssl_object=tls, peercert=tls.getpeercert(),
                     cipher=tls.cipher(), compression=None)
        if more.get("context") is not None:
            try:
                return self._make_socket_transport(rawsock, protocol, waiter, extra=extra,
                                                   server=server, context=more["context"])
            except TypeError:
                pass
        return self._make_socket_transport(rawsock, protocol, waiter, extra=extra, server=server)

    selector_events.BaseSelectorEventLoop._make_ssl_transport = _make_ssl_transport

    original = base_events.BaseEventLoop._create_connection_transport

    async def _create_connection_transport(self: Any, sock: Any, protocol_factory: Any, ssl: object,
                                           server_hostname: str | None, *args: Any,
                                           **kwargs: Any) -> tuple[Any, Any]:
        """TLS without blocking the loop: the host runs the handshake while other tasks go on;
        then a plain transport over the (now plaintext) socket carries the TLS details."""
        if not ssl or kwargs.get("server_side") or not hasattr(sock, "_door_start_tls"):
            return await original(self, sock, protocol_factory, ssl, server_hostname, *args, **kwargs)
        timeout = kwargs.get("ssl_handshake_timeout") or 60.0
        sock.setblocking(False)
        info = sock._door_start_tls(server_hostname, timeout=timeout, wait=False)
        while info.get("pending"):
            ready = self.create_future()
            self.add_writer(sock.fileno(), _settle, ready)
            try:
                await ready
            finally:
                self.remove_writer(sock.fileno())
            info = sock._door_start_tls(server_hostname, timeout=timeout, wait=False)
        sslcontext = None if isinstance(ssl, bool) else ssl
        tls = _TLSInfo(info, server_hostname, sslcontext)
        kwargs.pop("ssl_handshake_timeout", None)
        kwargs.pop("ssl_shutdown_timeout", None)
        transport, protocol = await original(self, sock, protocol_factory, None, None, *args, **kwargs)
        transport._extra.update(sslcontext=sslcontext, ssl_object=tls, peercert=tls.getpeercert(),
                                cipher=tls.cipher(), compression=None)
        return transport, protocol

    base_events.BaseEventLoop._create_connection_transport = _create_connection_transport

    async def start_tls(self: asyncio.AbstractEventLoop, transport: object, protocol: object, sslcontext: object,
                        *, server_side: bool = False, server_hostname: str | None = None,
                        ssl_handshake_timeout: float | None = None,
                        ssl_shutdown_timeout: float | None = None) -> asyncio.Transport:
        raise NotImplementedError("upgrading a connection to TLS (start_tls) is not available in "
                                  "the sandbox; open it with ssl= instead")

    loop_class.start_tls = start_tls


def patch_anyio_tls(tls_module: Any) -> None:
    """anyio's TLS (`TLSStream.wrap`, so httpcore2's and httpx2's async clients, and the official
    `AsyncOpenAI` / `AsyncAnthropic`) drives an in-memory TLS object, which the stub ssl cannot
    provide. On a fresh client connection of the sandbox's network, the host runs TLS instead
    (as for asyncio's `ssl=` above), and the stream carries plaintext with the TLS details as
    its extra attributes. Anything else (a server side, a non-sandbox stream) takes anyio's
    own path (and fails there, as before)."""
    import asyncio

    stream_class: Any = tls_module.TLSStream
    if getattr(stream_class, "_declaw_net", False):
        return
    stream_class._declaw_net = True
    original = stream_class.wrap.__func__
    from anyio.abc import ByteStream, SocketAttribute

    attribute: Any = tls_module.TLSAttribute

    class HostTLSStream(ByteStream):
        """A stream the host encrypts: reads and writes go to the plaintext transport stream."""

        def __init__(self, inner: Any, tls: _TLSInfo, standard_compatible: bool) -> None:
            self.transport_stream = inner
            self._tls = tls
            self.standard_compatible = standard_compatible

        async def receive(self, max_bytes: int = 65536) -> bytes:
            return await self.transport_stream.receive(max_bytes)

        async def send(self, item: bytes) -> None:
            await self.transport_stream.send(item)

        async def send_eof(self) -> None:
            raise NotImplementedError("send_eof() is not supported on TLS streams")

        async def aclose(self) -> None:
            await self.transport_stream.aclose()

        async def unwrap(self) -> tuple[Any, bytes]:
            return self.transport_stream, b""

        @property
        def extra_attributes(self) -> Any:
            tls = self._tls
            return {**self.transport_stream.extra_attributes,
                    attribute.alpn_protocol: tls.selected_alpn_protocol,
                    attribute.channel_binding_tls_unique: lambda: None,
                    attribute.cipher: tls.cipher,
                    attribute.peer_certificate: tls.getpeercert,
                    attribute.peer_certificate_binary: lambda: tls.getpeercert(True),
                    attribute.server_side: lambda: False,
                    attribute.shared_ciphers: lambda: None,
                    attribute.ssl_object: lambda: tls,
                    attribute.standard_compatible: lambda: self.standard_compatible,
                    attribute.tls_version: tls.version}

    async def wrap(cls: Any, transport_stream: Any, *, server_side: bool | None = None,
                   hostname: str | None = None, ssl_context: Any = None,
                   standard_compatible: bool = True) -> Any:
        raw = transport_stream.extra(SocketAttribute.raw_socket, None)
        sock = getattr(raw, "_sock", raw)
        if server_side or not hostname or not hasattr(sock, "_door_start_tls"):
            return await original(cls, transport_stream, server_side=server_side, hostname=hostname,
                                  ssl_context=ssl_context, standard_compatible=standard_compatible)
        loop = asyncio.get_running_loop()
        transport = getattr(transport_stream, "_transport", None)
        if transport is not None:
            transport.pause_reading()  # the transport must not read while the host shakes hands
        try:
            info = sock._door_start_tls(hostname, timeout=60.0, wait=False)
            while info.get("pending"):
                # the transport owns the descriptor, so the loop's own (unchecked) registration
                ready = loop.create_future()
                loop._add_writer(sock.fileno(), _settle, ready)  # type: ignore[attr-defined]
                try:
                    await ready
                finally:
                    loop._remove_writer(sock.fileno())  # type: ignore[attr-defined]
                info = sock._door_start_tls(hostname, timeout=60.0, wait=False)
        finally:
            if transport is not None and not transport.is_closing():
                transport.resume_reading()
        return HostTLSStream(transport_stream, _TLSInfo(info, hostname, ssl_context), standard_compatible)

    stream_class.wrap = classmethod(wrap)
