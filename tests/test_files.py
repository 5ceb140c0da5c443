"""sbx.files: E2B's Filesystem behaviours, through the real guest filesystem."""

import io
from datetime import timezone

import pytest

from declaw_wasm import EntryInfo, FileNotFoundException, FileType, InvalidArgumentException, Sandbox

pytestmark = [pytest.mark.guest, pytest.mark.served]  # every test on `sbx` runs in-process and served


def test_write_creates_parents_and_read_formats(sbx: Sandbox) -> None:
    info = sbx.files.write("/tmp/f/deep/er/a.txt", "héllo")
    assert (info.name, info.path, info.type) == ("a.txt", "/tmp/f/deep/er/a.txt", FileType.FILE)
    assert sbx.files.read("/tmp/f/deep/er/a.txt") == "héllo"
    data = sbx.files.read("/tmp/f/deep/er/a.txt", format="bytes")
    assert isinstance(data, bytearray) and data == "héllo".encode()
    with sbx.files.read("/tmp/f/deep/er/a.txt", format="stream") as stream:
        assert b"".join(stream) == "héllo".encode()


def test_write_accepts_bytes_and_file_objects_and_overwrites(sbx: Sandbox) -> None:
    sbx.files.write("/tmp/f/b.bin", b"\x00\x01")
    sbx.files.write("/tmp/f/b.bin", io.BytesIO(b"\xffbinary"))
    assert sbx.files.read("/tmp/f/b.bin", format="bytes") == b"\xffbinary"
    sbx.files.write("/tmp/f/s.txt", io.StringIO("from text io"))
    assert sbx.files.read("/tmp/f/s.txt") == "from text io"


def test_the_guest_sees_what_the_api_wrote_and_back(sbx: Sandbox) -> None:
    sbx.files.write("/tmp/f/in.txt", "from host")
    r = sbx.commands.run("python3 -c 'print(open(\"/tmp/f/in.txt\").read()); "
                         "open(\"/home/user/out.txt\", \"w\").write(\"from guest\")'")
    assert r.stdout == "from host\n"
    assert sbx.files.read("out.txt") == "from guest"  # relative paths start at /home/user


def test_write_files(sbx: Sandbox) -> None:
    infos = sbx.files.write_files([{"path": "/tmp/f/w1", "data": "1"}, {"path": "w2", "data": b"2"}])
    assert [i.path for i in infos] == ["/tmp/f/w1", "/home/user/w2"]
    assert sbx.files.write_files([]) == []


def test_get_info_fields(sbx: Sandbox) -> None:
    sbx.files.write("/tmp/f/info.txt", "12345")
    info = sbx.files.get_info("/tmp/f/info.txt")
    assert isinstance(info, EntryInfo)
    assert (info.name, info.type, info.size, info.mode, info.permissions) == (
        "info.txt", FileType.FILE, 5, 0o644, "-rw-r--r--")
    assert (info.owner, info.group, info.symlink_target) == ("user", "user", None)
    assert info.modified_time.tzinfo is not None and info.modified_time.utcoffset() == timezone.utc.utcoffset(None)
    folder = sbx.files.get_info("/tmp/f")
    assert folder.type == FileType.DIR and folder.permissions.startswith("d")


def test_symlink_made_by_the_guest_reports_its_target(sbx: Sandbox) -> None:
    sbx.files.write("/tmp/f/target.txt", "t")
    r = sbx.commands.run("python3 -c 'import os; os.symlink(\"target.txt\", \"/tmp/f/link\")'")
    assert r.exit_code == 0, r.stderr
    info = sbx.files.get_info("/tmp/f/link")
    assert (info.type, info.symlink_target) == (FileType.FILE, "/tmp/f/target.txt")
    assert sbx.files.read("/tmp/f/link") == "t"


def test_list_depth_and_order(sbx: Sandbox) -> None:
    for p in ("/tmp/l/b.txt", "/tmp/l/a/x.txt", "/tmp/l/a/y/z.txt"):
        sbx.files.write(p, "")
    assert [e.path for e in sbx.files.list("/tmp/l")] == ["/tmp/l/a", "/tmp/l/b.txt"]
    assert [e.path for e in sbx.files.list("/tmp/l", depth=2)] == [
        "/tmp/l/a", "/tmp/l/a/x.txt", "/tmp/l/a/y", "/tmp/l/b.txt"]
    with pytest.raises(InvalidArgumentException, match="depth should be at least 1"):
        sbx.files.list("/tmp/l", depth=0)


