"""What makes commands and creates cheap must not show: a standby sandbox (made ahead of time,
_local/standby.py) is a sandbox like any other (its envs, metadata, lifetime, network, files),
parked guests are bounded, and idle sandboxes cost no thread each (one timer serves every
lifetime)."""

from __future__ import annotations

import threading
import time

import pytest

from declaw_wasm import Sandbox, SandboxException, TimeoutException, testing
from declaw_wasm._local.parking import parking


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def _standby(timeout: float = 60, **create: object) -> Sandbox:
    """A standby sandbox, handed out by `create` (creates until one is: standby starts on the
    second create of a template and refills once creates pause)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        sbx = Sandbox.create(timeout=timeout, **create)  # type: ignore[arg-type]
        if "declaw-wasm-standby-" in testing.host_folder(sbx).name:
            return sbx
        sbx.kill()
        time.sleep(0.3)
    raise AssertionError("no standby sandbox came")


def test_a_standby_sandbox_takes_its_envs_metadata_and_lifetime(guest_path: str) -> None:
    sbx = _standby(timeout=5, envs={"ONLY": "this one"}, metadata={"who": "standby"})
    try:
        assert sbx.commands.run("echo $ONLY").stdout == "this one\n"
        assert (sbx.run_code("import os; os.environ['ONLY']").text or "").strip("'") == "this one"
        assert sbx.get_info().metadata == {"who": "standby"}
        assert sbx.sandbox_id in {i.sandbox_id for i in Sandbox.list()}
        other = _standby()
        assert other.commands.run("echo ${ONLY:-unset}").stdout == "unset\n"
        other.kill()
        time.sleep(5.5)  # its lifetime counts from the create, not from when it was made
        with pytest.raises((TimeoutException, SandboxException)):
            sbx.commands.run("true")
    finally:
        sbx.kill()


def test_standby_sandboxes_do_not_show_until_handed_out(guest_path: str) -> None:
    sbx = _standby()
    time.sleep(0.5)  # the next ones are made meanwhile
    listed = {i.sandbox_id for i in Sandbox.list()}
    assert sbx.sandbox_id in listed
    time.sleep(0.5)
    assert {i.sandbox_id for i in Sandbox.list()} == listed
    sbx.kill()


def test_a_standby_sandbox_takes_its_network(guest_path: str) -> None:
    """Made before its create's arguments were known, it gets their network policy when handed
    out (and a later one the default again)."""
    closed = _standby(allow_internet_access=False)
    try:
        assert testing.egress_of(closed).policy.describe()["allow_internet_access"] is False
        assert closed.get_info().allow_internet_access is False
        opened = _standby()
        assert testing.egress_of(opened).policy.describe()["allow_internet_access"] is True
        opened.kill()
    finally:
        closed.kill()


def test_a_parked_guests_network_is_its_sandboxs(guest_path: str) -> None:
    """A parked guest booted before its command existed; its network calls reach the door of
    the sandbox it runs for, under that sandbox's policy (here: none allowed)."""
    if guest_path != "warm":
        pytest.skip("only the warm image parks guests")
    sbx = Sandbox.create(timeout=120, allow_internet_access=False)
    try:
        testing.park(sbx)
        hits, calls = testing.parked_hits(), testing.egress_of(sbx).calls
        got = sbx.commands.run("python3 -c \"import socket\ntry:\n    socket.getaddrinfo('example.com', 80)\n"
                               "except OSError as exc:\n    print('refused:', exc)\"")
        assert testing.parked_hits() == hits + 1
        assert got.stdout.startswith("refused:") and "network policy" in got.stdout, got
        assert testing.egress_of(sbx).calls > calls
        assert any(e.decision == "denied" for e in sbx.audit_events())
    finally:
        sbx.kill()


def test_parked_guests_are_bounded(monkeypatch: pytest.MonkeyPatch, guest_path: str) -> None:
    if guest_path != "warm":
        pytest.skip("only the warm image parks guests")
    monkeypatch.setenv("DECLAW_WASM_PARKED", "2")
    monkeypatch.setenv("DECLAW_WASM_STANDBY", "0")  # standby sandboxes would park guests of their own
    sandboxes = [Sandbox.create(timeout=120) for _ in range(4)]
    try:
        for sbx in sandboxes:
            testing.park(sbx)
            assert parking.count() <= 2
        assert all(s.commands.run("echo ok").stdout == "ok\n" for s in sandboxes)  # parked or not
    finally:
        for sbx in sandboxes:
            sbx.kill()


