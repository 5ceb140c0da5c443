"""The guest's door to the host: a built-in module the host's WASI runtime provides to the
guest's CPython (declaw_wasm/_wasm/guest.py), not importable on the host.

Each call sends one msgpack-encoded request and returns the host's msgpack-encoded answer.
"""

def call(request: bytes, /) -> bytes: ...
