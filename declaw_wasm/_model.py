"""The base of every public data model: pydantic, with its validator built on first use.

Defining a pydantic model builds its validator and serializer at once (~1 ms each); declaw-wasm
has ~60 models (charts, results, the wire), and a program that only runs commands uses a few.
`defer_build` moves the work to a model's first use, so `import declaw_wasm` stays cheap (a
serverless cold start pays for what it uses). Behaviour is pydantic's, unchanged."""

import inspect
from typing import Any, Callable, TypeVar, cast

from pydantic import BaseModel, ConfigDict

M = TypeVar("M", bound=BaseModel)


class Model(BaseModel):
    model_config = ConfigDict(defer_build=True)


_factories: dict[type[BaseModel], tuple[tuple[str, Callable[[], Any]], ...]] = {}


def _plain_factories(model: type[BaseModel]) -> tuple[tuple[str, Callable[[], Any]], ...]:
    """The model's fields with a default factory, each with it (none if a factory takes the
    validated data: those are left to pydantic)."""
    made: list[tuple[str, Callable[[], Any]]] = []
    for name, field in model.model_fields.items():
        factory = field.default_factory
        if factory is None:
            continue
        try:  # pydantic's rule: one positional parameter without a default takes the data
            params = list(inspect.signature(factory).parameters.values())
        except (TypeError, ValueError):  # a builtin without a signature takes nothing
            params = []
        takes_data = len(params) == 1 and params[0].default is inspect.Parameter.empty and \
            params[0].kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        if takes_data:
            return ()
        made.append((name, cast(Callable[[], Any], factory)))
    return tuple(made)


def construct(model: type[M], **values: Any) -> M:
    """`model.model_construct(**values)`: an instance from the host's own, already well-typed
    values, without validation (and without building the model's validator). The one way the
    package constructs models unvalidated.

    Each field left out that has a `default_factory` is made here, by calling the factory:
    pydantic's `model_construct` inspects the factory's signature on every call (for builtins like
    `list`, `inspect.signature` parses a text signature with `ast`: ~45 µs a field, and `ast`
    from several threads at once can fail on CPython 3.11). `model_fields_set` stays the fields
    given, as `model_construct` sets it."""
    factories = _factories.get(model)
    if factories is None:
        factories = _factories[model] = _plain_factories(model)
    if not factories:
        return model.model_construct(**values)
    given = {name for name, field in model.model_fields.items() if name in values or field.alias in values}
    for name, factory in factories:
        if name not in values:
            values[name] = factory()
    return model.model_construct(given, **values)


def build_all() -> None:
    """Build every deferred model now (the server's OpenAPI document needs them built: pydantic
    before 2.14 cannot encode a field's default that is a model whose serializer is not built)."""
    pending: list[type[Model]] = list(Model.__subclasses__())
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        if not model.__pydantic_complete__ or type(model.__pydantic_serializer__).__name__.startswith("Mock"):
            model.model_rebuild(force=True)
