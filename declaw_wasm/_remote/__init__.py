"""The remote backend: sandboxes on a `declaw-wasm serve`, over HTTP (httpx) and WebSockets."""
