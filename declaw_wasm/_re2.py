"""User-supplied regular expressions run on RE2 (the `google-re2` package).

Why RE2 and not `re` or the `regex` package with a timeout: the guards run in the caller's
process, so one backtracking pattern from a policy would stall every sandbox and the host
application. RE2 matches in time linear in the input for every pattern, so there is nothing to
time out and no half-applied rule to recover from. It is also what declaw's own proxy runs (Go's
regexp is RE2), so a policy that works on declaw's server works here; constructs RE2 lacks
(backreferences, lookaround) are refused when the rule is built, with the field named.
"""

from __future__ import annotations

from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern on stderr
_OPTIONS.max_mem = 32 << 20  # the compiled automaton's memory bound (RE2's default is 8 MiB)


def compile_user_pattern(pattern: str) -> Any:
    """Compile `pattern` with RE2; raise ValueError with RE2's reason if it cannot be."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ValueError(f"Regex pattern '{pattern}' is not supported by the RE2 engine the guards "
                         f"use ({reason}); backreferences and lookaround are not available") from e
