"""TLS for the guest's connections, run by the host with the host's own trust.

The guest's `ssl` is a stub (guest/declaw_net/ssl.py): `wrap_socket(sock, server_hostname=...)`
asks the host to run TLS on that connection, and the guest then speaks plaintext to the host.
Whatever the guest configured (CERT_NONE, `_create_unverified_context()`, its own CA file)
changes nothing here: the host always verifies the certificate against the name the connection
is bound to, which is also the SNI, and offers ALPN `http/1.1` only (the relay parses HTTP/1.x).

Trust: `truststore` (the operating system's certificate store and verifier: what a browser or
pip 24.2+ trusts on this host, corporate CAs included; on Linux that is OpenSSL with the
system's CA files). If the OS store is empty (a bare container), `certifi`'s Mozilla bundle.
`DECLAW_WASM_CA_BUNDLE=path` adds the CAs in that PEM file (tests use it for their own CA).
"""

from __future__ import annotations

import functools
import os
import ssl
import sys

from ..settings import CA_BUNDLE_ENV, ca_bundle


def _system_store_present() -> bool:
    if sys.platform != "linux":
        return True  # truststore asks the platform verifier
    paths = ssl.get_default_verify_paths()
    return bool((paths.cafile and os.path.exists(paths.cafile)) or
                (paths.capath and os.path.isdir(paths.capath) and os.listdir(paths.capath)))


@functools.lru_cache(maxsize=4)
def _context(extra_ca: str) -> ssl.SSLContext:
    context: ssl.SSLContext
    try:
        import truststore

        if not _system_store_present():
            raise ImportError("no system CA store")
        context = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    except ImportError:
        import certifi

        context = ssl.create_default_context(cafile=certifi.where())
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    context.set_alpn_protocols(["http/1.1"])
    if extra_ca:
        try:
            context.load_verify_locations(cafile=extra_ca)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"{CA_BUNDLE_ENV}={extra_ca!r}: cannot load it as PEM CAs: {exc}") from None
    return context


def client_context() -> ssl.SSLContext:
    """The host's client context (shared; contexts are thread-safe for wrapping)."""
    return _context(ca_bundle())


def peer_info(sock: ssl.SSLSocket) -> dict[str, object]:
    """What the guest's SSLSocket reports: version, cipher, ALPN, the verified certificate."""
    cipher = sock.cipher()
    return {"version": sock.version(), "cipher": list(cipher) if cipher else None,
            "alpn": sock.selected_alpn_protocol(), "peercert": _plain(sock.getpeercert()),
            "peercert_der": sock.getpeercert(binary_form=True)}


def _plain(value: object) -> object:
    """getpeercert()'s tuples as lists (msgpack-safe); the guest turns them back into tuples."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
