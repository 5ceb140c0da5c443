"""The Ray backend (`backend="ray"`), on a real two-node Ray cluster started by the tests
(`ray.cluster_utils.Cluster`, tests/conftest.py), and a local `ray.init` in a child process:
placement over nodes, a node lost mid-command, secrets kept inline, `declaw-wasm serve
--backend ray:...` fronting the cluster, and the Ray Data batch helper. (The API itself runs on
Ray in every module's `served` tests.) Runs when Ray is installed: `pip install -e '.[test,ray]'`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

ray = pytest.importorskip("ray")

from declaw_wasm import InvalidArgumentException, Sandbox, SandboxException, Secret, Vault  # noqa: E402
from declaw_wasm._ray.sandboxes import RaySandboxes, ray_sandboxes  # noqa: E402
from waiting import until  # noqa: E402  # tests/ is on sys.path

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # Ray runs the same host code on both guest paths


@pytest.fixture(scope="module")
def backend(ray_cluster: Any) -> RaySandboxes:
    return ray_sandboxes()


def test_hosts_spread_over_the_nodes_and_sandboxes_over_the_hosts(backend: RaySandboxes) -> None:
    sandboxes = [Sandbox.create(backend="ray") for _ in range(2)]
    try:
        hosts = [backend.host_of(s.sandbox_id) for s in sandboxes]
        assert hosts[0]["name"] != hosts[1]["name"]  # least loaded host
        assert hosts[0]["node"] != hosts[1]["node"]  # one host per node (SPREAD)
        assert all(s.sandbox_id.endswith("." + h["name"]) for s, h in zip(sandboxes, hosts, strict=True))
        assert os.getpid() not in {h["pid"] for h in hosts}
    finally:
        for sandbox in sandboxes:
            sandbox.kill()


def test_calls_by_id_find_the_sandbox_on_its_host(backend: RaySandboxes) -> None:
    sbx = Sandbox.create(backend="ray", metadata={"where": "ray"})
    assert Sandbox.connect(sbx.sandbox_id).commands.run("echo by id").stdout == "by id\n"
    assert Sandbox.get_info(sbx.sandbox_id).metadata == {"where": "ray"}
    assert Sandbox.get_info(sbx.sandbox_id).sandbox_id == sbx.sandbox_id
    assert sbx.sandbox_id in [i.sandbox_id for i in Sandbox.list(backend="ray")]
    assert Sandbox.kill(sbx.sandbox_id) is True
    assert Sandbox.kill(sbx.sandbox_id, backend="ray") is False


def test_secrets_travel_inline_never_through_the_object_store(backend: RaySandboxes,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    put: list[Any] = []
    real_put = ray.put

    def recording_put(value: Any, **kw: Any) -> Any:
        put.append(value)
        return real_put(value, **kw)

    monkeypatch.setattr(ray, "put", recording_put)
    with Sandbox.create(backend="ray", envs={"API_TOKEN": "sk-ray-secret"}) as sbx:
        r = sbx.commands.run("echo $API_TOKEN $CMD_TOKEN", envs={"CMD_TOKEN": "sk-cmd-secret"})
        assert r.stdout == "sk-ray-secret sk-cmd-secret\n"
        assert sbx.run_code("import os; os.environ['API_TOKEN']", envs={"X": "y"}).text == "sk-ray-secret"
        with pytest.raises(InvalidArgumentException, match="object store"):
            sbx.commands.run("true", envs={"BIG": "x" * (65 << 10)})
    assert put == []


def test_secret_values_go_as_the_creates_argument_and_stay_on_this_machine(
        backend: RaySandboxes, monkeypatch: pytest.MonkeyPatch) -> None:
    """`secrets=` and vault refs (resolved here, where the vault is) reach the host actor as an
    argument of the create call: never `ray.put`, never an environment variable. Without Ray's
    TLS they go only to a host on this machine."""
    put: list[Any] = []
    real_put = ray.put

    def recording_put(value: Any, **kw: Any) -> Any:
        put.append(value)
        return real_put(value, **kw)

    monkeypatch.setattr(ray, "put", recording_put)
    vault = Vault()
    vault.create_secret("sk-ray-vaulted", name="rv", provider="openai")
    with Sandbox.create(backend="ray", vault=vault, vault_refs={"OPENAI_API_KEY": "rv"},
                        secrets={"TOKEN": Secret("sk-ray-value", hosts=["example.com"])}) as sbx:
        env = sbx.commands.run("echo $OPENAI_API_KEY $TOKEN; env").stdout
        assert env.split()[0] == "declaw:vault-managed" and env.split()[1].startswith("declaw-secret-")
        assert "sk-ray" not in env
    assert put == []
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "192.0.2.1")  # "another machine"
    with pytest.raises(InvalidArgumentException, match="RAY_USE_TLS"):
        Sandbox.create(backend="ray", secrets={"TOKEN": Secret("sk-ray-value", hosts=["example.com"])})
    monkeypatch.setenv("RAY_USE_TLS", "1")  # encrypted connections: any host will do
    Sandbox.create(backend="ray", secrets={"TOKEN": Secret("sk-ray-value", hosts=["example.com"])}).kill()


def test_the_state_key_reaches_hosts_as_a_call_argument_never_runtime_env_or_the_object_store(
        backend: RaySandboxes, monkeypatch: pytest.MonkeyPatch) -> None:
    """Host actors sign and check the state store's records with the driver's key, given with
    the calls that may use the store (as a create's secrets are): set in the driver after the
    hosts started, it is what they sign with, and a change reaches them with the next call; it is
    never in their `runtime_env`, their environment, Ray's object store or the store."""
    from pathlib import Path

    from declaw_wasm._ray.sandboxes import host_env
    from declaw_wasm._state import keys

    put: list[Any] = []
    real_put = ray.put

    def recording_put(value: Any, **kw: Any) -> Any:
        put.append(value)
        return real_put(value, **kw)

    monkeypatch.setattr(ray, "put", recording_put)
    value = os.urandom(32).hex()
    monkeypatch.setenv("DECLAW_WASM_STATE_KEY", value)
    assert value not in repr(host_env())  # what `runtime_env` gets
    sbx = Sandbox.create(backend="ray", timeout=300)
    try:
        sbx.run_code("w = 3")
        sbx.pause()
        state = Path(os.environ["DECLAW_WASM_STATE"]) / "sandboxes" / sbx.sandbox_id.split(".")[0]
        header = (state / "state.json").read_bytes().split(b"\n", 1)[0].decode().split(" ")
        assert header[3] == keys.key_from_hex(value).key_id  # signed by the host, with the driver's key
        monkeypatch.delenv("DECLAW_WASM_STATE_KEY")  # the driver's key is now its key file's ...
        with pytest.raises(SandboxException, match="signed with another state key"):
            sbx.resume()  # ... and so is the host's, with this call
        monkeypatch.setenv("DECLAW_WASM_STATE_KEY", value)
        sbx.resume()
        assert sbx.run_code("w").text == "3"
        environ = Path(f"/proc/{backend.host_of(sbx.sandbox_id)['pid']}/environ").read_bytes()  # this machine's
        assert value.encode() not in environ and b"DECLAW_WASM_STATE_KEY=" not in environ
        stored = _stored_bytes(state)
        assert bytes.fromhex(value) not in stored and value.encode() not in stored
        assert put == []
    finally:
        sbx.kill()


def test_large_files_cross_in_inline_chunks(backend: RaySandboxes) -> None:
    with Sandbox.create(backend="ray") as sbx:
        data = os.urandom((1 << 20) + 3)
        sbx.files.write("/tmp/big.bin", data)
        assert bytes(sbx.files.read("/tmp/big.bin", format="bytes")) == data
        r = sbx.commands.run("python3 -c 'print(\"y\" * 300000)'")  # output over several messages
        assert r.stdout == "y" * 300000 + "\n"


def test_get_host_is_refused_in_a_ray_driver(backend: RaySandboxes) -> None:
    """A host actor's listener is on its node's loopback, maybe another machine's: the driver
    gets a clear refusal naming the way that works (docs/inbound.md)."""
    from declaw_wasm.exceptions import InvalidArgumentException

    with Sandbox.create(backend="ray") as sbx:
        with pytest.raises(InvalidArgumentException, match="not on Ray yet"):
            sbx.get_host(8000)




def test_ray_data_batch_runs_rows_in_sandboxes(backend: RaySandboxes) -> None:
    from declaw_wasm.batch import run_batch

    rows: list[dict[str, Any]] = [
        {"code": "print(6 * 7)", "tests": None},
        {"code": "def add(a, b):\n    return a + b", "tests": "assert add(2, 3) == 5\nprint('passed')"},
        {"code": "def add(a, b):\n    return a - b", "tests": "assert add(2, 3) == 5"},
        {"code": "import sys; print('oops', file=sys.stderr); sys.exit(3)", "tests": None},
        {"code": "while True: pass", "tests": None},
        {"code": "open('left-behind', 'w').write('x')", "tests": None},
        {"code": "import os; print(os.path.exists('left-behind'))", "tests": None},
    ]
    dataset = ray.data.from_items(rows)
    out = {r["code"]: r for r in run_batch(dataset, tests_column="tests", concurrency=1, batch_size=8,
                                           timeout=2, num_cpus=0.5).take_all()}
    by_row = [out[r["code"]] for r in rows]
    assert (by_row[0]["stdout"], by_row[0]["exit_code"]) == ("42\n", 0)
    assert (by_row[1]["stdout"], by_row[1]["exit_code"]) == ("passed\n", 0)
    assert by_row[2]["exit_code"] == 1 and "AssertionError" in by_row[2]["stderr"]
    assert (by_row[3]["stderr"], by_row[3]["exit_code"]) == ("oops\n", 3)
    assert by_row[4]["exit_code"] == -1 and "timed out" in by_row[4]["error"]
    assert by_row[6]["stdout"] == "False\n"  # each row runs in a folder of its own
    assert all(r["seconds"] > 0 for r in by_row)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_fronts_the_cluster(backend: RaySandboxes, ray_cluster: Any) -> None:
    """`declaw-wasm serve --backend ray:ADDRESS` in a process of its own (a second driver of the
    cluster), used through the remote SDK: one HTTP endpoint for sandboxes on the cluster."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "declaw_wasm.cli", "serve", "--port", str(port),
         "--backend", f"ray:{ray_cluster.address}"],
        env={**os.environ, "DECLAW_API_KEY": "", "DECLAW_WASM_BACKEND": ""}, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(server.stderr or []), daemon=True).start()
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(url + "/health").status_code == 200
        except httpx.TransportError:
            return server.poll() is not None

    try:
        until(up, 120)
        assert server.poll() is None, "".join(lines)
        with Sandbox.create(domain=url) as sbx:
            assert ".declaw-host-" in sbx.sandbox_id  # made on the cluster
            assert sbx.commands.run("echo through the server").stdout == "through the server\n"
            assert sbx.run_code("2 ** 10").text == "1024"
            assert sbx.sandbox_id in [i.sandbox_id for i in Sandbox.list(backend="ray")]
    finally:
        server.terminate()
        server.wait(30)


def test_a_local_ray_started_by_the_backend(tmp_path: Any) -> None:
    """`DECLAW_WASM_BACKEND=ray:local` starts a Ray of its own (`ray.init(address="local")`;
    plain `ray` would join the tests' cluster, which Ray records as this machine's current one)."""
    script = ("import ray\n"
              "from declaw_wasm import Sandbox\n"
              "assert not ray.is_initialized()\n"
              "with Sandbox.create() as s:\n"
              "    print(s.commands.run('echo on a local ray').stdout, end='')\n"
              "    print(ray.is_initialized(), s.sandbox_id.split('.')[1].startswith('declaw-host-'))\n")
    env = {**os.environ, "DECLAW_WASM_BACKEND": "ray:local", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.stdout == "on a local ray\nTrue True\n", done.stderr[-3000:]


@pytest.fixture
def doomed_node(ray_cluster: Any) -> Iterator[tuple[Any, RaySandboxes]]:
    """A third node, and a backend whose one host can only live there (a custom resource)."""
    node = ray_cluster.add_node(num_cpus=1, resources={"doomed": 1})
    ray_cluster.wait_for_nodes()
    doomed = RaySandboxes(hosts=1, host_cpus=0.5, host_memory=256 << 20, host_resources={"doomed": 1})
    yield node, doomed
    if node in ray_cluster.worker_nodes:
        ray_cluster.remove_node(node)


def test_a_node_lost_mid_command_fails_its_sandboxes_fast_and_nothing_else(
        backend: RaySandboxes, ray_cluster: Any, doomed_node: tuple[Any, RaySandboxes]) -> None:
    node, doomed = doomed_node
    victim = Sandbox.create(backend=doomed)
    assert doomed.host_of(victim.sandbox_id)["node"] == node.node_id
    bystander = Sandbox.create(backend="ray")
    loop = "python3 -c 'import time\nfor i in range({n}):\n    print(i, flush=True); time.sleep(0.02)'"
    running = victim.commands.run(loop.format(n=10000), background=True)
    survivor = bystander.commands.run(loop.format(n=150), background=True)
    until(lambda: running._process.text("stdout").count("\n") > 3)

    lost_at = time.monotonic()
    ray_cluster.remove_node(node)
    with pytest.raises(SandboxException, match="died") as info:
        running.wait()
    failed_in = time.monotonic() - lost_at
    assert failed_in < 10.0, failed_in  # Ray notices the node's death (measured: ~2 s)
    assert victim.sandbox_id in str(info.value)
    with pytest.raises(SandboxException, match="died"):
        victim.commands.run("echo hi")
    assert victim.is_running() is False and victim.kill() is False

    assert survivor.wait().stdout == "".join(f"{i}\n" for i in range(150))  # 0 lost outputs
    assert bystander.commands.run("echo fine").stdout == "fine\n"
    bystander.kill()


def test_guest_traps_neither_crash_the_driver_nor_a_host(backend: RaySandboxes) -> None:
    """Ray's own failure signal handler would swallow wasmtime's trap signals (SIGSEGV, SIGILL)
    and end the process at a guest's first trap: switched off in the driver and the host actors."""
    crash = "python3 -c 'import faulthandler; faulthandler._sigsegv()'"
    local = Sandbox.create(backend="local", timeout=120)  # a guest in this (driver) process
    try:
        assert local.commands.run(crash).exit_code == 134
    finally:
        local.kill()
    hosted = Sandbox.create(backend=backend, timeout=120)  # a guest in a host actor
    try:
        assert hosted.commands.run(crash).exit_code == 134
        assert hosted.commands.run("echo alive").stdout == "alive\n"
    finally:
        hosted.kill()


@pytest.fixture
def two_doomed_nodes(ray_cluster: Any, tmp_path: Any,
                     monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[Any], RaySandboxes, Any]]:
    """Two more nodes, each with room for one host of a backend of its own (a custom resource),
    and a state store of the test's own that the backend hands its hosts."""
    monkeypatch.setenv("DECLAW_WASM_STATE", str(tmp_path / "state"))
    nodes = [ray_cluster.add_node(num_cpus=1, resources={"ckpt": 1}) for _ in range(2)]
    ray_cluster.wait_for_nodes()
    backend = RaySandboxes(hosts=2, host_cpus=0.5, host_memory=256 << 20, host_resources={"ckpt": 1})
    yield nodes, backend, tmp_path / "state"
    for node in nodes:
        if node in ray_cluster.worker_nodes:
            ray_cluster.remove_node(node)


