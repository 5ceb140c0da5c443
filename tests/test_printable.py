"""Text someone else chose, made safe for a log line, an error message or a terminal
(declaw_wasm/_printable.py; docs/security.md, "Guest output into logs, the audit log, server logs
and the terminal"). Pure host code; the guest-driven cases are tests/security/test_log_lines.py."""

from __future__ import annotations

import ast
import io
import logging
from pathlib import Path

from declaw_wasm._hostfs.exports import shown_path
from declaw_wasm._printable import OneLine, logger, printable, terminal_text

PACKAGE = Path(__file__).resolve().parent.parent / "declaw_wasm"
HOSTILE = "a\nb\rc\td\x1b[31me\x07f\x9bg\u2028h\u202ei\u2066j\udcffk\x00l\x7fm"


def test_printable_escapes_every_control_character_and_keeps_the_rest() -> None:
    assert printable(HOSTILE) == ("a\\nb\\rc\\td\\x1b[31me\\x07f\\x9bg\\u2028h\\u202ei\\u2066j\\udcffk\\x00l"
                                  "\\x7fm")
    assert printable("plain text, é, 字, emoji 🙂") == "plain text, é, 字, emoji 🙂"
    assert terminal_text(HOSTILE) == ("a\nb\rc\td\\x1b[31me\\x07f\\x9bg\\u2028h\\u202ei\\u2066j\\udcffk\\x00l"
                                      "\\x7fm")


def test_a_guest_path_in_a_message_is_escaped_and_cut() -> None:
    assert shown_path("/tmp/a\nb") == "/tmp/a\\nb"
    long = "/" + "\x1b" * 5000
    shown = shown_path(long)
    assert "\x1b" not in shown and shown.endswith("(a path of 5001 bytes)") and len(shown) < 1000


def _formatted(record_logger: logging.Logger, emit: "object") -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    record_logger.addHandler(handler)
    record_logger.propagate = False
    try:
        emit()  # type: ignore[operator]
    finally:
        record_logger.removeHandler(handler)
        record_logger.propagate = True
    return stream.getvalue()


def test_a_log_line_of_ours_is_one_line_whatever_it_names() -> None:
    log = logger("declaw_wasm.test_printable")
    assert sum(isinstance(f, OneLine) for f in logger("declaw_wasm.test_printable").filters) == 1
    text = _formatted(log, lambda: log.warning("volume %s: /%s not written back", "v", HOSTILE))
    assert text.count("\n") == 1 and "\x1b" not in text and "\\x1b[31m" in text, text

    def failing() -> None:
        try:
            try:
                raise ValueError("inner\n2026-01-01 CRITICAL forged")
            except ValueError as exc:
                raise OSError(f"outer {HOSTILE}") from exc
        except OSError:
            log.exception("failed on %s", "x\ny")

    text = _formatted(log, failing)
    assert "\x1b" not in text and "\ufffd" not in text
    assert "\n2026-01-01 CRITICAL forged" not in text and "inner\\n2026-01-01 CRITICAL forged" in text
    assert text.startswith("ERROR failed on x\\ny\nTraceback (most recent call last):\n"), text
    assert "The above exception was the direct cause of the following exception:" in text


def test_uvicorns_coloured_copy_of_a_message_is_dropped() -> None:
    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, "got %s", ("a\nb",), None)
    record.__dict__["color_message"] = "got %s"
    assert OneLine().filter(record)
    assert record.getMessage() == "got a\\nb" and "color_message" not in record.__dict__


def test_every_logger_of_ours_escapes_its_lines() -> None:
    """No module makes a logger but through `_printable.logger` (which puts `OneLine` on it), nor
    logs on the root logger."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_printable.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "getLogger":
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: logging.getLogger")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "logging" and \
                    node.func.attr in {"debug", "info", "warning", "error", "exception", "critical", "log"}:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: the root logger")
    assert not found, f"use _printable.logger: {found}"
