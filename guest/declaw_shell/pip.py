"""`pip` in the guest. Installs come from the host; everything else is done here.

The guest has no network, so `pip install` sends its requirements through the door: the host
resolves them for this guest with its own pip (pure-Python wheels only), takes the wheels from
its cache or downloads them, and writes them into the sandbox's user site-packages
(/home/user/.local/lib/python3.15/site-packages), which every later command and cell of the
sandbox imports from. `list`, `freeze`, `show` and `uninstall` read and change the installed
metadata here. (Reached as `pip`, `pip3` and `python3 -m pip`.)
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import IO, Any

USER_SITE = "/home/user/.local/lib/python3.15/site-packages"
USER_BASE = "/home/user/.local"
RUNTIME_ZIP = "/usr/local/lib/python315.zip"
VERSION = "pip 25.0 (declaw-wasm: installs run on the host, pure-Python wheels only) from %s (python 3.15)"

GLOBAL_FLAGS = {"-q", "--quiet", "-v", "--verbose", "--disable-pip-version-check", "--no-cache-dir",
                "--isolated", "--no-color", "--no-input", "--require-virtualenv", "--no-python-version-warning"}
GLOBAL_WITH_VALUE = {"--root-user-action", "--progress-bar", "--cache-dir", "--timeout", "--retries",
                     "--log", "--proxy", "--cert", "--client-cert", "--python", "--trusted-host"}
INSTALL_FLAGS = {"-U", "--upgrade", "--user", "--no-deps", "--no-index", "--pre", "--break-system-packages",
                 "--force-reinstall", "--ignore-installed", "-I", "--no-build-isolation", "--no-warn-script-location",
                 "--only-binary=:all:", "--prefer-binary", "--no-compile", "--compile", "-y", "--yes"}
INSTALL_WITH_VALUE = {"--upgrade-strategy", "--only-binary", "--no-binary", "--target", "-t", "--prefix",
                      "--root", "--platform", "--python-version", "--implementation", "--abi"}
REMOTE_INDEX = {"-i", "--index-url", "--extra-index-url"}


class PipError(Exception):
    pass


def main(argv: Sequence[str], stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        return _main(list(argv), stdout, stderr)
    except PipError as exc:
        stderr.write("ERROR: %s\n" % exc)
        return 1
    finally:
        importlib.invalidate_caches()  # what was installed imports without a restart


def _main(argv: list[str], out: IO[str], err: IO[str]) -> int:
    quiet = 0
    while argv and argv[0].startswith("-"):
        opt = argv.pop(0)
        if opt in ("-V", "--version"):
            out.write(VERSION % os.path.dirname(__file__) + "\n")
            return 0
        if opt in ("-h", "--help"):
            argv = ["help"]
            break
        if opt in ("-q", "--quiet"):
            quiet += 1
        elif opt.split("=", 1)[0] in GLOBAL_WITH_VALUE:
            if "=" not in opt and argv:
                argv.pop(0)
        elif opt not in GLOBAL_FLAGS:
            raise PipError("no such option: %s" % opt)
    if not argv or argv[0] == "help":
        out.write("Usage: pip <install|uninstall|list|freeze|show> [options]\n"
                  "Installs pure-Python wheels into %s; the host fetches them.\n" % USER_SITE)
        return 0
    command, args = argv[0], argv[1:]
    if command == "install":
        return _install(args, out, err, quiet)
    if command == "uninstall":
        return _uninstall(args, out, err)
    if command == "list":
        return _list(args, out)
    if command == "freeze":
        for name, version in sorted(_installed().items(), key=lambda kv: kv[0].lower()):
            out.write("%s==%s\n" % (name, version))
        return 0
    if command == "show":
        return _show(args, out, err)
    raise PipError('unknown command "%s" (this pip knows install, uninstall, list, freeze, show)'
                   % command)


# -- what is installed -------------------------------------------------------------------------

def _hidden_by_template(dist: importlib.metadata.Distribution) -> bool:
    """`base` hides the runtime's third-party packages: so does its pip."""
    return bool(getattr(sys, "_declaw_hiding", False)) and str(getattr(dist, "_path", "")).startswith(RUNTIME_ZIP)


def _distributions() -> dict[str, importlib.metadata.Distribution]:
    seen = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and _key(name) not in seen and not _hidden_by_template(dist):
            seen[_key(name)] = dist
    return seen


