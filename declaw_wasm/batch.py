"""Batch evaluation on Ray Data: `run_batch(dataset, ...)` runs each row's code in a sandbox.

It needs `declaw-wasm[ray]`; each row's code (and tests) runs in a sandbox, and the row gets
its stdout, stderr, exit code and time; see
`declaw_wasm._ray.batch` and docs/scale.md."""

from ._ray.batch import SandboxRunner, run_batch

__all__ = ["SandboxRunner", "run_batch"]
