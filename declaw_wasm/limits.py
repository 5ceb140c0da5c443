"""Resource limits: per sandbox (`Sandbox.create(limits=Limits(...))`) and per process.

What hitting each one looks like is in docs/limits.md. The number of live sandboxes per process
is a setting (`DECLAW_WASM_MAX_SANDBOXES`, settings.py)."""

from __future__ import annotations

from typing import Optional

from pydantic import ConfigDict, Field

from ._model import Model

# A command line is one argument of `bash -c`, and Linux refuses an argument of this many bytes
# or more (MAX_ARG_STRLEN, with its NUL: E2BIG). It also bounds the in-guest parser, whose time
# grows faster than linearly with the length of one word (128 KiB: ~1.6 s; 1 MB: ~1 min).
MAX_COMMAND_LINE = 128 * 1024


class Limits(Model):
    """Per-sandbox limits; every guest of the sandbox runs under them."""

    model_config = ConfigDict(frozen=True)

    memory_limit: int = Field(1 << 30, gt=64 << 20, description="linear memory per guest, bytes")
    output_limit: int = Field(16 << 20, gt=0, description="bytes kept per output stream")
    max_processes: int = Field(64, gt=0, description="commands and PTYs running at once")
    disk_bytes: int = Field(1 << 30, gt=0, description="bytes on disk under /home/user and /tmp")
    disk_files: int = Field(100_000, gt=0, description="files and folders under /home/user and /tmp")
    cpu_instructions: Optional[int] = Field(
        None, gt=0, lt=1 << 63,
        description="instructions each command line and each run_code cell may run (WebAssembly "
                    "instructions, counted by Wasmtime's fuel: Python code runs ~2-6e9 of them per "
                    "second on a 2023 x86 core); needs the fuel build, `declaw-wasm warmup --fuel`")
    # egress (declaw_wasm/_egress, docs/egress.md): what one sandbox's network may use
    net_connections: int = Field(64, gt=0, description="open network connections at once")
    net_connection_bytes: int = Field(1 << 30, gt=0, description="bytes in + out per connection")
    net_sandbox_bytes: int = Field(8 << 30, gt=0, description="bytes in + out per sandbox, in all")
    net_connect_timeout: float = Field(10.0, gt=0, description="seconds to resolve and connect")
    net_idle_timeout: float = Field(300.0, gt=0, description="seconds a waiting read may see no traffic")
    net_header_bytes: int = Field(64 << 10, ge=1024, description="bytes of one HTTP request or response head")
    net_guard_body_bytes: int = Field(16 << 20, gt=0, description="request body bytes a content guard may hold "
                                      "(raw, and again decoded)")
    net_guard_response_bytes: int = Field(256 << 20, gt=0, description="decoded response bytes a content "
                                          "guard reads (past it the response is cut)")
    net_guard_scan_bytes: int = Field(4 << 20, gt=0, description="response bytes held back for a blocking "
                                      "injection scan (past it: released window by window)")

    def over_disk_quota(self, used_bytes: int, used_files: int) -> str:
        """What is over the disk quota ("" if nothing)."""
        if used_bytes > self.disk_bytes:
            return f"disk quota exceeded: {used_bytes} bytes used, limit {self.disk_bytes} (Limits.disk_bytes)"
        if used_files > self.disk_files:
            return f"disk quota exceeded: {used_files} files, limit {self.disk_files} (Limits.disk_files)"
        return ""
