"""`declaw-wasm serve`'s app: the routes (routes.py) of one backend's sandboxes behind the guard
(guard.py), with errors as JSON naming the SDK's exception class.

Why FastAPI on uvicorn: the request and response bodies are the pydantic models the SDK already
returns (models.py, execution.py, wire/), and FastAPI turns those into validation and an
OpenAPI document (`/openapi.json`) without a second schema; Starlette under it gives streamed
request and response bodies and WebSockets; uvicorn is the ASGI server both are made for.
"""

from __future__ import annotations

import warnings
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, AsyncIterator, Iterable, Optional, Sequence, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter
from pydantic.warnings import UnsupportedFieldAttributeWarning
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp

from .. import __version__
from .._backend import Sandboxes
from .._webguard import HostPolicy
from .._threads import in_thread
from ..exceptions import InvalidArgumentException, NotFoundException, SandboxException
from ..settings import allowed_hosts as allowed_hosts_setting
from ..wire import (API_KEY_HEADER, PREFIX, STREAMED, CellLine, CommandLine, PtyControl, PtyEnd,
                    error_body, status_of)
from .guard import Guard
from .previews import Previews, is_path_preview
from .registry import Registry
from .routes import routers

if TYPE_CHECKING:
    from .observe import Metrics

DEFAULT_MAX_BODY = 16 << 20  # JSON bodies: code, stdin, arguments
DEFAULT_MAX_UPLOAD = 1 << 30  # one file upload (the default per-sandbox disk quota)


def _error_response(exc: BaseException, status: Optional[int] = None) -> JSONResponse:
    body = error_body(exc)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status or status_of(body.error))


def create_app(api_key: Optional[str] = None, max_body: int = DEFAULT_MAX_BODY,
               max_upload: int = DEFAULT_MAX_UPLOAD, sandboxes: Optional[Sandboxes] = None,
               vault: Any = None, allowed_hosts: Iterable[str] = (), metrics: Optional["Metrics"] = None,
               webhooks: Sequence[str] = (), webhook_secret: Optional[str] = None) -> ASGIApp:
    """The server as an ASGI app, serving `sandboxes` (default: this process's), with `vault`
    (a `Vault`; default this process's) behind declaw's vault routes and `vault_refs`. Without
    `api_key` it answers loopback Host names and `allowed_hosts` (plus
    `DECLAW_WASM_ALLOWED_HOSTS`) only, and no other origin's web page (docs/server.md).
    `/metrics`: `metrics` (default: the app's own, with the `metrics` extra); `webhooks`: URLs
    that get each lifecycle event, signed with `webhook_secret` (observe.py)."""
    try:
        hosts = HostPolicy.of([*allowed_hosts_setting(), *allowed_hosts])
    except ValueError as exc:
        raise InvalidArgumentException(str(exc)) from None
    if sandboxes is None:
        from .._local.sandbox import LocalSandboxes

        sandboxes = LocalSandboxes()
    registry = Registry(sandboxes, vault)
    previews = Previews(registry, api_key, hosts)
    from .observe import Metrics, Webhooks, metrics_available, metrics_router, observe

    if metrics is None and metrics_available():
        metrics = Metrics()
    stop_observing = observe(metrics, Webhooks(webhooks, webhook_secret or "") if webhooks else None)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await previews.aclose()
        await in_thread(registry.kill_all)
        stop_observing()

    # no /docs or /redoc: they load their scripts from a CDN and fetch the document without the key
    app = FastAPI(title="declaw-wasm", version=__version__, docs_url=None, redoc_url=None,
                  lifespan=lifespan,
                  description="Sandboxes running CPython on WASI, with declaw's REST API at declaw's "
                              f"paths (its SDKs run unchanged) and our clients' own calls under {PREFIX}. "
                              f"Every request needs the API key ({API_KEY_HEADER} or Authorization: "
                              "Bearer) when the server has one; without one, state-changing requests "
                              "need a Content-Type a web page cannot send cross-site (application/json, "
                              "or the raw body's own type).")
    for router in routers(registry):
        app.include_router(router)
    app.include_router(metrics_router(metrics))
    from .console import ServedSource, data_router, static_router

    app.include_router(static_router())  # /console: the page, no data (guard.py lets it through)
    app.include_router(data_router(ServedSource(registry), events_route=False))

    @app.exception_handler(SandboxException)
    async def sandbox_error(request: Request, exc: SandboxException) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        cls: type[SandboxException] = (NotFoundException if exc.status_code == 404
                                       else InvalidArgumentException)
        if exc.status_code >= 500:
            cls = SandboxException
        return _error_response(cls(str(exc.detail)), exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}"
                             for e in exc.errors())
        return _error_response(InvalidArgumentException(problems), 400)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return _error_response(SandboxException(f"internal error: {type(exc).__name__}: {exc}"), 500)

    def openapi() -> dict[str, Any]:
        """FastAPI's document, plus the streamed messages (NDJSON lines, WebSocket frames)."""
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            from .._model import build_all

            build_all()

            with warnings.catch_warnings():  # FastAPI's body parameter over a model built late
                warnings.simplefilter("ignore", UnsupportedFieldAttributeWarning)  # (wire/, _model.py)
                document = get_openapi(title=app.title, version=app.version, description=app.description,
                                       routes=app.routes)
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            kinds: list[tuple[str, Any]] = [("CommandLine", CommandLine), ("CellLine", CellLine),
                                            ("PtyControl", PtyControl), ("PtyEnd", PtyEnd)]
            kinds += [(model.__name__, model) for model in STREAMED]
            for name, kind in kinds:
                schema = TypeAdapter(cast(Any, kind)).json_schema(ref_template="#/components/schemas/{model}")
                schemas.update(schema.pop("$defs", {}))
                schemas[name] = schema
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    previews.api = app
    previews.app = Guard(previews.path_app(app), api_key, max_body, max_upload, hosts,
                         preview_route=is_path_preview)
    return previews
