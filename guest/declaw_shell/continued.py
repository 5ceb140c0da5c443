"""A newline after `&&`, `||` or `|` continues the command, as bash reads it:

    ls a.txt &&
      python3 build.py |
      tail -n 3

(LLMs break long lines this way.) The library's script splitter ended the command at the
newline, and the line failed with "operator with a missing operand". `install()` gives the
library's modules that split scripts a splitter that reads on; everything else is the library's.
The same splitter ends a heredoc's command at a `;` on its line (`_heredoc_line_goes_on`).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from bash_purepython import block_parser, execute_command, parse_script
from bash_purepython.parse_script import CommandBlock, CommandBlockType, ScriptSplitter

_WHITESPACE = " \t"


class ContinuingSplitter(ScriptSplitter):
    def __init__(self, script: str) -> None:
        super().__init__(script)
        self.script: str = script  # (rewritten by _heredoc_line_goes_on)
        self.after_operator = False  # the last token at the top level was `&&`, `||` or `|`

    def _scan_next(self) -> None:
        script, position = self.script, self.position
        character = script[position]
        if character == ";" and self.pending_heredocs and not self.nesting and script[position:position + 2] != ";;":
            self._heredoc_line_goes_on(position)
            script = self.script
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


    def _heredoc_line_goes_on(self, position: int) -> None:
        """`cat <<EOF > f; cat f` and `cat <<A; cat <<B`: a heredoc's command ends at `;` and
        another follows on its line. bash reads the bodies after the line, each for its own
        command; the library kept the line as one command and failed (a syntax error). The script
        is rewritten so the bodies pending here follow their command and the rest of the line
        comes after them: `cat <<EOF > f` + body + `cat f`. A rest of the line that is not whole
        on its line (a quote left open) is left to the library."""
        script = self.script
        line_end = script.find("\n", position)
        rest = script[position + 1:line_end]
        if line_end < 0 or rest.count("'") % 2 or rest.count('"') % 2 or "`" in rest or "\\" in rest[-1:]:
            return
        end = line_end + 1
        for delimiter, strip_tabs in self.pending_heredocs:  # each body ends at its delimiter's line
            while end < len(script):
                next_line = script.find("\n", end)
                stop = len(script) if next_line < 0 else next_line
                line = script[end:stop]
                end = min(stop + 1, len(script))
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
        bodies = script[line_end + 1:end]
        if not bodies.endswith("\n"):
            bodies += "\n"
        self.script = script[:position] + "\n" + bodies + rest + "\n" + script[end:]


_OPERATOR_AT_END = re.compile(r"(?:&&|\|)[ \t]*(?:#[^\n]*)?\n")  # a line that may go on


def split(script: str) -> list[CommandBlock]:
    """The top-level commands of a script (the library's split_script_into_connected_commands);
    the library's own splitter unless a line ends in an operator or holds a heredoc (this one
    scans twice as slowly)."""
    if "\n" not in script or not (_OPERATOR_AT_END.search(script) or "<<" in script):
        blocks = ScriptSplitter(script).split()
    else:
        blocks = ContinuingSplitter(script).split()
    if "time" in script:
        blocks = [_timed_compound(block) for block in blocks]
    return blocks


_TIMED_COMPOUND = re.compile(r"time((?:[ \t]+(?:-p|--))*)[ \t]+(?=[({])")


def _timed_compound(block: CommandBlock) -> CommandBlock:
    """`time ( ... )` and `time { ...; }`: bash's `time` keyword times a compound command too.
    The library read the first as a function definition and the second as a syntax error; the
    `time` builtin (shells.py `run_time`) runs a simple command, so the compound, with its
    redirections, becomes `eval`'s script: `time eval '( ... ) 2>/dev/null'`."""
    match = _TIMED_COMPOUND.match(block.command)
    if match is None:
        return block
    body = block.command[match.end():]
    return CommandBlock(block_type=CommandBlockType.COMMAND,
                        command=f"time{match.group(1)} eval {shlex.quote(body)}")


def parse_and_or_list(text: str) -> Any:
    """The library's parse_and_or_list, with each heredoc's body after its whole pipeline: the
    library joined a pipeline's stages after the first's body was added to it, so in
    `cd src && python3 - <<'EOF' | tail -1` (an agent's way to run a script and keep its end) the
    body ended with `EOF | tail -1`, which is no delimiter: the program read the rest of the
    line as code."""
    splitter = block_parser.OperatorSplitter(text)
    texts = [block.command for block in splitter.split()]
    operators = splitter.operators
    if len(texts) != len(operators) + 1 or any(owner >= len(texts) for owner, _ in splitter.heredoc_bodies):
        return _library_parse_and_or_list(text)  # the library's own error
    bodies: dict[int, list[str]] = {}
    for owner, body in splitter.heredoc_bodies:
        bodies.setdefault(owner, []).append(body)
    pipelines: list[list[int]] = [[0]]
    list_operators = []
    for index, operator in enumerate(operators, 1):
        if operator in (block_parser.PIPE_OPERATOR, block_parser.PIPE_WITH_STDERR_OPERATOR):
            pipelines[-1].append(index)
        else:
            pipelines.append([index])
            list_operators.append(block_parser.ListOperator(operator))
    items = []
    for stages in pipelines:
        line = texts[stages[0]]
        for index in stages[1:]:
            line += f" {operators[index - 1]} {texts[index]}"
        items.append("\n".join([line, *(body for index in stages for body in bodies.get(index, []))]))
    first = block_parser.parse_pipeline(items[0])
    rest = [(operator, block_parser.parse_pipeline(item)) for operator, item in zip(list_operators, items[1:],
                                                                                    strict=True)]
    return block_parser.AndOrListNode(first=first, rest=rest)


_library_parse_and_or_list = block_parser.parse_and_or_list


def install() -> None:
    """Have the library's executor and block parser split scripts with ContinuingSplitter, and
    and/or lists keep heredoc bodies after their pipelines (parse_and_or_list)."""
    for module in (parse_script, block_parser, execute_command):
        module.split_script_into_connected_commands = split
    block_parser.parse_and_or_list = parse_and_or_list
