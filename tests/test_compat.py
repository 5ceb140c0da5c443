"""declaw's and E2B's API shapes on our own classes: `Sandbox.create`'s declaw options, template
aliases, declaw's exceptions and `CommandExitException`, `PtySize`, `WriteInfo.size`,
`WriteEntry`, `Sandbox.list` as a paginator and as declaw's dict, `SandboxQuery`, `kill_many`,
`get_metrics`, `run_stream`, stdio, `TemplateBase`, `AsyncSandbox`'s flat methods; E2B's
`watch_dir`, file metadata, `gzip`/`use_octet_stream`, the kill and timeout contracts and output
decoding. Tests marked `served` run in-process and through `declaw-wasm serve`."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from declaw_wasm import (AsyncSandbox, CommandExitException, ConflictException, FileNotFoundException,
                         FilesystemEventType, InvalidArgumentException, NotFoundException, PtySize,
                         RateLimitException, Sandbox, SandboxError, SandboxException, SandboxLifecycle,
                         SandboxQuery, SandboxState, TemplateBase, TimeoutException, WriteEntry)
from declaw_wasm import exceptions
from waiting import until  # tests/ is on sys.path


# -- Sandbox.create and the sandbox ---------------------------------------------------------------
class Policy:
    """A config object as declaw's (and the guardrails work's) are: anything with `to_dict()`."""

    def to_dict(self) -> dict[str, Any]:
        return {"pii": {"enabled": True}, "network": {"allow_out": ["pypi.org"]}}


@pytest.mark.guest
def test_create_takes_declaws_options_as_data() -> None:
    with pytest.raises(TypeError):
        Sandbox.create("base", 60, None, None, {"vault": "ref"})  # type: ignore[call-arg]  # keyword-only after envs
    from declaw_wasm import VaultClient, Volumes

    vault = VaultClient()
    if any(secret.name == "openai-compat-test" for secret in vault.list_secrets()):
        vault.delete_secret("openai-compat-test")  # the process's vault: the other guest path made it
    vault.create_secret("sk-test", name="openai-compat-test", provider="openai")
    volume = Volumes.create("compat-options")
    sbx = Sandbox.create(template="python", timeout=60, security=Policy(),
                         lifecycle=SandboxLifecycle(), volumes=[{"volume_id": volume.volume_id, "mount_path": "/data"}],
                         vault_refs={"OPENAI_API_KEY": "openai-compat-test"}, secure=True, request_timeout=5)
    try:
        options = sbx._backend.options  # type: ignore[attr-defined]  # the local backend keeps them
        assert options.security == {"policy_json": '{"pii": {"enabled": true}, "network": {"allow_out": ["pypi.org"]}}'}
        assert options.network == {"allow_out": ["pypi.org"]}  # hoisted from the policy, as declaw does
        assert options.volumes == [{"volume_id": volume.volume_id, "mount_path": "/data"}]
        assert options.vault_refs == {"OPENAI_API_KEY": "openai-compat-test"}
        info = sbx.get_info()
        assert info.template_id == "code-interpreter" and info.lifecycle == {"on_timeout": "kill", "auto_resume": False}
    finally:
        sbx.kill()
        Volumes.delete(volume.volume_id)
        vault.delete_secret("openai-compat-test")  # the process's vault outlives the test
    closed = Sandbox.create(template="ai-agent", allow_internet_access=False, network={"allow_out": ["x.com"]})
    try:  # declaw's rule: allow_internet_access=False wins
        assert closed.get_info().network == {"deny_out": ["0.0.0.0/0"]}
        assert closed.commands.run("python3 -c 'import requests, aiohttp'").exit_code == 0
    finally:
        closed.kill()
    with pytest.raises(InvalidArgumentException):
        Sandbox.create(security=object())


def test_exceptions_have_declaws_names_codes_and_ids() -> None:
    assert exceptions.SandboxError is SandboxException and exceptions.TimeoutError is TimeoutException
    assert exceptions.CommandExitError is CommandExitException and SandboxError is SandboxException
    assert issubclass(exceptions.AuthenticationException, SandboxException)  # declaw's arrangement
    assert exceptions.VersionMismatchException is ConflictException
    error = CommandExitException("boom", exit_code=2, stdout="o", stderr="e", sandbox_id="sbx_1")
    assert (error.exit_code, error.stdout, error.stderr, error.sandbox_id, error.code) == \
        (2, "o", "e", "sbx_1", "command_exit")
    assert NotFoundException("x").code == "not_found" and SandboxException("x").code == ""


@pytest.mark.guest
def test_list_is_a_paginator_and_declaws_dict() -> None:
    tagged = [Sandbox.create(template="base", metadata={"suite": "list", "n": str(i)}) for i in range(3)]
    try:
        page = Sandbox.list(query=SandboxQuery(metadata={"suite": "list"}), limit=2)
        assert [s.metadata["n"] for s in page["sandboxes"]] == ["2", "1"] and page["next_token"] == "2"
        assert page.get("next_token") == "2" and "sandboxes" in page
        assert [s.metadata["n"] for s in page.next_items()] == ["2", "1"] and page.has_next
        assert [s.metadata["n"] for s in page.next_items()] == ["0"] and not page.has_next
        assert page["sandboxes"][0]["sandbox_id"] == tagged[2].sandbox_id  # declaw reads dicts
        everything = Sandbox.list(query=SandboxQuery(metadata={"suite": "list"}, state=[SandboxState.RUNNING]),
                                  order="asc")
        assert [s.metadata["n"] for s in everything] == ["0", "1", "2"]
        assert list(Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED]))) == []
        results = Sandbox.kill_many([t.sandbox_id for t in tagged] + ["sbx_none"], wait=True)
        assert results == {**{t.sandbox_id: {"killed": True} for t in tagged},
                           "sbx_none": {"error": "sandbox not found"}}
    finally:
        for sandbox in tagged:
            sandbox.kill()
    other = Sandbox.create(template="base")
    assert Sandbox.kill_by_id(other.sandbox_id) is True and Sandbox.kill_by_id(other.sandbox_id) is False


def test_metrics_measure_the_guests(fresh: Sandbox) -> None:
    # some CPU work before the memory the loop below waits for: the CPU time is read in clock ticks
    # (10 ms), and a warm start plus the allocation alone can take less than one
    handle = fresh.commands.run("python3 -c 'sum(range(3_000_000)); x = bytearray(50 << 20); "
                                "import time; time.sleep(30)'", background=True)
    deadline = time.monotonic() + 20  # a cold start on a loaded machine takes a while
    # (a warm guest starts with the warm image's memory, over 50 MB: wait for its CPU time too)
    while ((busy := fresh.get_metrics()[0]).memory_usage_mb <= 50 or busy.cpu_time_seconds <= 0) \
            and time.monotonic() < deadline:
        time.sleep(0.25)
    assert busy.memory_usage_mb > 50 and busy.timestamp.tzinfo is not None
    fresh.files.write("/tmp/two-mib", b"x" * (2 << 20))
    handle.kill()
    after = fresh.get_metrics()[0]
    assert after.disk_usage_mb >= 2 and after.cpu_time_seconds >= busy.cpu_time_seconds > 0


def test_template_aliases_and_declaws_builder() -> None:
    t = TemplateBase().from_base_image("python:3.12").run_cmd(["echo", "one", "line"]).run_cmd("echo two")
    assert t._commands == ["echo one line", "echo two"] and t._base == "base"


# -- commands ------------------------------------------------------------------------------------------
@pytest.mark.served
def test_background_wait_raises_command_exit_foreground_returns(sbx: Sandbox) -> None:
    assert sbx.commands.run("echo out; exit 3").exit_code == 3
    handle = sbx.commands.run("echo out; echo err >&2; exit 4", background=True)
    with pytest.raises(CommandExitException) as raised:
        handle.wait()
    error = raised.value
    assert (error.exit_code, error.stdout, error.stderr, error.sandbox_id) == (4, "out\n", "err\n", sbx.sandbox_id)
    assert sbx.commands.run("true", background=True).wait().exit_code == 0


@pytest.mark.served
def test_run_stream_calls_back_per_line(sbx: Sandbox) -> None:
    lines: list[str] = []
    result = sbx.commands.run_stream("echo a; printf 'b\\nc'; echo e >&2", on_stdout=lines.append)
    assert lines == ["a", "b", "c"] and (result.stdout, result.stderr) == ("a\nb\nc", "e\n")


@pytest.mark.served
def test_stdio_process(sbx: Sandbox) -> None:
    process = sbx.stdio.start("python3 -c 'import sys\nfor l in sys.stdin: print(l.upper(), end=\"\", flush=True)'")
    process.send_stdin("ping\n")
    process.close_stdin()
    assert [c for kind, c in process if kind == "stdout"] == [b"PING\n"]
    assert process.wait() == 0 and int(process.wait()) == 0 and process.exit_code == 0
    seen: list[bytes] = []
    cat = sbx.stdio.start("cat", on_stdout=seen.append)
    cat.send_stdin(b"\x00bin\n")
    until(lambda: seen)
    assert seen == [b"\x00bin\n"] and cat.kill() is True


@pytest.mark.served
def test_iterating_past_the_timeout_raises(sbx: Sandbox) -> None:
    # 3 s: a cold-path guest on a loaded machine takes over 1 s to print its first line
    handle = sbx.commands.run("echo started; sleep 30", background=True, timeout=3)
    seen = []
    with pytest.raises(TimeoutException):
        for stdout, _, _ in handle:
            seen.append(stdout)
    assert seen == ["started\n"]


@pytest.mark.served
def test_broken_utf8_is_decoded_as_e2b_does(sbx: Sandbox) -> None:
    streamed: list[str] = []
    code = "import sys; sys.stdout.buffer.write(b'ok \\xe2\\x82'); sys.stderr.buffer.write(b'\\xff\\n')"
    result = sbx.commands.run(f'python3 -c "{code}"', on_stdout=streamed.append)
    assert result.stdout == "ok \ufffd" == "".join(streamed)
    assert result.stderr == "\ufffd\n"


@pytest.mark.guest
def test_a_killed_sandbox_ends_its_calls_with_timeout(fresh_pair: Any) -> None:
    sandbox = fresh_pair
    handle = sandbox.commands.run("sleep 30", background=True)
    errors: list[BaseException] = []

    def cell() -> None:
        try:
            sandbox.run_code("import time; time.sleep(30)")
        except BaseException as exc:
            errors.append(exc)

    import threading
    thread = threading.Thread(target=cell)
    thread.start()
    time.sleep(1)
    sandbox.kill()
    thread.join(10)
    with pytest.raises(TimeoutException, match="killed or reached its end of life"):
        handle.wait()
    assert len(errors) == 1 and isinstance(errors[0], TimeoutException)
    assert "killed or reached its end of life" in str(errors[0])


@pytest.fixture
def fresh_pair() -> Any:
    sandbox = Sandbox.create(timeout=120)
    yield sandbox
    sandbox.kill()


# -- PTY ---------------------------------------------------------------------------------------------
def test_pty_size_defaults_and_orders() -> None:
    assert PtySize() == PtySize(24, 80) == PtySize(cols=80, rows=24)  # E2B positional, declaw keywords
    assert PtySize(cols=120).to_dict() == {"cols": 120, "rows": 24}


@pytest.mark.served
def test_pty_create_has_a_default_size(sbx: Sandbox) -> None:
    handle = sbx.pty.create()
    sbx.pty.send_stdin(handle.pid, b"tput cols; tput lines; exit\n")
    out: list[bytes] = []
    handle.wait(on_pty=out.append)
    assert b"80\r\n24\r\n" in b"".join(out)


# -- files ---------------------------------------------------------------------------------------------
@pytest.mark.served
def test_write_info_size_and_write_entries(sbx: Sandbox) -> None:
    assert sbx.files.write("/tmp/size.txt", "héllo").size == 6
    written = sbx.files.write_files([WriteEntry("/tmp/we/a", "A"), {"path": "/tmp/we/b", "data": b"BB"},
                                     WriteEntry(path="/tmp/we/c", data=b"CCC")])
    assert [(w.path, w.size) for w in written] == [("/tmp/we/a", 1), ("/tmp/we/b", 2), ("/tmp/we/c", 3)]
    with pytest.raises(InvalidArgumentException):
        sbx.files.write_files([{"path": "/tmp/we/d"}])


@pytest.mark.served
def test_file_metadata(sbx: Sandbox) -> None:
    info = sbx.files.write("/tmp/meta/one.txt", "x", metadata={"owner": "agent-1", "kind": "report v2"})
    assert info.metadata == {"owner": "agent-1", "kind": "report v2"}
    assert sbx.files.get_info("/tmp/meta/one.txt").metadata == info.metadata
    sbx.files.rename("/tmp/meta/one.txt", "/tmp/meta/two.txt")  # metadata follows the file
    assert [e.metadata for e in sbx.files.list("/tmp/meta")] == [info.metadata]
    sbx.commands.run("mv /tmp/meta/two.txt /tmp/meta/three.txt && echo more >> /tmp/meta/three.txt")
    assert sbx.files.get_info("/tmp/meta/three.txt").metadata == info.metadata  # the guest's mv too
    sbx.files.write("/tmp/meta/three.txt", "overwritten")  # without metadata: cleared (E2B's rule)
    assert sbx.files.get_info("/tmp/meta/three.txt").metadata is None
    written = sbx.files.write_files([WriteEntry("/tmp/meta/a", "1"), WriteEntry("/tmp/meta/b", "2")],
                                    metadata={"batch": "yes"})
    assert [w.metadata for w in written] == [{"batch": "yes"}] * 2
    for bad in ({"bad key": "v"}, {"k": "tab\there"}, {"k": "é"}, {"k": 1}, {"k": "v" * 3000}):
        with pytest.raises(InvalidArgumentException):
            sbx.files.write("/tmp/meta/bad", "x", metadata=bad)  # type: ignore[arg-type]  # wrong on purpose
    assert not sbx.files.exists("/tmp/meta/bad")  # refused before anything is written


@pytest.mark.served
def test_gzip_and_octet_stream_carry_the_same_data(sbx: Sandbox) -> None:
    data = "ünïcode " * 5000
    for gzip in (False, True):
        for octet in (None, True, False):
            sbx.files.write("/tmp/transfer.txt", data, gzip=gzip, use_octet_stream=octet)
            assert sbx.files.read("/tmp/transfer.txt", gzip=gzip) == data
            assert b"".join(sbx.files.read("/tmp/transfer.txt", format="stream", gzip=gzip)) == data.encode()


@pytest.mark.served
def test_watch_dir(sbx: Sandbox) -> None:
    sbx.files.make_dir("/tmp/watched/deep")
    watch = sbx.files.watch_dir("/tmp/watched")
    sbx.files.write("/tmp/watched/new.txt", "x")  # through the API
    sbx.commands.run("echo y > /tmp/watched/guest.txt; rm /tmp/watched/new.txt; echo z > /tmp/watched/deep/no")
    time.sleep(0.3)
    events = [(e.name, e.type) for e in watch.get_new_events()]
    assert events[:3] == [("new.txt", FilesystemEventType.CREATE), ("new.txt", FilesystemEventType.WRITE),
                          ("new.txt", FilesystemEventType.WRITE)]  # E2B's count for a new file
    assert ("guest.txt", FilesystemEventType.CREATE) in events and ("new.txt", FilesystemEventType.REMOVE) in events
    assert not [e for e in events if e[0].startswith("deep/")]  # not recursive
    watch.stop()
    with pytest.raises(SandboxException, match="already stopped"):
        watch.get_new_events()
    deep = sbx.files.watch_dir("/tmp/watched", recursive=True, include_entry=True)
    sbx.commands.run("mkdir -p /tmp/watched/deep/er && echo q > /tmp/watched/deep/er/f")
    time.sleep(0.3)
    found = {e.name: e for e in deep.get_new_events()}
    assert "deep/er/f" in found and found["deep/er/f"].path == "/tmp/watched/deep/er/f"
    assert found["deep/er/f"].entry is not None and found["deep/er/f"].entry.size == 2
    deep.stop()
    with pytest.raises(FileNotFoundException):
        sbx.files.watch_dir("/tmp/no-such-folder")
    with pytest.raises(InvalidArgumentException):
        sbx.files.watch_dir("/tmp/watched/deep/no")


def test_watch_never_follows_a_link_out(fresh: Sandbox) -> None:
    """A guest-made link to a folder outside the watched one is reported, never entered: the
    host's own folders are never watched, and no event names a host path."""
    import glob

    def host_watches() -> int:
        count = 0
        for fdinfo in glob.glob("/proc/self/fdinfo/*"):
            try:
                with open(fdinfo) as f:
                    count += sum(1 for line in f if line.startswith("inotify wd:"))
            except OSError:
                continue
        return count

    fresh.files.make_dir("/home/user/w/inner")
    fresh.commands.run("ln -s ../.. /home/user/w/up; ln -s /usr /home/user/w/usr")
    before = host_watches()
    watch = fresh.files.watch_dir("/home/user/w", recursive=True)
    assert host_watches() - before == 2  # w and w/inner, nothing behind the links
    fresh.commands.run("echo x > /home/user/w/inner/f")
    time.sleep(0.3)
    assert all(e.path.startswith("/home/user/w/") for e in watch.get_new_events())
    watch.stop()
    assert host_watches() == before


