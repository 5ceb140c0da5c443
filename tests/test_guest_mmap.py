"""`mmap.mmap` in the guest (guest/declaw_posix/mmaps.py): WASI has no memory mapping, and the
runtime's module raised `OSError: mmap is unavailable on wasm32-wasi` for every map, so
`numpy.memmap`, `np.load(..., mmap_mode="r")` and `open_memmap` failed. Each program runs natively
(this machine's CPython, real mmap) and in a sandbox: the outputs must match."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from declaw_wasm import Sandbox

pytestmark = pytest.mark.guest

PROGS = {
"anon": """
import mmap
m = mmap.mmap(-1, 16)
m[0:5] = b"hello"; m[5] = 33
print(len(m), m[:6], m[0], m.find(b"l"), m.rfind(b"l"), m.find(b"l", 4))
m.seek(0); print(m.read(3), m.tell(), m.readline(), m.tell())
m.seek(2); m.write(b"XY"); print(m[:6], m.tell())
m.move(0, 2, 2); print(m[:6])
m.seek(-1, 2); print(m.read_byte(), m.tell())
try: m.read_byte()
except ValueError as e: print("ValueError", e)
print(m.closed); m.close(); print(m.closed, repr(m))
try: len(m)
except ValueError as e: print("ValueError", e)
""",
"file_write": """
import mmap, os
with open("data.bin", "wb") as f: f.write(b"0123456789" * 3)
with open("data.bin", "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    print(len(m), m.size(), m[:10])
    m[0:3] = b"abc"
    m.flush()
    print(open("data.bin", "rb").read()[:10])
    m[3:5] = b"de"
    m.close()
print(open("data.bin", "rb").read()[:10])
""",
"file_read_only": """
import mmap
with open("ro.bin", "wb") as f: f.write(b"line one\\nline two\\n")
with open("ro.bin", "rb") as f:
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        print(m.readline(), m.readline(), m.readline(), m[-4:])
        try: m[0] = 65
        except TypeError as e: print("TypeError", e)
        try: m.write(b"x")
        except TypeError as e: print("TypeError", e)
        print(memoryview(m).readonly)
""",
"copy": """
import mmap
with open("c.bin", "wb") as f: f.write(b"abcdef")
with open("c.bin", "r+b") as f:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    m[0:2] = b"ZZ"; m.flush(); print(m[:], open("c.bin","rb").read()); m.close()
print(open("c.bin","rb").read())
""",
"errors": """
import mmap
with open("e.bin", "wb") as f: pass
with open("e.bin", "r+b") as f:
    for args, kw in [((f.fileno(), 0), {}), ((f.fileno(), 10), {}), ((-1, -1), {}),
                     ((f.fileno(), 0), {"access": 7}),
                     ((f.fileno(), 0), {"access": mmap.ACCESS_READ, "prot": mmap.PROT_READ}),
                     ((f.fileno(), 0), {"offset": 100})]:
        try: mmap.mmap(*args, **kw); print("ok")
        except Exception as e: print(type(e).__name__, e)
    f.write(b"x" * 100); f.flush()
    try: mmap.mmap(f.fileno(), 0, offset=8192); print("ok")
    except Exception as e: print(type(e).__name__, e)
    try: mmap.mmap(f.fileno(), 0, offset=3); print("ok")
    except OSError as e: print(type(e).__name__, e.strerror)
with open("e.bin", "rb") as f:
    try: mmap.mmap(f.fileno(), 0); print("ok")
    except OSError as e: print(type(e).__name__, e.strerror)
    print(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)[:3], mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)[:3])
m = mmap.mmap(-1, 4)
for op in (lambda: m.__setitem__(0, 256), lambda: m.__setitem__(slice(0, 2), b"abc"), lambda: m[9],
           lambda: m.seek(5), lambda: m.write(b"12345"), lambda: m.flush(0, 9), lambda: m.move(0, 3, 2)):
    try: op(); print("ok")
    except Exception as e: print(type(e).__name__, e)
