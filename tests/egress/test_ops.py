"""The door ops are declared once (declaw_wasm/_egress/ops.py); the guest's side must name the
same ops with the same request fields, and the session must answer each."""

from __future__ import annotations

import ast
from pathlib import Path

from declaw_wasm._egress.ops import OPS
from declaw_wasm._egress.session import EgressSession

GUEST_DOOR = Path(__file__).resolve().parents[2] / "guest" / "declaw_net" / "_door.py"


def _guest_ops() -> dict[str, tuple[str, ...]]:
    tree = ast.parse(GUEST_DOOR.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "OPS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("no OPS table in the guest's _door.py")


def test_guest_and_host_declare_the_same_ops() -> None:
    guest = _guest_ops()
    assert set(guest) == set(OPS)
    for name, op in OPS.items():
        assert guest[name] == op.request, name


def test_the_guest_sends_only_declared_fields() -> None:
    """Every `_door.call("net.x", a=..., b=...)` in the guest's code uses declared fields."""
    folder = GUEST_DOOR.parent
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "call" and node.args \
                    and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("net."):
                op = OPS[str(node.args[0].value)]
                sent = {k.arg for k in node.keywords}
                assert sent <= set(op.request), (path.name, op.name, sent - set(op.request))


def test_the_session_answers_every_op() -> None:
    from declaw_wasm._egress.policy import Policy
    from declaw_wasm.limits import Limits

    session = EgressSession(Policy(), Limits())
    assert set(session._ops) == set(OPS)
    reply = session.handle(None, {"op": "net.nonsense"})  # type: ignore[arg-type]
    assert reply["error"]["kind"] == "invalid"
    for name in OPS:  # malformed requests get error replies, never exceptions
        assert "error" in session.handle(None, {"op": name, "id": "x", "host": 5})  # type: ignore[arg-type]


def test_the_guest_wire_codec_agrees_with_msgpack() -> None:
    import importlib.util

    import msgpack

    spec = importlib.util.spec_from_file_location("_wire", GUEST_DOOR.parent / "_wire.py")
    assert spec is not None and spec.loader is not None
    wire = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wire)
    samples = [None, True, False, 0, 1, 127, 128, 255, 65535, 2**32 - 1, 2**32, 2**63, -1, -32, -33,
               -129, -2**31, -2**63, 1.5, "", "a" * 31, "é" * 40, "x" * 70000, b"", b"\x00" * 300,
               b"y" * 70000, [], [1, [2, [3]]], list(range(20)), {}, {"a": {"b": [None, b"c"]}},
               {str(i): i for i in range(20)}]
    for value in samples:
        packed = wire.pack(value)
        assert msgpack.unpackb(packed, raw=False) == value
        assert wire.unpack(msgpack.packb(value, use_bin_type=True)) == value
        assert wire.unpack(packed) == value
