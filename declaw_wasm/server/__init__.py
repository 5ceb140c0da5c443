"""`declaw-wasm serve`: sandboxes over HTTP for the remote SDKs.

The Python SDK's remote mode and the TypeScript SDK use it. For embedding: `create_app`, `serve_in_thread`, `serve`."""

from .app import DEFAULT_MAX_BODY, DEFAULT_MAX_UPLOAD, create_app
from .run import GRACE, check_bind, serve, serve_in_thread

__all__ = ["create_app", "serve", "serve_in_thread", "check_bind", "DEFAULT_MAX_BODY",
           "DEFAULT_MAX_UPLOAD", "GRACE"]
