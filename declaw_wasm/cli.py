"""The `declaw-wasm` command: warmup, demo, run, serve, console, template, state, mcp."""

from __future__ import annotations

import argparse
import runpy
import sys
from typing import Callable, Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["mcp"]:  # its own parser, in the optional module (declaw-wasm[mcp])
        try:
            from .integrations.mcp import main as mcp_main
        except ImportError as exc:
            print(f"declaw-wasm mcp: {exc}", file=sys.stderr)
            return 2
        return mcp_main(args_in[1:])
    parser = argparse.ArgumentParser(prog="declaw-wasm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    warmup = sub.add_parser("warmup", help="fetch, verify and compile the runtime once (cached on disk)")
    warmup.add_argument("--fuel", action="store_true",
                        help="also compile the runtime with fuel, for Limits(cpu_instructions=...) "
                             "(minutes more)")
    warmup.add_argument("--cold", action="store_true",
                        help="also compile the plain module, for the cold path (DECLAW_WASM_WARM_IMAGE=0; "
                             "the test suite runs both paths); otherwise it is built on its first use")
    warmup.add_argument("--status", action="store_true",
                        help="build nothing: say what is cached and what a first use would still build")
    warmup.add_argument("--json", action="store_true", help="with --status: as JSON")
    sub.add_parser("demo", help="run the declaw code-interpreter example")
    run = sub.add_parser("run", help="run Python code in a fresh sandbox")
    what = run.add_mutually_exclusive_group(required=True)
    what.add_argument("-c", dest="code", help="the code to run")
    what.add_argument("file", nargs="?", help="a local Python file to copy in and run")
    run.add_argument("--timeout", type=float, default=60.0)
    run.add_argument("--raw", action="store_true",
                     help="print the program's output as it is; by default its control characters other "
                          "than tabs and line breaks (ESC, so every ANSI or OSC sequence) are shown escaped")
    serve = sub.add_parser("serve", help="serve sandboxes over HTTP (API key: DECLAW_API_KEY)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--max-body-bytes", type=int, default=None,
                       help="largest JSON request body (default 16 MiB)")
    serve.add_argument("--max-upload-bytes", type=int, default=None,
                       help="largest file upload (default 1 GiB)")
    serve.add_argument("--backend", default=None, metavar="BACKEND",
                       help="where the served sandboxes run: local (default), processes[:N], "
                            "ray[:address] (e.g. ray:auto to front a Ray cluster)")
    serve.add_argument("--tls-cert", default=None, metavar="PEM",
                       help="serve HTTPS with this certificate (chain) file; needs --tls-key")
    serve.add_argument("--tls-key", default=None, metavar="PEM", help="the certificate's private key file")
    serve.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                       help="without an API key, also answer requests whose Host is NAME (besides "
                            "localhost, 127.0.0.1, [::1]); repeatable; DECLAW_WASM_ALLOWED_HOSTS adds more")
    serve.add_argument("--state-namespace", default=None, metavar="NAME",
                       help="the server's part of the state store (default: DECLAW_WASM_STATE_NAMESPACE, "
                            "else 'serve'); in-process programs share it with DECLAW_WASM_STATE_NAMESPACE=NAME")
    serve.add_argument("--vault-file", default=None, metavar="PATH",
                       help="keep the vault's secrets in this file (mode 0600); default: in memory")
    serve.add_argument("--webhook", action="append", default=[], metavar="URL",
                       help="POST each sandbox lifecycle event to URL, signed (HMAC-SHA256) with "
                            "DECLAW_WASM_WEBHOOK_SECRET; repeatable")
    serve.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                       help="also serve /metrics without the API key on 127.0.0.1:PORT (loopback only)")
    console = sub.add_parser("console", help="a web page of what sandboxes did: from journals (a local "
                                              "server on loopback) or a declaw-wasm serve's /console")
    console.add_argument("--journal", default=None, metavar="DIR",
                         help="the journal folder to show (default: DECLAW_WASM_JOURNAL)")
    console.add_argument("--serve", default=None, metavar="URL",
                         help="a declaw-wasm serve: open its own console (URL/console; its API key is asked there)")
    console.add_argument("--port", type=int, default=8090, help="the local console's port (on 127.0.0.1)")
    _template_parser(sub)
    _state_parser(sub)
    sub.add_parser("mcp", help="serve sandboxes as MCP tools (stdio or HTTP; pip install "
                               "'declaw-wasm[mcp]'; declaw-wasm mcp --help)")
    args = parser.parse_args(argv)

    if args.command == "warmup":
        if args.json and not args.status:
            parser.error("--json goes with --status")
        if args.status:
            return _warmup_status(args.fuel, args.json)
        return _warmup(args.fuel, args.cold)
    if args.command == "template":
        return _template(args)
    if args.command == "state":
        return _state(args)
    if args.command == "demo":
        from ._assets import examples_dir

        runpy.run_path(str(examples_dir() / "code_interpreter.py"), run_name="__main__")
        return 0
    if args.command == "console":
        return _console(args)
    if args.command == "serve":
        return _serve(args)
    return _run(args.code, args.file, args.timeout, args.raw)


