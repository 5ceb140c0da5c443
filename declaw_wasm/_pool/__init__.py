"""The process-pool backend (`processes[:N]`): sandboxes in worker processes on this machine.

For crash isolation. `host.py` is a worker's side (also the Ray actor's), `client.py` the agent's
side of a hosted sandbox (also Ray's), `pool.py` the workers and placement, `worker.py` a
worker's main loop, `codec.py` what crosses the pipe. See docs/scale.md."""
