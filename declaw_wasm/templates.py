"""Templates: what a new sandbox starts with.

Built in:
- `code-interpreter` (the default): the runtime's packages plus the packages bundle
  (plotly, IPython, requests...; see bundle.py).
- `base`: the standard library only, the fastest start: the runtime's third-party packages are
  hidden from imports (the same warm snapshot, so no slower to start than the default).

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
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from pydantic import BaseModel

from .exceptions import InvalidArgumentException, TemplateException
from .guest import Mount
from .settings import cache_dir

if TYPE_CHECKING:
    from .runtime import Runtime

BUILTIN_TEMPLATES = ("code-interpreter", "base")
TEMPLATE_ALIASES = {"code-interpreter-v1": "code-interpreter"}
GUEST_TEMPLATE_SITE = "/usr/local/lib/declaw-template"
USER_SITE = "/home/user/.local/lib/python3.15/site-packages"
CAPTURED = ("home/user", "tmp", "workspace")  # the folders a build's result is taken from
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
BUILD_COMMAND_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class GuestTemplate:
    """What a sandbox takes from its template: mounts, guest profile, files, envs."""

    name: str
    stdlib_only: bool = False
    bundle: bool = False
    site: Optional[Path] = None  # a custom template's installed packages
    root: Optional[Path] = None  # files laid over the sandbox's root folder
    envs: dict[str, str] = field(default_factory=dict)

    def mounts(self, runtime: "Runtime") -> list[Mount]:
        from .bundle import GUEST_BUNDLE, bundle_dir

        mounts = []
        if self.bundle:
            from .progress import Progress

            mounts.append(Mount(GUEST_BUNDLE, bundle_dir(runtime, Progress()), writable=False))
        if self.site is not None:
            mounts.append(Mount(GUEST_TEMPLATE_SITE, self.site, writable=False))
        return mounts

    def profile(self, runtime: "Runtime") -> dict[str, Any]:
        """What the guest's start-up applies (runtime/_declaw_boot.py `_apply_profile`): extra
        import folders, in order, and the runtime's top-level names to hide (`base`)."""
        from .bundle import GUEST_BUNDLE
        from .packages import runtime_top_levels

        paths = [USER_SITE]
        if self.site is not None:
            paths.append(GUEST_TEMPLATE_SITE)
        if self.bundle:
            paths.append(GUEST_BUNDLE)
        hidden = runtime_top_levels(runtime.files.lib_dir / "python315.zip") if self.stdlib_only else ()
        return {"paths": paths, "hidden": list(hidden)}


def builtin(name: str) -> GuestTemplate:
    if name == "base":
        return GuestTemplate("base", stdlib_only=True)
    return GuestTemplate("code-interpreter", bundle=True)


def templates_dir() -> Path:
    return cache_dir() / "templates"


def lookup(name: Optional[str]) -> GuestTemplate:
    """The template called `name` (None: code-interpreter)."""
    name = TEMPLATE_ALIASES.get(name or "code-interpreter", name or "code-interpreter")
    if not isinstance(name, str):
        raise InvalidArgumentException(f"template must be a string, got {name!r}")
    if name in BUILTIN_TEMPLATES:
        return builtin(name)
    folder = templates_dir() / name
    if not NAME_RE.fullmatch(name) or not (folder / "template.json").is_file():
        known = [*BUILTIN_TEMPLATES, *(t.name for t in list_templates())]
        raise InvalidArgumentException(f"unknown template {name!r}; available: {', '.join(known)}")
    info = TemplateInfo.model_validate_json((folder / "template.json").read_text())
    base = builtin(info.base)
    return GuestTemplate(name, stdlib_only=base.stdlib_only, bundle=base.bundle,
                         site=folder / "site", root=folder / "root", envs=dict(info.envs))


# -- custom templates ------------------------------------------------------------------------------

class TemplateInfo(BaseModel):
    """A built template, as `list_templates()` and `Template.build()` report it."""

    name: str
    base: str
    packages: list[str]  # what was installed, NAME==VERSION
    envs: dict[str, str]
    commands: list[str]
    built_at: datetime
    size_bytes: int


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
        if name not in BUILTIN_TEMPLATES:
            raise InvalidArgumentException(f"a template builds on {' or '.join(BUILTIN_TEMPLATES)}, "
                                           f"not {name!r}")
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


def list_templates() -> list[TemplateInfo]:
    found = []
    folder = templates_dir()
    for path in sorted(folder.glob("*/template.json")) if folder.is_dir() else ():
        try:
            found.append(TemplateInfo.model_validate_json(path.read_text()))
        except ValueError:
            continue
    return found


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
    from .bundle import bundle_distributions, base_distributions
    from .guest_site import compile_in_guest
    from .packages import PackageError, fetch, install, resolve
    from .runtime import get_runtime

    if not isinstance(alias, str) or not NAME_RE.fullmatch(alias) or alias in BUILTIN_TEMPLATES \
            or alias in TEMPLATE_ALIASES:
        raise InvalidArgumentException(f"template name {alias!r}: use 1-63 of a-z 0-9 - _, "
                                       "starting with a letter or digit, not a built-in name")
    runtime = get_runtime()
    base = builtin(template._base)
    present = base_distributions(runtime.files.lib_dir / "python315.zip")
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
                install(fetch(pins), site, staging / "bin")
            except PackageError as exc:
                raise TemplateException(f"template {alias!r}: {exc}") from None
            installed = [f"{pin.name}=={pin.version}" for pin in pins]
            compile_in_guest(runtime, site, GUEST_TEMPLATE_SITE)
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
    from .sandbox import Sandbox

    sbx = Sandbox._with_template(partial, timeout=BUILD_COMMAND_TIMEOUT_S * (1 + len(template._commands)))
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
            source = sbx._core.fs.root / folder
            shutil.copytree(source, root / folder, symlinks=True)
    finally:
        sbx.kill()


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def info_json(infos: list[TemplateInfo]) -> str:
    return json.dumps([json.loads(i.model_dump_json()) for i in infos], indent=2)
