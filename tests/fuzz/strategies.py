"""Hypothesis strategies for door requests, derived from the ops' declarations
(declaw_wasm/_wasm/door.py): requests each declaration accepts (with the most hostile content
it allows: NULs, line breaks, U+2028, path tricks, edge numbers) and requests it must refuse
(wrong types, one past every bound, characters a field does not allow, unknown and missing
fields, nested junk), and raw frames (garbage, truncations, bombs)."""

from __future__ import annotations

import functools
import math
import struct
from typing import Any, Mapping, Sequence

import msgpack
from hypothesis import strategies as st

from declaw_wasm._wasm.door import (MAX_DEPTH, Bool, Bytes, Field, Int, Json, Keyed, List, Map, Num, Op,
                                    Str, Word)

# text that has broken parsers before: separators, controls, traversal, options, injections
NASTY_TEXT = ["", "\x00", "\n", "\r\n", "\r", "\x0b", "\x1b[31m", "\u2028", "\u2029", "\ufeff", "\u202e",
              "..", "../../etc/passwd", "/", "/etc/passwd", "//", "/tmp/../..", "~", ".", "-", "--",
              "-e .", "--index-url=http://127.0.0.1:9/", "-r /etc/passwd", "$(id)", "`id`", "%s%n",
              "a" * 300, "é" * 40, "\U0001F600", "localhost", "127.0.0.1", "::1", "[::1]", "0x7f000001",
              "169.254.169.254", "xn--", "a..b", "*.example", "\\\\host\\share", "C:\\", "nul", "con"]
EDGE_INTS = [0, 1, -1, 2, 255, 256, 65535, 65536, 1 << 30, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32,
             1 << 62, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, -(1 << 31), -(1 << 63)]
EDGE_FLOATS = [0.0, -0.0, 0.5, 1e-300, 1e300, -1e300, math.inf, -math.inf, math.nan]


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


JUNK = [None, True, False, b"", b"\x00" * 8, "", [], {}, [None], {"": None}, {"op": "exit"}, nested(MAX_DEPTH + 4),
        nested(20), [[]] * 50, {str(i): i for i in range(40)}, 1.5, -7, 1 << 63]

text_any = st.one_of(st.sampled_from(NASTY_TEXT), st.text(max_size=40),
                     st.text(st.characters(codec="utf-8"), max_size=20))


# Named functions, not lambdas, throughout: Hypothesis reads a lambda's source (with `ast`) to
# describe or rewrite it, and CPython 3.11's `ast` raised "AST constructor recursion depth
# mismatch" doing so beside the guest tier's threads (tests/guards/test_bodies.py met it).
def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(inner, max_size=6), st.dictionaries(text_any, inner, max_size=6))


def packed(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def _packed_list(items: tuple[Any, ...]) -> bytes:
    return packed(list(items))


plain = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 64) - 1), st.floats(), text_any,
              st.binary(max_size=40)),
    _containers, max_leaves=30)


# -- what a declaration accepts ---------------------------------------------------------------------

def _text(spec: Str) -> st.SearchStrategy[str]:
    pool = [t for t in NASTY_TEXT if spec.min_len <= len(t) <= spec.max_len]
    top = min(spec.max_len, 60)
    low = min(spec.min_len, top)
    edges = [("a" * spec.max_len)] if spec.max_len <= 5000 else []
    generated = st.text(st.characters(codec="utf-8"), min_size=low, max_size=top)
    return st.one_of(st.sampled_from(pool) if pool else st.nothing(), generated,
                     st.sampled_from(edges) if edges else st.nothing()).filter(
        functools.partial(_fits, spec))


def _fits(spec: Str, text: str) -> bool:
    return spec.min_len <= len(text) <= spec.max_len and bool(spec.chars.test(text))


def _unknown_key(known: Mapping[str, Any], key: Any) -> bool:
    return key not in known


