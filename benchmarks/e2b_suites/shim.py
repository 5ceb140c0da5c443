"""`import e2b` / `import e2b_code_interpreter` as declaw_wasm: a module alias, nothing more.

E2B's tests import its SDK by many paths (`e2b`, `e2b.exceptions`,
`e2b.sandbox.filesystem.filesystem`, `e2b_code_interpreter.charts`, ...). Each of those names
resolves here to declaw_wasm: the few paths that have a real counterpart alias that module
(`e2b.sandbox_sync.main` is `declaw_wasm.sandbox`), every other path is a view whose attributes
are declaw_wasm's public names (none under E2B's REST client, `e2b.api`). The shim adds no
behaviour: a name declaw_wasm lacks (E2B's REST-client models, `ConnectionConfig`, ...) is an
`Absent` placeholder that raises `NotInDeclawWasm` when a test touches it, so a test file that
imports one E2B internal still collects and only the tests that use it fail, each saying which
name it was.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any, Optional, Sequence

# E2B module path -> the declaw_wasm module that is its counterpart (looked up first).
ALIASES = {
    "e2b.sandbox_sync.main": "declaw_wasm.sandbox",
    "e2b.sandbox_async.main": "declaw_wasm.async_sandbox",
    "e2b.exceptions": "declaw_wasm.exceptions",
    "e2b.sandbox.commands.command_handle": "declaw_wasm.commands",
    "e2b.sandbox.filesystem.filesystem": "declaw_wasm.models",
    "e2b.sandbox_sync.filesystem.filesystem": "declaw_wasm.files",
    "e2b.sandbox_async.filesystem.filesystem": "declaw_wasm.models",
    "e2b_code_interpreter.code_interpreter_sync": "declaw_wasm.sandbox",
    "e2b_code_interpreter.code_interpreter_async": "declaw_wasm.async_sandbox",
    "e2b_code_interpreter.charts": "declaw_wasm.charts",
    "e2b_code_interpreter.models": "declaw_wasm.execution",
}
ROOTS = ("e2b", "e2b_code_interpreter")
# E2B's generated REST client and its transport: models of E2B's HTTP API, with no counterpart
# (its `Sandbox` model is not a sandbox), so nothing under them falls back to declaw_wasm's names.
NO_FALLBACK = ("e2b.api", "e2b.envd", "e2b.connection_config")


class NotInDeclawWasm(Exception):
    """A test used a name of E2B's SDK that declaw_wasm does not have."""


class Absent:
    """Stands for an E2B name declaw_wasm lacks; any use raises `NotInDeclawWasm`."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise NotInDeclawWasm(f"{self._name} is not in declaw_wasm (an E2B SDK internal)")

    __call__ = __setattr__ = __getitem__ = __iter__ = __enter__ = _refuse

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        self._refuse()

    def __repr__(self) -> str:
        return f"<absent {self._name}>"


class View(types.ModuleType):
    """An E2B module path: its counterpart's names, then declaw_wasm's, else `Absent`."""

    def __init__(self, name: str, sources: Sequence[types.ModuleType]) -> None:
        super().__init__(name)
        self.__path__: list[str] = []  # a package, so deeper E2B paths import through it
        self._sources = sources

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        for source in self._sources:
            try:
                return getattr(source, name)
            except AttributeError:
                continue
        return Absent(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[types.ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname.split(".")[0] not in ROOTS:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        top = importlib.import_module("declaw_wasm")
        alias = ALIASES.get(spec.name)
        sources = [importlib.import_module(alias)] if alias else []
        internal = any(spec.name == p or spec.name.startswith(p + ".") for p in NO_FALLBACK)
        return View(spec.name, sources if internal else [*sources, top])

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the view reads declaw_wasm's names on access."""


def install() -> None:
    """Make `e2b` and `e2b_code_interpreter` import as declaw_wasm (idempotent). Refuses to
    run where the real SDKs are installed: the suites must not test E2B against itself."""
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    for root in ROOTS:
        if importlib.util.find_spec(root) is not None:
            raise RuntimeError(f"the real {root} is installed in this venv; use a venv without it")
    sys.meta_path.insert(0, _Finder())
