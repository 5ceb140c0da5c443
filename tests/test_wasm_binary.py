"""The section reader/writer the snapshot builder relies on, on the real runtime module."""

from declaw_wasm._wasm import binary as wb
from declaw_wasm._wasm.artifacts import runtime_dir


def test_leb128_round_trips() -> None:
    for n in (0, 1, 127, 128, 16384, 2**31 - 1, 2**32 - 1):
        assert wb.read_u(wb.u(n), 0) == (n, len(wb.u(n)))
    for n in (0, -1, 63, -64, 64, -65, 2**31 - 1, -(2**31)):
        assert wb.read_s(wb.s(n), 0) == (n, len(wb.s(n)))


def test_the_runtime_module_round_trips_and_edits_stay_local(guest_path: str) -> None:
    data = (runtime_dir() / "python-snapshot.wasm").read_bytes()
    module = wb.Module.parse(data)
    assert module.encode() == data
    assert "__wasilibc_reset_preopens" in module.function_names()
    module.set_memory_min(700)
    module.set_global_i32(0, 123456)
    module.set_data([(1024, b"\x01\x02"), (1 << 20, b"abc")])
    module.set_exports(module.exports() + [("extra", wb.EXPORT_GLOBAL, 0)])
    again = wb.Module.parse(module.encode())
    assert again.memory_limits() == (700, None)
    assert again.globals()[0][2] == bytes([wb.I32_CONST]) + wb.s(123456) + bytes([wb.END])
    assert ("extra", wb.EXPORT_GLOBAL, 0) in again.exports()
    code = module.section(wb.CODE)
    assert code is not None and again.section(wb.CODE).payload == code.payload  # type: ignore[union-attr]


def test_nonzero_segments_cover_every_nonzero_byte() -> None:
    memory = bytearray(10_000)
    memory[10:20] = b"x" * 10
    memory[50:52] = b"yy"  # a short gap: merged with the run before it
    memory[5000] = 7
    segments = wb.nonzero_segments(bytes(memory), max_gap=64)
    assert [(off, len(data)) for off, data in segments] == [(10, 42), (5000, 1)]
    rebuilt = bytearray(len(memory))
    for off, data in segments:
        rebuilt[off:off + len(data)] = data
    assert rebuilt == memory
