"""The Ray backend (`ray[:address]`): sandboxes hosted by Ray actors across a cluster.

`actor.py` is the host actor (the pool's `Host`, placed by Ray), `sandboxes.py` the driver's side
(placement, ids, secrets kept inline, restoring checkpointed sandboxes whose node died), `batch.py`
the Ray Data helper for eval and RL rollouts. Ray is the
optional extra `declaw-wasm[ray]`, imported only when this backend is used. See docs/scale.md."""