def _installed() -> dict[str, str]:
    return {dist.metadata["Name"]: dist.version for dist in _distributions().values()}


def _key(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _location(dist: importlib.metadata.Distribution) -> str:
    path = str(getattr(dist, "_path", ""))
    return os.path.dirname(path) if path else "?"


# -- install -----------------------------------------------------------------------------------

def _install(args: list[str], out: IO[str], err: IO[str], quiet: int) -> int:  # noqa: C901 (pip's options, one flat loop)
    requirements: list[str] = []
    wheels: list[str] = []
    find_links: list[str] = []
    no_index = no_deps = False
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if arg in ("-r", "--requirement") or name == "--requirement" or (arg.startswith("-r") and len(arg) > 2):
            path = value if eq else (arg[2:] if arg.startswith("-r") and len(arg) > 2 else _value(arg, args))
            requirements += _read_requirements(path, wheels, find_links, err)
        elif arg in ("-f", "--find-links") or name == "--find-links":
            find_links.append(os.path.abspath(value if eq else _value(arg, args)))
        elif arg in REMOTE_INDEX or name in REMOTE_INDEX:
            raise PipError("%s: the sandbox has no network; the host's package index (or its "
                           "wheelhouse) is used for every install" % name)
        elif arg in ("-e", "--editable") or name == "--editable":
            raise PipError("editable installs are not supported here")
        elif arg in ("-c", "--constraint") or name == "--constraint":
            _value(arg, args) if not eq else None
            err.write("WARNING: constraints files are ignored\n")
        elif arg == "--no-index":
            no_index = True
        elif arg == "--no-deps":
            no_deps = True
        elif arg in ("-q", "--quiet"):
            quiet += 1
        elif arg in INSTALL_FLAGS or arg in GLOBAL_FLAGS:
            pass
        elif name in INSTALL_WITH_VALUE or name in GLOBAL_WITH_VALUE:
            if not eq:
                _value(arg, args)
        elif arg.startswith("-"):
            raise PipError("no such option: %s" % arg)
        elif arg.endswith(".whl") and "://" not in arg and "@" not in arg:
            wheels.append(os.path.abspath(arg))
        else:
            requirements.append(arg)
    if not requirements and not wheels:
        raise PipError("You must give at least one requirement to install (see \"pip help install\")")
    reply = _door("pip_install", requirements=requirements, wheels=wheels, find_links=find_links,
                  no_index=no_index, no_deps=no_deps, present=_installed())
    if not quiet or reply.get("status"):
        out.write(reply.get("stdout", ""))
    err.write(reply.get("stderr", ""))
    return int(reply.get("status", 1))


def _value(option: str, args: list[str]) -> str:
    if not args:
        raise PipError("%s option requires 1 argument" % option)
    return args.pop(0)


def _read_requirements(path: str, wheels: list[str], find_links: list[str], err: IO[str],
                       depth: int = 0) -> list[str]:
    if depth > 10:
        raise PipError("requirements files nest too deeply")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise PipError("Could not open requirements file: %s" % exc) from None
    folder = os.path.dirname(os.path.abspath(path))
    found = []
    for raw in lines:
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if words[0] in ("-r", "--requirement") and len(words) > 1:
            found += _read_requirements(os.path.join(folder, words[1]), wheels, find_links, err, depth + 1)
        elif words[0] in ("-f", "--find-links") and len(words) > 1:
            find_links.append(os.path.join(folder, words[1]))
        elif line.startswith("-"):
            err.write("WARNING: ignoring requirements-file option: %s\n" % line)
        elif words[0].endswith(".whl"):
            wheels.append(os.path.join(folder, words[0]))
        else:
            found.append(" ".join(w for w in words if not w.startswith("--hash")))
    return found


def _door(op: str, **args: Any) -> Any:
    from . import door

    try:
        return door.call(op, **args)
    except ConnectionRefusedError:
        raise PipError("no host to install from") from None
    except OSError as exc:
        raise PipError("the host could not install: %s" % exc) from None


# -- uninstall, list, show ---------------------------------------------------------------------

def _uninstall(args: list[str], out: IO[str], err: IO[str]) -> int:
    names = [a for a in args if not a.startswith("-")]
    if "-r" in args or "--requirement" in args:
        raise PipError("uninstall -r is not supported; name the packages")
    if not names:
        raise PipError("You must give at least one requirement to uninstall")
    dists = _distributions()
    status = 0
    for name in names:
        dist = dists.get(_key(name))
        if dist is None:
            err.write("WARNING: Skipping %s as it is not installed.\n" % name)
            continue
        where = _location(dist)
        if where != USER_SITE:
            err.write("ERROR: Cannot uninstall %s %s: it is part of the sandbox (%s), not "
                      "installed by pip here\n" % (dist.metadata["Name"], dist.version, where))
            status = 1
            continue
        label = "%s-%s" % (dist.metadata["Name"], dist.version)
        out.write("Found existing installation: %s %s\nUninstalling %s:\n"
                  % (dist.metadata["Name"], dist.version, label))
        _remove_files(dist)
        out.write("  Successfully uninstalled %s\n" % label)
    return status


def _remove_files(dist: importlib.metadata.Distribution) -> None:
    site = os.path.realpath(USER_SITE)
    base = os.path.realpath(USER_BASE)
    folders = set()
    for entry in dist.files or []:
        path = os.path.realpath(os.path.join(site, str(entry)))
        if path.startswith(base + os.sep) and os.path.isfile(path):
            os.remove(path)
            folders.add(os.path.dirname(path))
    info = str(getattr(dist, "_path", ""))
    if info.startswith(site + os.sep) and os.path.isdir(info):
        import shutil

        shutil.rmtree(info, ignore_errors=True)
    for folder in sorted(folders, key=len, reverse=True):
        while folder.startswith(site + os.sep):
            cache = os.path.join(folder, "__pycache__")
            if os.path.isdir(cache) and not any(n for n in os.listdir(cache) if not n.endswith(".pyc")):
                import shutil

                shutil.rmtree(cache, ignore_errors=True)
            try:
                os.rmdir(folder)
            except OSError:
                break
            folder = os.path.dirname(folder)


def _list(args: list[str], out: IO[str]) -> int:
    fmt = "columns"
    for i, arg in enumerate(args):
        if arg.startswith("--format="):
            fmt = arg.split("=", 1)[1]
        elif arg == "--format" and i + 1 < len(args):
            fmt = args[i + 1]
    rows = sorted(_installed().items(), key=lambda kv: kv[0].lower())
    if fmt == "freeze":
        out.write("".join("%s==%s\n" % row for row in rows))
    elif fmt == "json":
        out.write(json.dumps([{"name": n, "version": v} for n, v in rows]) + "\n")
    else:
        width = max([len("Package")] + [len(n) for n, _ in rows])
        vwidth = max([len("Version")] + [len(v) for _, v in rows])
        out.write("%s %s\n%s %s\n" % ("Package".ljust(width), "Version", "-" * width, "-" * vwidth))
        out.write("".join("%s %s\n" % (n.ljust(width), v) for n, v in rows))
    return 0


def _show(args: list[str], out: IO[str], err: IO[str]) -> int:
    names = [a for a in args if not a.startswith("-")]
    if not names:
        raise PipError("Please provide a package name or names.")
    dists = _distributions()
    missing = [n for n in names if _key(n) not in dists]
    for n in missing:
        err.write("WARNING: Package(s) not found: %s\n" % n)
    shown = [dists[_key(n)] for n in names if _key(n) in dists]
    for i, dist in enumerate(shown):
        meta: Any = dist.metadata  # its .get is typed from 3.12 on (the guest has 3.15, the checker 3.11)
        requires = sorted({_req_name(r) for r in dist.requires or [] if "extra ==" not in r})
        required_by = sorted(d.metadata["Name"] for d in dists.values()
                             if any(_key(_req_name(r)) == _key(meta["Name"])
                                    for r in d.requires or [] if "extra ==" not in r))
        if i:
            out.write("---\n")
        out.write("Name: %s\nVersion: %s\nSummary: %s\nHome-page: %s\nAuthor: %s\nLicense: %s\n"
                  "Location: %s\nRequires: %s\nRequired-by: %s\n"
                  % (meta["Name"], dist.version, meta.get("Summary", ""), meta.get("Home-page", ""),
                     meta.get("Author", "") or meta.get("Author-email", ""),
                     meta.get("License", "") or meta.get("License-Expression", ""),
                     _location(dist), ", ".join(requires), ", ".join(required_by)))
    return 1 if missing and not shown else 0


def _req_name(requirement: str) -> str:
    name = ""
    for ch in requirement.strip():
        if ch.isalnum() or ch in "-_.":
            name += ch
        else:
            break
    return name