def test_watches_per_sandbox_are_capped(fresh: Sandbox) -> None:
    from declaw_wasm._local.watch import MAX_WATCHES

    fresh.files.make_dir("/tmp/cap")
    watches = [fresh.files.watch_dir("/tmp/cap") for _ in range(MAX_WATCHES)]
    with pytest.raises(RateLimitException):
        fresh.files.watch_dir("/tmp/cap")
    watches.pop().stop()
    fresh.files.watch_dir("/tmp/cap").stop()
    for watch in watches:
        watch.stop()


# -- AsyncSandbox ------------------------------------------------------------------------------------
@pytest.mark.guest
def test_async_flat_methods_class_calls_and_streams() -> None:
    async def main() -> None:
        sbx = await AsyncSandbox.create(template="base", metadata={"suite": "async-flat"})
        try:
            assert (await sbx.run_command("echo flat")).stdout == "flat\n"
            handle = await sbx.run_command("echo bad; exit 5", background=True)
            with pytest.raises(CommandExitException):
                await handle.wait()
            assert handle.exit_code == 5
            assert (await sbx.write_file("/tmp/a.txt", "abc")).size == 3
            assert await sbx.read_file("/tmp/a.txt") == "abc"
            assert await sbx.file_exists("/tmp/a.txt") and (await sbx.get_file_info("/tmp/a.txt")).size == 3
            assert [e.name for e in await sbx.list_files("/tmp")] == ["a.txt"]
            await sbx.write_files([WriteEntry("/tmp/b.txt", "b")])
            await sbx.rename_file("/tmp/b.txt", "/tmp/c.txt")
            await sbx.remove_file("/tmp/c.txt")
            assert await sbx.make_dir("/tmp/d")
            cat = await sbx.run_command("cat", background=True)
            connected = sbx.connect_command(cat.pid)  # a plain method, as declaw's
            assert cat.pid in [p.pid for p in await sbx.list_commands()]
            assert await sbx.kill_command(cat.pid)
            with pytest.raises((CommandExitException, NotFoundException)):
                await connected.wait()
            async with await sbx.files.read("/tmp/a.txt", format="stream") as stream:
                assert [chunk async for chunk in stream] == [b"abc"]
            events: list[Any] = []
            watch = await sbx.files.watch_dir("/tmp", on_event=events.append, timeout=0)
            await sbx.write_file("/tmp/e.txt", "e")
            for _ in range(50):
                if events:
                    break
                await asyncio.sleep(0.05)
            await watch.stop()
            assert events[0].name == "e.txt"
            page = AsyncSandbox.list(query=SandboxQuery(metadata={"suite": "async-flat"}))
            assert [s.sandbox_id for s in await page.next_items()] == [sbx.sandbox_id]
            assert (await AsyncSandbox.list())["sandboxes"]  # awaited: declaw's answer
            assert (await AsyncSandbox.get_info(sbx.sandbox_id)).sandbox_id == sbx.sandbox_id
            await AsyncSandbox.set_timeout(sbx.sandbox_id, 120)
            assert (await sbx.get_metrics())[0].disk_usage_mb >= 0
            process = await sbx.stdio.start("cat")
            await process.send_stdin("s\n")
            await process.close_stdin()
            assert [c async for _, c in process] == [b"s\n"]
        finally:
            assert await AsyncSandbox.kill(sbx.sandbox_id) is True
        assert await AsyncSandbox.kill(sbx.sandbox_id) is False
        assert await AsyncSandbox.kill_many([sbx.sandbox_id]) == {sbx.sandbox_id: {"error": "sandbox not found"}}

    asyncio.run(main())


