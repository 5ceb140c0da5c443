"""A guest's tree nested past PATH_MAX (docs/security.md, "Exports and the disk quota"): each
rename names two paths under WASI's 4096 bytes, the result does not, so a guest can give 4000
empty files ~38 KB paths each at no cost to its quota (empty files count 0 bytes, the folders a
few KiB each), and reach them through folder descriptors. What the host does with such a tree
stays bounded by what the sandbox may hold: a snapshot, pause or checkpoint counts every entry's
tar header (its whole path) against the disk quota and every entry against its file count; a
listing, a watch and a volume snapshot leave out what lies past PATH_MAX (no call can name it)
and a listing is bounded in entries and bytes; the quota counts every file however deep; a
checkpoint sees a change there. Driven from guest code, in this process and in a process pool's
worker (which runs the same host code for its sandboxes)."""

from __future__ import annotations

import tempfile
from typing import Any, Callable, Iterator

import pytest

from declaw_wasm import InvalidArgumentException, Limits, NotEnoughSpaceException, Sandbox, Volumes
from declaw_wasm._hostfs import PATH_MAX
from declaw_wasm._local import files as local_files
from declaw_wasm._pool.pool import ProcessPool

from .test_quota_exports import BOUND, MIB, OVERHEAD, QUOTA, Host, Peak, _pid, _stored_files, _volume_snapshot

BOTH = pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """A private state store and temporary folder, and a pool whose workers use them (as
    test_quota_exports.py's)."""
    root = tmp_path_factory.mktemp("deep-trees")
    store, tmp = root / "state", root / "tmp"
    store.mkdir()
    tmp.mkdir()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DECLAW_WASM_STATE", str(store))
        env.setenv("TMPDIR", str(tmp))
        env.setattr(tempfile, "tempdir", str(tmp))
        env.setenv("DECLAW_WASM_PARKED", "0")  # no guest made meanwhile counts in the host's RSS
        env.setenv("DECLAW_WASM_STANDBY", "0")
        env.setenv("DECLAW_WASM_WARM_IMAGE", "1")
        pool = ProcessPool(2)
        try:
            yield Host(store, tmp, pool)
        finally:
            pool.close()


@pytest.fixture
def make(mode: str, host: Host) -> Iterator[Callable[..., Sandbox]]:
    """20 MiB sandboxes in this process or in the pool."""
    made: list[Sandbox] = []
    where: dict[str, Any] = {"backend": host.pool} if mode == "processes" else {}

    def create(**arguments: Any) -> Sandbox:
        arguments.setdefault("timeout", 600)
        arguments.setdefault("limits", Limits(disk_bytes=QUOTA))
        sandbox = Sandbox.create(**arguments, **where)
        made.append(sandbox)
        return sandbox

    yield create
    for sandbox in made:
        sandbox.kill()

# The guest: N files of SIZE bytes in ROOT/x, then x moved to the bottom of a 15-folder chain of
# 255-byte names, that chain to the bottom of another, STEPS times: each file's path ends up
# ~STEPS x 3.8 KB long.
NEST = r'''
import os, sys
files, steps, size, root = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
name = "d" * 255
os.makedirs(root + "/x")
for i in range(files):
    with open(root + "/x/f%05d" % i, "wb") as f:
        f.write(b"x" * size)
inner = root + "/x"
for k in range(steps):
    top = bottom = root + "/c%d" % k
    os.mkdir(top)
    for _ in range(14):
        bottom += "/" + name
        os.mkdir(bottom)
    os.rename(inner, bottom + "/" + os.path.basename(inner))
    inner = top
print("made")
'''

# Guest code reaching the files' folder after NEST, by folder descriptors (no path names it).
BOTTOM = r'''
import os, sys, time
def bottom(steps, root="/tmp"):
    name = "d" * 255
    fd = os.open(root + "/c%d" % (steps - 1), os.O_RDONLY)
    parts = []
    for k in range(steps - 1, -1, -1):
        parts += [name] * 14 + (["c%d" % (k - 1)] if k else ["x"])
    for part in parts:
        nxt = os.open(part, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    return fd
'''


def _nest(sandbox: Sandbox, files: int, steps: int, size: int = 0, root: str = "/tmp") -> None:
    sandbox.files.write("/home/user/nest.py", NEST)
    r = sandbox.commands.run(f"python3 /home/user/nest.py {files} {steps} {size} {root}", timeout=120)
    assert r.stdout == "made\n", r


def _at_bottom(sandbox: Sandbox, steps: int, code: str) -> str:
    """Run guest `code` with `fd` the nested files' folder; its stdout."""
    sandbox.files.write("/home/user/bottom.py", f"{BOTTOM}\nfd = bottom({steps})\n{code}\n")
    r = sandbox.commands.run("python3 /home/user/bottom.py", timeout=120)
    assert r.exit_code == 0, r
    return r.stdout


