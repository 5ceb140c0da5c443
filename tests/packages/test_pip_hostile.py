"""`pip install` when the guest is hostile: nothing a guest sends runs or lands on the host, and
nothing one sandbox supplies reaches another. The attacks come from guest code, as raw door
requests (`_host.call`), not through the guest's own pip, which would tidy them up first.

Each test runs in-process and on the process-pool backend (whose workers run the same host
pip code for their sandboxes): a pool made for the test, so its worker gets the test's
environment (the test's package index, DECLAW_WASM_OFFLINE...).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from declaw_wasm import Limits, Sandbox
from declaw_wasm._packages.pip import MAX_GUEST_WHEEL_BYTES, MAX_GUEST_WHEELS, MAX_LISTED, wheel_cache
from declaw_wasm._packages.wheel_check import MAX_MEMBERS

from security.support import PeakRSS
from .conftest import ChildPeak, Hits, HostTmp, Index
from tracing import Peak
from wheels import make_wheel, many_members_zip, stuffed_wheel

MIB = 1 << 20

pytestmark = [pytest.mark.guest, pytest.mark.traces_memory,  # tracemalloc stays on after them (tracing.py)
              pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)]

DOOR = """
import json, sys, _host, msgpack
request = json.load(open(sys.argv[1]))
reply = _host.call(msgpack.packb({"op": "pip_install", **request}, use_bin_type=True))
print(json.dumps(msgpack.unpackb(reply, raw=False)))
"""


class Maker:
    """Makes sandboxes on the test's backend; in "processes", each on a pool started then (its
    worker inherits the environment the test has set up to that point)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.made: list[Sandbox] = []
        self.pools: dict[str, Any] = {}

    def __call__(self, **arguments: Any) -> Sandbox:
        from declaw_wasm._pool.pool import ProcessPool

        pool = ProcessPool(1) if self.mode == "processes" else None
        if pool is not None:
            arguments["backend"] = pool
        try:
            sbx = Sandbox.create(timeout=900, **arguments)
        except BaseException:
            if pool is not None:
                pool.close()
            raise
        self.made.append(sbx)
        if pool is not None:
            self.pools[sbx.sandbox_id] = pool
        return sbx

    def host_pid(self, sbx: Sandbox) -> int:
        """The process running the sandbox's host code (its pip, its files API)."""
        pool = self.pools.get(sbx.sandbox_id)
        return pool.pid_of(sbx.sandbox_id) if pool is not None else os.getpid()

    def close(self) -> None:
        for sbx in self.made:
            try:
                sbx.kill()
            except Exception:
                pass
        for pool in self.pools.values():
            pool.close()


@pytest.fixture
def make_sbx(mode: str) -> Iterator[Maker]:
    maker = Maker(mode)
    yield maker
    maker.close()


def door(sbx: Sandbox, request: dict[str, Any]) -> dict[str, Any]:
    """Send a raw `pip_install` request from guest code; the host's answer."""
    sbx.files.write("/tmp/door.py", DOOR)
    sbx.files.write("/tmp/request.json", json.dumps(request))
    r = sbx.commands.run("python3 /tmp/door.py /tmp/request.json", timeout=300)
    assert r.exit_code == 0, r.stderr
    reply: dict[str, Any] = json.loads(r.stdout)
    return reply


def refused_naming(field: str, reply: dict[str, Any]) -> bool:
    """The request was refused with an error naming `field` (a bad value, or a guest path that
    names no file: only the sandbox's confined files API ever sees a guest path)."""
    return reply["status"] == 1 and re.match(rf"ERROR: (bad install request: )?{re.escape(field)}",
                                             reply["stderr"]) is not None


def cache_state() -> dict[str, str]:
    """What the wheel cache holds: each file (wheels and records) and its SHA-256."""
    root = wheel_cache().parent
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith(".")}


def cached_hashes() -> set[str]:
    return {hashlib.sha256(p.read_bytes()).hexdigest() for p in wheel_cache().glob("*")}


