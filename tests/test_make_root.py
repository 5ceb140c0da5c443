"""A sandbox's root folder (layout.make_root, written from a skeleton read once per process) is
what copying the skeleton made: the same folders, files, bytes, modes and file times; and each
root's files are its own (a write in one reaches neither the skeleton nor the next root)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from declaw_wasm._wasm.layout import ROOT_FILES, ROOT_FOLDERS, make_root


def _tree(root: Path) -> dict[str, tuple[int, bytes, int]]:
    found: dict[str, tuple[int, bytes, int]] = {}
    for folder, subfolders, names in os.walk(root):
        for name in subfolders + names:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            is_file = os.path.isfile(path)
            found[os.path.relpath(path, root)] = (st.st_mode, Path(path).read_bytes() if is_file else b"",
                                                  st.st_mtime_ns if is_file else 0)
    return found


def _skeleton(tmp_path: Path) -> Path:
    skeleton = tmp_path / "skeleton"
    (skeleton / "etc" / "deep").mkdir(parents=True)
    (skeleton / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
    (skeleton / "etc" / "deep" / "x").write_bytes(b"\0binary")
    os.chmod(skeleton / "etc" / "deep" / "x", 0o600)
    (skeleton / "__pycache__").mkdir()
    (skeleton / "__init__.py").write_text("")
    return skeleton


def test_a_root_is_what_copying_the_skeleton_made(tmp_path: Path) -> None:
    skeleton = _skeleton(tmp_path)
    copied = tmp_path / "copied"
    shutil.copytree(skeleton, copied, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    for folder in ROOT_FOLDERS:
        (copied / folder).mkdir(exist_ok=True)
    made = tmp_path / "made"
    make_root(made, skeleton)
    for name in ROOT_FILES:  # /proc's empty files, made now (their time is their making's)
        (copied / name).touch(mode=0o644)
        made_ns = os.stat(made / name).st_mtime_ns
        os.utime(copied / name, ns=(made_ns, made_ns))
    assert _tree(made) == _tree(copied)
    assert "etc/deep/x" in _tree(made) and "__init__.py" not in _tree(made)


def test_each_roots_files_are_its_own(tmp_path: Path) -> None:
    skeleton = _skeleton(tmp_path)
    first, second = tmp_path / "first", tmp_path / "second"
    make_root(first, skeleton)
    (first / "etc" / "hosts").write_text("written by the first sandbox\n")
    make_root(second, skeleton)
    assert (second / "etc" / "hosts").read_text() == "127.0.0.1 localhost\n"
    assert (skeleton / "etc" / "hosts").read_text() == "127.0.0.1 localhost\n"
    assert os.stat(first / "etc" / "hosts").st_ino != os.stat(second / "etc" / "hosts").st_ino


def test_a_changed_skeleton_is_read_again(tmp_path: Path) -> None:
    skeleton = _skeleton(tmp_path)
    make_root(tmp_path / "before", skeleton)
    (skeleton / "new-file").write_text("added\n")  # changes the skeleton folder's time
    make_root(tmp_path / "after", skeleton)
    assert (tmp_path / "after" / "new-file").read_text() == "added\n"


def test_a_skeleton_with_a_symlink_is_copied_as_before(tmp_path: Path) -> None:
    skeleton = _skeleton(tmp_path)
    (skeleton / "etc" / "link").symlink_to("hosts")
    make_root(tmp_path / "made", skeleton)
    assert (tmp_path / "made" / "etc" / "link").read_text() == "127.0.0.1 localhost\n"
    assert not (tmp_path / "made" / "etc" / "link").is_symlink()  # copytree follows symlinks
