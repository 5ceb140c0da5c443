"""The console: a web page of ours that shows what sandboxes did, from a live server or from journals.

`GET /console` (and its two assets) is a static page shipped in the package (`console/`: no CDN,
works offline); it holds no data. Its data calls are the routes below, under `PREFIX`, made by
its script with the server's API key as a header (typed into the page, held in its memory only:
no cookie, no storage). The same routes serve two sources: the server's sandboxes
(`ServedSource`, on `declaw-wasm serve`, behind the key like every route) and a journal folder
(`JournalSource`, `declaw-wasm console --journal DIR`: a keyless listener on loopback behind
`WebGuard`).

- `GET {PREFIX}/console/sandboxes`: the sandboxes (id, template, state, start);
- `GET {PREFIX}/sandboxes/{id}/events?since=N`: its events (the server's is network.py's);
- `GET {PREFIX}/sandboxes/{id}/events/stream?since=N`: the same, then each new one as it
  comes, as server-sent events (`id:` the seq, `data:` the event's JSON), until the sandbox ends;
- `GET {PREFIX}/sandboxes/{id}/images/{sha256}`: a chart an event refers to, as JSON
  `{"mime", "base64"}` (PNG or JPEG only; the page shows it as a `data:` URL).

Guest content is never served as a page or an asset of the console's origin: events and images
are JSON (`nosniff`); the page renders every value as text. The static answers carry a strict
Content-Security-Policy (`CSP`): scripts and styles from the console's own files only, images
from `data:` only, no frames of ours, no plugins, no form targets, connections to itself only.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Optional

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, Response, StreamingResponse

from .._threads import in_thread
from ..events import SandboxEvent, parse_event, read_journal, to_json
from ..exceptions import NotFoundException, SandboxException
from ..wire import PREFIX

ASSETS = Path(__file__).resolve().parent / "console"
FILES = {"/console": ("index.html", "text/html; charset=utf-8"),
         "/console/console.js": ("console.js", "text/javascript; charset=utf-8"),
         "/console/console.css": ("console.css", "text/css; charset=utf-8")}
OPEN_PATHS = frozenset(FILES)  # the static page: no data, so no key (server/guard.py)
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; connect-src 'self'; "
       "frame-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; object-src 'none'")
STATIC_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                  "Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "X-Frame-Options": "DENY"}
DATA_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
POLL = 0.25  # seconds between looks for new events while following
READ_AT_ONCE = 8 << 20  # bytes of a journal a follow reads in one look
STREAM_FOR = 3600.0  # a follow ends after this long (the page follows again)
HEARTBEAT = 15.0
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
ENDS = ("killed", "timed_out")


class ServedSource:
    """The server's sandboxes (its registry)."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def sandboxes(self) -> list[dict[str, Any]]:
        return [{"sandbox_id": i.sandbox_id, "template": i.template_id, "state": str(i.state.value),
                 "started_at": i.started_at.isoformat()} for i in self.registry.sandboxes.list()]

    def events(self, sandbox_id: str, since: int) -> list[SandboxEvent]:
        events: list[SandboxEvent] = self.registry.get(sandbox_id).events(since)
        return events

    def reader(self, sandbox_id: str) -> Callable[[int], list[SandboxEvent]]:
        """A follow's reader: the sandbox's own `events` (a kill's route forgets the sandbox;
        its follower still reads its last events, the kill's among them)."""
        reader: Callable[[int], list[SandboxEvent]] = self.registry.get(sandbox_id).events
        return reader

    def image(self, sandbox_id: str, digest: str) -> Optional[tuple[str, bytes]]:
        backend = self.registry.get(sandbox_id)
        found = getattr(backend, "event_image", None)  # in-process sandboxes' rings
        return found(digest) if found is not None else None


