"""Resource limits: per sandbox (`Sandbox.create(limits=Limits(...))`) and per process.

What hitting each one looks like is in README, "Limits". (The limits issue extends this: fuel,
disk quotas.)"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Per-sandbox limits; every guest of the sandbox runs under them."""

    model_config = ConfigDict(frozen=True)

    memory_limit: int = Field(1 << 30, gt=64 << 20, description="linear memory per guest, bytes")
    output_limit: int = Field(16 << 20, gt=0, description="bytes kept per output stream")
    max_processes: int = Field(64, gt=0, description="commands and PTYs running at once")


def max_sandboxes() -> int:
    """Live sandboxes per host process (`DECLAW_WASM_MAX_SANDBOXES`, default 1000): each costs
    a host folder, and its guests threads and memory."""
    import os

    value = os.environ.get("DECLAW_WASM_MAX_SANDBOXES", "1000")
    try:
        return max(1, int(value))
    except ValueError:
        raise ValueError(f"DECLAW_WASM_MAX_SANDBOXES must be a whole number, got {value!r}") from None
