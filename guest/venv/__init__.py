"""`python3 -m venv DIR` in the sandbox: a working stand-in for CPython's venv module, which the
guest's Python does not ship.

Agents run `python3 -m venv .venv && . .venv/bin/activate && pip install x` by habit. A sandbox
is already one isolated Python, and its interpreter cannot be copied or linked (it is the
WebAssembly runtime's, not a file), so the environment made here is the usual folder —
pyvenv.cfg, bin/activate (PATH, VIRTUAL_ENV, the prompt, `deactivate`), bin/python, python3,
pip, pip3 as small scripts running the sandbox's own — and packages installed "in" it go to
the sandbox's site-packages, shared by every environment (pyvenv.cfg and `--help` say so).
`venv.create()` and `EnvBuilder` make the same folder for code that calls them.
"""

from __future__ import annotations

import os
import shutil
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

PYTHON = "/usr/local/bin/python3"
USAGE = ("usage: venv [-h] [--system-site-packages] [--symlinks | --copies] [--clear] [--upgrade]\n"
         "            [--without-pip] [--prompt PROMPT] [--upgrade-deps]\n"
         "            [--without-scm-ignore-files]\n"
         "            ENV_DIR [ENV_DIR ...]\n")
HELP = USAGE + """
Creates virtual Python environments in one or more target directories.

declaw-wasm: the sandbox is already an isolated Python. The environment is the usual folder
(pyvenv.cfg, bin/activate, bin/python, bin/pip) whose programs are the sandbox's own; packages
installed with its pip go to the sandbox's site-packages, shared by every environment.
"""
FLAGS = {"--system-site-packages", "--symlinks", "--copies", "--clear", "--upgrade", "--without-pip",
         "--upgrade-deps", "--without-scm-ignore-files"}

ACTIVATE = """# This file must be used with "source bin/activate" *from bash*
# declaw-wasm: python and pip here are the sandbox's own (see pyvenv.cfg)

deactivate () {
    if [ -n "${_OLD_VIRTUAL_PATH:-}" ] ; then
        PATH="${_OLD_VIRTUAL_PATH:-}"
        export PATH
        unset _OLD_VIRTUAL_PATH
    fi
    if [ -n "${_OLD_VIRTUAL_PS1:-}" ] ; then
        PS1="${_OLD_VIRTUAL_PS1:-}"
        export PS1
        unset _OLD_VIRTUAL_PS1
    fi
    unset VIRTUAL_ENV
    unset VIRTUAL_ENV_PROMPT
    if [ ! "${1:-}" = "nondestructive" ] ; then
        unset -f deactivate
    fi
}

deactivate nondestructive

VIRTUAL_ENV=%(env)s
export VIRTUAL_ENV

_OLD_VIRTUAL_PATH="$PATH"
PATH="$VIRTUAL_ENV/bin:$PATH"
export PATH

VIRTUAL_ENV_PROMPT=%(prompt)s
export VIRTUAL_ENV_PROMPT

if [ -z "${VIRTUAL_ENV_DISABLE_PROMPT:-}" ] ; then
    _OLD_VIRTUAL_PS1="${PS1:-}"
    PS1="(%(bare)s) ${PS1:-}"
    export PS1
fi
"""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _script(program: str) -> str:
    return "#!/bin/bash\n# declaw-wasm: the sandbox's own %s\nexec %s \"$@\"\n" % (program, program)


