"""Guest output into logs and terminals (docs/security.md, "Guest output into logs, the audit log,
server logs and the terminal"), driven from guest code: a name the guest chose reaches a log line
of ours as one line with its control characters escaped (a line break cannot forge a line, ESC
cannot command the terminal showing the log), and the guest's output reaches the terminal of
`declaw-wasm run` with escape sequences shown, not obeyed."""

from __future__ import annotations

import logging
import re
from typing import Callable

import pytest

from declaw_wasm import Sandbox, VolumeAttachment, Volumes
from declaw_wasm import cli

# A control character other than a tab, in a log line or on the terminal: what must not appear.
CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# A folder name forging a log line and commanding a terminal (OSC 52 sets the clipboard; the
# override reverses what follows): 250 bytes, so that 17 of them nest past PATH_MAX.
HOSTILE = ("n\n2026-01-01 00:00:00 CRITICAL forged line \x1b]52;c;aGVsbG8=\x07\x1b[2J\u202e").ljust(248, "x")


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_a_name_the_guest_chose_reaches_a_log_line_as_one_line(make: Callable[..., Sandbox],
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """A `mount` volume's write-back leaves out a file or folder whose path is longer than the 4096
    bytes a volume keeps (a guest nests folders past it by renaming) and logs a warning naming it:
    the guest's folder names, with a line break, OSC and CSI sequences and a bidi override, are in
    the line escaped, cut to its ends, and the line is one line."""
    volume = Volumes.create("log-lines")
    try:
        sandbox = make(volumes=[VolumeAttachment(volume.volume_id, "/data", mode="mount")])
        chain = "/".join([HOSTILE] * 16)  # /data/b/<chain>/f: ~4030 bytes, under WASI's 4096
        r = sandbox.commands.run(
            f"python3 -c \"import os; n = {HOSTILE!r}; c = {chain!r}\n"
            "os.makedirs('/data/b/' + c); open('/data/b/' + c + '/f', 'w').write('x')\n"
            "os.mkdir('/data/' + n); os.rename('/data/b', '/data/' + n + '/b')\"")
        assert r.exit_code == 0, r
        with caplog.at_level(logging.WARNING, logger="declaw_wasm"):
            sandbox.kill()  # the write-back refuses the file (logged); the kill goes on
        lines = [record for record in caplog.records if record.name.startswith("declaw_wasm")]
        refused = [record.getMessage() for record in lines if "not written back" in record.getMessage()]
        assert refused, [record.getMessage() for record in lines]
        for record in lines:
            assert not CONTROL.search(record.getMessage()), record.getMessage()
        for formatted in caplog.text.splitlines():
            assert not CONTROL.search(formatted), formatted
        assert "n\\n2026-01-01 00:00:00 CRITICAL forged line \\x1b]52;c;aGVsbG8=\\x07\\x1b[2J\\u202e" in refused[0]
        assert "a path of" in refused[0] and len(refused[0]) < 1500, refused[0]
        deepest, files = "/", Volumes.files(volume.volume_id)  # what a volume holds is <= 4096 bytes
        while (below := [e.path for e in files.list(deepest) if e.is_dir]):
            deepest = below[0]
        assert 3900 < len(deepest.encode()) <= 4096, len(deepest.encode())
    finally:
        Volumes.delete(volume.volume_id)


@pytest.mark.guest
def test_a_guests_output_cannot_command_the_terminal_of_declaw_wasm_run(capsys: pytest.CaptureFixture[str]) -> None:
    """`declaw-wasm run` shows the program's output with its escape sequences escaped (an OSC 52
    clipboard write, a screen clear, a title, a bidi override, a C1 CSI), tabs and line breaks as
    they are; `--raw` passes them on."""
    code = ("import sys\nprint('a\\tb')\nprint('\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J\\x1b]0;title\\x07\\u202e\\x9b31m')\n"
            "print('\\x1b[31merr\\x1b[0m', file=sys.stderr)\n")
    assert cli.main(["run", "-c", code]) == 0
    out, err = capsys.readouterr()
    assert out == "a\tb\n\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J\\x1b]0;title\\x07\\u202e\\x9b31m\n", repr(out)
    assert err.endswith("\\x1b[31merr\\x1b[0m\n"), repr(err)
    assert cli.main(["run", "--raw", "-c", code]) == 0
    out, err = capsys.readouterr()
    assert out == "a\tb\n\x1b]52;c;aGVsbG8=\x07\x1b[2J\x1b]0;title\x07\u202e\x9b31m\n", repr(out)
