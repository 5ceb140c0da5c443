"""A newline after `&&`, `||` or `|` continues the command, as bash reads it:

    ls a.txt &&
      python3 build.py |
      tail -n 3

(LLMs break long lines this way.) The library's script splitter ended the command at the
newline, and the line failed with "operator with a missing operand". `install()` gives the
library's modules that split scripts a splitter that reads on; everything else is the library's.
"""

from __future__ import annotations

import re

from bash_purepython import block_parser, execute_command, parse_script
from bash_purepython.parse_script import CommandBlock, ScriptSplitter

_WHITESPACE = " \t"


class ContinuingSplitter(ScriptSplitter):
    def __init__(self, script: str) -> None:
        super().__init__(script)
        self.after_operator = False  # the last token at the top level was `&&`, `||` or `|`

    def _scan_next(self) -> None:
        script, position = self.script, self.position
        character = script[position]
        if character == "\n" and self.after_operator and not self.nesting and not self.pending_heredocs:
            self._flush_segment()
            self.pieces.append(" ")  # the newline, as the whitespace it is there
            self.position += 1
            self.segment_start = self.position
            self.at_word_start = True
            return
        operator = not self.nesting and (script.startswith("&&", position) or character == "|"
                                          and script[position - 1:position] != ">")  # `||`, `|&`, `|`; not `>|`
        comment = character == "#" and self.at_word_start
        super()._scan_next()
        if operator:
            self.after_operator = True
        elif character not in _WHITESPACE and not comment and not script.startswith("\\\n", position):
            self.after_operator = False


_OPERATOR_AT_END = re.compile(r"(?:&&|\|)[ \t]*(?:#[^\n]*)?\n")  # a line that may go on


def split(script: str) -> list[CommandBlock]:
    """The top-level commands of a script (the library's split_script_into_connected_commands);
    the library's own splitter unless a line ends in an operator (this one scans twice as slowly)."""
    if "\n" not in script or not _OPERATOR_AT_END.search(script):
        return ScriptSplitter(script).split()
    return ContinuingSplitter(script).split()


def install() -> None:
    """Have the library's executor and block parser split scripts with ContinuingSplitter."""
    for module in (parse_script, block_parser, execute_command):
        module.split_script_into_connected_commands = split