def test_root_listing_is_a_sane_tree(sbx: Sandbox) -> None:
    names = {e.name for e in sbx.files.list("/")}
    assert {"etc", "home", "tmp", "usr"} <= names
    r = sbx.commands.run("python3 -c 'import os; print(sorted(os.listdir(\"/\")))'")
    # /proc: the boot id; /dev: where the devices' files are mounted
    assert r.stdout == "['bin', 'dev', 'etc', 'home', 'proc', 'root', 'tmp', 'usr', 'workspace']\n"


def test_exists_remove_rename_make_dir(sbx: Sandbox) -> None:
    assert sbx.files.make_dir("/tmp/m/n/o") is True
    assert sbx.files.make_dir("/tmp/m/n/o") is False
    sbx.files.write("/tmp/m/n/o/file", "x")
    assert sbx.files.exists("/tmp/m/n/o/file")
    moved = sbx.files.rename("/tmp/m/n/o/file", "/home/user/moved")
    assert (moved.path, moved.type) == ("/home/user/moved", FileType.FILE)
    assert not sbx.files.exists("/tmp/m/n/o/file") and sbx.files.read("moved") == "x"
    sbx.files.remove("/tmp/m")
    assert not sbx.files.exists("/tmp/m")
    sbx.files.remove("/tmp/m")  # missing: no error
    with pytest.raises(FileNotFoundException):
        sbx.files.rename("/tmp/nope", "/tmp/nope2")


def test_missing_paths_raise_file_not_found(sbx: Sandbox) -> None:
    for call in (lambda: sbx.files.read("/tmp/missing"), lambda: sbx.files.get_info("/tmp/missing"),
                 lambda: sbx.files.list("/tmp/missing")):
        with pytest.raises(FileNotFoundException):
            call()
    assert sbx.files.exists("/tmp/missing") is False


def test_bad_input_gets_a_clear_error(sbx: Sandbox) -> None:
    with pytest.raises(InvalidArgumentException, match="format"):
        sbx.files.read("/etc/hostname", format="yaml")  # type: ignore[call-overload]  # wrong on purpose
    with pytest.raises(InvalidArgumentException, match="data must be"):
        sbx.files.write("/tmp/f/x", 123)  # type: ignore[arg-type]  # wrong on purpose
    with pytest.raises(InvalidArgumentException, match="NUL"):
        sbx.files.read("/tmp/a\x00b")
    with pytest.raises(InvalidArgumentException, match="directory"):
        sbx.files.read("/tmp")


def test_a_bounded_read_counts_the_apparent_size_and_reads_no_more(local_sbx: Sandbox) -> None:
    """The host's bounded read of a guest file (what pip_install copies wheels out with): one
    open, the descriptor's apparent size against the limit (a sparse file counts whole)."""
    from declaw_wasm import testing

    fs = testing.local(local_sbx).fs
    local_sbx.files.write("/tmp/bounded/ten", b"0123456789")
    assert fs.read_bytes("/tmp/bounded/ten", limit=10) == b"0123456789"
    with pytest.raises(InvalidArgumentException, match="ten: 10 bytes, more than the 9 that may be read"):
        fs.read_bytes("/tmp/bounded/ten", limit=9)
    # 64 MiB apparent, one byte written: within the shared sandbox's 1 GiB disk quota, which counts
    # apparent sizes (a 1 GiB sparse file here was over it, stopped when the quota's look came
    # before the command's end, and left the shared sandbox full for every later test)
    try:
        made = local_sbx.commands.run("python3 -c \"f = open('/tmp/bounded/sparse', 'wb'); f.seek(1 << 26); "
                                      "f.write(b'x')\"")
        assert made.exit_code == 0, made.stderr
        with pytest.raises(InvalidArgumentException, match="sparse: 67108865 bytes, more than"):
            fs.read_bytes("/tmp/bounded/sparse", limit=20 << 20)
        with pytest.raises(InvalidArgumentException, match="directory"):
            fs.read_bytes("/tmp/bounded", limit=10)
    finally:
        local_sbx.files.remove("/tmp/bounded")
