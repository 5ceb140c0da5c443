"""The base of every public data model: pydantic, with its validator built on first use.

Defining a pydantic model builds its validator and serializer at once (~1 ms each); declaw-wasm
has ~60 models (charts, results, the wire), and a program that only runs commands uses a few.
`defer_build` moves the work to a model's first use, so `import declaw_wasm` stays cheap (a
serverless cold start pays for what it uses). Behaviour is pydantic's, unchanged."""

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(defer_build=True)


def build_all() -> None:
    """Build every deferred model now (the server's OpenAPI document needs them built: pydantic
    before 2.14 cannot encode a field's default that is a model whose serializer is not built)."""
    pending: list[type[Model]] = list(Model.__subclasses__())
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        if not model.__pydantic_complete__ or type(model.__pydantic_serializer__).__name__.startswith("Mock"):
            model.model_rebuild(force=True)
