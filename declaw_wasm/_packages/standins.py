"""What the host's resolver knows about compiled requirements a guest can still satisfy.

A fixed, host-side table: nothing here comes from the guest, and the guest cannot add to it.
pip.py's `resolve` applies it to every resolution for a guest (`pip install` in a sandbox, a
template build, the locks):

- **Stand-ins**: a compiled project with a pure-Python implementation of the same import
  package on the index. pip sees a stub wheel of the compiled project at `provides` (so version
  pins such as openai's `jiter>=0.16,<1` are judged against it), and wherever that stub is
  chosen the host installs the stand-in instead, pinned by name, version and SHA-256. A pin
  the presented version does not meet is refused, naming the stand-in.
- **Held back**: a project whose newer line needs compiled code (pydantic 2 is built on the
  Rust `pydantic-core`) or does not work with what the guest must use instead; pip gets a
  constraint, and a package that needs the newer line is refused with the reason.

`docs/templates-and-packages.md` says why each entry is what it is; docs/security.md
("Stand-ins and held-back packages") gives the boundary.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StandIn:
    """`name` (canonical), compiled, is installed as `project`==`version` (sha256), presented
    to pip as `name`==`provides`."""

    name: str
    provides: str
    project: str
    version: str
    sha256: str
    why: str


STAND_INS: dict[str, StandIn] = {
    "jiter": StandIn(
        "jiter", "0.19.0", "jiter-pupy", "0.8.5",
        "8e3ebe106f45e8bb5b5c192f03bb8f01b4001f3b1837058f43452ccb2f2f0f06",
        "jiter is a Rust extension; jiter-pupy is a pure-Python implementation of its API "
        "(`from_json` with partial modes, `cache_clear`, `LosslessFloat`) that installs the same "
        "top-level `jiter` package"),
}


@dataclass(frozen=True)
class Held:
    """`name` (canonical) is kept below `below` in every guest resolution, for `why`."""

    name: str
    below: str
    why: str

    def constraint(self) -> str:
        return f"{self.name}<{self.below}"


HELD: dict[str, Held] = {
    "pydantic": Held("pydantic", "2", "pydantic 2 is built on pydantic-core, a Rust extension with "
                     "no pure-Python wheel; the sandbox can have pydantic 1.10 (pure Python), which "
                     "the official openai and anthropic clients accept"),
    "httpx2": Held("httpx2", "2.13", "from httpx2 2.13 its Timeout is a dataclass, which pydantic "
                   "1.10 (the sandbox's pydantic) rewrites in place when a model names it, breaking "
                   "the openai and anthropic clients; 2.12 is the newest that works with both"),
}


def constraint_lines() -> list[str]:
    """The constraints every guest resolution gets (pip's `-c`), written by us."""
    return [held.constraint() for held in HELD.values()]
