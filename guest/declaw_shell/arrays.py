"""Arrays as bash 5.2 keeps them, on top of the library's indexed arrays.

The library had indexed arrays only: `declare -A m` was accepted and then every subscript was
arithmetic (`m[foo]=1; m[bar]=2` set one element, `m[0]`), so agents' scripts that count words
or map names to values printed wrong answers without an error; compound assignments took
`[3]=x` as a value, arithmetic knew no array elements (`((count[$w]++))` was a syntax error) and
`"${!a[@]}"` was one word. Here:

- `AssocArray`, an associative array that lists its keys in bash's own order: bash keeps them in
  a hash table (FNV-1 over the key's bytes, 1024 buckets growing 4x once it holds twice as many
  keys, the newest key first in its bucket) and scripts print `${!m[@]}` unsorted;
- `declare`/`typeset`/`local -A`, `declare -p` as bash prints it, subscripts expanded as words
  for associative arrays (`m["a b"]`, `m[$k]`), `[k]=v` in compound assignments of both kinds,
  `unset 'm[k]'`, `[[ -v m[k] ]]`, elements in arithmetic (`a[i]++`, `n[k] += 3`, `$(( a[0] ))`),
  `"${!a[@]}"` one word per key.

`install()` patches the library's functions in place (bash_purepython has no hooks for this).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from bash_purepython import arithmetic, conditional, execute_command, shell_builtins, words
from bash_purepython.shell_state import ExpansionError, ShellError
from bash_purepython.words import QuoteStyle, Word, WordPart

if TYPE_CHECKING:
    from bash_purepython.shell_state import ShellState

    RunSubstitution = Any

FNV_OFFSET = 2166136261
FNV_PRIME = 16777619
BUCKETS = 1024  # bash's ASSOC_HASH_BUCKETS
GROW_FACTOR = 2  # grows once it holds this many keys per bucket (HASH_REHASH_FACTOR)
GROW_BY = 4  # HASH_REHASH_MULTIPLIER
# the first character of a compound-assignment element that carries its own key, `[k]=v`,
# and of an argument `declare` receives for one (a NUL never occurs in a shell string)
KEYED = "\0"
ELEMENT_NAME = re.compile(r"^([A-Za-z_]\w*)\[(.*)\]$", re.DOTALL)
ALL = frozenset("@*")


def bash_hash(key: str) -> int:
    """bash's hash_string: FNV-1 over the key's bytes, each read as a signed char."""
    value = FNV_OFFSET
    for byte in key.encode("utf-8", "surrogateescape"):
        value = (value * FNV_PRIME) & 0xFFFFFFFF
        value ^= (byte - 256 if byte >= 128 else byte) & 0xFFFFFFFF
    return value


class AssocArray(dict[str, str]):  # the library's arrays are plain dicts (int -> str)
    """An associative array: a dict whose iteration is bash's order of its keys.

    The buckets are kept sparse (bucket number -> its keys, newest first) and reordered as bash
    reorders them when its table grows; deleting a key never shrinks the table (hash_remove)."""

    __slots__ = ("_buckets", "_size")

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__()
        self._buckets: dict[int, list[str]] = {}
        self._size = BUCKETS
        for key, value in items:
            self[key] = value

    def __setitem__(self, key: str, value: str) -> None:
        if not dict.__contains__(self, key):
            if len(self) >= self._size * GROW_FACTOR:
                self._rehash(self._size * GROW_BY)
            self._buckets.setdefault(bash_hash(key) & (self._size - 1), []).insert(0, key)
        super().__setitem__(key, value)

    def _rehash(self, size: int) -> None:
        buckets: dict[int, list[str]] = {}
        for number in sorted(self._buckets):
            for key in self._buckets[number]:  # each old bucket from its head, to the new heads
                buckets.setdefault(bash_hash(key) & (size - 1), []).insert(0, key)
        self._buckets, self._size = buckets, size

    def _unplace(self, key: str) -> None:
        number = bash_hash(key) & (self._size - 1)
        bucket = self._buckets[number]
        bucket.remove(key)
        if not bucket:
            del self._buckets[number]

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._unplace(key)

    def pop(self, key: str, *default: Any) -> Any:
        if dict.__contains__(self, key):
            self._unplace(key)
        return super().pop(key, *default)

    def clear(self) -> None:  # bash's hash_flush keeps the table's size
        super().clear()
        self._buckets = {}

    def update(self, other: Any = (), **more: str) -> None:  # type: ignore[override]
        for key, value in dict(other, **more).items():
            self[key] = value

    def setdefault(self, key: str, default: str = "") -> str:
        if not dict.__contains__(self, key):
            self[key] = default
        return str(dict.__getitem__(self, key))

    def keys(self) -> list[str]:  # type: ignore[override]
        return [key for number in sorted(self._buckets) for key in self._buckets[number]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def values(self) -> list[str]:  # type: ignore[override]
        return [dict.__getitem__(self, key) for key in self.keys()]

    def items(self) -> list[tuple[str, str]]:  # type: ignore[override]
        return [(key, dict.__getitem__(self, key)) for key in self.keys()]

    def copy(self) -> AssocArray:
        copied = AssocArray()
        dict.update(copied, self)
        copied._buckets = {number: list(keys) for number, keys in self._buckets.items()}
        copied._size = self._size
        return copied


def is_assoc(name: str, state: ShellState) -> bool:
    return isinstance(state.arrays.get(name), AssocArray)


# -- subscripts --------------------------------------------------------------------------------------
def _subscript_word(text: str) -> Word:
    """The text of a subscript as a word of quoted and unquoted parts (bash expands an
    associative array's subscript as a word: no splitting, no globbing, quotes removed)."""
    parts: list[WordPart] = []
    plain: list[str] = []

    def flush() -> None:
        if plain:
            parts.append(WordPart("".join(plain), QuoteStyle.NONE))
            plain.clear()

    index = 0
    while index < len(text):
        character = text[index]
        if character == "\\" and index + 1 < len(text):
            plain.append(text[index:index + 2])
            index += 2
        elif character == "'":
            end = text.find("'", index + 1)
            if end < 0:
                raise ExpansionError(f"{text}: bad array subscript")
            flush()
            parts.append(WordPart(text[index + 1:end], QuoteStyle.SINGLE))
            index = end + 1
        elif character == '"':
            end = _closing_double_quote(text, index + 1)
            flush()
            parts.append(WordPart(text[index + 1:end], QuoteStyle.DOUBLE))
            index = end + 1
        elif character == "$" and text.startswith("$(", index):
            end = _balanced(text, index + 1, "(", ")")
            plain.append(text[index:end + 1])
            index = end + 1
        else:
            plain.append(character)
            index += 1
    flush()
    return Word(parts=parts)


def _closing_double_quote(text: str, index: int) -> int:
    while index < len(text):
        if text[index] == "\\":
            index += 2
        elif text[index] == '"':
            return index
        elif text.startswith("$(", index):
            index = _balanced(text, index + 1, "(", ")") + 1
        else:
            index += 1
    raise ExpansionError(f"{text}: bad array subscript")


def _balanced(text: str, index: int, opening: str, closing: str) -> int:
    """The index of the `closing` that matches the `opening` at `index`."""
    depth = 0
    for position in range(index, len(text)):
        if text[position] == opening:
            depth += 1
        elif text[position] == closing:
            depth -= 1
            if depth == 0:
                return position
    raise ExpansionError(f"{text}: bad array subscript")


async def assoc_key(subscript: str, state: ShellState, run_substitution: RunSubstitution) -> str:
    key = await words.expand_word_unsplit(_subscript_word(subscript), state, run_substitution)
    if not key:
        raise ExpansionError(f"{subscript}: bad array subscript" if subscript else "[]: bad array subscript")
    return str(key)


def _quoted(subscript: str) -> bool:
    return "'" in subscript or '"' in subscript


async def indexed_subscript(subscript: str, elements: dict[Any, str], state: ShellState,
                            run_substitution: RunSubstitution) -> int:
    """An indexed array's subscript with quotes in it (`a["$i"]`): quotes removed, then arithmetic
    (the library's arithmetic read the quotes)."""
    text = await words.expand_word_unsplit(_subscript_word(subscript), state, run_substitution)
    return _index_of(elements, arithmetic.evaluate_arithmetic(str(text), state), subscript)


def _index_of(elements: dict[Any, str], index: int, subscript: str) -> int:
    if index < 0:
        index += max(elements, default=-1) + 1
        if index < 0:
            raise ExpansionError(f"{subscript}: bad array subscript")
    return index


# -- expansion ---------------------------------------------------------------------------------------
_resolve_reference = words.resolve_parameter_reference
_array_elements = words.array_elements
_expand_braced = words.expand_braced_parameter


def array_elements(name: str, state: ShellState) -> dict[Any, str]:
    elements = state.arrays.get(name)
    if isinstance(elements, AssocArray):
        return elements  # read only: every path that changes one is here
    return dict(_array_elements(name, state))


async def resolve_parameter_reference(name: str, subscript: str | None, state: ShellState,
                                      run_substitution: RunSubstitution, split_positional: bool) -> Any:
    elements = state.arrays.get(name)
    if isinstance(elements, AssocArray) and subscript is not None and subscript not in ALL:
        key = await assoc_key(subscript, state, run_substitution)
        return words.ParameterReference(name=name, values=[elements.get(key, "")], is_set=key in elements,
                                        all_elements=False, joiner="")
    if elements is not None and subscript is not None and subscript not in ALL and _quoted(subscript):
        index = await indexed_subscript(subscript, elements, state, run_substitution)
        return words.ParameterReference(name=name, values=[elements.get(index, "")], is_set=index in elements,
                                        all_elements=False, joiner="")
    return await _resolve_reference(name, subscript, state, run_substitution, split_positional)


async def expand_braced_parameter(expression: str, state: ShellState, run_substitution: RunSubstitution,
                                  in_double_quotes: bool = True, split_positional: bool = False) -> str:
    """`${!a[@]}` and `${!a[*]}`: the keys, one field each when quoted with @ (the library joined
    them with spaces: `for i in "${!a[@]}"` ran once with "0 1 2")."""
    match = words.PARAMETER_PATTERN.match(expression)
    if match is None or match.group(1) != "!" or match.group(3) not in ALL or expression.startswith("#"):
        return str(await _expand_braced(expression, state, run_substitution, in_double_quotes, split_positional))
    name, subscript, rest = match.group(2), match.group(3), match.group(4)
    keys = [str(key) for key in array_elements(name, state)]
    if subscript == "@" and split_positional:
        joiner = words.POSITIONAL_FIELD_SEPARATOR
    elif subscript == "*" and in_double_quotes:
        joiner = words.field_separators(state)[:1]
    else:
        joiner = " "
    if not rest:
        return joiner.join(keys)
    reference = words.ParameterReference(name, keys, bool(keys), True, joiner)
    return str(await words.apply_parameter_operator(reference, rest, state, run_substitution, in_double_quotes))


# -- compound assignments ----------------------------------------------------------------------------
def _keyed_split(word: Word) -> tuple[Word, Word] | None:
    """A compound-assignment element `[k]=v` as (key word, value word); None for a plain one."""
    if not word.parts or word.parts[0].quote != QuoteStyle.NONE or not word.parts[0].text.startswith("["):
        return None
    depth = 0
    for number, part in enumerate(word.parts):
        if part.quote != QuoteStyle.NONE:
            continue
        for offset, character in enumerate(part.text):
            if number == 0 and offset == 0:
                continue
            if character == "[":
                depth += 1
            elif character == "]" and depth:
                depth -= 1
            elif character == "]" and part.text.startswith("]=", offset):
                key_parts = [*word.parts[:number], WordPart(part.text[:offset], QuoteStyle.NONE)]
                key_parts[0] = WordPart(key_parts[0].text[1:], QuoteStyle.NONE)
                value_parts = [WordPart(part.text[offset + 2:], QuoteStyle.NONE), *word.parts[number + 1:]]
                return (Word(parts=[p for p in key_parts if p.text or p.quote != QuoteStyle.NONE]),
                        Word(parts=[p for p in value_parts if p.text or p.quote != QuoteStyle.NONE]))
    return None


async def _compound_elements(array_words: Iterable[Word], state: ShellState,
                             run_substitution: RunSubstitution) -> list[tuple[str | None, str]]:
    """The elements of `(...)`: (the key's text, expanded, or None) and the value."""
    elements: list[tuple[str | None, str]] = []
    for word in array_words:
        keyed = _keyed_split(word)
        if keyed is None:
            elements.extend((None, value) for value in await words.expand_word(word, state, run_substitution))
        else:
            key = await words.expand_word_unsplit(keyed[0], state, run_substitution)
            value = await words.expand_word_unsplit(keyed[1], state, run_substitution)
            elements.append((str(key), str(value)))
    return elements


def _fill_assoc(target: AssocArray, elements: list[tuple[str | None, str]]) -> None:
    """`m=([k]=v ...)`, or bash 5.1's `m=(k1 v1 k2 v2)` for unkeyed elements."""
    plain = [value for key, value in elements if key is None]
    if plain and len(plain) == len(elements):
        pairs = iter(plain)
        for first in pairs:
            if not first:
                raise ShellError("[]: bad array subscript")
            target[first] = next(pairs, "")
        return
    for key, value in elements:
        if key is None:  # bash: "m: value: must use subscript when assigning associative array"
            continue
        if not key:
            raise ShellError("[]: bad array subscript")
        target[key] = value


def _fill_indexed(target: dict[Any, str], elements: list[tuple[str | None, str]], state: ShellState) -> None:
    following = max(target, default=-1) + 1
    for key, value in elements:
        if key is not None:
            following = _index_of(target, arithmetic.evaluate_arithmetic(key, state), key)
        target[following] = value
        following += 1


_apply_assignment = execute_command.Executor.apply_assignment


async def apply_assignment(self: Any, assignment: Any, state: ShellState, run_substitution: RunSubstitution) -> None:
    name = assignment.name
    current = state.arrays.get(name)
    assoc = isinstance(current, AssocArray)
    keyed = assignment.array_words is not None and any(_keyed_split(w) for w in assignment.array_words)
    if not assoc and assignment.index_text is not None and _quoted(assignment.index_text):
        if name in state.readonly_names:
            raise ShellError(f"{name}: readonly variable")
        indexed = dict(words.array_elements(name, state))
        index = await indexed_subscript(assignment.index_text, indexed, state, run_substitution)
        value = str(await words.expand_word_unsplit(assignment.value, state, run_substitution))
        indexed[index] = indexed.get(index, "") + value if assignment.append else value
        state.variables.pop(name, None)
        state.arrays[name] = dict(sorted(indexed.items()))
        return None
    if not assoc and not keyed:
        return await _apply_assignment(self, assignment, state, run_substitution)
    if name in state.readonly_names:
        raise ShellError(f"{name}: readonly variable")
    if assignment.array_words is not None:
        elements = await _compound_elements(assignment.array_words, state, run_substitution)
        if assoc:
            target = current if assignment.append else AssocArray()
            if not assignment.append:
                target._size = current._size  # bash flushes the table it has
            _fill_assoc(target, elements)
            state.arrays[name] = target
        else:
            indexed = dict(words.array_elements(name, state)) if assignment.append else {}
            _fill_indexed(indexed, elements, state)
            state.variables.pop(name, None)
            state.arrays[name] = dict(sorted(indexed.items()))
        return None
    assert isinstance(current, AssocArray)
    value = str(await words.expand_word_unsplit(assignment.value, state, run_substitution))
    key = "0" if assignment.index_text is None else await assoc_key(assignment.index_text, state, run_substitution)
    current[key] = current.get(key, "") + value if assignment.append else value
    return None


# -- `m["a b"]=v`: an assignment whose subscript is quoted ---------------------------------------------
_as_assignment = words.SimpleCommandTokenizer._as_assignment
QUOTE_MARKS = {QuoteStyle.SINGLE: "'", QuoteStyle.DOUBLE: '"'}
OPEN_SUBSCRIPT = re.compile(r"^([A-Za-z_]\w*)\[")
CLOSE_SUBSCRIPT = re.compile(r"\](\+?)=")


def as_assignment(self: Any, word: Word, array_words: list[Word] | None) -> Any:
    """The library's assignment words, and `name[SUB]=value` whose SUB has quotes in it (the
    library took `m["a b"]=1` for a command named `m[a b]=1`)."""
    found = _as_assignment(self, word, array_words)
    if found is not None or len(word.parts) < 2 or word.parts[0].quote != QuoteStyle.NONE:
        return found
    opening = OPEN_SUBSCRIPT.match(word.parts[0].text)
    if opening is None or "]" in word.parts[0].text:
        return None
    subscript = [word.parts[0].text[opening.end():]]
    for number, part in enumerate(word.parts[1:], start=1):
        if part.quote != QuoteStyle.NONE:
            mark = QUOTE_MARKS.get(part.quote, "")
            subscript.append(f"{mark}{part.text}{mark}")
            continue
        closing = CLOSE_SUBSCRIPT.search(part.text)
        if closing is None:
            if "]" in part.text:
                return None
            subscript.append(part.text)
            continue
        subscript.append(part.text[:closing.start()])
        value_parts = [WordPart(part.text[closing.end():], QuoteStyle.NONE), *word.parts[number + 1:]]
        return words.Assignment(name=opening.group(1), value=Word(parts=[p for p in value_parts if p.text]),
                                index_text="".join(subscript), append=closing.group(1) == "+",
                                array_words=array_words)
    return None


# -- expansion of `declare m=(...)` arguments --------------------------------------------------------
_expand_word = words.expand_word


async def expand_word(word: Word, state: ShellState, run_substitution: RunSubstitution) -> list[str]:
    """A `name=(...)` argument (to declare, local, typeset): its `[k]=v` elements reach the builtin
    marked (KEYED k KEYED v), so that it can tell them from a value that reads `[k]=v`."""
    if word.array_words is None or not any(_keyed_split(w) for w in word.array_words):
        return list(await _expand_word(word, state, run_substitution))
    prefix = await words.expand_word_unsplit(Word(parts=word.parts), state, run_substitution)
    elements = await _compound_elements(word.array_words, state, run_substitution)
    texts = [value if key is None else f"{KEYED}{key}{KEYED}{value}" for key, value in elements]
    return [f"{prefix}({' '.join(shlex.quote(text) for text in texts)})"]


def _literal(value: str) -> list[tuple[str | None, str]] | None:
    if not (value.startswith("(") and value.endswith(")")):
        return None
    try:
        texts = shlex.split(value[1:-1])
    except ValueError:
        return None
    elements: list[tuple[str | None, str]] = []
    for text in texts:
        if text.startswith(KEYED):
            key, _, element = text[1:].partition(KEYED)
            elements.append((key, element))
        else:
            elements.append((None, text))
    return elements


# -- declare, typeset, local -------------------------------------------------------------------------
_declare = shell_builtins.ShellBuiltins.declare
_local = shell_builtins.ShellBuiltins.local
_print_declarations = shell_builtins.ShellBuiltins.print_declarations
_remember_outer_value = shell_builtins.ShellBuiltins.remember_outer_value


def _split_options(arguments: list[str]) -> tuple[list[str], set[str], list[str]]:
    options: list[str] = []
    letters: set[str] = set()
    names: list[str] = []
    for argument in arguments:
        if argument.startswith(("-", "+")) and len(argument) > 1 and not names:
            options.append(argument)
            if argument[0] == "-":
                letters.update(argument[1:])
        else:
            names.append(argument)
    return options, letters, names


def _ours(argument: str, letters: set[str], state: ShellState) -> bool:
    name, separator, value = argument.partition("=")
    return "A" in letters or is_assoc(name.partition("[")[0], state) or \
        (separator != "" and value.startswith("(") and KEYED in value)


async def declare(self: Any, arguments: list[str], stdin: Any, state: ShellState) -> int:
    return await _declaring(self, arguments, stdin, state, _declare, "declare")


async def local(self: Any, arguments: list[str], stdin: Any, state: ShellState) -> int:
    if not state.local_scopes:
        return await _local(self, arguments, stdin, state)
    return await _declaring(self, arguments, stdin, state, _local, "local")


async def _declaring(self: Any, arguments: list[str], stdin: Any, state: ShellState, original: Any,
                     builtin: str) -> int:
    options, letters, names = _split_options(arguments)
    if letters & {"f", "F"} or (("p" in letters) and builtin == "declare") or not names:
        return await original(self, arguments, stdin, state)
    status = 0
    for argument in names:
        if _ours(argument, letters, state):
            code = await _declare_ours(self, argument, letters, state, builtin)
        else:
            code = await original(self, [*options, argument], stdin, state)
        status = status or code
    return status


async def _declare_ours(self: Any, argument: str, letters: set[str], state: ShellState, builtin: str) -> int:
    name, separator, value = argument.partition("=")
    subscript = None
    element = ELEMENT_NAME.match(name)
    if element is not None:
        name, subscript = element.group(1), element.group(2)
    if shell_builtins.NAME_PATTERN.match(name) is None:
        state.write_error(f"bash: {builtin}: `{argument}': not a valid identifier\n")
        return 1
    local = builtin == "local" or (bool(state.local_scopes) and "g" not in letters)
    creates_local = local and name not in state.local_scopes[-1]
    if name in state.readonly_names and (separator or creates_local):
        state.write_error(f"bash: {builtin}: {name}: readonly variable\n")
        return 1
    current = state.arrays.get(name)
    if "A" in letters and current is not None and not isinstance(current, AssocArray) and not creates_local:
        state.write_error(f"bash: {builtin}: {name}: cannot convert indexed to associative array\n")
        return 1
    if creates_local:
        self.remember_outer_value(name, state)
        state.variables.pop(name, None)
        state.arrays.pop(name, None)
        current = None
    literal = _literal(value) if separator else None
    if "A" in letters or isinstance(current, AssocArray):
        target = current if isinstance(current, AssocArray) else AssocArray()
        if not isinstance(current, AssocArray) and name in state.variables:
            target["0"] = state.variables.pop(name)
        try:
            if subscript is not None:
                target[await assoc_key(subscript, state, self.executor.substitution_runner(state))] = value
            elif literal is not None:
                target.clear()
                _fill_assoc(target, literal)
            elif separator:
                target["0"] = value
        except (ExpansionError, ShellError) as error:
            state.write_error(f"bash: {builtin}: {error}\n")
            return 1
        state.arrays[name] = target
    else:  # an indexed array given `[k]=v` elements
        indexed: dict[Any, str] = {}
        _fill_indexed(indexed, literal or [], state)
        state.variables.pop(name, None)
        state.arrays[name] = dict(sorted(indexed.items()))
    if "x" in letters:
        state.exported_names.add(name)
    if "r" in letters:
        state.readonly_names.add(name)
    return 0


SHELL_METAS = frozenset(" \t\n'\"\\|&;()<>!{}*[?]^$`")
ANSI_C_ESCAPES = {"\x1b": "\\E", "\a": "\\a", "\v": "\\v", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                  "\t": "\\t", "\\": "\\\\", "'": "\\'"}


def _unprintable(character: str) -> bool:
    return ord(character) < 32 or ord(character) == 127 or 0xDC80 <= ord(character) <= 0xDCFF


def ansi_c_quote(value: str) -> str:
    """bash's ansic_quote: $'...' with C escapes, other unprintable bytes as \\ooo."""
    out = []
    for character in value:
        if character in ANSI_C_ESCAPES:
            out.append(ANSI_C_ESCAPES[character])
        elif _unprintable(character):
            byte = ord(character) - 0xDC00 if ord(character) >= 0xDC80 else ord(character)
            out.append(f"\\{byte:03o}")
        else:
            out.append(character)
    return "$'" + "".join(out) + "'"


_quote_for_declare = shell_builtins.quote_for_declare


def quote_for_declare(value: str) -> str:
    """`declare -p`'s quoting: $'...' for a value with a control character in it, as bash's
    ansic_shouldquote (the library printed the newline itself inside double quotes)."""
    if any(_unprintable(character) for character in value):
        return ansi_c_quote(value)
    return str(_quote_for_declare(value))


def _quote_key(key: str) -> str:
    """An associative array's key as `declare -p` prints it (assoc_to_assign)."""
    if any(_unprintable(character) for character in key):
        return ansi_c_quote(key)
    if any(character in SHELL_METAS for character in key) or key[:1] in ("~", "#") or key in ALL \
            or "=~" in key or ":~" in key:
        return str(_quote_for_declare(key))
    return key


async def print_declarations(self: Any, names: list[str], state: ShellState) -> int:
    status = 0
    for name in names or sorted(set(state.variables) | set(state.arrays)):
        elements = state.arrays.get(name)
        if not isinstance(elements, AssocArray):
            if name in state.arrays and not state.arrays[name]:
                flags = "a" + ("x" if name in state.exported_names else "") + \
                    ("r" if name in state.readonly_names else "")
                await state.output_sink.write(f"declare -{flags} {name}=()\n")
                continue
            status = await _print_declarations(self, [name], state) or status
            continue
        flags = "A" + ("x" if name in state.exported_names else "") + ("r" if name in state.readonly_names else "")
        if not elements:
            await state.output_sink.write(f"declare -{flags} {name}\n")
            continue
        body = "".join(f"[{_quote_key(key)}]={shell_builtins.quote_for_declare(value)} "
                       for key, value in elements.items())
        await state.output_sink.write(f"declare -{flags} {name}=({body})\n")
    return status


def remember_outer_value(self: Any, name: str, state: ShellState) -> None:
    scope = state.local_scopes[-1]
    elements = state.arrays.get(name)
    if name not in scope and isinstance(elements, AssocArray):
        scope[name] = (state.variables.get(name), elements.copy())
        return
    _remember_outer_value(self, name, state)


# -- unset, [[ -v ]] ---------------------------------------------------------------------------------
_unset = execute_command.Executor.builtin_unset


async def builtin_unset(self: Any, arguments: list[str], stdin: Any, state: ShellState) -> int:
    rest: list[str] = []
    status = 0
    for argument in arguments:
        element = ELEMENT_NAME.match(argument)
        if element is None or not is_assoc(element.group(1), state) or "-f" in rest:
            rest.append(argument)
            continue
        if element.group(1) in state.readonly_names:
            state.write_error(f"bash: unset: {element.group(1)}: cannot unset: readonly variable\n")
            status = 1
            continue
        try:
            key = await assoc_key(element.group(2), state, self.substitution_runner(state))
        except ExpansionError as error:
            state.write_error(f"bash: unset: {error}\n")
            status = 1
            continue
        state.arrays[element.group(1)].pop(key, None)
    if rest and any(not argument.startswith("-") for argument in rest):
        status = await _unset(self, rest, stdin, state) or status
    return status


_conditional_unary = conditional.ConditionalEvaluator._unary


async def conditional_unary(self: Any, operator: str, operand: Any) -> bool:
    if operator != conditional.VARIABLE_SET_TEST or self.skipping:
        return await _conditional_unary(self, operator, operand)
    value = await self._value(operand)
    answer = _set_test(value, self.state)
    return value in self.state.variables if answer is None else answer


def _set_test(value: str, state: ShellState) -> bool | None:
    """`-v NAME` / `-v NAME[SUB]` for arrays (None: a scalar, the library's answer)."""
    element = ELEMENT_NAME.match(value)
    name = element.group(1) if element else value
    elements = state.arrays.get(name)
    if elements is None:
        return None
    if element is None:
        return ("0" if isinstance(elements, AssocArray) else 0) in elements
    subscript = element.group(2)
    if subscript in ALL:
        return bool(elements)
    if isinstance(elements, AssocArray):
        return subscript in elements
    try:
        return _index_of(elements, arithmetic.evaluate_arithmetic(subscript, state), subscript) in elements
    except ExpansionError:
        return False


# -- arithmetic --------------------------------------------------------------------------------------
def tokenize_expression(expression: str) -> list[tuple[str, str]]:
    """The library's tokens, with `name[subscript]` one name token."""
    tokens: list[tuple[str, str]] = []
    position = 0
    stripped = expression.rstrip()
    while position < len(stripped):
        match = arithmetic.TOKEN_PATTERN.match(stripped, position)
        if match is None:
            raise ExpansionError(f"{expression}: syntax error: invalid arithmetic operator")
        kind = match.lastgroup or ""
        text = match.group(kind)
        position = match.end()
        if kind == "name" and stripped.startswith("[", position):
            end = _balanced(stripped, position, "[", "]")
            text, position = stripped[match.start(kind):end + 1], end + 1
        tokens.append((kind, text))
    return tokens


_read_variable = arithmetic.ArithmeticEvaluator._read_variable
_assign = arithmetic.ArithmeticEvaluator._assign


def _element_slot(evaluator: Any, name: str) -> tuple[dict[Any, str], Any] | None:
    """The array and key an arithmetic name stands for, None for a scalar."""
    element = ELEMENT_NAME.match(name)
    base = element.group(1) if element else name
    elements = evaluator.state.arrays.get(base)
    if element is None:
        if elements is None:
            return None
        return elements, ("0" if isinstance(elements, AssocArray) else 0)
    if elements is None:
        elements = evaluator.state.arrays[base] = dict[Any, str]()
        if base in evaluator.state.variables:
            elements[0] = evaluator.state.variables.pop(base)
    subscript = element.group(2)
    if evaluator.depth >= arithmetic.MAX_VARIABLE_DEPTH:  # `a[a[a[...]]]`: bounded as variables are
        raise ExpansionError(f"{name}: expression recursion level exceeded")
    if isinstance(elements, AssocArray):
        if not subscript:
            raise ExpansionError(f"{name}: bad array subscript")
        return elements, subscript
    index = arithmetic.ArithmeticEvaluator(subscript, evaluator.state, evaluator.depth + 1).evaluate()
    return elements, _index_of(elements, index, subscript)


def read_variable(self: Any, name: str) -> int:
    slot = _element_slot(self, name)
    if slot is None:
        return _read_variable(self, name)
    elements, key = slot
    text = elements.get(key, "").strip()
    if not text:
        return 0
    if text.lstrip("-").isdigit():
        return int(text)
    if self.depth >= arithmetic.MAX_VARIABLE_DEPTH:
        raise ExpansionError(f"{name}: expression recursion level exceeded")
    return arithmetic.ArithmeticEvaluator(text, self.state, self.depth + 1).evaluate()


def assign(self: Any, name: str, value: int) -> None:
    if self.skipping:
        return
    slot = _element_slot(self, name)
    if slot is None:
        _assign(self, name, value)
        return
    elements, key = slot
    if isinstance(elements, AssocArray):
        elements[key] = str(value)
        return
    elements[key] = str(value)
    base = ELEMENT_NAME.match(name)
    array_name = base.group(1) if base else name
    self.state.arrays[array_name] = dict(sorted(elements.items()))


_installed = False


def install() -> None:
    """Patch the library (once)."""
    global _installed
    if _installed:
        return
    _installed = True
    words.array_elements = array_elements
    execute_command.array_elements = array_elements
    words.resolve_parameter_reference = resolve_parameter_reference
    words.expand_braced_parameter = expand_braced_parameter
    words.expand_word = expand_word
    words.ALL_ELEMENTS_EXPANSION_PATTERN = re.compile(r"^(\$@|\$\{@\}|\$\{!?[A-Za-z_]\w*\[@\]\})$")
    for module in (execute_command, shell_builtins, conditional):
        for attribute, patched in (("expand_word", expand_word), ("array_elements", array_elements),
                                   ("expand_braced_parameter", expand_braced_parameter)):
            if hasattr(module, attribute):
                setattr(module, attribute, patched)
    words.SimpleCommandTokenizer._as_assignment = as_assignment
    execute_command.Executor.apply_assignment = apply_assignment
    execute_command.Executor.builtin_unset = builtin_unset
    shell_builtins.ShellBuiltins.declare = declare
    shell_builtins.ShellBuiltins.local = local
    shell_builtins.ShellBuiltins.print_declarations = print_declarations
    shell_builtins.ShellBuiltins.remember_outer_value = remember_outer_value
    shell_builtins.quote_for_declare = quote_for_declare
    conditional.ConditionalEvaluator._unary = conditional_unary
    arithmetic.tokenize_expression = tokenize_expression
    arithmetic.ArithmeticEvaluator._read_variable = read_variable
    arithmetic.ArithmeticEvaluator._assign = assign