class EnvBuilder:
    """The folder of a virtual environment (the arguments of CPython's EnvBuilder; what cannot
    apply here, such as symlinks or installing pip, is accepted and changes nothing)."""

    def __init__(self, system_site_packages: bool = False, clear: bool = False, symlinks: bool = False,
                 upgrade: bool = False, with_pip: bool = False, prompt: str | None = None, upgrade_deps: bool = False,
                 *, scm_ignore_files: Collection[str] = frozenset({"git"})) -> None:
        self.clear = clear
        self.prompt = prompt
        self.scm_ignore_files = scm_ignore_files

    def create(self, env_dir: str | os.PathLike[str]) -> None:
        env_dir = os.path.abspath(os.fspath(env_dir))
        if self.clear and os.path.isdir(env_dir):
            for name in os.listdir(env_dir):
                path = os.path.join(env_dir, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
        version = "%d.%d" % sys.version_info[:2]
        bindir = os.path.join(env_dir, "bin")
        for folder in (bindir, os.path.join(env_dir, "include"),
                       os.path.join(env_dir, "lib", "python" + version, "site-packages")):
            os.makedirs(folder, exist_ok=True)
        prompt = self.prompt or os.path.basename(env_dir)
        if prompt == ".":
            prompt = os.path.basename(os.getcwd())
        self._write(env_dir, "pyvenv.cfg", "".join((
            "home = %s\n" % os.path.dirname(PYTHON),
            "include-system-site-packages = true\n",
            "version = %d.%d.%d\n" % sys.version_info[:3],
            "executable = %s\n" % PYTHON,
            "command = %s -m venv %s\n" % (PYTHON, env_dir),
            "prompt = %s\n" % prompt,
            "# declaw-wasm: bin/python and bin/pip are the sandbox's own; packages installed here go\n"
            "# to the sandbox's site-packages, shared by every environment\n")))
        if "git" in self.scm_ignore_files:
            self._write(env_dir, ".gitignore", "# Created by venv; see https://docs.python.org/3/library/venv.html\n*\n")
        self._write(bindir, "activate", ACTIVATE % {"env": _quote(env_dir), "prompt": _quote("(%s) " % prompt),
                                                    "bare": prompt.replace("\\", "").replace("'", "")})
        for name in ("python", "python3", "python" + version):
            self._write(bindir, name, _script("python3"))
        for name in ("pip", "pip3", "pip" + version):
            self._write(bindir, name, _script("pip"))

    @staticmethod
    def _write(folder: str, name: str, text: str) -> None:
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)


def create(env_dir: str | os.PathLike[str], system_site_packages: bool = False, clear: bool = False,
           symlinks: bool = False, with_pip: bool = False, prompt: str | None = None, upgrade_deps: bool = False,
           *, scm_ignore_files: Collection[str] = frozenset({"git"})) -> None:
    """Make a virtual environment in env_dir (EnvBuilder's arguments)."""
    EnvBuilder(system_site_packages, clear, symlinks, False, with_pip, prompt, upgrade_deps,
               scm_ignore_files=scm_ignore_files).create(env_dir)


def main(args: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if args is None else args)
    dirs: list[str] = []
    options: set[str] = set()
    prompt: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in ("-h", "--help"):
            sys.stdout.write(HELP)
            return 0
        if arg == "--prompt" or arg.startswith("--prompt="):
            if arg == "--prompt":
                if i >= len(args):
                    sys.stderr.write(USAGE + "venv: error: argument --prompt: expected one argument\n")
                    return 2
                prompt, i = args[i], i + 1
            else:
                prompt = arg.split("=", 1)[1]
        elif arg in FLAGS:
            options.add(arg)
        elif arg.startswith("-") and arg != "-":
            sys.stderr.write(USAGE + "venv: error: unrecognized arguments: %s\n" % arg)
            return 2
        else:
            dirs.append(arg)
    if not dirs:
        sys.stderr.write(USAGE + "venv: error: the following arguments are required: ENV_DIR\n")
        return 2
    ignore: frozenset[str] = frozenset() if "--without-scm-ignore-files" in options else frozenset({"git"})
    builder = EnvBuilder(clear="--clear" in options, prompt=prompt, scm_ignore_files=ignore)
    for env_dir in dirs:
        try:
            builder.create(env_dir)
        except OSError as exc:
            sys.stderr.write("Error: %s\n" % exc)
            return 1
    return 0
