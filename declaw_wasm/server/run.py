"""Running the server: `declaw-wasm serve` (uvicorn until interrupted) and `serve_in_thread`
(a free port in a thread of this process: tests, benchmarks, embedding)."""

from __future__ import annotations

import socket
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

from .._backend import Sandboxes
from ..settings import SERVE_NAMESPACE, log_level, use_state_namespace
from ..settings import state_namespace as settings_namespace
from .app import DEFAULT_MAX_BODY, DEFAULT_MAX_UPLOAD, create_app
from .._printable import logger
from .._webguard import is_loopback

GRACE = 5  # seconds open streams get at shutdown before they are cut and the sandboxes killed


def one_line_logs() -> None:
    """uvicorn's error log escaped as ours is (`_printable.OneLine`: its lines can carry an
    exception's message). Its access log keeps its own arguments (its formatter reads them): a
    request target there is h11's printable ASCII (`http="h11"`, not whichever parser is
    installed), its path percent-encoded by uvicorn."""
    logger("uvicorn.error")


def check_bind(host: str, api_key: Optional[str]) -> None:
    """Refuse to listen beyond loopback without an API key."""
    if not api_key and not is_loopback(host):
        raise SystemExit(f"declaw-wasm serve: refusing to listen on {host} without an API key; "
                         "set DECLAW_API_KEY (or use --host 127.0.0.1)")


def serve(host: str = "127.0.0.1", port: int = 8080, api_key: Optional[str] = None,
          max_body: int = DEFAULT_MAX_BODY, max_upload: int = DEFAULT_MAX_UPLOAD,
          sandboxes: Optional[Sandboxes] = None, tls: Optional[tuple[str, str]] = None,
          vault: Any = None, allowed_hosts: Sequence[str] = (),
          state_namespace: Optional[str] = None, webhooks: Sequence[str] = (),
          metrics_port: Optional[int] = None) -> None:
    """Run the server until interrupted (what `declaw-wasm serve` does), serving `sandboxes`
    (default: this process's; `--backend` gives a process pool or a Ray cluster); over HTTPS
    with `tls` (certificate file, key file): what clients need to send secret values from
    another machine. `allowed_hosts`: names besides loopback ones that a keyless server answers.

    The process keeps its sandboxes, snapshots and volumes in its own namespace of the state
    store (`state_namespace`, else `DECLAW_WASM_STATE_NAMESPACE`, else "serve"), apart from
    in-process programs' (docs/server.md); `sandboxes` made before this call (a pool) must have
    been made after `settings.use_state_namespace`, as the CLI does.

    `webhooks`: URLs that get each lifecycle event, signed with `DECLAW_WASM_WEBHOOK_SECRET`;
    `metrics_port`: `/metrics` also without a key, on 127.0.0.1 at that port (observe.py)."""
    import uvicorn

    from .._wasm.warm_image import get_interpreter

    check_bind(host, api_key)
    use_state_namespace(state_namespace or settings_namespace() or SERVE_NAMESPACE)
    if not api_key:
        print("declaw-wasm serve: no DECLAW_API_KEY set; requests are not authenticated "
              "(loopback only)", file=sys.stderr)
    if sandboxes is None:
        get_interpreter()  # load (or build) the runtime before taking requests
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if tls else "http"
    print(f"declaw-wasm serve: {scheme}://{shown}:{port} (OpenAPI document: /openapi.json); state store "
          f"namespace {settings_namespace()!r}", file=sys.stderr)
    # at shutdown: streams get GRACE seconds to end, then every sandbox is killed (lifespan)
    one_line_logs()
    from ..settings import webhook_secret
    from .observe import Metrics, keyless_metrics, metrics_available

    metrics = Metrics() if metrics_available() else None
    if metrics_port is not None:
        if metrics is None:
            raise SystemExit("declaw-wasm serve: --metrics-port needs prometheus-client "
                             "(pip install 'declaw-wasm[metrics]')")
        listener = uvicorn.Server(uvicorn.Config(keyless_metrics(metrics), host="127.0.0.1", port=metrics_port,
                                                 log_level="warning", http="h11"))
        threading.Thread(target=listener.run, name="declaw-metrics", daemon=True).start()
        print(f"declaw-wasm serve: metrics without a key at http://127.0.0.1:{metrics_port}/metrics",
              file=sys.stderr)
    app = create_app(api_key, max_body, max_upload, sandboxes, vault, allowed_hosts, metrics=metrics,
                     webhooks=webhooks, webhook_secret=webhook_secret())
    uvicorn.run(app, host=host, port=port,
                log_level=log_level(), timeout_graceful_shutdown=GRACE, http="h11",
                ssl_certfile=tls[0] if tls else None, ssl_keyfile=tls[1] if tls else None)


@contextmanager
def serve_in_thread(api_key: Optional[str] = None, host: str = "127.0.0.1", grace: float = GRACE,
                    tls: Optional[tuple[str, str]] = None, **app_args: Any) -> Iterator[str]:
    """Run the server on a free port in a thread of this process; yields its URL (https with
    `tls`: certificate file, key file). Leaving the block stops it (and kills its sandboxes).
    It serves this process's sandboxes and state store (its namespace, if the process set one:
    the embedding program is the server's principal; `serve` gives a server its own)."""
    import uvicorn

    check_bind(host, api_key)
    # proto IPPROTO_TCP, so that asyncio sets TCP_NODELAY on the accepted connections (it checks
    # the proto; without it, small writes wait ~40 ms for delayed ACKs)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM,
                         socket.IPPROTO_TCP)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    one_line_logs()
    config = uvicorn.Config(create_app(api_key, **app_args), log_level="warning", http="h11",
                            timeout_graceful_shutdown=grace,  # type: ignore[arg-type]  # a float works
                            ssl_certfile=tls[0] if tls else None, ssl_keyfile=tls[1] if tls else None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name="declaw-serve")
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    try:
        yield f"{'https' if tls else 'http'}://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(grace + 10)
        sock.close()