REFUSED = (r"refused: /tmp/c9/d+\.\.\.d+/x/f\d{5} \(a path of \d{5} bytes\) needs \d+ bytes of names and headers "
           rf"\(\d+ bytes in all\), more than the disk quota of {QUOTA} bytes \+ 1 MiB allows \(Limits.disk_bytes")


@BOTH
def test_a_snapshot_carries_at_most_the_disk_quota_names_and_headers_included(
        mode: str, host: Host, make: Callable[..., Sandbox]) -> None:
    """4000 empty files with ~38 KB paths use ~1 MiB of a 20 MiB quota and would be ~150 MiB of
    tar headers: the snapshot and the pause are refused as those headers are counted (naming
    the path, its length, the quota), nothing is stored, the host's disk and memory stay within
    the bound, and the sandbox goes on; with 100 of them left, a pause carries the deep files and
    a resume brings them back."""
    sandbox = make()
    assert sandbox.run_code("x = 41").error is None
    _nest(sandbox, 4000, 10)
    assert sandbox.get_metrics()[0].disk_used < 2 * MIB
    peaks = []
    for _ in range(2):  # the least of two tries: RSS is the whole process's, and other threads only add
        with Peak(host, _pid(mode, host, sandbox)) as peak:
            with pytest.raises(NotEnoughSpaceException, match=rf"snapshot of sandbox \S+ {REFUSED}"):
                sandbox.create_snapshot()
            with pytest.raises(NotEnoughSpaceException, match=rf"pause of sandbox \S+ {REFUSED}"):
                sandbox.pause()
        peaks.append((peak.disk, peak.rss))
    assert all(disk < BOUND + OVERHEAD for disk, _ in peaks), peaks  # the disk's figure: every try
    assert min(rss_growth for _, rss_growth in peaks) < BOUND + OVERHEAD, peaks
    assert sandbox.list_snapshots() == [] and _stored_files(host, sandbox.sandbox_id) == []
    assert sandbox.is_running() and sandbox.run_code("x + 1").text == "42"
    _at_bottom(sandbox, 10, "for i in range(100, 4000):\n    os.unlink('f%05d' % i, dir_fd=fd)")
    snapshot = sandbox.snapshot()
    assert 100 * 38_000 < (snapshot.size_bytes or 0) < BOUND + OVERHEAD, snapshot.size_bytes
    sandbox.pause()
    sandbox.resume()
    assert _at_bottom(sandbox, 10, "print(sorted(os.stat('f%05d' % i, dir_fd=fd).st_size for i in range(100)))") \
        == f"{[0] * 100}\n"
    assert sandbox.run_code("x + 1").text == "42"


@pytest.mark.parametrize("mode", ["processes"], indirect=True)
def test_a_checkpoint_sees_a_change_below_path_max_and_carries_at_most_the_quota(
        host: Host, make: Callable[..., Sandbox]) -> None:
    """A checkpointed sandbox (a pool's): a turn that only rewrites a file whose host path is
    past PATH_MAX is checkpointed (the fingerprint walks by descriptor); a turn that leaves
    ~150 MiB of tar headers is not (refused, logged by its host) and the previous checkpoint
    stays, while the host's disk and memory stay within the bound."""
    sandbox = make(lifecycle={"checkpoint": "cell"})
    _nest(sandbox, 4000, 0, root="/home/user/flat")  # (the guest's own memory, in the worker, before the peak)
    _nest(sandbox, 1, 2, size=3)
    sandbox.files.write("/home/user/change.py", f"{BOTTOM}\nfd = bottom(2)\n"
                        "os.write(os.open('f00000', os.O_WRONLY | os.O_CREAT, dir_fd=fd), b'new')\n")
    before = sandbox.list_snapshots()[0]  # the newest (a superseded one is deleted in the background)
    assert sandbox.commands.run("python3 /home/user/change.py").exit_code == 0
    after = sandbox.list_snapshots()[0]
    assert after.snapshot_id != before.snapshot_id
    with Peak(host, host.pool.pid_of(sandbox.sandbox_id)) as peak:
        r = sandbox.commands.run("python3 /home/user/nest.py 4000 10 0 /home/user", timeout=120)
    assert r.stdout == "made\n", r
    assert peak.disk < BOUND + OVERHEAD and peak.rss < BOUND + OVERHEAD, (peak.disk, peak.rss)
    assert sandbox.list_snapshots()[0].snapshot_id == after.snapshot_id


