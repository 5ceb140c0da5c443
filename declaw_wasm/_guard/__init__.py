"""The content-guard engine: declaw's SecurityPolicy enforced at the egress door.

`GuardPipeline` (pipeline.py) implements the relay's hook (contract.py: `ContentGuard`,
`RequestOutcome`, `BlockResponse`, `ResponseFilter`, `GuardCut`) directly, one per sandbox,
owning the sandbox's PII token map (tokens.py). Its parts, one module a job: bodies.py (a body
split into text units and rebuilt), detectors.py (PII), injection.py (the local injection
scanner), invisible_text.py (hidden Unicode), domains.py (a guard's domain list), rehydrate.py
(tokens put back in answers, streamed), response_filter.py (one answer on its way), plugins.py
(engines declaw-wasm does not ship). The configuration it reads is declaw_wasm.security's
(`SecurityPolicy` and its parts), which re-exports this package's public names.
"""