def _serve(args: argparse.Namespace) -> int:
    from . import server
    from ._webguard import check_names
    from .exceptions import InvalidArgumentException
    from .sandbox import sandboxes_for
    from .settings import (SERVE_NAMESPACE, allowed_hosts, api_key, backend, check_namespace, parse_backend,
                           state_namespace, use_state_namespace)

    server.check_bind(args.host, api_key())
    try:
        namespace = check_namespace(args.state_namespace or state_namespace() or SERVE_NAMESPACE,
                                    "--state-namespace")
        check_names([*allowed_hosts(), *args.allowed_host])
    except (InvalidArgumentException, ValueError) as exc:
        raise SystemExit(f"declaw-wasm serve: {exc}") from None
    # --backend, else DECLAW_WASM_BACKEND, else this process (never DECLAW_DOMAIN: no proxying)
    try:
        choice = parse_backend(args.backend, "--backend") if args.backend else backend()
    except InvalidArgumentException as exc:
        raise SystemExit(f"declaw-wasm serve: {exc}") from None
    if bool(args.tls_cert) != bool(args.tls_key):
        raise SystemExit("declaw-wasm serve: --tls-cert and --tls-key go together")
    if args.webhook:
        from .server.observe import check_webhook
        from .settings import webhook_secret

        if not webhook_secret():
            raise SystemExit("declaw-wasm serve: --webhook needs DECLAW_WASM_WEBHOOK_SECRET (the signing key)")
        try:
            for url in args.webhook:
                check_webhook(url)
        except InvalidArgumentException as exc:
            raise SystemExit(f"declaw-wasm serve: {exc}") from None
    vault = None
    if args.vault_file:
        from .secrets import Vault

        try:
            vault = Vault(path=args.vault_file)
        except InvalidArgumentException as exc:
            raise SystemExit(f"declaw-wasm serve: {exc}") from None
    # the server's own part of the state store, set before any sandbox (a pool's workers inherit it)
    use_state_namespace(namespace)
    sandboxes = sandboxes_for(choice) if choice is not None and choice.kind != "local" else None
    server.serve(args.host, args.port, api_key(),
                 max_body=args.max_body_bytes or server.DEFAULT_MAX_BODY,
                 max_upload=args.max_upload_bytes or server.DEFAULT_MAX_UPLOAD, sandboxes=sandboxes,
                 tls=(args.tls_cert, args.tls_key) if args.tls_cert else None, vault=vault,
                 allowed_hosts=args.allowed_host, state_namespace=namespace, webhooks=args.webhook,
                 metrics_port=args.metrics_port)
    return 0


def _console(args: argparse.Namespace) -> int:
    """`declaw-wasm console`: a server's own console, or a local one over a journal folder."""
    import webbrowser
    from pathlib import Path

    from .settings import journal_dir

    if args.serve:
        if not args.serve.startswith(("http://", "https://")):
            raise SystemExit("declaw-wasm console: --serve must be an http:// or https:// URL")
        url = args.serve.rstrip("/") + "/console"
        print(f"declaw-wasm console: {url} (type the server's API key there)", file=sys.stderr)
        webbrowser.open(url)
        return 0
    folder = Path(args.journal).expanduser() if args.journal else journal_dir()
    if folder is None or not folder.is_dir():
        raise SystemExit("declaw-wasm console: give --journal DIR (or set DECLAW_WASM_JOURNAL) naming a journal "
                         "folder, or --serve URL")
    import uvicorn

    from .server.console import journal_app
    from .server.run import one_line_logs

    one_line_logs()
    print(f"declaw-wasm console: http://127.0.0.1:{args.port}/console (journals in {folder})", file=sys.stderr)
    uvicorn.run(journal_app(folder), host="127.0.0.1", port=args.port, log_level="warning", http="h11")
    return 0


def _warmup(fuel: bool = False, cold: bool = False) -> int:
    from ._warmup import warmup

    warmup(cold=cold, fuel=fuel)
    return 0


def _warmup_status(fuel: bool, as_json: bool) -> int:
    from ._warmup import status, status_json, status_lines
    from .settings import warm_image_enabled

    warm = warm_image_enabled()
    rows = status(warm, fuel)
    print(status_json(rows, warm) if as_json else "\n".join(status_lines(rows, warm)))
    return 0


def _template_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    template = sub.add_parser("template", help="build, list or delete custom templates")
    tsub = template.add_subparsers(dest="template_command", required=True)
    build = tsub.add_parser("build", help="build a custom template (kept in the cache)")
    build.add_argument("name")
    build.add_argument("--from", dest="base", default="code-interpreter",
                       help="the built-in template to start from: code-interpreter (default) or base")
    build.add_argument("--pip", action="append", default=[], metavar="REQUIREMENT",
                       help="a pure-Python package to install (repeatable)")
    build.add_argument("-r", "--requirements", action="append", default=[], metavar="FILE",
                       help="a requirements file of packages to install")
    build.add_argument("--copy", action="append", default=[], metavar="SRC:DEST",
                       help="a host file or folder to place at DEST (under /home/user or /tmp)")
    build.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    build.add_argument("--run", action="append", default=[], metavar="COMMAND",
                       help="a shell command run once at build time (repeatable)")
    ls = tsub.add_parser("list", help="list the custom templates")
    ls.add_argument("--json", action="store_true")
    delete = tsub.add_parser("delete", help="delete a custom template")
    delete.add_argument("name")


