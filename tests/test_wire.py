"""The wire is written once (declaw_wasm/wire/): the OpenAPI document carries every streamed
message, and the TypeScript SDK's types (sdk-ts/src/wire.ts, which `tsc` checks the SDK against)
are generated from it and must be current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from declaw_wasm import wire

SDK = Path(__file__).resolve().parent.parent / "sdk-ts"


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_wire", SDK / "scripts" / "gen_wire.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_openapi_document_carries_every_streamed_message() -> None:
    schemas = _generator().document()["components"]["schemas"]
    for model in wire.STREAMED:
        assert model.__name__ in schemas
    for union in ("CommandLine", "CellLine", "PtyControl", "PtyEnd"):
        assert union in schemas


def test_the_typescript_types_are_generated_from_the_current_wire() -> None:
    current = (SDK / "src" / "wire.ts").read_text()
    assert current == _generator().generate(), \
        "sdk-ts/src/wire.ts is stale: python3 sdk-ts/scripts/gen_wire.py > sdk-ts/src/wire.ts"


def test_messages_round_trip_through_their_unions() -> None:
    for message in (wire.StartLine(pid=4), wire.OutputLine(type="stderr", data="x"),
                    wire.EndLine(exit_code=3, error="e"), wire.ExceptionLine(error="TimeoutException",
                                                                             message="m", stdout="o")):
        assert wire.COMMAND_LINES.validate_json(wire.line(message)) == message
