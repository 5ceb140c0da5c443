"""Templates: what a new sandbox starts with.

Built in:
- `code-interpreter` (the default): the runtime's packages plus the packages bundle
  (plotly, IPython, requests...; see _packages/bundle.py).
- `base`: the standard library only, the fastest start: the runtime's third-party packages are
  hidden from imports (the same warm image, so no slower to start than the default).

Custom templates are built locally with E2B's builder vocabulary and kept in
`<cache>/templates/<name>/` (so a shipped cache carries them)::

    template = (Template().from_template("code-interpreter")
                .pip_install(["pyjokes"]).copy("data.csv", "/home/user/data.csv")
                .set_envs({"MODE": "demo"}).run_cmd("python3 prepare.py"))
    Template.build(template, alias="my-template")
    Sandbox.create(template="my-template")

A build resolves and installs the extra pure-Python packages once (byte-compiled for the guest),
then runs the commands in a throw-away sandbox; what that sandbox's writable folders hold
afterwards (/home/user, /tmp, /workspace) is what every sandbox of the template starts with.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Union

from ._local.sandbox import LocalSandboxes
from ._packages.bundle import base_distributions, bundle_distributions
from ._packages.catalog import (BUILDABLE_BASES, BUILTIN_TEMPLATES, NAME_RE, TEMPLATE_ALIASES, GuestTemplate,
                                builtin, list_templates, templates_dir)
from ._packages.pip import PackageError, fetch, install, resolve
from ._wasm.layout import GUEST_TEMPLATE_SITE, WRITABLE
from ._wasm.site import compile_in_guest
from ._wasm.warm_image import get_interpreter
from .exceptions import InvalidArgumentException, TemplateException
from .limits import Limits
from .models import TemplateInfo
from .sandbox import Sandbox

CAPTURED = tuple(folder.lstrip("/") for folder in WRITABLE)  # a build's result is taken from these
BUILD_COMMAND_TIMEOUT_S = 600.0

__all__ = ["Template", "TemplateInfo", "list_templates", "delete_template"]


class Template:
    """A custom template's recipe (E2B's builder names); `Template.build(t, alias=...)` makes it."""

    def __init__(self) -> None:
        self._base = "code-interpreter"
        self._packages: list[str] = []
        self._copies: list[tuple[Path, str]] = []
        self._writes: list[tuple[str, bytes]] = []
        self._envs: dict[str, str] = {}
        self._commands: list[str] = []

    def from_template(self, name: str) -> "Template":
        """Start from a built-in template: "code-interpreter" (default) or "base"."""
        name = TEMPLATE_ALIASES.get(name, name)
        if name not in BUILDABLE_BASES:
            raise InvalidArgumentException(f"a template builds on {' or '.join(BUILDABLE_BASES)}, "
                                           f"not {name!r}" + (" (for the official LLM clients, "
                                           "pip_install(['openai', 'anthropic']) on code-interpreter)"
                                           if name == "ai-agent" else ""))
        self._base = name
        return self

    def from_base_image(self) -> "Template":
        return self.from_template("base")

    def pip_install(self, packages: Union[str, list[str]]) -> "Template":
        """Pure-Python packages (and their dependencies) to install, resolved at build time."""
        self._packages += [packages] if isinstance(packages, str) else list(packages)
        return self

    def copy(self, src: Union[str, Path], dest: str) -> "Template":
        """A host file or folder to place at `dest` (under /home/user or /tmp) in the guest."""
        path = Path(src)
        if not path.exists():
            raise InvalidArgumentException(f"copy: {src} does not exist")
        self._copies.append((path, dest))
        return self

    def write_file(self, dest: str, content: Union[str, bytes]) -> "Template":
        self._writes.append((dest, content.encode() if isinstance(content, str) else bytes(content)))
        return self

    def set_envs(self, envs: dict[str, str]) -> "Template":
        self._envs.update(envs)
        return self

    def run_cmd(self, command: Union[str, list[str]]) -> "Template":
        """A shell command run once, at build time; its files become part of the template."""
        self._commands += [command] if isinstance(command, str) else list(command)
        return self

    def set_start_cmd(self, command: str, ready_cmd: Optional[str] = None) -> "Template":
        """Run once when the template is built (there is no process to keep running between
        commands here: each command is its own guest), like `run_cmd`."""
        return self.run_cmd(command)

    @staticmethod
    def build(template: "Template", alias: str, **_ignored: Any) -> TemplateInfo:
        """Build `template` under the name `alias` (replacing an older build of that name)."""
        return _build(template, alias)


class TemplateBase(Template):
    """declaw's builder name. As declaw does, `run_cmd(["pip3", "install", "x"])` is ONE command
    line, its words joined by spaces (E2B's `Template.run_cmd` takes a list as several
    commands); `from_base_image(image)` starts from `base` (there are no container images)."""

    def run_cmd(self, command: Union[str, list[str]]) -> "Template":
        return super().run_cmd(command if isinstance(command, str) else " ".join(command))

    def from_base_image(self, image: str = "ubuntu:22.04") -> "Template":
        return self.from_template("base")


def delete_template(name: str) -> bool:
    """Remove a custom template; False if there was none of that name."""
    if name in BUILTIN_TEMPLATES or not NAME_RE.fullmatch(name or ""):
        raise InvalidArgumentException(f"{name!r} is not a custom template")
    folder = templates_dir() / name
    if not folder.exists():
        return False
    shutil.rmtree(folder)
    return True


def _build(template: Template, alias: str) -> TemplateInfo:
    if not isinstance(alias, str) or not NAME_RE.fullmatch(alias) or alias in BUILTIN_TEMPLATES \
            or alias in TEMPLATE_ALIASES:
        raise InvalidArgumentException(f"template name {alias!r}: use 1-63 of a-z 0-9 - _, "
                                       "starting with a letter or digit, not a built-in name")
    interpreter = get_interpreter()
    base = builtin(template._base)
    present = base_distributions(interpreter.files.lib_dir / "python315.zip")
    if base.bundle:
        present.update(bundle_distributions())
    templates_dir().mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".build-{alias}-", dir=templates_dir()))
    try:
        site = staging / "site"
        site.mkdir()
        installed: list[str] = []
        if template._packages:
            try:
                pins = resolve(template._packages, present)
                with tempfile.TemporaryDirectory(prefix="declaw-pip-") as wheels:
                    install(fetch(pins, Path(wheels)), site, staging / "bin")
            except PackageError as exc:
                raise TemplateException(f"template {alias!r}: {exc}") from None
            installed = [f"{pin.name}=={pin.version}" for pin in pins]
            compile_in_guest(interpreter, site, GUEST_TEMPLATE_SITE)
        partial = GuestTemplate(alias, base.stdlib_only, base.bundle, site, None, dict(template._envs))
        _run_build_sandbox(template, partial, staging / "root")
        info = TemplateInfo(name=alias, base=template._base, packages=installed,
                            envs=dict(template._envs), commands=list(template._commands),
                            built_at=datetime.now(timezone.utc), size_bytes=_size(staging))
        (staging / "template.json").write_text(info.model_dump_json(indent=2))
        final = templates_dir() / alias
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
        return info
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _run_build_sandbox(template: Template, partial: GuestTemplate, root: Path) -> None:
    """Place the files and run the commands in a throw-away sandbox; keep its writable folders."""
    backend = LocalSandboxes().create_from(partial, BUILD_COMMAND_TIMEOUT_S * (1 + len(template._commands)),
                                           {}, {}, Limits())
    sbx = Sandbox(backend)
    try:
        for src, dest in template._copies:
            if src.is_dir():
                for path in sorted(src.rglob("*")):
                    if path.is_file() and not path.is_symlink():
                        sbx.files.write(f"{dest.rstrip('/')}/{path.relative_to(src).as_posix()}",
                                        path.read_bytes())
            else:
                sbx.files.write(dest, src.read_bytes())
        for dest, content in template._writes:
            sbx.files.write(dest, content)
        for command in template._commands:
            result = sbx.commands.run(command, timeout=BUILD_COMMAND_TIMEOUT_S)
            if result.exit_code != 0:
                raise TemplateException(f"template build command {command!r} exited with "
                                        f"{result.exit_code}: {(result.stderr or result.error or '')[-2000:]}")
        for folder in CAPTURED:
            source = backend.fs.root / folder
            shutil.copytree(source, root / folder, symlinks=True)
    finally:
        sbx.kill()


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def info_json(infos: list[TemplateInfo]) -> str:
    return json.dumps([json.loads(i.model_dump_json()) for i in infos], indent=2)
