"""Resource limits applied to each guest. (The limits issue extends this: fuel, disk, counts.)"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Per-sandbox limits; every guest of the sandbox runs under them."""

    model_config = ConfigDict(frozen=True)

    memory_limit: int = Field(1 << 30, gt=64 << 20, description="linear memory per guest, bytes")
    output_limit: int = Field(16 << 20, gt=0, description="bytes kept per output stream")
