"""The template catalog: what a sandbox takes from its template (mounts, the guest's start-up
profile, files laid over its root, environment). The builder that makes custom templates is
`declaw_wasm/templates.py`, above the sandbox faces; this is what sandboxes read.

Built in: `code-interpreter` (the default: the runtime plus the packages bundle), `base`
(the standard library only: the runtime's third-party packages hidden from imports, on the same
warm image) and `ai-agent` (the code interpreter plus the official openai and anthropic
clients: packages-bundle/ai-agent-lock.txt, mounted as a template site), `web-dev` (the code
interpreter plus pure-Python web frameworks: Flask, Werkzeug, Bottle, Dash, websockets:
packages-bundle/web-dev-lock.txt, the same way; built at its first use). Custom templates
live in `<cache>/templates/<name>/` (a shipped cache carries them): `template.json`
(`TemplateInfo`), `site/` (their packages), `root/` (their files).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .._wasm.engine import Interpreter
from .._wasm.layout import GUEST_BUNDLE, GUEST_TEMPLATE_SITE, USER_SITE, Mount
from ..exceptions import InvalidArgumentException
from ..models import TemplateInfo
from ..settings import cache_dir
from .bundle import ensure_agent_site, ensure_bundle, ensure_web_site

BUILTIN_TEMPLATES = ("code-interpreter", "base", "ai-agent", "web-dev")
BUILDABLE_BASES = ("code-interpreter", "base")  # what a custom template builds on (one template site)
# E2B's name of its code interpreter; declaw's `python`
TEMPLATE_ALIASES = {"code-interpreter-v1": "code-interpreter", "python": "code-interpreter"}
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


@dataclass(frozen=True)
class GuestTemplate:
    """What a sandbox takes from its template: mounts, guest profile, files, envs."""

    name: str
    stdlib_only: bool = False
    bundle: bool = False
    site: Optional[Path] = None  # a custom template's installed packages
    root: Optional[Path] = None  # files laid over the sandbox's root folder
    envs: dict[str, str] = field(default_factory=dict)
    agent_site: bool = False  # ai-agent: its locked packages (built like the bundle) as the site
    web_site: bool = False  # web-dev: its locked packages (Flask, Bottle, Dash...) as the site

    def ensure_mounts(self, interpreter: Interpreter) -> list[Mount]:
        """The template's read-only mounts (the packages bundle built first if it is missing)."""
        mounts = []
        if self.bundle:
            mounts.append(Mount(GUEST_BUNDLE, ensure_bundle(interpreter), writable=False))
        if self.site is not None:
            mounts.append(Mount(GUEST_TEMPLATE_SITE, self.site, writable=False))
        elif self.agent_site:
            mounts.append(Mount(GUEST_TEMPLATE_SITE, ensure_agent_site(interpreter), writable=False))
        elif self.web_site:
            mounts.append(Mount(GUEST_TEMPLATE_SITE, ensure_web_site(interpreter), writable=False))
        return mounts

    def profile(self, interpreter: Interpreter) -> dict[str, Any]:
        """What the guest's start-up applies (guest/_declaw_boot.py `_apply_profile`): extra
        import folders, in order, and the runtime's top-level names to hide (`base`)."""
        paths = [USER_SITE]
        if self.site is not None or self.agent_site or self.web_site:
            paths.append(GUEST_TEMPLATE_SITE)
        if self.bundle:
            paths.append(GUEST_BUNDLE)
        hidden: Any = ()
        if self.stdlib_only:
            from .pip import runtime_top_levels  # packaging & co.: only for `base`

            hidden = runtime_top_levels(interpreter.files.lib_dir / "python315.zip")
        return {"paths": paths, "hidden": list(hidden)}


def builtin(name: str) -> GuestTemplate:
    if name == "base":
        return GuestTemplate("base", stdlib_only=True)
    if name == "ai-agent":
        return GuestTemplate("ai-agent", bundle=True, agent_site=True)
    if name == "web-dev":
        return GuestTemplate("web-dev", bundle=True, web_site=True)
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


def list_templates() -> list[TemplateInfo]:
    found = []
    folder = templates_dir()
    for path in sorted(folder.glob("*/template.json")) if folder.is_dir() else ():
        try:
            found.append(TemplateInfo.model_validate_json(path.read_text()))
        except ValueError:
            continue
    return found
