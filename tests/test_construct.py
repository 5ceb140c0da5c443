"""Models the host makes from its own values are built by `_model.construct`, one way.

pydantic's `model_construct` inspects every missing field's `default_factory` on every call
(`inspect.signature`, which for a builtin like `list` parses a text signature with `ast`): ~45 µs
a field on each event an egress request records, and `ast` from several threads at once can fail
on CPython 3.11. `construct` makes those defaults itself and keeps `model_fields_set` as given.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from declaw_wasm._model import construct
from declaw_wasm.events import CellRun, EgressEvent, LifecycleEvent

PACKAGE = Path(__file__).resolve().parent.parent / "declaw_wasm"


@pytest.mark.parametrize("model", [EgressEvent, LifecycleEvent, CellRun])
def test_a_constructed_model_is_what_model_construct_makes(model: type[BaseModel]) -> None:
    values: dict[str, Any] = {"sandbox_id": "sbx", "seq": 3}
    if model is CellRun:
        values.update(context_id="c", code="1", execution_count=1)  # not a field: ignored
    ours, theirs = construct(model, **dict(values)), model.model_construct(**dict(values))
    assert ours.model_dump() == theirs.model_dump()
    assert ours.model_fields_set == theirs.model_fields_set == set(values) - {"execution_count"}
    again = construct(model, **dict(values))
    for name, field in model.model_fields.items():
        if field.default_factory is not None:  # a fresh default each time, never shared
            assert getattr(again, name) is not getattr(ours, name)


def test_constructing_does_not_inspect_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    construct(EgressEvent, sandbox_id="sbx", seq=1)  # the model's factories, looked at once
    calls: list[object] = []
    real = inspect.signature

    def counted(obj: object, *args: object, **kwargs: object) -> inspect.Signature:
        calls.append(obj)
        return real(obj, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(inspect, "signature", counted)
    for seq in range(5):
        event = construct(EgressEvent, sandbox_id="sbx", seq=seq, url="http://x/", secrets_injected=["K"])
        assert event.secrets_injected == ["K"]
        construct(EgressEvent, sandbox_id="sbx", seq=seq)
    assert calls == []


def test_no_module_calls_model_construct_but_the_one_home() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_model.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "model_construct":
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == [], "use declaw_wasm._model.construct: " + ", ".join(found)
