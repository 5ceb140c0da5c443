"""Scale-out side by side (issue 19): in-process vs a process pool vs a two-node Ray cluster, in
one run on this machine.

    python3 -m pip install -e '.[bench,ray]' && declaw-wasm warmup
    python3 benchmarks/scale.py [--limit 164] [--clients 4] [-n 30]

- HumanEval's problems as commands (write the program, `python3 it`), `--clients` client threads
  each with a sandbox of its own: throughput in-process, on `processes:2`, and on a local Ray
  cluster of two simulated nodes (`ray.cluster_utils.Cluster`, one CPU each, one host per node).
- Added latency of `commands.run("echo hi")` and `run_code("x=1")` over in-process (medians,
  the backend's and an in-process sandbox's calls alternating, so both see the same load).
- A pool worker SIGKILLed mid-command: how long until its command raises; the other worker's
  command loses no output. The same for a Ray node removed mid-command.
- Coordination: a no-op Ray actor call, and the driver's CPU per command on each backend (what
  one client process spends per command: the ceiling a driver puts on a cluster's throughput).
  The N-node model built from these figures is in benchmarks/notes/2026-11-30-scale-model.md.
- Ray `echo hi` as one call (a foreground command without callbacks) vs streamed (the same with
  an `on_stdout` callback: start, output and end as a stream the driver pulls), alternating.
- Node-loss checkpoints (`lifecycle={"checkpoint": "cell"}`): what a checkpoint adds to a turn
  (a cell, a command that changed nothing, one that wrote a file, a cell in a context holding
  pandas), checkpointed and plain sandboxes alternating on the same pool; and how long after a
  Ray node's removal (a pool worker's SIGKILL) its checkpointed sandbox is restored and running.

`--part latency` runs only the Ray latency comparison, `--part checkpoint` only the checkpoint
figures (minutes instead of a quarter of an hour), `--part pool` only the process pool's added
latency (`echo hi`, `run_code("x=1")`, and a command streaming 1 000 lines to a callback).
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

# Ray's failure signal handler would take wasmtime's trap signals (docs/scale.md)
os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # every Ray address on loopback
import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's
sys.path.insert(0, str(Path(__file__).resolve().parent))

from humaneval import problems, program  # noqa: E402

from declaw_wasm import Sandbox, SandboxException  # noqa: E402

IDLE = 0.2  # s between measured turns of the latency and checkpoint parts (parked guests ready everywhere)
LOOP = "python3 -c 'import time\nfor i in range({n}):\n    print(i, flush=True); time.sleep(0.01)'"


def median_ms(call: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def humaneval(sandboxes: list[Sandbox], items: list[dict[str, Any]]) -> tuple[float, int, float]:
    """(problems per second, failures, driver CPU seconds per problem) with one client thread per
    sandbox taking problems from a shared list."""
    next_index = iter(range(len(items)))
    lock = threading.Lock()
    failures = [0]

    def client(sbx: Sandbox) -> None:
        while True:
            with lock:
                i = next(next_index, None)
            if i is None:
                return
            sbx.files.write(f"/tmp/he/p{i}.py", program(items[i]))
            r = sbx.commands.run(f"python3 /tmp/he/p{i}.py", timeout=60)
            if r.exit_code != 0 or r.stdout != "passed\n":
                with lock:
                    failures[0] += 1

    cpu, start = time.process_time(), time.perf_counter()
    threads = [threading.Thread(target=client, args=(s,)) for s in sandboxes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return len(items) / wall, failures[0], cpu / len(items)


def echo_hi(s: Sandbox) -> Callable[[], object]:
    return lambda: s.commands.run("echo hi")


def cell_x1(s: Sandbox) -> Callable[[], object]:
    return lambda: s.run_code("x=1")


def latencies(sbx: Sandbox, local: Sandbox, n: int) -> tuple[float, float, float, float]:
    """Medians of `echo hi` and `run_code("x=1")` on `sbx` and on the in-process `local`, the
    two alternating so that both see the same load: (echo, cell, local echo, local cell)."""
    for s in (sbx, local):
        s.commands.run("echo hi")
        s.run_code("x = 1")
    echo: dict[int, list[float]] = {0: [], 1: []}
    cell: dict[int, list[float]] = {0: [], 1: []}
    for _ in range(n):
        for i, s in enumerate((sbx, local)):
            echo[i].append(median_ms(echo_hi(s), 1))
            cell[i].append(median_ms(cell_x1(s), 3))
    m = statistics.median
    return m(echo[0]), m(cell[0]), m(echo[1]), m(cell[1])


def killed_mid_command(victim: Sandbox, bystander: Sandbox, kill: Callable[[], None]) -> tuple[float, bool]:
    """(seconds from the kill until the victim's command raises, whether the bystander's command
    lost no output)."""
    doomed = victim.commands.run(LOOP.format(n=100000), background=True)
    survivor = bystander.commands.run(LOOP.format(n=200), background=True)
    while doomed._process.text("stdout").count("\n") < 5:
        time.sleep(0.01)
    start = time.perf_counter()
    kill()
    try:
        doomed.wait()
    except SandboxException:
        pass
    failed_in = time.perf_counter() - start
    intact = survivor.wait().stdout == "".join(f"{i}\n" for i in range(200))
    return failed_in, intact


def run_backend(name: str, where: dict[str, Any], items: list[dict[str, Any]], clients: int,
                n: int) -> dict[str, Any]:
    sandboxes = [Sandbox.create(timeout=3600, **where) for _ in range(clients)]
    for sbx in sandboxes:  # first guest of each sandbox (and of each worker)
        sbx.commands.run("python3 -c 'import json'")
    rate, failed, cpu = humaneval(sandboxes, items)
    with Sandbox.create() as local:
        echo, cell, local_echo, local_cell = latencies(sandboxes[0], local, n)
    for sbx in sandboxes:
        sbx.kill()
    print(f"  {name}: {rate:.1f} problems/s ({failed} failed), echo hi {echo:.1f} ms (in-process "
          f"{local_echo:.1f}), run_code {cell:.2f} ms (in-process {local_cell:.2f}), driver CPU "
          f"{cpu * 1000:.1f} ms/problem", file=sys.stderr)
    return {"rate": rate, "failed": failed, "echo": echo, "cell": cell, "cpu": cpu,
            "added_echo": echo - local_echo, "added_cell": cell - local_cell}


def pool_kill() -> tuple[float, bool]:
    from declaw_wasm._pool.pool import ProcessPool

    pool = ProcessPool(2)
    try:
        victim, bystander = Sandbox.create(backend=pool), Sandbox.create(backend=pool)
        pid = pool.pid_of(victim.sandbox_id)
        assert pid != pool.pid_of(bystander.sandbox_id)
        return killed_mid_command(victim, bystander, lambda: os.kill(pid, signal.SIGKILL))
    finally:
        pool.close()


def ray_cluster() -> Any:
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    return cluster


def ray_node_loss(cluster: Any) -> tuple[float, bool]:
    from declaw_wasm._ray.sandboxes import RaySandboxes

    node = cluster.add_node(num_cpus=1, resources={"doomed": 1})
    cluster.wait_for_nodes()
    doomed = RaySandboxes(hosts=1, host_cpus=0.5, host_memory=256 << 20, host_resources={"doomed": 1})
    victim, bystander = Sandbox.create(backend=doomed), Sandbox.create(backend="ray")
    return killed_mid_command(victim, bystander, lambda: cluster.remove_node(node))


def ray_batch(items: list[dict[str, Any]], copies: int = 3) -> tuple[float, float, int]:
    """(seconds to the first row, rows per second after it, failures) of HumanEval (`copies`
    times over) through the Ray Data helper: two actors (one a node), each with an in-process
    sandbox, batches of 16 rows. The first row waits for Ray Data to plan and start its actors."""
    import ray

    from declaw_wasm.batch import run_batch

    rows = ray.data.from_items([{"code": program(p)} for p in items * copies])
    start = time.perf_counter()
    first, done, failed = 0.0, 0, 0
    for row in run_batch(rows, concurrency=2, batch_size=16, timeout=60, num_cpus=1).iter_rows():
        done += 1
        first = first or time.perf_counter() - start
        failed += row["exit_code"] != 0 or row["stdout"] != "passed\n"
    return first, (done - 1) / (time.perf_counter() - start - first), failed


def ray_single_node_latency(n: int) -> tuple[float, float]:
    """Added latency of `echo hi` and `run_code` on a one-node Ray (`ray.init`): Ray's own cost
    without a second simulated node's processes competing for this machine's two cores."""
    import ray

    from declaw_wasm._ray.sandboxes import RaySandboxes

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        sbx = Sandbox.create(backend=RaySandboxes(hosts=1))
        with Sandbox.create() as local:
            echo, cell, local_echo, local_cell = latencies(sbx, local, n)
        sbx.kill()
    finally:
        ray.shutdown()
    return echo - local_echo, cell - local_cell


def ray_noop_ms(n: int) -> float:
    import ray

    from declaw_wasm._ray.sandboxes import ray_sandboxes

    link = ray_sandboxes()._own()[0]
    return median_ms(lambda: ray.get(link.handle.load.remote()), n * 3)


def noop(_: object) -> None:
    pass


def streamed(s: Sandbox, lines: str) -> Callable[[], object]:
    """`lines` run with its stdout going to a callback (the channel's streaming path)."""
    return lambda: s.commands.run(lines, on_stdout=noop)


def _in_actor(actor: Any, host_id: str) -> float:
    """ms of one `echo hi` run by the host actor itself (`Host.run`), no Ray call around it."""
    from declaw_wasm.wire import RunCommand

    start = time.perf_counter()
    actor.host.run(host_id, RunCommand(cmd="echo hi"), 10.0)
    return (time.perf_counter() - start) * 1000


def ray_call_vs_stream(n: int) -> tuple[float, float, float, float]:
    """On the running Ray backend: medians of `echo hi` in one call, streamed (an on_stdout
    callback), in-process, and inside the host actor (no Ray call: where the rest goes),
    alternating, each after `IDLE` s without a command in any of them: an agent's commands come
    after its model's turn, and a sandbox's next command finds a parked guest only if it comes
    50 ms or more after the last one (_local/parking.py) — back to back, the sandbox measured
    right after another call of its own would start a fresh guest and the comparison would be
    of parking, not of the backends."""
    import ray

    sbx = Sandbox.create(backend="ray")
    hosted: Any = sbx._backend  # noqa: SLF001 -- the benchmark looks under the hood
    times: dict[str, list[float]] = {"call": [], "stream": [], "local": [], "actor": []}
    with Sandbox.create() as local:
        calls = {"call": lambda: sbx.commands.run("echo hi"),
                 "stream": lambda: sbx.commands.run("echo hi", on_stdout=noop),
                 "local": lambda: local.commands.run("echo hi")}
        for call in calls.values():
            call()
        for _ in range(n):
            for name, call in calls.items():
                time.sleep(IDLE)
                times[name].append(median_ms(call, 1))
            time.sleep(IDLE)
            times["actor"].append(ray.get(hosted.link.handle.__ray_call__.remote(_in_actor, hosted.host_id)))
    sbx.kill()
    m = statistics.median
    return m(times["call"]), m(times["stream"]), m(times["local"]), m(times["actor"])


def latency_part(n: int) -> None:
    """Ray's added latency, one call vs streamed, on a 2-node cluster and on one node."""
    import ray

    from declaw_wasm._ray.sandboxes import RaySandboxes, ray_sandboxes

    import declaw_wasm._ray.sandboxes as module

    module._current = None  # a backend for this cluster (an earlier part's is gone with its cluster)
    cluster = ray_cluster()
    try:
        ray_sandboxes(None, hosts=2)
        call, stream, local, actor = ray_call_vs_stream(n)
        with Sandbox.create() as in_process:
            _, cell, _, local_cell = latencies(Sandbox.create(backend="ray"), in_process, n)
        noop_ms = ray_noop_ms(n)
    finally:
        ray.shutdown()
        cluster.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        module._current = RaySandboxes(hosts=1)  # `backend="ray"` on this one-node Ray
        call1, stream1, local1, actor1 = ray_call_vs_stream(n)
    finally:
        ray.shutdown()
    print("\n| Ray | `echo hi` one call | added | streamed (as before) | added | in-process | in the actor, "
          "no Ray call | Ray's part of one call |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, (c, st, lo, ac) in {"2 nodes": (call, stream, local, actor),
                                  "1 node": (call1, stream1, local1, actor1)}.items():
        print(f"| {name} | {c:.1f} | {c - lo:+.1f} | {st:.1f} | {st - lo:+.1f} | {lo:.1f} | {ac:.1f} | "
              f"{c - ac:+.1f} |")
    print(f"2 nodes: run_code(\"x=1\") added {cell - local_cell:+.2f} ms; no-op actor call {noop_ms:.2f} ms")


def checkpoint_costs(n: int) -> dict[str, tuple[float, float]]:
    """Per turn, (plain, checkpointed) medians in ms on `processes:2`, alternating."""
    plain = Sandbox.create(backend="processes:2", timeout=3600)
    kept = Sandbox.create(backend="processes:2", timeout=3600, lifecycle={"checkpoint": "cell"})
    turns: dict[str, Callable[[Sandbox], object]] = {
        "run_code(\"x=1\")": lambda s: s.run_code("x=1"),
        "`echo hi` (no file changed)": lambda s: s.commands.run("echo hi"),
        "`echo hi > f` (a file written)": lambda s: s.commands.run("echo hi > /home/user/f"),
        "files.write (1 KiB)": lambda s: s.files.write("/home/user/g", "x" * 1024),
    }
    heavy = "run_code(\"x=1\"), pandas imported"
    out: dict[str, tuple[float, float]] = {}
    for name, turn in turns.items():
        out[name] = _alternate(plain, kept, turn, n)
    for s in (plain, kept):
        s.run_code("import pandas as pd\ndf = pd.DataFrame({'a': range(1000)})")
    out[heavy] = _alternate(plain, kept, lambda s: s.run_code("x=1"), max(5, n // 3))
    size = max((snap.size_bytes or 0) for snap in kept.list_snapshots())
    print(f"  a checkpoint with pandas imported: {size / 1e6:.1f} MB in the store", file=sys.stderr)
    plain.kill()
    kept.kill()
    return out


def _alternate(a: Sandbox, b: Sandbox, turn: Callable[[Sandbox], object], n: int) -> tuple[float, float]:
    turn(a)
    turn(b)
    times: dict[int, list[float]] = {0: [], 1: []}
    for _ in range(n):
        for i, s in enumerate((a, b)):
            time.sleep(IDLE)  # parked guests ready in both (see `ray_call_vs_stream`)
            times[i].append(median_ms(functools.partial(turn, s), 1))
    return statistics.median(times[0]), statistics.median(times[1])


def restored_after(kill: Callable[[], None], sbx: Sandbox) -> float:
    """Seconds from `kill` (the sandbox's host lost mid-cell) until the sandbox, restored from its
    checkpoint elsewhere, answers a cell with the last completed cell's state."""
    sbx.run_code("x = 41")
    thread = threading.Thread(target=lambda: _swallow(lambda: sbx.run_code("import time; time.sleep(60)")))
    thread.start()
    time.sleep(0.3)
    start = time.perf_counter()
    kill()
    thread.join(60)
    assert sbx.run_code("x + 1").text == "42"
    return time.perf_counter() - start


def _swallow(call: Callable[[], object]) -> None:
    try:
        call()
    except SandboxException:
        pass


def checkpoint_part(n: int) -> None:
    import tempfile

    import ray

    from declaw_wasm._pool.pool import ProcessPool
    from declaw_wasm._ray.sandboxes import RaySandboxes

    os.environ["DECLAW_WASM_STATE"] = tempfile.mkdtemp(prefix="declaw-bench-state-")  # before any worker
    costs = checkpoint_costs(n)
    pool = ProcessPool(2)
    try:
        sbx = Sandbox.create(backend=pool, lifecycle={"checkpoint": "cell"}, timeout=600)
        pool_restore = restored_after(lambda: os.kill(pool.pid_of(sbx.sandbox_id), signal.SIGKILL), sbx)
    finally:
        pool.close()
    cluster = ray_cluster()
    try:
        nodes = [cluster.add_node(num_cpus=1, resources={"ckpt": 1}) for _ in range(2)]
        cluster.wait_for_nodes()
        backend = RaySandboxes(hosts=2, host_cpus=0.5, host_memory=256 << 20, host_resources={"ckpt": 1})
        sbx = Sandbox.create(backend=backend, lifecycle={"checkpoint": "cell"}, timeout=600)
        node = next(x for x in nodes if x.node_id == backend.host_of(sbx.sandbox_id)["node"])
        ray_restore = restored_after(lambda: cluster.remove_node(node), sbx)
    finally:
        ray.shutdown()
        cluster.shutdown()
    print("\n| turn (processes:2, local state folder) | plain ms | checkpointed ms | added |")
    print("|---|---:|---:|---:|")
    for name, (plain, kept) in costs.items():
        print(f"| {name} | {plain:.1f} | {kept:.1f} | {kept - plain:+.1f} |")
    print(f"checkpointed sandbox restored and running after its host died: Ray node removed "
          f"{ray_restore:.2f} s, pool worker SIGKILLed {pool_restore:.2f} s (target 2 s)")


def pool_part(n: int) -> None:
    """The process pool's added latency over in-process (alternating, as `latencies`), and a
    command whose 1 000 lines go to an `on_stdout` callback (the channel's streaming path)."""
    lines = "python3 -c 'import sys\nfor i in range(1000):\n    print(i, flush=True)'"
    with Sandbox.create(backend="processes:2") as pooled, Sandbox.create() as local:
        echo, cell, local_echo, local_cell = latencies(pooled, local, n)
        stream: dict[int, list[float]] = {0: [], 1: []}
        for _ in range(n):
            for i, s in enumerate((pooled, local)):
                time.sleep(IDLE)
                stream[i].append(median_ms(streamed(s, lines), 1))
    m = statistics.median
    print("\n| pool | ms | in-process | added |")
    print("|---|---:|---:|---:|")
    print(f"| `echo hi` | {echo:.2f} | {local_echo:.2f} | {echo - local_echo:+.2f} |")
    print(f"| `run_code(\"x=1\")` | {cell:.2f} | {local_cell:.2f} | {cell - local_cell:+.2f} |")
    pooled_ms, local_ms = m(stream[0]), m(stream[1])
    print(f"| 1 000 lines to on_stdout | {pooled_ms:.1f} | {local_ms:.1f} | {pooled_ms - local_ms:+.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("-n", type=int, default=30)
    parser.add_argument("--part", choices=["all", "latency", "checkpoint", "pool"], default="all")
    args = parser.parse_args()
    if args.part == "latency":
        return latency_part(args.n)
    if args.part == "checkpoint":
        return checkpoint_part(args.n)
    if args.part == "pool":
        return pool_part(args.n)
    items = problems()[: args.limit]
    print(f"HumanEval: {len(items)} problems, {args.clients} client threads", file=sys.stderr)
    # in-process runs next to each other backend (the machine's load drifts over minutes)
    rows = {"in-process": run_backend("in-process", {}, items, args.clients, args.n),
            "processes:2": run_backend("processes:2", {"backend": "processes:2"}, items, args.clients, args.n)}
    pool_failed_in, pool_intact = pool_kill()
    rows["in-process, again"] = run_backend("in-process", {}, items, args.clients, args.n)
    from declaw_wasm._ray.sandboxes import ray_sandboxes

    start = time.perf_counter()
    cluster = ray_cluster()
    print(f"  Ray: two-node cluster up in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    try:
        batch_first, batch_rate, batch_failed = ray_batch(items)  # before the hosts take the CPUs
        print(f"  Ray Data: first row after {batch_first:.1f} s, then {batch_rate:.1f} problems/s "
              f"({batch_failed} failed)", file=sys.stderr)
        ray_sandboxes(None, hosts=2)
        rows["ray (2 nodes)"] = run_backend("ray", {"backend": "ray"}, items, args.clients, args.n)
        noop = ray_noop_ms(args.n)
        node_failed_in, node_intact = ray_node_loss(cluster)
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()
    single_echo, single_cell = ray_single_node_latency(args.n)

    baseline = {"processes:2": "in-process", "ray (2 nodes)": "in-process, again"}
    print("\n| backend | HumanEval problems/s | vs in-process next to it | `echo hi` ms | added | "
          "`run_code(\"x=1\")` ms | added | driver CPU per problem |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        local = rows[baseline.get(name, name)]
        print(f"| {name} | {row['rate']:.1f} | {row['rate'] / local['rate']:.2f}× | {row['echo']:.1f} | "
              f"{row['added_echo']:+.1f} | {row['cell']:.2f} | {row['added_cell']:+.2f} | "
              f"{row['cpu'] * 1000:.1f} ms |")
    print("\nfailures: " + ", ".join(f"{k} {v['failed']}" for k, v in rows.items()))
    print(f"pool worker SIGKILLed mid-command: its command raised after {pool_failed_in * 1000:.0f} ms; "
          f"the other worker's command lost {'no' if pool_intact else 'SOME'} output")
    print(f"Ray node removed mid-command: its command raised after {node_failed_in * 1000:.0f} ms; "
          f"the other node's command lost {'no' if node_intact else 'SOME'} output")
    print(f"Ray no-op actor call (driver -> host -> driver): {noop:.2f} ms")
    print(f"one-node Ray (no simulated second node): added `echo hi` {single_echo:+.1f} ms, "
          f"`run_code` {single_cell:+.2f} ms")
    print(f"Ray Data helper (run_batch, 2 actors, batches of 16, HumanEval x3): first row after "
          f"{batch_first:.1f} s, then {batch_rate:.1f} problems/s "
          f"({batch_rate / rows['in-process, again']['rate']:.2f}× in-process), {batch_failed} failed")
    latency_part(args.n)
    checkpoint_part(args.n)


if __name__ == "__main__":
    main()
