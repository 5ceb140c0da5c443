"""Build declaw_wasm/_media/jpeg.wasm: libjpeg-turbo 2.1.5 and codec.c for wasm32-wasi.

    python3 tools/jpeg_wasm/build.py [--tarball PATH] [--build-dir DIR] [--out PATH]

The source is Debian's orig tarball of libjpeg-turbo 2.1.5 (downloaded from deb.debian.org
unless --tarball names a local copy), checked against its SHA-256 before anything is unpacked.
The C compiler is zig's clang from PyPI (`pip install ziglang`, `python3 -m ziglang cc`): no
system toolchain, no CMake. The configuration CMake would generate (jconfig.h, jconfigint.h,
jversion.h) is written here by hand: 8-bit samples, the libjpeg 6.2 API (as Debian's and
Pillow's libjpeg62-turbo), no SIMD (jsimd_none.c), arithmetic decoding and encoding, the
in-memory source and destination managers, no getenv (JPEGMEM is not read).

The module is a WASI reactor (no `_start`; its exports are codec.c's), optimised (-O2),
stripped of debug info and names. It imports a few WASI functions only because libjpeg's
default message printer (fprintf to stderr) stays linked; codec.c replaces that printer, and
the host stubs every import (declaw_wasm/_media/jpeg.py), so the module runs with no
capability at all. The script prints the module's imports, exports, size and SHA-256.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "declaw_wasm" / "_media" / "jpeg.wasm"

VERSION = "2.1.5"
URL = f"http://deb.debian.org/debian/pool/main/libj/libjpeg-turbo/libjpeg-turbo_{VERSION}.orig.tar.gz"
SHA256 = "254f3642b04e309fee775123133c6464181addc150499561020312ec61c1bf7c"
ZIG_TESTED = "0.17.1"  # the ziglang wheel the committed jpeg.wasm was built with

# CMakeLists.txt's JPEG_SOURCES, plus arithmetic coding (jaricom, jcarith, jdarith) and
# the SIMD stubs
SOURCES = """
jcapimin jcapistd jccoefct jccolor jcdctmgr jchuff jcicc jcinit jcmainct jcmarker jcmaster
jcomapi jcparam jcphuff jcprepct jcsample jctrans jdapimin jdapistd jdatadst jdatasrc
jdcoefct jdcolor jddctmgr jdhuff jdicc jdinput jdmainct jdmarker jdmaster jdmerge jdphuff
jdpostct jdsample jdtrans jerror jfdctflt jfdctfst jfdctint jidctflt jidctfst jidctint
jidctred jquant1 jquant2 jutils jmemmgr jmemnobs jaricom jcarith jdarith jsimd_none
""".split()

JCONFIG_H = f"""\
/* jconfig.h for declaw's jpeg.wasm (tools/jpeg_wasm/build.py) */
#define JPEG_LIB_VERSION  62
#define LIBJPEG_TURBO_VERSION  {VERSION}
#define LIBJPEG_TURBO_VERSION_NUMBER  2001005
#define C_ARITH_CODING_SUPPORTED 1
#define D_ARITH_CODING_SUPPORTED 1
#define MEM_SRCDST_SUPPORTED 1
/* no WITH_SIMD */
#define BITS_IN_JSAMPLE  8
/* no RIGHT_SHIFT_IS_UNSIGNED */
"""

JCONFIGINT_H = f"""\
/* jconfigint.h for declaw's jpeg.wasm (tools/jpeg_wasm/build.py) */
#define BUILD  "declaw-wasm32"
#undef inline
#define INLINE  __inline__ __attribute__((always_inline))
#define THREAD_LOCAL  __thread
#define PACKAGE_NAME  "libjpeg-turbo"
#define VERSION  "{VERSION}"
#define SIZEOF_SIZE_T  4
#define HAVE_BUILTIN_CTZL
#if defined(__has_attribute)
#if __has_attribute(fallthrough)
#define FALLTHROUGH  __attribute__((fallthrough));
#else
#define FALLTHROUGH
#endif
#else
#define FALLTHROUGH
#endif
"""

CFLAGS = [
    "-target", "wasm32-wasi", "-O2", "-g0", "-std=gnu99",
    "-DNO_GETENV", "-DNO_PUTENV", "-DNDEBUG",
    "-fno-stack-protector", "-ffunction-sections", "-fdata-sections",
    "-Wno-everything",  # libjpeg's own code: its warnings are not ours to fix
]
LDFLAGS = [
    "-mexec-model=reactor",
    "-Wl,--gc-sections", "-Wl,--strip-all",
    "-Wl,-z,stack-size=1048576",  # libjpeg keeps its big buffers on the heap; 1 MiB of stack is ample
]


def zig() -> list[str]:
    return [sys.executable, "-m", "ziglang"]


def fetch_source(tarball: Path | None, work: Path) -> Path:
    if tarball is None:
        tarball = work / Path(URL).name
        print(f"downloading {URL}")
        with urllib.request.urlopen(URL, timeout=120) as response, open(tarball, "wb") as out:
            shutil.copyfileobj(response, out)
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{tarball}: SHA-256 {digest}, expected {SHA256}")
    print(f"source {tarball.name}: SHA-256 {digest} (verified)")
    with tarfile.open(tarball) as tar:
        tar.extractall(work, filter="data")
    src = work / f"libjpeg-turbo-{VERSION}"
    if not (src / "jpeglib.h").exists():
        raise SystemExit(f"{tarball} does not unpack to libjpeg-turbo-{VERSION}/")
    return src


def version_h(src: Path) -> str:
    text = (src / "jversion.h.in").read_text()
    return text.replace("@COPYRIGHT_YEAR@", "1991-2023")


def compile_one(src: Path, build: Path, name: str, include: list[str]) -> Path:
    obj = build / f"{name}.o"
    source = (HERE / "codec.c") if name == "codec" else (src / f"{name}.c")
    subprocess.run([*zig(), "cc", *CFLAGS, *include, "-c", str(source), "-o", str(obj)], check=True)
    return obj


def inspect(path: Path) -> None:
    import wasmtime

    module = wasmtime.Module(wasmtime.Engine(), path.read_bytes())
    imports = [f"{i.module}.{i.name}" for i in module.imports]
    exports = [e.name for e in module.exports]
    print("imports:", ", ".join(imports) or "(none)")
    print("exports:", ", ".join(exports))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tarball", type=Path, help="a local copy of the orig tarball (checked against SHA-256)")
    parser.add_argument("--build-dir", type=Path, help="keep the build here (default: a temporary folder)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    zig_version = subprocess.run([*zig(), "version"], capture_output=True, text=True, check=True).stdout.strip()
    if zig_version != ZIG_TESTED:
        print(f"note: zig {zig_version}; the committed module was built with {ZIG_TESTED} (bytes may differ)")

    with tempfile.TemporaryDirectory(prefix="jpeg-wasm-") as tmp:
        work = args.build_dir.resolve() if args.build_dir else Path(tmp)
        if work.exists() and args.build_dir:
            shutil.rmtree(work)
        work.mkdir(parents=True, exist_ok=True)
        src = fetch_source(args.tarball.resolve() if args.tarball else None, work)
        config = work / "config"
        config.mkdir()
        (config / "jconfig.h").write_text(JCONFIG_H)
        (config / "jconfigint.h").write_text(JCONFIGINT_H)
        (config / "jversion.h").write_text(version_h(src))
        build = work / "obj"
        build.mkdir()
        include = [f"-I{config}", f"-I{src}"]
        names = [*SOURCES, "codec"]
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            objects = list(pool.map(lambda n: compile_one(src, build, n, include), names))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([*zig(), "cc", "-target", "wasm32-wasi", "-O2", *LDFLAGS,
                        *map(str, objects), "-o", str(args.out)], check=True)

    data = args.out.read_bytes()
    print(f"{args.out}: {len(data)} bytes, SHA-256 {hashlib.sha256(data).hexdigest()}")
    inspect(args.out)


if __name__ == "__main__":
    main()
