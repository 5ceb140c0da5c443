"""Served vs in-process: what `declaw-wasm serve` adds to a call.

Starts `declaw-wasm serve` as a separate process on a free loopback port (as a user would), then
times the same calls in-process and through the remote SDK (medians of N):

    python3 benchmarks/serve.py [-n 30]
"""

from __future__ import annotations

import argparse
import io
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from typing import Any, Callable, NamedTuple

import httpx

from declaw_wasm import Sandbox, Secret, Volumes


def median_ms(call: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def first_chunk(sbx: Sandbox) -> tuple[float, float]:
    """(ms to the first stdout chunk, ms to the end) of `echo a; sleep 2; echo b`."""
    seen: list[float] = []
    start = time.perf_counter()
    sbx.commands.run("echo a; sleep 2; echo b", on_stdout=lambda _: seen.append(time.perf_counter()))
    end = time.perf_counter()
    return (seen[0] - start) * 1000, (end - start) * 1000


def tar_gz(size: int) -> bytes:
    """A tar.gz holding one file of `size` random (incompressible) bytes."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo("data.bin")
        info.size = size
        tar.addfile(info, io.BytesIO(os.urandom(size)))
    return out.getvalue()


def volume_round(where: dict[str, Any], archive: bytes) -> None:
    Volumes.delete(Volumes.create("bench", archive, **where).volume_id, **where)


def volume_file(where: dict[str, Any], volume_id: str, data: bytes) -> None:
    files = Volumes.files(volume_id, **where)
    files.write("/f.bin", data)
    assert len(files.read("/f.bin")) == len(data)


class Inputs(NamedTuple):
    secret: dict[str, Secret]
    archive: bytes  # a 10 MiB tar.gz
    mib: bytes
    blob: bytes  # 10 MiB


def figures(sbx: Sandbox, where: dict[str, Any], n: int, data: Inputs) -> dict[str, float | str]:
    """The calls timed on one side: in-process (`where` empty) or through the server (`where`
    names it)."""
    secret, archive, mib, blob = data
    vol = Volumes.create("bench-files", **where)
    got: dict[str, float | str] = {
        "create+kill with a secret": median_ms(lambda: Sandbox.create(secrets=secret, **where).kill(),
                                               max(5, n // 3)),
        "volume from 10 MiB tar.gz (+delete)": median_ms(lambda: volume_round(where, archive), 5),
        "volume file write+read 1 MiB": median_ms(lambda: volume_file(where, vol.volume_id, mib), 5),
        "create+kill": median_ms(lambda: Sandbox.create(**where).kill(), max(5, n // 3)),
        "echo hi": median_ms(lambda: sbx.commands.run("echo hi"), n),
        "run_code x=1": median_ms(lambda: sbx.run_code("x = 1"), n),
        "files.exists": median_ms(lambda: sbx.files.exists("/tmp"), n),
        "write 10 MiB": median_ms(lambda: sbx.files.write("/tmp/blob", blob), 5),
        "read 10 MiB": median_ms(lambda: sbx.files.read("/tmp/blob", format="bytes"), 5),
        "first chunk / end": "%.0f / %.0f" % first_chunk(sbx),
    }
    Volumes.delete(vol.volume_id, **where)
    return got


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=30)
    args = parser.parse_args()
    key = secrets.token_hex(16)
    port = free_port()
    os.environ["DECLAW_WASM_STATE"] = tempfile.mkdtemp(prefix="bench-state-")  # volumes: both sides, one store
    env = {**os.environ, "DECLAW_API_KEY": key}
    env.pop("DECLAW_DOMAIN", None)
    server = subprocess.Popen([sys.executable, "-m", "declaw_wasm.cli", "serve", "--port", str(port)], env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(url + "/health", headers={"X-API-Key": key}).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.1)
        local = Sandbox.create()
        remote = Sandbox.create(domain=url, api_key=key)
        for sbx in (local, remote):  # warm both: first guest, first cell
            sbx.commands.run("echo hi")
            sbx.run_code("x = 1")
        blob = os.urandom(10 << 20)
        archive = tar_gz(10 << 20)
        mib = os.urandom(1 << 20)
        secret = {"OPENAI_API_KEY": Secret("sk-bench", hosts=["api.openai.com"])}
        rows: list[tuple[str, dict[str, float | str]]] = []
        for name, sbx in (("in-process", local), ("served", remote)):
            where: dict[str, Any] = {"domain": url, "api_key": key} if sbx is remote else {}
            rows.append((name, figures(sbx, where, args.n, Inputs(secret, archive, mib, blob))))
        errors: list[BaseException] = []

        def client() -> None:
            try:
                with Sandbox.create(domain=url, api_key=key) as sbx:
                    for _ in range(5):
                        assert sbx.commands.run("echo hi").stdout == "hi\n"
            except BaseException as exc:
                errors.append(exc)

        start = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        concurrent = (time.perf_counter() - start) * 1000
        local.kill()
        remote.kill()
        names = list(rows[0][1])
        print(f"| call (median, ms) | {' | '.join(name for name, _ in rows)} |")
        print("|---|" + "---:|" * len(rows))
        for metric in names:
            cells = [v if isinstance(v, str) else f"{v:.1f}" for v in (r[metric] for _, r in rows)]
            print(f"| {metric} | {' | '.join(cells)} |")
        print(f"\n20 concurrent clients (create, 5 x echo hi, kill each): {concurrent:.0f} ms, "
              f"{len(errors)} errors")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
