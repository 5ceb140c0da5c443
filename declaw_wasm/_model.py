"""The base of every public data model: pydantic, with its validator built on first use.

Defining a pydantic model builds its validator and serializer at once (~1 ms each); declaw-wasm
has ~60 models (charts, results, the wire), and a program that only runs commands uses a few.
`defer_build` moves the work to a model's first use, so `import declaw_wasm` stays cheap (a
serverless cold start pays for what it uses). Behaviour is pydantic's, unchanged."""

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(defer_build=True)