import pickle
try: pickle.dumps(m)
except TypeError as e: print("TypeError")
print(list(m), b"\\x00" in list(m))
""",
"numpy_memmap": """
import numpy as np, os
a = np.memmap("arr.dat", dtype="float64", mode="w+", shape=(3, 4))
a[:] = np.arange(12).reshape(3, 4); a.flush(); del a
b = np.memmap("arr.dat", dtype="float64", mode="r", shape=(3, 4))
print(b.sum(), b[2, 3], b.flags.writeable, os.path.getsize("arr.dat"))
try: b[0, 0] = 1
except ValueError as e: print("ValueError", e)
c = np.memmap("arr.dat", dtype="float64", mode="r+", shape=(3, 4))
c[0, 0] = 100.0; del c
print(np.frombuffer(open("arr.dat", "rb").read())[0])
d = np.memmap("arr.dat", dtype="float64", mode="c", shape=(3, 4)); d[0, 0] = -1; d.flush(); del d
print(np.frombuffer(open("arr.dat", "rb").read())[0])
e = np.memmap("arr.dat", dtype="float64", mode="r", offset=8 * 4, shape=(2, 4)); print(e[0].tolist())
""",
"numpy_load": """
import numpy as np
np.save("x.npy", np.arange(10.0))
y = np.load("x.npy", mmap_mode="r"); print(type(y).__name__, y[3:6].tolist(), y.mean())
z = np.lib.format.open_memmap("z.npy", mode="w+", dtype="int32", shape=(5,)); z[:] = 7; z.flush(); del z
print(np.load("z.npy").tolist())
""",
}

PROGS.update({
"numpy_tofile_fromfile": """
import numpy as np
np.arange(5.0).tofile("a.bin"); print(np.fromfile("a.bin").tolist(), open("a.bin", "rb").read()[8:16])
with open("t.bin", "wb") as f:
    f.write(b"HDR"); np.arange(4, dtype=np.int16).tofile(f); f.write(b"END")
with open("t.bin", "rb") as f:
    print(f.read(3), np.fromfile(f, dtype=np.int16, count=4).tolist(), f.read(), f.tell())
with open("t.bin", "r+b") as f:
    f.seek(3); np.array([9], dtype=np.int16).tofile(f); print(f.tell(), f.read())
with open("t.bin", "ab") as f:
    np.array([7], dtype=np.uint8).tofile(f)
print(open("t.bin", "rb").read())
np.array([1.5, 2.5]).tofile("s.txt", sep=","); print(open("s.txt").read(), np.fromfile("s.txt", sep=",").tolist())
""",
"dup_elsewhere": """
import os, sys
with open("d.txt", "w") as f:
    f.write("one\\n"); f.flush()
    fd = os.dup(f.fileno()); os.write(fd, b"two\\n"); os.close(fd)
print(open("d.txt").read(), end="")
""",
})


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with Sandbox.create() as sandbox:
        yield sandbox


@pytest.mark.parametrize("name", sorted(PROGS))
def test_a_map_behaves_as_on_linux(box: Sandbox, name: str, tmp_path: Path) -> None:
    code = PROGS[name]
    if name.startswith("numpy"):
        pytest.importorskip("numpy")
    native = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stderr
    box.files.write(f"/home/user/{name}/p.py", code)
    guest = box.commands.run(f"cd /home/user/{name} && python3 p.py", timeout=60)
    assert (guest.stdout, guest.exit_code) == (native.stdout, 0), guest.stderr


def test_a_shared_maps_writes_reach_the_file_when_the_program_ends(box: Sandbox) -> None:
    line = ("printf abcd > g.bin; python3 -c 'import mmap; f = open(\"g.bin\", \"r+b\"); "
            "m = mmap.mmap(f.fileno(), 0); m[0:2] = b\"ZZ\"'; cat g.bin")
    assert box.commands.run(line).stdout == "ZZcd"


def test_a_map_of_a_bare_descriptor_says_why_it_cannot_write_back_once_it_is_closed(box: Sandbox) -> None:
    code = ("import mmap, os\nfd = os.open('h.bin', os.O_RDWR)\nm = mmap.mmap(fd, 0)\nm[0:1] = b'Q'\nm.flush()\n"
            "os.close(fd)\ntry:\n    m.flush()\nexcept OSError as e:\n    print(e.strerror)\n")
    box.files.write("/home/user/bare.py", code)
    out = box.commands.run("printf abcd > h.bin && python3 bare.py && cat h.bin")
    assert out.stdout == ("the mapped file's descriptor was closed: a map of a bare descriptor writes back only "
                          "while it is open\nQbcd"), out.stderr