OPTIONS = ["--no-binary :all:", "--no-binary=:all:", "-i http://127.0.0.1:9/simple",
           "--index-url=http://127.0.0.1:9/simple", "--extra-index-url http://127.0.0.1:9/simple",
           "-f /tmp", "--find-links=/tmp", "-c /etc/passwd", "-r /etc/passwd", "-e .", "--pre",
           "--trusted-host 127.0.0.1"]
BREAKS = ["\n", "\r", "\x00", "\u2028", "\r\n", "\x0b"]


def hostile_requests(escape: Path) -> list[tuple[str, dict[str, Any]]]:
    """(the field the refusal must name, the request) for every field of the request and every
    way to smuggle an option, a line or a path through it. Each asks for evilpkg (an sdist only:
    building it writes the marker)."""
    cases: list[tuple[str, dict[str, Any]]] = []
    base: dict[str, Any] = {"requirements": ["evilpkg"]}
    for option in OPTIONS:
        cases.append(("requirements[0]", {"requirements": [option]}))
        cases.append(("requirements[1]", {"requirements": ["evilpkg", option]}))
        for cut in BREAKS:
            cases.append(("requirements[0]", {"requirements": [f"evilpkg{cut}{option}"]}))
            cases.append(("present[", {**base, "present": {"goodpkg": f"1.0{cut}{option}"}}))
            cases.append(("present", {**base, "present": {f"goodpkg{cut}{option}": "1.0"}}))
        cases.append(("present[", {**base, "present": {"goodpkg": option}}))
        cases.append(("present", {**base, "present": {option: "1.0"}}))
        cases.append(("wheels[0]", {**base, "wheels": [f"/tmp/{option}-1.0-py3-none-any.whl"]}))
        cases.append(("find_links[0]", {**base, "find_links": [option]}))
    for cut in BREAKS:
        cases.append(("wheels[0]", {**base, "wheels": [f"/tmp/w{cut}/x-1.0-py3-none-any.whl"]}))
        cases.append(("wheels[0]", {**base, "wheels": [f"/tmp/x-1.0{cut}-py3-none-any.whl"]}))
        cases.append(("find_links[0]", {**base, "find_links": [f"/tmp/w{cut}--no-binary :all:"]}))
    for path in [str(escape / "x"), "../../x", "/any/dir/x", "x/../../y", ".."]:
        cases.append(("present", {**base, "present": {path: "1.0"}}))
        cases.append(("present[", {**base, "present": {"goodpkg": path}}))
        cases.append(("requirements[0]", {"requirements": [path]}))
        cases.append(("find_links[0]", {**base, "find_links": [path + "/.."]}))
        cases.append(("wheels[0]", {**base, "wheels": [path + "/../x-1.0-py3-none-any.whl"]}))
    cases += [
        ("wheels[0]", {**base, "wheels": ["relative/x-1.0-py3-none-any.whl"]}),
        ("wheels[0]", {**base, "wheels": ["/tmp/not-a-wheel.whl"]}),
        ("wheels[0]", {**base, "wheels": [f"/tmp/{'..'}-1.0-py3-none-any.whl"]}),
        ("requirements[0]", {"requirements": ["evilpkg===1.0"]}),
        ("requirements[0]", {"requirements": ["evilpkg @ file:///etc/passwd"]}),
        ("requirements[0]", {"requirements": ['evilpkg; os_name == "\n--no-binary :all:"']}),
        ("requirements", {"requirements": "evilpkg"}),
        ("present", {**base, "present": [["goodpkg", "1.0"]]}),
        ("present[", {**base, "present": {"goodpkg": 1}}),
        ("no_index", {**base, "no_index": "--no-binary :all:"}),
        ("no_binary", {**base, "no_binary": ":all:"}),
    ]
    return cases