def test_a_checkpointed_sandbox_is_restored_on_another_node(
        ray_cluster: Any, two_doomed_nodes: tuple[list[Any], RaySandboxes, Any]) -> None:
    """`lifecycle={"checkpoint": "cell"}`: its node removed mid-cell, the cell in flight fails
    fast saying the sandbox was restored from its checkpoint; the restored sandbox, on the other
    node, has the last completed cell's variables and files; its secret never reached the store."""
    nodes, backend, state = two_doomed_nodes
    secret = "sk-checkpoint-" + os.urandom(8).hex()
    sbx = Sandbox.create(backend=backend, lifecycle={"checkpoint": "cell"}, timeout=600,
                         secrets={"TOKEN": Secret(secret, hosts=["example.com"])})
    sbx.run_code("x = 41")
    sbx.files.write("/home/user/kept.txt", "kept")
    sbx.commands.run("echo more >> /home/user/kept.txt")
    node_id = backend.host_of(sbx.sandbox_id)["node"]
    doomed = next(n for n in nodes if n.node_id == node_id)
    cell: dict[str, Any] = {}

    def in_flight() -> None:
        try:
            sbx.run_code("x = 0\nimport time; time.sleep(60)")
        except Exception as exc:
            cell["error"], cell["at"] = exc, time.monotonic()
    thread = threading.Thread(target=in_flight)
    thread.start()
    time.sleep(0.5)
    lost_at = time.monotonic()
    ray_cluster.remove_node(doomed)
    thread.join(30)
    assert isinstance(cell.get("error"), SandboxException), cell
    assert "restored on another host from its checkpoint after turn 3 (command)" in str(cell["error"])
    assert sbx.run_code("x + 1").text == "42"  # the last completed cell's state, on the other node
    running_in = time.monotonic() - lost_at
    print(f"restored and running {running_in:.2f} s after the node's removal "
          f"(the cell in flight failed after {cell['at'] - lost_at:.2f} s)")
    assert running_in < 10.0  # target 2 s; Ray's own notice of the death is most of it
    assert backend.host_of(sbx.sandbox_id)["node"] != node_id
    assert sbx.files.read("/home/user/kept.txt") == "keptmore\n"
    assert sbx.is_running() is True
    stored = _stored_bytes(state)
    assert stored and secret.encode() not in stored  # secrets never enter a checkpoint
    assert sbx.kill() is True


def _stored_bytes(root: Path) -> bytes:
    """Every file's bytes under `root`, read while the checkpointer may still be dropping an older
    checkpoint (os.walk skips a folder gone meanwhile; a file gone meanwhile is skipped here)."""
    found = []
    for top, _folders, files in os.walk(root):
        for name in files:
            try:
                found.append((Path(top) / name).read_bytes())
            except FileNotFoundError:
                continue
    return b"".join(found)


def test_checkpoints_are_refused_in_process_and_named_right(backend: RaySandboxes) -> None:
    with pytest.raises(InvalidArgumentException, match="process pool or a Ray cluster"):
        Sandbox.create(backend="local", lifecycle={"checkpoint": "cell"})
    with pytest.raises(InvalidArgumentException, match="must be 'cell'"):
        Sandbox.create(backend="ray", lifecycle={"checkpoint": "always"})
