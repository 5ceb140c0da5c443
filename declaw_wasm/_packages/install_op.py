"""The `pip_install` door op's declaration (doors.py): light, so a guest's routes are made
without importing the installer (pip.py, ~20 ms of imports), which answers it on first use.

The declaration checks each field's type, count, length and characters before the handler
runs; pip.py's `parse_request` is the deeper check (a requirement's grammar, a path's form, a
name's and a version's shape) and writes every value back in its own form.
"""

from __future__ import annotations

from typing import Any

from .._wasm.door import ASCII_PRINTABLE, PRINTABLE, Bool, Chars, List, Map, Op, RequestError, Str

MAX_REQUIREMENTS = 200
MAX_FIND_LINKS = 16
MAX_PRESENT = 2000  # installed distributions the guest may list (a sandbox has ~100)
MAX_GUEST_WHEELS = 100  # wheels one request may copy out of the sandbox
MAX_REQUIREMENT = 1000  # characters of one requirement
MAX_PATH = 4096  # characters of one guest path

NAME_CHARS = Chars.only("letters, digits, '.', '_', '-'", "A-Za-z0-9._-")
VERSION_CHARS = Chars.only("letters, digits, '.', '+', '!', '_', '-'", "A-Za-z0-9.+!_-")
GUEST_PATH = Str(MAX_PATH, PRINTABLE, min_len=1, doc="an absolute, normalised guest path")



def _refused(exc: RequestError) -> dict[str, Any]:
    """A refused request answered as pip's failure (what the guest's pip prints), as
    parse_request's refusals are."""
    return {"status": 1, "stdout": "", "stderr": f"ERROR: bad install request: {exc.field}: {exc.why}\n"}


PIP_INSTALL = Op("pip_install", {
    "requirements": List(Str(MAX_REQUIREMENT, ASCII_PRINTABLE, min_len=1), MAX_REQUIREMENTS,
                         doc="PEP 508 requirements (no URLs, no paths)"),
    "wheels": List(GUEST_PATH, MAX_GUEST_WHEELS, doc="wheel files in the sandbox to install"),
    "find_links": List(GUEST_PATH, MAX_FIND_LINKS, doc="folders of wheels in the sandbox"),
    "present": Map(Str(128, NAME_CHARS, min_len=1), Str(64, VERSION_CHARS, min_len=1), MAX_PRESENT,
                   doc="the guest's installed distributions: name -> version"),
    "no_index": Bool(), "no_deps": Bool()},
    "{status, stdout, stderr}", "`pip install` in the sandbox, resolved and fetched by the host "
    "(every field parsed and written back first: _packages/pip.py's parse_request)", _refused)
