"""The `declaw-wasm` command: warmup, demo, run, serve."""

from __future__ import annotations

import argparse
import runpy
import sys
import time
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="declaw-wasm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("warmup", help="fetch, verify and compile the runtime once (cached on disk)")
    sub.add_parser("demo", help="run the declaw code-interpreter example")
    run = sub.add_parser("run", help="run Python code in a fresh sandbox")
    what = run.add_mutually_exclusive_group(required=True)
    what.add_argument("-c", dest="code", help="the code to run")
    what.add_argument("file", nargs="?", help="a local Python file to copy in and run")
    run.add_argument("--timeout", type=float, default=60.0)
    serve = sub.add_parser("serve", help="serve sandboxes over HTTP (API key: DECLAW_API_KEY)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--max-body-bytes", type=int, default=None,
                       help="largest JSON request body (default 16 MiB)")
    serve.add_argument("--max-upload-bytes", type=int, default=None,
                       help="largest file upload (default 1 GiB)")
    args = parser.parse_args(argv)

    if args.command == "warmup":
        return _warmup()
    if args.command == "demo":
        from .paths import examples_dir

        runpy.run_path(str(examples_dir() / "code_interpreter.py"), run_name="__main__")
        return 0
    if args.command == "serve":
        return _serve(args)
    return _run(args.code, args.file, args.timeout)


def _serve(args: argparse.Namespace) -> int:
    import os

    from . import server

    server.serve(args.host, args.port, os.environ.get("DECLAW_API_KEY") or None,
                 max_body=args.max_body_bytes or server.DEFAULT_MAX_BODY,
                 max_upload=args.max_upload_bytes or server.DEFAULT_MAX_UPLOAD)
    return 0


def _warmup() -> int:
    from .runtime import compiled_path, get_runtime
    from .settings import cache_dir

    start = time.monotonic()
    runtime = get_runtime()
    print(f"declaw-wasm: runtime ready in {time.monotonic() - start:.1f}s; cache {cache_dir()}",
          file=sys.stderr)
    path = "warm snapshot" if runtime.warm else "cold module (DECLAW_WASM_SNAPSHOT=0 or no snapshot)"
    print(f"declaw-wasm: guests start from the {path}; plain module "
          f"{compiled_path(runtime.files, runtime.flags)}", file=sys.stderr)
    return 0


def _run(code: Optional[str], file: Optional[str], timeout: float) -> int:
    from . import Sandbox

    with Sandbox.create(timeout=max(timeout + 30, 300)) as sbx:
        if file is not None:
            with open(file, "rb") as f:
                sbx.files.write("/home/user/main.py", f.read())
        else:
            sbx.files.write("/home/user/main.py", code or "")
        result = sbx.commands.run("python3 main.py", timeout=timeout,
                                  on_stdout=lambda s: print(s, end="", flush=True),
                                  on_stderr=lambda s: print(s, end="", file=sys.stderr, flush=True))
        return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
