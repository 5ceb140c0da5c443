"""The adapters' shared pieces: argv to a command line, the `cd DIR || exit` prefix, and the
workspace tar (portable names; hostile archives refused before anything is written)."""

from __future__ import annotations

import io
import tarfile

import pytest

from declaw_wasm import AsyncSandbox
from declaw_wasm.cli import main as cli_main
from declaw_wasm.integrations._common import (
    command_line,
    split_cd,
    tar_folder,
    untar_into,
)


def test_command_line() -> None:
    assert command_line(["sh", "-lc", "echo $HOME | wc -c"]) == "echo $HOME | wc -c"
    assert command_line(["bash", "-l", "-c", "pwd"]) == "pwd"
    assert command_line(["/bin/sh", "-c", 'echo "$1"', "sh", "a b"]) == \
        "sh -c 'echo \"$1\"' sh 'a b'"
    assert command_line(["sudo", "-u", "user", "--", "ls", "-la", "x y"]) == "ls -la 'x y'"
    assert command_line(["sh", "-e", "script.sh"]) == "sh -e script.sh"  # not a -c: left as is
    with pytest.raises(ValueError):
        command_line([])


def test_split_cd() -> None:
    assert split_cd("cd /w || exit\nls -la") == ("/w", "ls -la")
    assert split_cd("cd -- '/a b' || exit\npwd\nls") == ("/a b", "pwd\nls")
    assert split_cd("cd /w && ls") == (None, "cd /w && ls")


def _tar(*members: tuple[str, bytes | None, str | None]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            else:
                info.size = len(data or b"")
                tar.addfile(info, io.BytesIO(data or b""))
    return out.getvalue()


@pytest.mark.guest
@pytest.mark.anyio
async def test_tar_round_trip_and_hostile_archives() -> None:
    sbx = await AsyncSandbox.create()
    try:
        root = "/home/user/ws"
        n = await untar_into(sbx, root, _tar(("a/b.txt", b"bee", None), ("./c.txt", b"sea", None),
                                             ("a/link", None, "b.txt"), ("a/out", None, "../../x"),
                                             ("a/abs", None, "/etc/passwd")))
        assert n == 3  # the two links leaving the folder are skipped
        assert await sbx.files.read(f"{root}/a/link") == "bee"
        back = await tar_folder(sbx, root)
        with tarfile.open(fileobj=back) as tar:
            assert sorted(tar.getnames()) == ["a", "a/b.txt", "a/link", "c.txt"]
            assert tar.getmember("a/link").linkname == "b.txt"
        for bad, reason in ((_tar(("/etc/x", b"", None)), "absolute"),
                            (_tar(("a/../../x", b"", None)), "leave the workspace")):
            with pytest.raises(ValueError, match=reason):
                await untar_into(sbx, "/home/user/other", bad)
        with pytest.raises(ValueError, match="more than 2 members"):
            await untar_into(sbx, "/home/user/other", _tar(*[(f"f{i}", b"", None)
                                                             for i in range(3)]), max_members=2)
        with pytest.raises(ValueError, match="more than 10 bytes"):
            await untar_into(sbx, "/home/user/other", _tar(("big", b"x" * 11, None)), max_bytes=10)
        assert not await sbx.files.exists("/home/user/other")  # refused before writing anything
    finally:
        await sbx.kill()


def test_mcp_refuses_a_public_host_without_the_flag() -> None:
    pytest.importorskip("mcp")
    assert cli_main(["mcp", "--transport", "http", "--host", "0.0.0.0"]) == 2