def _template(args: argparse.Namespace) -> int:
    from .exceptions import SandboxException
    from .templates import Template, delete_template, info_json, list_templates

    try:
        if args.template_command == "list":
            infos = list_templates()
            if args.json:
                print(info_json(infos))
            for info in [] if args.json else infos:
                print(f"{info.name:24} from {info.base:16} {len(info.packages):3} packages  "
                      f"{info.size_bytes / 1e6:7.1f} MB  built {info.built_at:%Y-%m-%d %H:%M}")
            return 0
        if args.template_command == "delete":
            if not delete_template(args.name):
                print(f"declaw-wasm: no template {args.name!r}", file=sys.stderr)
                return 1
            return 0
        template = Template().from_template(args.base)
        packages = list(args.pip)
        for path in args.requirements:
            with open(path, encoding="utf-8") as f:
                packages += [line.split("#", 1)[0].strip() for line in f
                             if line.split("#", 1)[0].strip()]
        if packages:
            template.pip_install(packages)
        for pair in args.copy:
            src, sep, dest = pair.partition(":")
            if not sep or not dest:
                raise SystemExit(f"declaw-wasm: --copy wants SRC:DEST, got {pair!r}")
            template.copy(src, dest)
        envs = {}
        for pair in args.env:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise SystemExit(f"declaw-wasm: --env wants KEY=VALUE, got {pair!r}")
            envs[key] = value
        template.set_envs(envs)
        for command in args.run:
            template.run_cmd(command)
        info = Template.build(template, alias=args.name)
        print(f"declaw-wasm: built template {info.name!r} ({', '.join(info.packages) or 'no packages'})")
        return 0
    except SandboxException as exc:
        print(f"declaw-wasm: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _state_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    state = sub.add_parser("state", help="the state store's signing key; re-sign a store you trust")
    ssub = state.add_subparsers(dest="state_command", required=True)
    resign = ssub.add_parser(
        "resign", help="sign every record of a state store you trust with this host's state key (records "
                       "written before records were signed, or with a key since rotated)")
    resign.add_argument("--store", default=None, metavar="URL",
                        help="the store: a folder or fsspec URL (default: DECLAW_WASM_STATE)")
    resign.add_argument("--dry-run", action="store_true", help="say what would be signed, change nothing")
    ssub.add_parser("key", help="where this host's state key comes from, and its id (never the key itself); "
                                "makes the key file on first use")


def _state(args: argparse.Namespace) -> int:
    from ._printable import printable
    from ._state import StateError, StateStore
    from ._state.keys import current
    from ._state.resign import Outcome, resign

    try:
        if args.state_command == "key":
            key = current()
            print(f"state key {key.key_id} from {key.source}")
            return 0
        store = StateStore(args.store)
        key = store.key
        print(f"declaw-wasm: signing the records of {store.url} with the state key {key.key_id} (from "
              f"{key.source}){' (dry run: nothing is changed)' if args.dry_run else ''}. Do this only for a "
              "store nobody else could have written, while nothing else uses it.", file=sys.stderr)

        def shown(outcome: Outcome) -> None:
            if outcome.action != "kept":
                note = f"  ({outcome.note})" if outcome.note else ""
                print(printable(f"{outcome.action:9} {outcome.kind or '-':15} {outcome.key}{note}"))

        report = resign(store, dry_run=args.dry_run, progress=shown)
    except StateError as exc:
        print(f"declaw-wasm: {printable(str(exc))}", file=sys.stderr)
        return 1
    verb = "would be" if args.dry_run else "were"
    print(f"declaw-wasm: {report.count('signed')} unsigned records {verb} signed, {report.count('re-signed')} "
          f"signed with another key {verb} re-signed, {report.count('kept')} already signed with this key, "
          f"{len(report.left)} left as they are (listed above)", file=sys.stderr)
    return 1 if report.left else 0


def _run(code: Optional[str], file: Optional[str], timeout: float, raw: bool = False) -> int:
    """Run the code in a fresh sandbox, its output on ours. The guest's output is its own text,
    but not commands to the terminal showing it: escape sequences can set the clipboard (OSC 52),
    the window title, or rewrite what was printed (`_printable.terminal_text`)."""
    from . import Sandbox
    from ._printable import terminal_text

    shown: Callable[[str], str] = (lambda s: s) if raw else terminal_text

    with Sandbox.create(timeout=max(timeout + 30, 300)) as sbx:
        if file is not None:
            with open(file, "rb") as f:
                sbx.files.write("/home/user/main.py", f.read())
        else:
            sbx.files.write("/home/user/main.py", code or "")
        result = sbx.commands.run("python3 main.py", timeout=timeout,
                                  on_stdout=lambda s: print(shown(s), end="", flush=True),
                                  on_stderr=lambda s: print(shown(s), end="", file=sys.stderr, flush=True))
        return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