# -- run_code: E2B's chart and image cases ------------------------------------------------------------
BOXES = """
import matplotlib.pyplot as plt
data = {'Class A': [85, 90, 78, 92, 88], 'Class B': [95, 89, 76, 91, 84, 87], 'Class C': [75, 82, 88, 79, 86]}
fig, ax = plt.subplots()
ax.set_title('Scores')
ax.boxplot(data.values(), labels=data.keys(){extra})
plt.show()
"""


@pytest.mark.parametrize("extra", ["", ", patch_artist=True"], ids=["default", "patches"])
def test_a_box_plot_is_a_box_and_whisker_chart(local_sbx: Sandbox, extra: str) -> None:
    """Default boxes are lines, not patches; `labels=` is matplotlib's old name of `tick_labels`."""
    execution = local_sbx.run_code(BOXES.replace("{extra}", extra))
    assert execution.error is None, execution.error
    chart = execution.results[0].chart
    assert chart is not None and chart.type.value == "box_and_whisker"
    assert [(b.label, b.min, b.median, b.max, b.outliers) for b in chart.elements] == [
        ("Class A", 78, 88, 92, []), ("Class B", 84, 88, 95, [76]), ("Class C", 75, 82, 88, [])]


def test_saving_an_image_displays_it(local_sbx: Sandbox) -> None:
    execution = local_sbx.run_code(
        "import numpy, io\nfrom PIL import Image\n"
        "image = Image.fromarray((numpy.random.rand(16, 16, 3) * 255).astype('uint8')).convert('RGBA')\n"
        "image.save(io.BytesIO(), 'PNG')\n"  # into a buffer: not a display
        "image.save('/tmp/saved.png')\nprint('Image saved.')")
    assert execution.error is None and execution.logs.stdout == ["Image saved.\n"]
    assert len(execution.results) == 1 and execution.results[0].png
    assert local_sbx.files.read("/tmp/saved.png", format="bytes")[:4] == b"\x89PNG"