def test_install_requests_are_parsed_and_nothing_from_them_runs_or_lands_on_the_host(
        make_sbx: Maker, on_index: Index, tmp_path: Path) -> None:
    sbx = make_sbx()
    # the host's pip reaches the test's index for this sandbox: a wheel from it installs...
    reply = door(sbx, {"requirements": ["goodpkg"]})
    assert reply["status"] == 0, reply
    assert sbx.commands.run("python3 -c 'import goodpkg; print(goodpkg.ORIGIN)'").stdout == "index\n"
    # ...and a package that is only a source distribution is refused, and not built
    reply = door(sbx, {"requirements": ["evilpkg"]})
    assert reply["status"] == 1 and "no pure-Python wheel of evilpkg" in reply["stderr"], reply
    before = cache_state()
    escape = tmp_path / "escape"
    escape.mkdir()
    for field, request in hostile_requests(escape):
        reply = door(sbx, request)
        assert reply["status"] == 1, (request, reply)
        assert refused_naming(field, reply), (request, reply)
        assert not on_index.marker.exists(), request
    assert list(escape.iterdir()) == []
    assert cache_state() == before
    # the same through the guest's own pip: refused, named, nothing built
    r = sbx.commands.run("pip install 'evilpkg; os_name == \"x\" --no-binary :all:'", timeout=120)
    assert r.exit_code == 1 and "bad install request: requirements[0]" in r.stderr
    r = sbx.commands.run("pip install --no-binary :all: evilpkg", timeout=120)
    assert r.exit_code == 1 and "no pure-Python wheel of evilpkg" in r.stderr
    assert not on_index.marker.exists()


def test_a_find_links_folder_with_a_hostile_file_name_is_refused(
        make_sbx: Maker, on_index: Index, tmp_path: Path) -> None:
    sbx = make_sbx()
    sbx.files.write("/home/user/fl/ok-1.0-py3-none-any.whl", make_wheel(tmp_path, "ok").read_bytes())
    before = cache_state()
    for name in ["x\n--no-binary :all:-1.0-py3-none-any.whl", "evilpkg-1.0\r-py3-none-any.whl",
                 "a\u2028b-1.0-py3-none-any.whl", "-f-1.0-py3-none-any.whl"]:
        made = sbx.commands.run(f"python3 -c 'open({json.dumps('/home/user/fl/' + name)}, \"w\").write(\"x\")'")
        assert made.exit_code == 0, made.stderr
        reply = door(sbx, {"requirements": ["evilpkg"], "find_links": ["/home/user/fl"]})
        assert refused_naming("find_links[0]", reply), reply
        sbx.commands.run(f"python3 -c 'import os; os.remove({json.dumps('/home/user/fl/' + name)})'")
    assert not on_index.marker.exists()
    assert cache_state() == before


