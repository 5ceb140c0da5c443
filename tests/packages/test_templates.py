"""Custom templates: built once on the host, used by `Sandbox.create(template=...)`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from declaw_wasm import InvalidArgumentException, Sandbox, TemplateException
from declaw_wasm.templates import Template, delete_template, list_templates

from wheels import make_wheel

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_custom_template_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    house = tmp_path / "house"
    make_wheel(house, "tplpkg", "0.3")
    monkeypatch.setenv("DECLAW_WASM_WHEELHOUSE", str(house))
    monkeypatch.setenv("DECLAW_WASM_OFFLINE", "1")
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")
    template = (Template().from_template("code-interpreter")
                .pip_install(["tplpkg"])
                .copy(data, "/home/user/data.csv")
                .set_envs({"MODE": "demo"})
                .run_cmd("python3 -c \"open('/home/user/made.txt', 'w').write('by the build')\"")
                .run_cmd("mkdir -p /workspace/app && echo kept > /workspace/app/w.txt"))
    info = Template.build(template, alias="test-round-trip")
    assert info.packages == ["tplpkg==0.3"] and info.base == "code-interpreter"
    assert "test-round-trip" in [t.name for t in list_templates()]
    try:
        with Sandbox.create(template="test-round-trip", timeout=120) as sbx:
            r = sbx.commands.run("python3 -c 'import tplpkg, os, pandas, plotly; "
                                 "print(tplpkg.__version__, os.environ[\"MODE\"])'; cat made.txt")
            assert (r.exit_code, r.stdout) == (0, "0.3 demo\nby the build"), r.stderr
            assert sbx.files.read("/home/user/data.csv") == "a,b\n1,2\n"
            assert sbx.files.read("/workspace/app/w.txt") == "kept\n"  # /workspace is kept too
            assert sbx.run_code("import tplpkg; tplpkg.NAME").text == "tplpkg"
            assert sbx.get_info().template_id == "test-round-trip"
            # the template's packages are the template's: not the user's to uninstall
            assert sbx.commands.run("pip uninstall -y tplpkg").exit_code == 1
        with Sandbox.create(template="test-round-trip", timeout=60) as other:
            assert other.files.read("/home/user/made.txt") == "by the build"  # each starts afresh
    finally:
        assert delete_template("test-round-trip")
    with pytest.raises(InvalidArgumentException, match="unknown template 'test-round-trip'"):
        Sandbox.create(template="test-round-trip")


def test_a_compiled_package_fails_the_build_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    house = tmp_path / "house"
    make_wheel(house, "nativeext", "1.0", tag="py3-none-manylinux1_x86_64")
    make_wheel(house, "nativeext", "1.0", tag="py3-none-manylinux2014_aarch64")
    monkeypatch.setenv("DECLAW_WASM_WHEELHOUSE", str(house))
    monkeypatch.setenv("DECLAW_WASM_OFFLINE", "1")
    with pytest.raises(TemplateException, match="nativeext has no pure-Python wheel"):
        Template.build(Template().from_template("base").pip_install("nativeext"), alias="test-native")
    assert "test-native" not in [t.name for t in list_templates()]


def test_a_failing_build_command_fails_the_build() -> None:
    with pytest.raises(TemplateException, match="exited with 3"):
        Template.build(Template().from_template("base").run_cmd("echo no >&2; exit 3"), alias="test-fails")
    with pytest.raises(InvalidArgumentException):
        Template.build(Template(), alias="Bad Name!")
    with pytest.raises(InvalidArgumentException):
        Template.build(Template(), alias="base")


def test_template_cli_build_list_delete(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "declaw_wasm.cli", "template"]
    (tmp_path / "hello.txt").write_text("hello from the host\n")
    built = subprocess.run([*cli, "build", "test-cli", "--from", "base", "--env", "GREETING=hi",
                            "--copy", f"{tmp_path / 'hello.txt'}:/home/user/hello.txt"],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    listed = subprocess.run([*cli, "list", "--json"], capture_output=True, text=True, timeout=60)
    entry = next(t for t in json.loads(listed.stdout) if t["name"] == "test-cli")
    assert entry["base"] == "base" and entry["envs"] == {"GREETING": "hi"}
    with Sandbox.create(template="test-cli", timeout=60) as sbx:
        r = sbx.commands.run("echo $GREETING; cat hello.txt; python3 -c 'import numpy'")
        assert r.stdout == "hi\nhello from the host\n" and r.exit_code == 1
    assert subprocess.run([*cli, "delete", "test-cli"], timeout=60).returncode == 0
    gone = subprocess.run([*cli, "delete", "test-cli"], capture_output=True, text=True, timeout=60)
    assert gone.returncode == 1 and "no template" in gone.stderr
