"""Finding hidden Unicode: format characters (Cf: zero-width spaces and joiners, bidi controls,
soft hyphen, BOM, the tag block U+E0000-E007F), private-use characters (Co), variation selectors
and the Hangul fillers that render as nothing.

The character class is built from `unicodedata` on first use (about 0.2 s, once per process), so
it follows the running Python's Unicode version instead of a hand-kept list.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache

# Invisible characters outside Cf/Co: variation selectors, the combining grapheme joiner, the
# Hangul fillers, and the braille blank.
_EXTRA = [(0xFE00, 0xFE0F), (0xE0100, 0xE01EF), (0x034F, 0x034F), (0x115F, 0x1160),
          (0x3164, 0x3164), (0xFFA0, 0xFFA0), (0x2800, 0x2800)]


@lru_cache(maxsize=1)
def invisible_re() -> re.Pattern[str]:
    ranges: list[tuple[int, int]] = []
    start = prev = -2
    for cp in range(0x80, sys.maxunicode + 1):
        if unicodedata.category(chr(cp)) in ("Cf", "Co"):
            if cp != prev + 1:
                if start >= 0:
                    ranges.append((start, prev))
                start = cp
            prev = cp
    ranges.append((start, prev))
    ranges.extend(_EXTRA)
    cls = "".join(f"\\U{a:08x}-\\U{b:08x}" if a != b else f"\\U{a:08x}" for a, b in ranges)
    return re.compile(f"[{cls}]")


def strip_invisible(text: str) -> tuple[str, int]:
    """`text` without hidden characters, and how many there were."""
    if text.isascii():
        return text, 0
    new, n = invisible_re().subn("", text)
    return new, n


def visible_view(text: str) -> tuple[str, list[int] | None]:
    """`text` with hidden characters removed, and where each kept character came from.

    Detectors scan the view so that `123\\u200b-45-6789` is still an SSN; the index list maps a
    match back onto the original text. The list is None when nothing was removed.
    """
    if text.isascii():
        return text, None
    rx = invisible_re()
    if rx.search(text) is None:
        return text, None
    index = [i for i, ch in enumerate(text) if not rx.match(ch)]
    return "".join(text[i] for i in index), index
