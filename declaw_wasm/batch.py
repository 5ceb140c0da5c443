"""Batch evaluation on Ray Data (needs `declaw-wasm[ray]`): `run_batch(dataset, ...)` runs each
row's code (and tests) in a sandbox and adds its stdout, stderr, exit code and time; see
`declaw_wasm._ray.batch` and docs/scale.md."""

from ._ray.batch import SandboxRunner, run_batch

__all__ = ["SandboxRunner", "run_batch"]