@BOTH
def test_listing_a_sandboxs_files_costs_the_host_bounded_memory(mode: str, host: Host,
                                                               make: Callable[..., Sandbox]) -> None:
    """`files.list` (and a volume snapshot, which lists) leaves out what lies past PATH_MAX: the
    4000 files with ~38 KB paths are not listed, the listing is small and quick. Paths under
    PATH_MAX are listed up to `MAX_LIST_BYTES` of them: 5000 files with ~3.9 KB paths (19 MB)
    are refused with an error naming the limit, the host holding no more than that meanwhile."""
    sandbox = make()
    _nest(sandbox, 4000, 10)
    with Peak(host, _pid(mode, host, sandbox)) as peak:
        entries = sandbox.files.list("/tmp", depth=4096)
        volume = _volume_snapshot(mode, sandbox, "/tmp")
    try:
        assert peak.rss < 16 * MIB, peak.rss
        assert entries and all(len(e.path.encode()) <= PATH_MAX for e in entries)
        assert not any(e.name.startswith("f0") for e in entries)
        assert Volumes.files(volume.volume_id).list("/") != []
    finally:
        Volumes.delete(volume.volume_id)
    make_many = ("import os\nbase = '/tmp/y' + '/' + '/'.join(['d' * 255] * 14)\nos.makedirs(base)\n"
                 "for i in range(5000):\n    open(base + '/' + ('%05d' % i) * 50, 'w').close()\nprint(len(base))")
    sandbox.files.write("/home/user/many.py", make_many)
    r = sandbox.commands.run("python3 /home/user/many.py", timeout=120)
    assert r.exit_code == 0, r
    with Peak(host, _pid(mode, host, sandbox)) as peak:
        with pytest.raises(InvalidArgumentException, match=rf"listing /tmp/y 4096 levels deep refused: more than "
                                                            rf"{local_files.MAX_LIST_BYTES} bytes of paths, link "
                                                            r"targets and metadata \(files.list's limit\)"):
            sandbox.files.list("/tmp/y", depth=4096)
    assert peak.rss < local_files.MAX_LIST_BYTES + 16 * MIB, peak.rss
    assert len(sandbox.files.list("/tmp/y", depth=14)) == 14  # the folders above them


@pytest.mark.parametrize("mode", ["in-process"], indirect=True)
def test_a_listing_holds_at_most_its_entry_limit(make: Callable[..., Sandbox],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `MAX_LIST_ENTRIES` (100 000: a default sandbox's file count) a listing is refused
    naming the limit (lowered here, so that the guest makes a few hundred files, not 100 000)."""
    sandbox = make()
    r = sandbox.commands.run("python3 -c \"import os\nos.makedirs('/tmp/m')\nfor i in range(600): "
                             "open('/tmp/m/%d' % i, 'w').close()\"")
    assert r.exit_code == 0, r
    monkeypatch.setattr(local_files, "MAX_LIST_ENTRIES", 500)
    with pytest.raises(InvalidArgumentException, match=r"listing /tmp/m 1 levels deep refused: more than 500 entries "
                                                        r"\(files.list's limit\): list a folder further down"):
        sandbox.files.list("/tmp/m")
    monkeypatch.setattr(local_files, "MAX_LIST_ENTRIES", 600)
    assert len(sandbox.files.list("/tmp/m")) == 600


@BOTH
def test_the_disk_quota_counts_files_below_paths_longer_than_path_max(mode: str,
                                                                      make: Callable[..., Sandbox]) -> None:
    """A file whose host path is past PATH_MAX counts toward the quota like any other (the count
    walks by descriptor): a guest writing 64 MiB there in a 20 MiB sandbox is stopped (exit 137)
    and the files API refuses a write after."""
    sandbox = make()
    _nest(sandbox, 1, 2)
    sandbox.files.write("/home/user/bottom.py", f"{BOTTOM}\nfd = bottom(2)\n"
                        "out = os.open('big', os.O_WRONLY | os.O_CREAT, dir_fd=fd)\n"
                        "for _ in range(64):\n    os.write(out, b'b' * (1 << 20)); time.sleep(0.02)\n")
    r = sandbox.commands.run("python3 /home/user/bottom.py", timeout=120)
    assert r.exit_code == 137 and "disk quota exceeded" in (r.error or ""), r
    assert sandbox.get_metrics()[0].disk_used > QUOTA
    with pytest.raises(NotEnoughSpaceException, match="disk quota exceeded"):
        sandbox.files.write("/tmp/more.txt", "x")


@BOTH
def test_watching_a_sandboxs_files_costs_the_host_bounded_memory(mode: str, host: Host,
                                                                 make: Callable[..., Sandbox]) -> None:
    """A recursive watch sees a folder that arrives full and reports what it holds, down to
    PATH_MAX: the 4000 files with ~38 KB paths are not reported, nor held."""
    sandbox = make()
    watch = sandbox.files.watch_dir("/tmp", recursive=True)
    try:
        _nest(sandbox, 4000, 10)
        with Peak(host, _pid(mode, host, sandbox)) as peak:
            events = watch.get_new_events()
        assert events and all(len(e.path.encode()) <= PATH_MAX for e in events)
        assert peak.rss < 16 * MIB, peak.rss
    finally:
        watch.stop()