def _merged(pair: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
    return {**pair[1], **pair[0]}


def accepted(spec: Field) -> st.SearchStrategy[Any]:
    """Values `spec` accepts (None among them when it allows it)."""
    base: st.SearchStrategy[Any]
    if isinstance(spec, Int):
        edges: Sequence[float] = [v for v in EDGE_INTS if spec.low <= v <= spec.high] + [spec.low, spec.high]
        base = st.one_of(st.sampled_from(edges), st.integers(spec.low, spec.high))
    elif isinstance(spec, Num):
        edges = [v for v in EDGE_INTS + EDGE_FLOATS if spec.low <= v <= spec.high]
        base = st.one_of(st.sampled_from(edges), st.floats(spec.low, spec.high, allow_nan=False))
    elif isinstance(spec, Bool):
        base = st.booleans()
    elif isinstance(spec, Str):
        base = _text(spec)
    elif isinstance(spec, Word):
        base = st.sampled_from(spec.words)
    elif isinstance(spec, Bytes):
        base = st.one_of(st.binary(max_size=min(spec.max_len, 200)),
                         st.sampled_from([b"\x00" * 64, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\xc1\xff" * 8]))
    elif isinstance(spec, List):
        base = st.lists(accepted(spec.items), max_size=min(spec.max_items, 6))
    elif isinstance(spec, Map):
        base = st.dictionaries(accepted(spec.keys), accepted(spec.values), max_size=min(spec.max_items, 6))
    elif isinstance(spec, Keyed):
        base = st.tuples(st.fixed_dictionaries({}, optional={k: accepted(v) for k, v in spec.known.items()}),
                         st.dictionaries(accepted(spec.keys).filter(functools.partial(_unknown_key, spec.known)),
                                         accepted(spec.others), max_size=3)).map(_merged)
    elif isinstance(spec, Json):
        base = plain
    else:
        raise TypeError(f"no strategy for {spec!r}")
    return st.one_of(st.none(), base) if spec.null else base


def typical(spec: Field) -> Any:
    """One value `spec` accepts, plainly (for a test that calls every op once)."""
    if isinstance(spec, (Int, Num)):
        return max(spec.low, min(spec.high, 1))
    if isinstance(spec, Bool):
        return True
    if isinstance(spec, Str):
        return next(t for t in ("x", "a-1", "/tmp/x", "1.0", "a" * max(spec.min_len, 1))
                    if spec.min_len <= len(t) <= spec.max_len and spec.chars.test(t))
    if isinstance(spec, Word):
        return spec.words[0]
    if isinstance(spec, Bytes):
        return b"\x00x"
    if isinstance(spec, List):
        return [typical(spec.items)]
    if isinstance(spec, Map):
        return {typical(spec.keys): typical(spec.values)}
    return {"text/plain": "x"}


def typical_request(op: Op) -> dict[str, Any]:
    """A request `op` accepts, with every field it declares."""
    return {"op": op.name, **{name: typical(spec) for name, spec in op.fields.items()}}


MIME = ["text/plain", "text/html", "text/markdown", "image/png", "image/jpeg", "image/svg+xml", "application/pdf",
        "text/latex", "application/json", "application/javascript", "e2b/chart", "e2b/data",
        "application/vnd.plotly.v1+json"]
CHART = st.fixed_dictionaries({"type": st.sampled_from(["line", "bar", "scatter", "pie", "box_and_whisker",
                                                        "superchart", "unknown", "x"])},
                              optional={"title": text_any, "elements": plain, "x_label": plain, "y_unit": plain})
PAYLOADS = st.one_of(st.tuples(st.lists(plain, max_size=3), st.dictionaries(text_any, plain, max_size=3)).map(
    _packed_list), st.binary(max_size=40), plain.map(packed))
# (op, field) -> values that reach past the generic ones: names the host knows, shapes it parses
HINTS: dict[tuple[str, str], st.SearchStrategy[Any]] = {
    ("result", "data"): st.dictionaries(st.sampled_from(MIME), st.one_of(plain, CHART), max_size=4),
    ("tools.call", "name"): st.sampled_from(["echo", "boom", "opaque", "nested", "nope"]),
    ("tools.start", "name"): st.sampled_from(["echo", "boom", "opaque", "nested", "nope"]),
    ("tools.call", "payload"): PAYLOADS,
    ("tools.start", "payload"): PAYLOADS,
    ("tools.wait", "id"): st.integers(0, 64),
}


def _passes(spec: Field, value: Any) -> bool:
    return spec.check(value) is None


def _field(op: Op, name: str, spec: Field) -> st.SearchStrategy[Any]:
    hint = HINTS.get((op.name, name))
    return accepted(spec) if hint is None else st.one_of(hint.filter(functools.partial(_passes, spec)),
                                                         accepted(spec))


def accepted_request(op: Op) -> st.SearchStrategy[dict[str, Any]]:
    """A request `op`'s declaration accepts: its required fields and some of the others."""
    required = {name: _field(op, name, spec) for name, spec in op.fields.items() if spec.required}
    optional = {name: _field(op, name, spec) for name, spec in op.fields.items() if not spec.required}
    return st.fixed_dictionaries({"op": st.just(op.name), **required}, optional=optional)


# -- what a declaration refuses ---------------------------------------------------------------------

def _past_bounds(spec: Field) -> list[st.SearchStrategy[Any]]:
    """Values one past a scalar field's bounds, or with a character it does not allow."""
    options: list[st.SearchStrategy[Any]] = []
    if isinstance(spec, Int):
        outside = [v for v in (spec.low - 1, spec.high + 1) if -(1 << 63) <= v < (1 << 64)]
        options += [st.sampled_from(outside)] if outside else []
        options.append(st.sampled_from([float(spec.low), True, str(spec.low)]))
    elif isinstance(spec, Num):
        options.append(st.sampled_from([v for v in (spec.low - 1, spec.high * 2, math.nan) if spec.check(v)]
                                       or [math.nan]))
    elif isinstance(spec, Str):
        options += [st.just("a" * (spec.max_len + 1))] if spec.max_len < 1 << 20 else []
        bad = [t for t in NASTY_TEXT if not spec.chars.test(t)]
        options += [st.sampled_from(bad).map(functools.partial(_prefixed, spec.max_len))] if bad else []
        options.append(st.just(b"bytes, not text"))
    elif isinstance(spec, Word):
        options.append(st.sampled_from([w.upper() + "x" for w in spec.words] + [b"pipe", ""]))
    elif isinstance(spec, Bytes):
        options += [st.just(b"x" * (spec.max_len + 1))] if spec.max_len < 4 << 20 else []
        options.append(st.just("text, not bytes"))
    return options


def _prefixed(max_len: int, text: str) -> str:
    return ("a" + text)[:max_len]


def _alone(value: Any) -> list[Any]:
    return [value]


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _key_of_none(key: str) -> dict[str, Any]:
    return {key: None}


def _not_allowed_none(spec: Field, value: Any) -> bool:
    return value is not None or not spec.null


def _only(key: str, value: Any) -> dict[str, Any]:
    return {key: value}


def _with(name: str, pair: tuple[dict[str, Any], Any]) -> dict[str, Any]:
    return {**pair[0], name: pair[1]}


def _without(name: str, request: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k != name}


def _refused(spec: Field) -> st.SearchStrategy[Any]:
    """Values `spec` must refuse: another type, one past a bound, a character it does not allow
    (nothing for a field that takes any plain value)."""
    if isinstance(spec, Json):
        return st.nothing()
    wrong = st.sampled_from([v for v in JUNK if not (spec.null and v is None) and spec.check(v) is not None])
    options: list[st.SearchStrategy[Any]] = [wrong, *_past_bounds(spec)]
    if isinstance(spec, List):
        options.append(st.just([None] * (spec.max_items + 1) if spec.max_items < 1 << 16 else [None]))
        options.append(_refused(spec.items).map(_alone))
    elif isinstance(spec, Keyed):
        options += [_refused(known).map(functools.partial(_only, key))
                    for key, known in spec.known.items() if not isinstance(known, Json)]
    elif isinstance(spec, Map):
        if not isinstance(spec.values, Json):
            options.append(_refused(spec.values).map(functools.partial(_only, "k")))
        options.append(_refused(spec.keys).filter(_is_text).map(_key_of_none))
    return st.one_of(*options).filter(functools.partial(_not_allowed_none, spec))


def refused_request(op: Op) -> st.SearchStrategy[dict[str, Any]]:
    """A request `op`'s declaration must refuse: one field broken, an unknown field, or a
    required one missing."""
    choices: list[st.SearchStrategy[dict[str, Any]]] = []
    for name, spec in op.fields.items():
        if isinstance(spec, Json):
            continue
        choices.append(st.tuples(accepted_request(op), _refused(spec)).map(
            functools.partial(_with, name)))
        if spec.required:
            choices.append(accepted_request(op).map(functools.partial(_without, name)))
    unknown = st.sampled_from(["extra", "OP", "op ", "\x00", "__class__", "id2", "password", "a" * 200])
    choices.append(st.tuples(accepted_request(op), unknown, plain).map(_with_unknown))
    return st.one_of(*choices)


def _with_unknown(triple: tuple[dict[str, Any], str, Any]) -> dict[str, Any]:
    return {**triple[0], triple[1]: triple[2]}


def request(op: Op) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(accepted_request(op), refused_request(op))


# -- raw frames -----------------------------------------------------------------------------------------

def _bomb(kind: str, n: int) -> bytes:
    if kind == "empty arrays":
        return b"\xdd" + struct.pack(">I", n) + b"\x90" * n
    if kind == "empty maps":
        return b"\xdd" + struct.pack(">I", n) + b"\x80" * n
    if kind == "declared, not there":
        return (b"\xdd" + struct.pack(">I", 1 << 31)) * 40 + b"\xc0" * 64
    if kind == "deep":
        return b"\x91" * n + b"\xc0"
    if kind == "deep maps":
        return b"\x81\xa1k" * n + b"\xc0"
    return b"\xdf" + struct.pack(">I", n) + b"".join(b"\xa2" + struct.pack(">H", i) + b"\xc0" for i in range(n))


def _bomb_of(pair: tuple[str, int]) -> bytes:
    return _bomb(*pair)


def _cut_short(pair: tuple[Any, int]) -> bytes:
    return packed(pair[0])[: -pair[1] or None]


frames = st.one_of(
    st.binary(max_size=200),
    plain.map(packed),
    st.tuples(st.sampled_from(["empty arrays", "empty maps", "declared, not there", "deep", "deep maps", "keys"]),
              st.sampled_from([70, 1000, 5000])).map(_bomb_of),
    st.tuples(plain, st.integers(0, 30)).map(_cut_short),
    st.sampled_from([b"\xc1", b"\xc7\x01\x05x", b"\xd6\xff\x00\x00\x00\x01", b"\x81\xa2op\xa4exit" + b"\xc0",
                     msgpack.packb({"op": "exit", "code": msgpack.Timestamp(1)}),
                     b"\x82\xa2op\xa5stdin\xa2op\xa4exit"]),
)