def test_a_sandboxs_own_wheels_never_reach_another_sandbox(
        make_sbx: Maker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = make_wheel(tmp_path, "humanize", "99.0", files={"humanize/__init__.py": "SANDBOX_A = True\n"})
    digest = hashlib.sha256(mine.read_bytes()).hexdigest()
    a = make_sbx()
    a.files.write(f"/home/user/w/{mine.name}", mine.read_bytes())
    r = a.commands.run("pip install --no-index -f /home/user/w humanize", timeout=300)
    assert r.exit_code == 0, r.stderr
    assert a.commands.run("python3 -c 'import humanize; print(humanize.SANDBOX_A)'").stdout == "True\n"
    r = a.commands.run(f"pip install /home/user/w/{mine.name}", timeout=300)
    assert r.exit_code == 0, r.stderr
    assert digest not in cached_hashes()  # used for A's request only, never cached
    monkeypatch.setenv("DECLAW_WASM_OFFLINE", "1")
    b = make_sbx()
    r = b.commands.run("pip install humanize==99.0", timeout=300)
    assert r.exit_code == 1 and "no pure-Python wheel of humanize" in r.stderr, r.stderr
    b.commands.run("pip install humanize", timeout=300)  # fails, or gets the real one
    got = b.commands.run("python3 -c 'import humanize; print(getattr(humanize, \"SANDBOX_A\", \"no\"))'")
    assert "True" not in got.stdout


def test_a_guest_wheel_never_replaces_a_cached_wheel(
        make_sbx: Maker, on_index: Index, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    first = make_sbx()
    assert first.commands.run("pip install goodpkg", timeout=300).exit_code == 0
    before = cache_state()
    assert any(name.startswith("wheels/goodpkg-1.0-") for name in before)
    forged = make_wheel(tmp_path, "goodpkg", "1.0", files={"goodpkg/__init__.py": "ORIGIN = 'sandbox'\n"})
    second = make_sbx()
    second.files.write(f"/home/user/w/{forged.name}", forged.read_bytes())
    r = second.commands.run(f"pip install /home/user/w/{forged.name}", timeout=300)
    assert r.exit_code == 0, r.stderr
    r = second.commands.run("pip install --no-index -f /home/user/w goodpkg", timeout=300)
    assert r.exit_code == 0, r.stderr
    assert cache_state() == before
    monkeypatch.setenv("DECLAW_WASM_OFFLINE", "1")  # a third sandbox has the cache only
    third = make_sbx()
    assert third.commands.run("pip install goodpkg", timeout=300).exit_code == 0
    assert third.commands.run("python3 -c 'import goodpkg; print(goodpkg.ORIGIN)'").stdout == "index\n"


def test_what_a_request_copies_out_of_a_sandbox_is_bounded(
        make_sbx: Maker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_OFFLINE", "1")
    # The quota holds the wheel (a file over the quota lives only until the quota's next look,
    # which may kill the command making it: 137, as one CI run saw); MAX_GUEST_WHEEL_BYTES is
    # what refuses it.
    sbx = make_sbx(limits=Limits(disk_bytes=512 << 20))
    before = cache_state()
    # a wheel that is mostly a hole: 256 MiB + 1 apparent, a few KiB on disk
    made = sbx.commands.run("mkdir -p /home/user/w && python3 -c \"f = open('/home/user/w/big-1.0-py3-none-any.whl', "
                            "'wb'); f.seek(256 << 20); f.write(b'x')\"")
    assert made.exit_code == 0, (made.stderr, made.error)
    assert sbx.files.get_info("/home/user/w/big-1.0-py3-none-any.whl").size == MAX_GUEST_WHEEL_BYTES + 1
    r = sbx.commands.run("pip install /home/user/w/big-1.0-py3-none-any.whl", timeout=120)
    assert r.exit_code == 1
    # refused by the bound before a byte is read, naming the field and the apparent size
    assert "wheels[0]: " in r.stderr and "big-1.0-py3-none-any.whl" in r.stderr, r.stderr
    assert f"{MAX_GUEST_WHEEL_BYTES + 1} bytes" in r.stderr, r.stderr
    r = sbx.commands.run("pip install --no-index -f /home/user/w big", timeout=120)
    assert r.exit_code == 1 and "find_links[0]: " in r.stderr and f"{MAX_GUEST_WHEEL_BYTES + 1}" in r.stderr, r.stderr
    sbx.files.remove("/home/user/w/big-1.0-py3-none-any.whl")  # (it counts whole against the quota)
    # many wheels: a request names at most MAX_GUEST_WHEELS
    reply = door(sbx, {"wheels": [f"/tmp/w{i}-1.0-py3-none-any.whl" for i in range(200)]})
    assert reply == {"status": 1, "stdout": "", "stderr": "ERROR: bad install request: wheels: must have at "
                                                       f"most {MAX_GUEST_WHEELS} items, not 200\n"}
    sbx.files.write_files([{"path": f"/home/user/many/t{i}-1.0-py3-none-any.whl",
                            "data": make_wheel(tmp_path / "many", f"t{i}", "1.0").read_bytes()}
                           for i in range(MAX_GUEST_WHEELS + 1)])
    r = sbx.commands.run("pip install --no-index -f /home/user/many tiny", timeout=120)
    assert r.exit_code == 1 and f"more than {MAX_GUEST_WHEELS} wheels to copy out" in r.stderr, r.stderr
    assert cache_state() == before


def test_a_guest_wheel_names_no_link_the_host_follows(make_sbx: Maker, hits: Hits, tmp_path: Path) -> None:
    """A guest wheel's `Requires-Dist: x @ URL` is refused before the host's pip sees the wheel:
    the host fetches nothing (the sandbox has no network; `no_index` is set), and a `file:` link
    tells the guest nothing of the host's files (a file, a folder, a project, nothing: one
    answer, naming the link)."""
    sbx = make_sbx(allow_internet_access=False)
    url = f"http://127.0.0.1:{hits.port}/exfiltrated-by-the-guest/dep-1.0-py3-none-any.whl"
    wheel = make_wheel(tmp_path, "front", requires=(f"dep @ {url}",))
    sbx.files.write(f"/home/user/{wheel.name}", wheel.read_bytes())
    reply = door(sbx, {"wheels": [f"/home/user/{wheel.name}"], "no_index": True})
    assert reply["status"] == 1 and "it depends on" in reply["stderr"] and "a URL or a path" in reply["stderr"], reply
    assert hits.paths == []
    answers = set()
    for i, path in enumerate(["/etc/hostname", "/etc", str(Path(__file__).parents[2]), "/nonexistent-7f3a"]):
        wheel = make_wheel(tmp_path / str(i), "front", requires=(f"dep @ file://{path}",))
        sbx.files.write(f"/home/user/{i}/{wheel.name}", wheel.read_bytes())
        reply = door(sbx, {"wheels": [f"/home/user/{i}/{wheel.name}"], "no_index": True})
        assert reply["status"] == 1 and reply["stderr"].startswith("ERROR: wheels[0]: "), reply
        answers.add(reply["stderr"].replace(path, "PATH").replace(f"/home/user/{i}/", ""))
    assert len(answers) == 1, answers


class HostCost:
    """What serving a door request costs the process hosting the sandbox, while a block runs:
    the peak of Python allocations (`traced`, in-process only: precise, the guest's memory is
    not in it) and the RSS growth (either backend; loose, since the guest that sends the request
    lives in that process's memory too and varies by tens of MiB from run to run)."""

    def __init__(self, maker: Maker, sbx: Sandbox) -> None:
        self.tracing = maker.mode == "in-process"
        self.rss = PeakRSS(maker.host_pid(sbx))
        self.traced = 0
        self.heap: Optional[Peak] = None

    def __enter__(self) -> "HostCost":
        if self.tracing:
            self.heap = Peak()  # tracing stays on once started (tracing.py says why)
        self.rss.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.rss.__exit__(*exc)
        if self.heap is not None:
            self.traced = self.heap.now()

    def check(self, what: str) -> None:
        assert self.traced < 16 * MIB, f"{what}: {self.traced >> 20} MiB of Python objects on the host"
        assert self.rss.growth < 64 * MIB, f"{what}: the host process grew by {self.rss.growth >> 20} MiB"


def test_checking_a_guest_wheel_costs_the_host_bounded_memory(make_sbx: Maker, tmp_path: Path,
                                                              no_background_guests: None) -> None:
    """A guest wheel is copied out a block at a time and checked with bounded cost before pip or
    installer sees it: 400 000 member entries (19 MiB; as ZipInfos ~150 MiB), a METADATA or a
    WHEEL inflating to 32 MiB (a 33 KB wheel; parsed, ~200 MiB) are refused without building the
    member list or reading the file, and no pip starts for them."""
    sbx = make_sbx()
    meta = b"Metadata-Version: 2.1\nName: bigmeta\nVersion: 1.0\n\n"
    wheel_meta = b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    wheels = {"many-1.0-py3-none-any.whl": (many_members_zip(400_000), "list of members"),
              "bigmeta-1.0-py3-none-any.whl":
                  (stuffed_wheel(tmp_path, "bigmeta", "METADATA", meta, 32 * MIB).read_bytes(), "dist-info"),
              "bigwheel-1.0-py3-none-any.whl":
                  (stuffed_wheel(tmp_path, "bigwheel", "WHEEL", wheel_meta, 32 * MIB).read_bytes(), "dist-info")}
    door(sbx, {"wheels": ["/home/user/none-1.0-py3-none-any.whl"]})  # (what the door loads once)
    for name, (data, what) in wheels.items():
        sbx.files.write(f"/home/user/{name}", data)
        with HostCost(make_sbx, sbx) as cost, ChildPeak(make_sbx.host_pid(sbx)) as pip:
            reply = door(sbx, {"wheels": [f"/home/user/{name}"], "no_index": True})
        assert reply["status"] == 1 and what in reply["stderr"], reply
        assert pip.seen == 0, f"pip ran for {name}"
        cost.check(name)


def test_installing_a_guest_wheel_costs_the_host_bounded_disk(make_sbx: Maker, host_tmp: HostTmp) -> None:
    """Entry points become script files where installer writes, on the host: a 190 KB wheel of
    80 000 of them (~330 MB of host disk, 80 000 files) is refused (its entry_points.txt's size,
    or its script count) before anything is written."""
    lines = b"[console_scripts]\n" + b"".join(b"s%07d=m:f\n" % i for i in range(80_000))
    data = stuffed_wheel(host_tmp.root.parent / "made", "scripts", "entry_points.txt", lines).read_bytes()
    sbx = make_sbx(limits=Limits(disk_bytes=64 * MIB))
    sbx.files.write("/home/user/scripts-1.0-py3-none-any.whl", data)
    with host_tmp:
        reply = door(sbx, {"wheels": ["/home/user/scripts-1.0-py3-none-any.whl"], "no_index": True})
    assert reply["status"] == 1 and "entry_points.txt" in reply["stderr"], reply
    assert host_tmp.peak_files < 2000 and host_tmp.peak_bytes < 2 * 64 * MIB, \
        (host_tmp.peak_files, host_tmp.peak_bytes)


def test_an_install_past_the_disk_quota_is_refused_and_the_guest_lives(make_sbx: Maker, tmp_path: Path) -> None:
    """The quota counts blocks: 12 000 one-byte modules (a 1.4 MB wheel, 12 KB declared) take
    ~47 MiB of a 32 MiB sandbox. The install is refused, naming the quota, before the sandbox
    holds more than its quota (it is not written and then the guest killed by the quota
    watcher); the guest goes on."""
    files = {f"tiny/m{i:05d}.py": "x" for i in range(12_000)}
    assert len(files) < MAX_MEMBERS
    wheel = make_wheel(tmp_path, "tiny", files={"tiny/__init__.py": "", **files})
    sbx = make_sbx(limits=Limits(disk_bytes=32 * MIB))
    sbx.files.write(f"/home/user/{wheel.name}", wheel.read_bytes())
    reply = door(sbx, {"wheels": [f"/home/user/{wheel.name}"], "no_index": True})
    assert reply["status"] == 1 and "disk quota" in reply["stderr"], reply
    assert sbx.get_metrics()[0].disk_used <= 32 * MIB
    assert sbx.commands.run("python3 -c 'import tiny'").exit_code == 1  # nothing half-installed
    assert sbx.commands.run("echo alive").stdout == "alive\n"


# The guest: a folder whose path is ~3.8 KB (under WASI's 4096), holding N files of 250-byte names.
WIDE_FOLDER = r'''
import os, sys
folder = "/home/user/" + "/".join(["d" * 250] * 15)
os.makedirs(folder)
for i in range(int(sys.argv[1])):
    open(folder + "/%s%05d" % ("f" * 245, i), "w").close()
print(folder)
'''


def test_a_find_links_folder_costs_the_host_bounded_memory(make_sbx: Maker, no_background_guests: None) -> None:
    """A find-links folder is looked at entry by entry (names only), at most MAX_LISTED: 30 000
    files at a 3.8 KB path (a listing of them: ~110 MiB of the host process; as the quota's
    walk once held them, as much again) are refused after MAX_LISTED names, naming the field."""
    sbx = make_sbx()
    sbx.files.write("/tmp/wide.py", WIDE_FOLDER)
    r = sbx.commands.run("python3 /tmp/wide.py 30000", timeout=300)
    assert r.exit_code == 0, r
    folder = r.stdout.strip()
    door(sbx, {"requirements": ["nothing-here"], "find_links": ["/nowhere"]})  # (what the door loads once)
    with HostCost(make_sbx, sbx) as cost:
        reply = door(sbx, {"requirements": ["nothing-here"], "find_links": [folder], "no_index": True})
    assert reply["status"] == 1 and reply["stderr"].startswith("ERROR: find_links[0]: "), reply
    assert f"more than {MAX_LISTED} entries" in reply["stderr"], reply
    cost.check("a find_links folder")
