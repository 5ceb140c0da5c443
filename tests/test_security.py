"""The files API and the guest stay inside the sandbox: `..`, symlinks, other sandboxes."""

import os
import uuid
from pathlib import Path

import pytest

from declaw_wasm import testing
from declaw_wasm import FileNotFoundException, Sandbox, SandboxException

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def _host_home(s: Sandbox) -> Path:
    return testing.host_root(s) / "home" / "user"


def test_dotdot_paths_stay_in_the_sandbox(sbx: Sandbox, tmp_path: Path) -> None:
    marker = f"escape-{uuid.uuid4().hex}.txt"
    sbx.files.write(f"../../../../../../../tmp/{marker}", "x")
    assert not (Path("/tmp") / marker).exists()  # the host's /tmp is untouched
    assert sbx.files.read(f"/tmp/{marker}") == "x"  # it landed in the sandbox's /tmp
    passwd = sbx.files.read("/home/user/../../../../etc/passwd")
    assert "user:x:1000" in passwd and passwd != Path("/etc/passwd").read_text()


def test_guest_cannot_make_or_follow_links_out(sbx: Sandbox) -> None:
    r = sbx.commands.run("python3 -c 'import os; os.symlink(\"/etc\", \"/home/user/abs\")'")
    assert r.exit_code == 1 and "PermissionError" in r.stderr
    r = sbx.commands.run("python3 -c 'import os; os.symlink(\"../../../../etc\", \"/home/user/up\"); "
                         "open(\"/home/user/up/shadow\")'")
    assert r.exit_code == 1


def test_api_through_a_guest_made_escaping_symlink_stays_inside(sbx: Sandbox) -> None:
    sbx.commands.run("python3 -c 'import os; os.symlink(\"../../../../../../etc\", \"/home/user/esc\")'")
    passwd = sbx.files.read("/home/user/esc/passwd")  # resolves to the sandbox's own /etc
    assert passwd != Path("/etc/passwd").read_text() and "user:x:1000" in passwd
    with pytest.raises(SandboxException, match="read-only"):
        sbx.files.write("/home/user/esc/evil", "x")  # the sandbox's /etc is read-only
    assert not Path("/etc/evil").exists()


@pytest.mark.parametrize("kind", ["absolute", "relative"])
def test_api_never_follows_a_planted_link_to_a_host_folder(fresh: Sandbox, tmp_path: Path, kind: str) -> None:
    # The worst case: a link in the sandbox's folder pointing at a host folder with a secret.
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    (secret_dir / "key.txt").write_text("host secret")
    home = _host_home(fresh)
    target = str(secret_dir) if kind == "absolute" else os.path.relpath(secret_dir, home)
    os.symlink(target, home / "planted")
    with pytest.raises(FileNotFoundException):
        fresh.files.read("/home/user/planted/key.txt")
    try:  # an absolute target is re-rooted at the sandbox's "/": the write may land in there
        fresh.files.write("/home/user/planted/new.txt", "x")
    except SandboxException:
        pass
    assert not (secret_dir / "new.txt").exists()
    fresh.files.remove("/home/user/planted")  # removes the link, never the host folder
    assert (secret_dir / "key.txt").read_text() == "host secret"
    assert [e.name for e in fresh.files.list("/home/user") if e.name == "planted"] == []


def test_read_only_parts_refuse_writes(sbx: Sandbox) -> None:
    for path in ("/etc/passwd", "/usr/local/lib/python315.zip", "/newdir/x"):
        with pytest.raises(SandboxException, match="read-only"):
            sbx.files.write(path, "x")
    r = sbx.commands.run("python3 -c 'open(\"/usr/local/lib/python315.zip\", \"ab\")'")
    assert r.exit_code == 1


def test_a_sandbox_cannot_see_another_sandboxs_files(sbx: Sandbox) -> None:
    with Sandbox.create() as other:
        other.files.write("/tmp/private.txt", "mine")
        assert not sbx.files.exists("/tmp/private.txt")
        r = sbx.commands.run("python3 -c 'import os; print(os.path.exists(\"/tmp/private.txt\"))'")
        assert r.stdout == "False\n"


def test_kill_deletes_the_host_folder() -> None:
    s = Sandbox.create()
    s.files.write("/tmp/x", "x")
    base = testing.host_folder(s)
    assert base.exists()
    s.kill()
    assert not base.exists()
