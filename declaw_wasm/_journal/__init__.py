"""Sandbox events recorded: a sandbox's ring, its JSONL journal, and this process's listeners.

Each sandbox has a `Recorder` (made with it, kept across a pause and resume in this process):
it numbers the sandbox's events (events.py; a sandbox resumed in another process goes on from
its journal's last number), keeps the newest in a bounded ring (`RING_EVENTS`
events, `RING_BYTES` of their text, `IMAGE_BYTES` of chart images; all rings of the process
`PROCESS_BYTES`, past which a growing ring drops its oldest down to `RING_FLOOR`) that
`sbx.events()` reads, appends each to the sandbox's JSONL journal when there is one, and hands
it to this process's listeners (`subscribe`: OpenTelemetry, `serve`'s metrics, webhooks and live console).

The journal (`DECLAW_WASM_JOURNAL`, or `Sandbox.create(journal=folder)`) is one file per
sandbox, `<sandbox id>.jsonl` in the folder: opened append-only (`O_APPEND | O_NOFOLLOW`, mode
0600, the folder made 0700), one line per event written with a single `write` and flushed to
the OS at once, so a reader sees each event as it happens and a writer killed by SIGKILL loses
none it wrote (a machine crash may lose the last ones: there is no fsync per event). At
`journal_max_bytes()` the file is rotated (`.jsonl.1`, `.2`, `.3`; older ones deleted), so a
sandbox's journal stays under four times that. Chart images go to `images/<sha256>.png|.jpg`
beside it, once each, only PNG and JPEG (checked by their signature). Values the egress
audit masks (secret values, the sandbox's environment variables named like secrets) are
masked as `***` in every text field of every event, the guest's output included. A journal that cannot be
written (a full disk, a folder gone) is logged once and dropped: it never fails a sandbox.

Listeners are called on the thread that made the event (a command's guest's, the caller's),
after the journal; one that raises is logged and kept. They must be quick and never block: the
ones in this package queue and return.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import threading
from collections import OrderedDict, deque
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Literal, Optional, Union

from .._model import construct
from .._budget import ProcessBytes
from .._printable import logger
from ..events import HEAD, ImageRef, SandboxEvent, to_json
from ..settings import journal_dir, journal_max_bytes, otel_enabled

RING_EVENTS = 2000  # events a sandbox's ring keeps (the newest)
RING_BYTES = 8 << 20  # ...and bytes of their text
IMAGE_BYTES = 16 << 20  # chart images a sandbox's ring keeps (the newest)
PROCESS_BYTES = 256 << 20  # all rings of the process (events and images), before each keeps its floor
RING_FLOOR = 256 << 10  # what a ring keeps while the process's rings are over their cap
KEEP_ROTATED = 3
EVENT_COST = 256  # what an event costs the ring beside its text
TAIL = 256 << 10  # bytes read back from a journal's end for its last event (an event is at most ~20 KiB)
_SEQ = re.compile(rb'^\{"sandbox_id":"[^"]*","seq":(\d{1,18}),')
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_SIGNATURES: dict[bytes, tuple[Literal["image/png", "image/jpeg"], str]] = {
    b"\x89PNG\r\n\x1a\n": ("image/png", "png"), b"\xff\xd8\xff": ("image/jpeg", "jpg")}
log = logger("declaw_wasm")

Listener = Callable[[SandboxEvent], None]
_listeners: list[Listener] = []
_listeners_lock = threading.Lock()
_otel_checked = False


def subscribe(listener: Listener) -> Callable[[], None]:
    """Call `listener` with every event of every sandbox of this process from now on; returns
    the function that unsubscribes it."""
    with _listeners_lock:
        _listeners.append(listener)

    def unsubscribe() -> None:
        with _listeners_lock:
            if listener in _listeners:
                _listeners.remove(listener)
    return unsubscribe


PROCESS_RINGS = ProcessBytes()  # bytes held by all the process's rings


def listening() -> bool:
    """Whether this process has listeners (a backend that forwards events asks first)."""
    return bool(_listeners)


def dispatch(event: SandboxEvent) -> None:
    """Hand `event` to this process's listeners: its own sandboxes' (`Recorder.emit`), or a
    hosted sandbox's forwarded from its worker (_pool/client.py)."""
    for listener in list(_listeners):
        try:
            listener(event)
        except Exception as exc:  # noqa: BLE001 -- a listener's bug must not break the sandbox
            log.error("an event listener failed on %s's event %d: %r", event.sandbox_id, event.seq, exc)