def test_a_loop_of_commands_parks_no_guest_beside_it(monkeypatch: pytest.MonkeyPatch, guest_path: str) -> None:
    """A guest is parked for a sandbox's next command once no command has started or ended for
    a moment (PARK_AFTER_S, here 1 s: a loaded machine's `true` once took over 0.4 s, and a
    guest was rightly parked during it); in a loop of commands it would only compete with them.
    Then one is parked, and the next command finds it."""
    if guest_path != "warm":
        pytest.skip("only the warm image parks guests")
    from declaw_wasm._local import sandbox as local_sandbox

    monkeypatch.setattr(local_sandbox, "PARK_AFTER_S", 1.0)
    sbx = Sandbox.create(timeout=120)
    try:
        sbx.commands.run("true")
        hits, deadline = testing.parked_hits(), time.monotonic() + 2.0
        while time.monotonic() < deadline:  # commands 1 s after the first's end, and after
            assert sbx.commands.run("true").exit_code == 0
            assert not parking.is_parked(testing.local(sbx))
        assert testing.parked_hits() == hits
        deadline = time.monotonic() + 30
        while not parking.is_parked(testing.local(sbx)):
            assert time.monotonic() < deadline, "no guest parked once the loop ended"
            time.sleep(0.05)
        assert sbx.commands.run("echo parked").stdout == "parked\n"
        assert testing.parked_hits() == hits + 1
    finally:
        sbx.kill()


def test_standby_sandboxes_are_kept_for_the_last_keys_only(monkeypatch: pytest.MonkeyPatch,
                                                             guest_path: str) -> None:
    """A harness that creates with different limits each time gets standby sandboxes for the
    keys it created with last (standby.MAX_KEYS of them, here 2), not a set for every key it
    ever used: an older key's standby sandboxes are killed."""
    from declaw_wasm import Limits
    from declaw_wasm._local import standby as standby_module
    from declaw_wasm._local.sandbox import LocalSandbox, standby

    monkeypatch.setattr(standby_module, "MAX_KEYS", 2)
    monkeypatch.setenv("DECLAW_WASM_STANDBY", "1")
    seen: set[LocalSandbox] = set()
    for n in range(5):
        limits = Limits(output_limit=(1 << 20) + n)
        for _ in range(3):
            Sandbox.create(limits=limits).kill()
            time.sleep(0.1)  # creates pause: standby sandboxes are made
            with standby._lock:
                seen.update(s for ready in standby._ready.values() for s in ready)
    deadline = time.monotonic() + 60
    while True:
        with standby._lock:
            wanted, evicted = list(standby._wanted), list(standby._evicted)
            ready = [s for ready in standby._ready.values() for s in ready]
        if not evicted and all(standby.ready(key) >= 1 for key in wanted):
            break
        assert time.monotonic() < deadline, "standby did not settle"
        time.sleep(0.05)
    assert len(wanted) <= 2
    assert set(standby._ready) <= set(wanted)
    assert len(ready) <= 2 and all(s.running for s in ready)
    assert len(seen) > 2
    assert all(not s.running for s in seen - set(ready)), "an older key's standby sandbox was left running"


def test_idle_sandboxes_hold_no_thread_each(monkeypatch: pytest.MonkeyPatch, guest_path: str) -> None:
    """Forty idle sandboxes hold no thread each: only the parked guests (bounded per process by
    DECLAW_WASM_PARKED, here 4: standby sandboxes handed out to a loop of creates come with one)
    and the shared timers."""
    monkeypatch.setenv("DECLAW_WASM_PARKED", "4")
    time.sleep(0.5)
    before = threading.active_count()
    sandboxes = [Sandbox.create(timeout=600) for _ in range(40)]
    try:
        time.sleep(0.5)
        assert threading.active_count() - before < 4 + 6  # the parked guests, and a few shared threads
    finally:
        for sbx in sandboxes:
            sbx.kill()


def test_short_lifetimes_end_on_time_with_one_timer(guest_path: str) -> None:
    short = [Sandbox.create(timeout=1 + i * 0.2) for i in range(5)]
    long = Sandbox.create(timeout=60)
    try:
        long.set_timeout(1.0)
        long.set_timeout(30)  # extended: the earlier end must not fire
        time.sleep(2.6)
        assert not any(s.is_running() for s in short)
        assert long.is_running()
    finally:
        long.kill()