class JournalSource:
    """A journal folder (`DECLAW_WASM_JOURNAL`'s, or `journal=`'s)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _file(self, sandbox_id: str) -> Path:
        if not _ID.match(sandbox_id):
            raise NotFoundException(f"no journal for sandbox {sandbox_id!r}")
        path = self.folder / f"{sandbox_id}.jsonl"
        if path.is_symlink() or not path.is_file():  # a journal is a file we wrote, never a link
            raise NotFoundException(f"no journal for sandbox {sandbox_id!r} in {self.folder}")
        return path

    def sandboxes(self) -> list[dict[str, Any]]:
        found = []
        for path in self.folder.glob("*.jsonl"):
            if path.is_symlink() or not _ID.match(path.stem):
                continue
            first = _first_event(path)
            started = first.timestamp if first is not None else datetime.fromtimestamp(path.stat().st_mtime,
                                                                                       timezone.utc)
            found.append({"sandbox_id": path.stem, "template": getattr(first, "template", ""), "state": "journal",
                          "started_at": started.isoformat()})
        return sorted(found, key=lambda s: str(s["started_at"]), reverse=True)

    def reader(self, sandbox_id: str) -> Callable[[int], list[SandboxEvent]]:
        """A follow's reader: the whole journal once, then only what was appended since (whole
        lines), so a long journal is not read again every `POLL`; a rotation reads it all again."""
        path = self._file(sandbox_id)
        state = {"inode": -1, "offset": 0}

        def read(since: int) -> list[SandboxEvent]:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                return []
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_ino != state["inode"] or st.st_size < state["offset"]:  # new, or rotated
                    events = self.events(sandbox_id, since)
                    state.update(inode=st.st_ino, offset=st.st_size)
                    return events
                f.seek(state["offset"])
                data = f.read(max(0, min(st.st_size - state["offset"], READ_AT_ONCE)))
            whole = data[:data.rfind(b"\n") + 1]
            state["offset"] += len(whole)
            events = []
            for line in whole.splitlines():
                try:
                    event = parse_event(line)
                except ValueError:  # a torn line (pydantic's error is a ValueError)
                    continue
                if event.seq > since:
                    events.append(event)
            return events

        return read

    def events(self, sandbox_id: str, since: int) -> list[SandboxEvent]:
        path = self._file(sandbox_id)
        rotated = sorted(path.parent.glob(f"{path.name}.*"), key=lambda p: -int(p.suffix[1:])
                         if p.suffix[1:].isdigit() else 0)
        events: list[SandboxEvent] = []
        for file in [*rotated, path]:
            events += [e for e in read_journal(file) if e.seq > since]
        return events

    def image(self, sandbox_id: str, digest: str) -> Optional[tuple[str, bytes]]:
        for ext, mime in (("png", "image/png"), ("jpg", "image/jpeg")):
            path = self.folder / "images" / f"{digest}.{ext}"
            if path.is_file() and not path.is_symlink():
                return mime, path.read_bytes()
        return None


def _first_event(path: Path) -> Optional[SandboxEvent]:
    """A journal's first event (its first line only; None if it is not one)."""
    try:
        with open(path, "rb") as f:
            line = f.readline(1 << 20)
        return parse_event(line)
    except (OSError, ValueError):
        return None


def static_router() -> APIRouter:
    """The page and its assets, with the CSP."""
    router = APIRouter()
    for path, (name, media) in FILES.items():
        def answer(name: str = name, media: str = media) -> Response:
            return Response((ASSETS / name).read_bytes(), media_type=media, headers=STATIC_HEADERS)
        router.add_api_route(path, answer, methods=["GET"], include_in_schema=False)
    return router


def data_router(source: Any, events_route: bool) -> APIRouter:
    """The page's data calls over `source` (`events_route`: also `.../events`, which `serve` has)."""
    router = APIRouter(prefix=PREFIX, include_in_schema=False)

    @router.get("/console/sandboxes")
    async def sandboxes() -> JSONResponse:
        return JSONResponse(await in_thread(source.sandboxes), headers=DATA_HEADERS)

    if events_route:
        @router.get("/sandboxes/{sandbox_id}/events")
        async def events(sandbox_id: str, since: int = Query(0, ge=0)) -> Response:
            listed = await in_thread(source.events, sandbox_id, since)
            return Response("[" + ",".join(to_json(e) for e in listed) + "]", media_type="application/json",
                            headers=DATA_HEADERS)

    @router.get("/sandboxes/{sandbox_id}/events/stream")
    async def follow(sandbox_id: str, since: int = Query(0, ge=0)) -> StreamingResponse:
        reader = await in_thread(source.reader, sandbox_id)  # an unknown sandbox: 404 now, not mid-stream
        return StreamingResponse(_follow(reader, since), media_type="text/event-stream",
                                 headers={**DATA_HEADERS, "X-Accel-Buffering": "no"})

    @router.get("/sandboxes/{sandbox_id}/images/{digest}")
    async def image(sandbox_id: str, digest: str) -> JSONResponse:
        found = await in_thread(source.image, sandbox_id, digest) if _DIGEST.match(digest) else None
        if found is None or found[0] not in ("image/png", "image/jpeg"):
            raise NotFoundException(f"no stored image {digest[:64]!r} for this sandbox")
        mime, data = found
        return JSONResponse({"mime": mime, "base64": base64.b64encode(data).decode()}, headers=DATA_HEADERS)

    return router


async def _follow(reader: Callable[[int], list[SandboxEvent]], since: int) -> AsyncIterator[bytes]:
    began = last = time.monotonic()
    while time.monotonic() - began < STREAM_FOR:
        try:
            events = await in_thread(reader, since)
        except (SandboxException, ValueError):  # gone (forgotten by the server), or a journal line that is no event
            return
        for event in events:
            since = event.seq
            yield f"id: {event.seq}\ndata: {to_json(event)}\n\n".encode()
            last = time.monotonic()
        if any(getattr(e, "action", None) in ENDS for e in events):
            yield b"event: end\ndata: {}\n\n"
            return
        if time.monotonic() - last > HEARTBEAT:
            yield b": keep-alive\n\n"
            last = time.monotonic()
        await asyncio.sleep(POLL)


def journal_app(folder: Path) -> Any:
    """`declaw-wasm console --journal DIR`'s app: the page and the data calls over the folder,
    behind the checks of a keyless listener of ours (`WebGuard`)."""
    from fastapi import FastAPI

    from .._webguard import HostPolicy, WebGuard

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(static_router())
    app.include_router(data_router(JournalSource(folder), events_route=True))

    @app.exception_handler(SandboxException)
    async def not_found(request: Any, exc: SandboxException) -> JSONResponse:
        return JSONResponse({"message": str(exc)}, status_code=404 if isinstance(exc, NotFoundException) else 400)

    return WebGuard(app, HostPolicy())
