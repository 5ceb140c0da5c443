"""What `run_code` returns: E2B code-interpreter's Execution, Result, Logs and the rest.

Execution, Result, Logs, ExecutionError, Context and OutputMessage, with their names, fields
and helpers."""

from __future__ import annotations

import json
import warnings
from datetime import datetime, timezone
from typing import Any, Optional

from pydantic import ConfigDict, Field, SerializeAsAny

from ._model import Model

from .charts import Chart, deserialize_chart

# Jupyter MIME type -> Result field (E2B's mapping); anything else lands in `extra`.
MIME_FIELDS = {
    "text/plain": "text", "text/html": "html", "text/markdown": "markdown",
    "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf",
    "text/latex": "latex", "application/json": "json", "application/javascript": "javascript",
    "e2b/data": "data", "e2b/chart": "chart",
}
FORMAT_FIELDS = ["text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json",
                 "javascript", "data", "chart"]


warnings.filterwarnings("ignore", message='Field name "json" in "Result" shadows', category=UserWarning)


class Result(Model):
    """One rich output of a cell: the main result (a final expression's value) or a display.
    (E2B names a field `json`, which shadows pydantic's deprecated `BaseModel.json()`.)"""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    text: Optional[str] = None
    html: Optional[str] = None
    markdown: Optional[str] = None
    svg: Optional[str] = None
    png: Optional[str] = None  # base64
    jpeg: Optional[str] = None  # base64
    pdf: Optional[str] = None  # base64
    latex: Optional[str] = None
    json: Optional[Any] = None  # type: ignore[assignment]  # E2B's field name
    javascript: Optional[str] = None
    data: Optional[dict[str, Any]] = None
    chart: Optional[SerializeAsAny[Chart]] = None  # dumps a LineChart's own fields too
    is_main_result: bool = False
    extra: Optional[dict[str, Any]] = None

    @classmethod
    def from_bundle(cls, bundle: dict[str, Any], is_main_result: bool) -> "Result":
        fields: dict[str, Any] = {"is_main_result": is_main_result}
        extra: dict[str, Any] = {}
        for mime, value in bundle.items():
            name = MIME_FIELDS.get(mime)
            if name is None:
                extra[mime] = value
            elif name == "text":
                fields["text"] = _unquote(value) if isinstance(value, str) else str(value)
            elif name == "chart":
                fields["chart"] = deserialize_chart(value) if value else None
            else:
                fields[name] = value
        if extra:
            fields["extra"] = extra
        return cls(**fields)

    def formats(self) -> list[str]:
        """The formats present (E2B's order), then the `extra` keys."""
        present = [name for name in FORMAT_FIELDS if getattr(self, name) is not None]
        return present + list(self.extra or {})

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __str__(self) -> str:
        return self.text or ""


def _unquote(text: str) -> str:
    """E2B strips one pair of surrounding quotes from text/plain ('abc' -> abc)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


class Logs(Model):
    stdout: list[str] = Field(default_factory=list)
    stderr: list[str] = Field(default_factory=list)


class ExecutionError(Model):
    """An exception the cell raised (code errors are reported here, not raised)."""

    name: str
    value: str
    traceback: str

    def to_json(self) -> str:
        return self.model_dump_json()


class Execution(Model):
    results: list[Result] = Field(default_factory=list)
    logs: Logs = Field(default_factory=Logs)
    error: Optional[ExecutionError] = None
    execution_count: Optional[int] = None
    # with Limits(cpu_instructions=...): the instructions the cell ran (Wasmtime fuel)
    cpu_instructions_used: Optional[int] = Field(None, exclude_if=lambda v: v is None)  # absent without a limit

    @property
    def text(self) -> Optional[str]:
        """The main result's text, if the cell ended with an expression."""
        for result in self.results:
            if result.is_main_result:
                return result.text
        return None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"))


class Context(Model):
    """An independent namespace for `run_code` (one long-lived guest)."""

    id: str
    language: str = "python"
    cwd: str = "/home/user"


class OutputMessage(Model):
    """One chunk of a cell's stdout or stderr, as given to `on_stdout`/`on_stderr`."""

    line: str
    timestamp: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    error: bool = False

    def __str__(self) -> str:
        return self.line
