"""Struct sequences as CPython's C modules make them (`pwd.struct_passwd`, `resource.struct_rusage`):
a tuple of the fields, each also an attribute; built from one sequence; `repr`
`module.name(field=value, ...)`; read-only; pickled by the module's name."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the base template has no typing_extensions (typing.Self is 3.11's)
    from typing_extensions import Self


class StructSequence(tuple):
    """The base of each struct sequence type: a subclass names its module (`__module__`) and
    lists `fields`; each field becomes a read-only attribute (annotate them for type checkers)."""

    fields: tuple[str, ...] = ()
    n_sequence_fields = n_fields = n_unnamed_fields = 0
    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for index, field in enumerate(cls.fields):
            setattr(cls, field, property(operator.itemgetter(index)))
        setattr(cls, "__match_args__", cls.fields)  # noqa: B010 - tuple's stub declares none
        cls.n_sequence_fields = cls.n_fields = len(cls.fields)

    def __new__(cls, sequence: Any, dict: Any = None) -> Self:  # noqa: A002 - CPython's name
        values = tuple(sequence)
        if len(values) != len(cls.fields):
            raise TypeError(f"{cls.__module__}.{cls.__qualname__}() takes a {len(cls.fields)}-sequence "
                            f"({len(values)}-sequence given)")
        return super().__new__(cls, values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("readonly attribute")

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value!r}" for name, value in zip(self.fields, self, strict=True))
        return f"{type(self).__module__}.{type(self).__qualname__}({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (tuple(self),)