def _cost(fields: dict[str, Any]) -> int:
    return EVENT_COST + sum(len(v) for v in fields.values() if type(v) is str)


class Journal:
    """One sandbox's JSONL file (module docstring)."""

    def __init__(self, folder: Path, sandbox_id: str, max_bytes: int) -> None:
        name = sandbox_id if _SAFE_ID.match(sandbox_id) else \
            "sbx_" + hashlib.sha256(sandbox_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.folder = folder
        self.path = folder / f"{name}.jsonl"
        self.max_bytes = max_bytes
        self._fd = self._open()
        self.size = os.fstat(self._fd).st_size
        if self.size and os.pread(self._fd, 1, self.size - 1) != b"\n":
            self.write(b"\n")  # a line torn by a crash of the last writer stays a line of its own

    def last_seq(self) -> int:
        """The sequence number of the journal's last whole event (0: none): a sandbox resumed in
        another process goes on numbering from it."""
        if not self.size:
            return 0
        lines = os.pread(self._fd, TAIL, max(0, self.size - TAIL)).split(b"\n")
        for line in reversed(lines[1:] if self.size > TAIL else lines):
            found = _SEQ.search(line[:200])
            if found and line.rstrip().endswith(b"}"):
                return int(found.group(1))
        return 0

    def _open(self) -> int:
        # read too: its last event is read back through this descriptor (`last_seq`), never by name
        return os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)

    def write(self, line: bytes) -> None:
        if self.size and self.size + len(line) > self.max_bytes:
            self._rotate()
        view = memoryview(line)
        while view:  # one write for a line that fits the pipe (all do); a short write goes on
            done = os.write(self._fd, view)
            view = view[done:]
        self.size += len(line)

    def _rotate(self) -> None:
        os.close(self._fd)
        for n in range(KEEP_ROTATED, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if n == KEEP_ROTATED:
                older.unlink(missing_ok=True)
            elif older.exists():
                older.rename(self.path.with_name(f"{self.path.name}.{n + 1}"))
        self.path.rename(self.path.with_name(f"{self.path.name}.1"))
        self._fd = self._open()
        self.size = 0

    def store_image(self, data: bytes, ext: str, digest: str) -> None:
        images = self.folder / "images"
        images.mkdir(mode=0o700, exist_ok=True)
        target = images / f"{digest}.{ext}"
        if target.exists():
            return
        partial = images / f".{digest}.{os.getpid()}.{threading.get_ident()}.part"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(partial, target)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class Recorder:
    """A sandbox's events: numbered, kept in a ring, journaled, handed to listeners."""

    def __init__(self, sandbox_id: str, journal: Union[None, bool, str, Path] = None) -> None:
        """`journal`: a folder (this sandbox's journal goes there), False (none, whatever the
        setting says), or None/True (the setting's folder, if any)."""
        global _otel_checked
        self.sandbox_id = sandbox_id
        self.hide: list[str] = []  # values masked as *** in every text field (set by the sandbox: secrets)
        self.seq = 0
        self._lock = threading.Lock()
        self._ring: deque[tuple[int, SandboxEvent]] = deque()  # (its cost, the event)
        self._ring_bytes = 0
        self._held = PROCESS_RINGS.share(self)  # events' and images' bytes (given back when this goes)
        self.dropped = 0
        self._images: "OrderedDict[str, tuple[str, bytes]]" = OrderedDict()
        self._image_bytes = 0
        folder = journal_dir() if journal is None or journal is True else None if journal is False else Path(journal)
        self.journal: Optional[Journal] = None
        if folder is not None:
            try:
                self.journal = Journal(folder, sandbox_id, journal_max_bytes())
                self.seq = self.journal.last_seq()  # resumed here after a pause elsewhere: numbering goes on
            except OSError as exc:
                log.error("sandbox %s: its journal cannot be written in %s (%s); it has none", sandbox_id, folder,
                          exc.strerror or exc)
        if not _otel_checked:
            _otel_checked = True
            if otel_enabled():
                from .otel import instrument

                instrument()

    def emit(self, model: type[SandboxEvent], masked: bool = False, **fields: Any) -> SandboxEvent:
        """Make the next event (`model`, constructed from the host's own values: not validated)
        and record it. Its text fields are masked (`hide`) unless they were already (`masked`)."""
        if self.hide and not masked:
            fields = {k: self._mask(v) for k, v in fields.items()}
        with self._lock:
            self.seq += 1
            event = construct(model, sandbox_id=self.sandbox_id, seq=self.seq,
                                          timestamp=datetime.now(timezone.utc), **fields)
            cost = _cost(fields)
            self._ring.append((cost, event))
            self._ring_bytes += cost
            self._count(cost)
            while len(self._ring) > 1 and (len(self._ring) > RING_EVENTS or self._ring_bytes > RING_BYTES
                                           or self._crowded()):
                gone, _ = self._ring.popleft()
                self._ring_bytes -= gone
                self._count(-gone)
                self.dropped += 1
            journal = self.journal
            if journal is not None:
                try:
                    journal.write((to_json(event) + "\n").encode("utf-8"))
                except (OSError, ValueError) as exc:
                    log.error("sandbox %s: writing its journal failed (%s); journaling stops", self.sandbox_id, exc)
                    self.journal = None
                    journal.close()
        if _listeners:
            dispatch(event)
        return event

    def _count(self, n: int) -> None:
        self._held.add(n)

    def _crowded(self) -> bool:
        """Past its floor while the process's rings are over their cap (under `_lock`)."""
        return self._held.bytes > RING_FLOOR and PROCESS_RINGS.bytes > PROCESS_BYTES

    def _mask(self, value: Any) -> Any:
        if isinstance(value, str):
            for secret in self.hide:
                if secret in value:
                    value = value.replace(secret, "***")
        elif isinstance(value, list):
            value = [self._mask(v) for v in value]
        return value

    def events(self, since: int = 0) -> list[SandboxEvent]:
        """The ring's events with a sequence number above `since`, oldest first."""
        with self._lock:
            return [e for _, e in self._ring if e.seq > since]

    def image(self, data_b64: Any) -> Optional[ImageRef]:
        """A cell's PNG or JPEG (base64, as a result carries it) stored (ring and journal), as
        a reference; None for anything else (an SVG is never stored as an image)."""
        if not isinstance(data_b64, str):
            return None
        try:
            data = base64.b64decode(data_b64, validate=False)
        except ValueError:
            return None
        kind = next((v for k, v in _SIGNATURES.items() if data.startswith(k)), None)
        if kind is None or len(data) > IMAGE_BYTES:
            return None
        mime, ext = kind
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            if digest not in self._images:
                self._images[digest] = (mime, data)
                self._image_bytes += len(data)
                self._count(len(data))
                while len(self._images) > 1 and (self._image_bytes > IMAGE_BYTES or self._crowded()):
                    _, (_, gone) = self._images.popitem(last=False)
                    self._image_bytes -= len(gone)
                    self._count(-len(gone))
            journal = self.journal
        if journal is not None:
            try:
                journal.store_image(data, ext, digest)
            except OSError as exc:
                log.error("sandbox %s: storing a chart beside its journal failed (%s)", self.sandbox_id, exc)
        return construct(ImageRef, mime=mime, sha256=digest, size=len(data))

    def image_data(self, digest: str) -> Optional[tuple[str, bytes]]:
        """A stored image's (mime, bytes), if the ring still has it."""
        with self._lock:
            return self._images.get(digest)

    def close(self) -> None:
        with self._lock:
            if self.journal is not None:
                self.journal.close()
                self.journal = None


def head_tail(text: str) -> tuple[str, str]:
    """The first `HEAD` characters of `text`, and the last `HEAD` ("" if the head has it all)."""
    if len(text) <= HEAD:
        return text, ""
    return text[:HEAD], text[-HEAD:]
