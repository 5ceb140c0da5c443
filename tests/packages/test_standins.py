"""The resolver's fixed table of stand-ins and held-back packages (_packages/standins.py): a
compiled requirement with a pure-Python stand-in resolves to it, a package needing pydantic 2 is
refused naming why, and nothing a guest supplies can take a stand-in's place.

The resolution tests use local wheels only (`no_index`); one guest test installs the official
client from the host's index, as a user would.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from wheels import make_wheel

from declaw_wasm import Sandbox
from declaw_wasm._packages.pip import PackageError, resolve
from declaw_wasm._packages.standins import HELD, STAND_INS

JITER = STAND_INS["jiter"]


def test_a_compiled_requirement_resolves_to_its_pinned_stand_in(tmp_path: Path) -> None:
    make_wheel(tmp_path, "needsjiter", "1.0", requires=("jiter<1,>=0.16.0",))
    pins = resolve(["needsjiter"], {}, find_links=[tmp_path], no_index=True)
    assert [(p.name, p.version) for p in pins] == [("jiter-pupy", JITER.version), ("needsjiter", "1.0")]
    assert pins[0].sha256 == JITER.sha256  # the table's hash: fetch checks the wheel against it
    already = resolve(["needsjiter"], {"jiter-pupy": JITER.version}, find_links=[tmp_path], no_index=True)
    assert [p.name for p in already] == ["needsjiter"]


def test_a_wheel_the_guest_supplies_never_takes_a_stand_ins_place(tmp_path: Path) -> None:
    make_wheel(tmp_path, "jiter", JITER.provides)  # a "jiter" of the guest's (or a wheelhouse's)
    pins = resolve(["jiter"], {}, find_links=[tmp_path], no_index=True)
    assert [(p.name, p.version, p.sha256) for p in pins] == [(JITER.project, JITER.version, JITER.sha256)]


def test_a_pin_the_stand_in_cannot_meet_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match=r"jiter is compiled code; .* jiter-pupy 0\.8\.5 .* 'jiter<0\.5'"):
        resolve(["jiter<0.5"], {}, find_links=[tmp_path], no_index=True)


def test_a_package_needing_pydantic_2_is_refused_with_the_reason(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # An empty cache: the wheel cache is one of pip's --find-links, and a real pydantic 1.10.27 put
    # there by an install (the openai test below, a user's) would stand beside this fake one.
    monkeypatch.setenv("DECLAW_WASM_CACHE", str(tmp_path / "cache"))
    make_wheel(tmp_path, "pydantic", "2.7.0", requires=("pydantic-core==2.18.2",))
    make_wheel(tmp_path, "pydantic", "1.10.27")
    make_wheel(tmp_path, "needspyd", "3.0", requires=("pydantic>=2.7",))
    make_wheel(tmp_path, "eitherpyd", "1.0", requires=("pydantic<3,>=1.10",))
    with pytest.raises(PackageError) as refused:
        resolve(["needspyd"], {}, find_links=[tmp_path], no_index=True)
    assert str(refused.value).startswith("needspyd 3.0 needs pydantic>=2.7, which cannot go into the sandbox")
    assert HELD["pydantic"].why in str(refused.value)
    with pytest.raises(PackageError, match="the request needs pydantic>=2"):
        resolve(["pydantic>=2"], {}, find_links=[tmp_path], no_index=True)
    pins = resolve(["eitherpyd"], {}, find_links=[tmp_path], no_index=True)  # 1.10 where 1.10 will do
    assert [(p.name, p.version) for p in pins] == [("eitherpyd", "1.0"), ("pydantic", "1.10.27")]


@pytest.mark.timeout(600)
def test_pip_install_openai_in_any_sandbox_takes_the_stand_ins(fresh: Sandbox) -> None:
    """Against the host's configured index, in a code-interpreter sandbox."""
    r = fresh.commands.run("pip install openai==3.57.0", timeout=500)
    assert r.exit_code == 0, r.stderr
    assert "jiter-pupy-0.8.5" in r.stdout and "pydantic-1.10." in r.stdout and "httpx2-2.12." in r.stdout
    r = fresh.commands.run("python3 -c 'import openai, jiter, pydantic; print(pydantic.VERSION[:5], "
                         "jiter.from_json(b\"[1]\"), type(openai.OpenAI(api_key=\"x\")).__name__)'", timeout=120)
    assert (r.exit_code, r.stdout) == (0, "1.10. [1] OpenAI\n"), r.stderr
    r = fresh.commands.run("pip install pydantic-settings==2.9.1", timeout=300)
    assert r.exit_code == 1 and "needs pydantic>=2.7.0" in r.stderr and "pydantic-core" in r.stderr, r.stderr
