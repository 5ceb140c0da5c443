"""`curl` and `wget` in the guest shell, over the sandbox's network (the host's door).

They are small clients on http.client (so the same policy, TLS verification by the host, secret
injection and audit apply as to any Python code), with the flags agents use:
curl -s -S -f -L -o -O -X -H -d/--data/--data-raw/--data-binary -w '%{http_code}' -I -i -k -m
--connect-timeout -u -A -G --compressed --retry (accepted) -v (headers on stderr);
wget -q -O FILE|- -T --header --no-check-certificate (the host verifies anyway).
"""

from __future__ import annotations

import io
import os
import sys
import time

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    from .shells import GuestState

    Invocation = Any  # bash_purepython's CommandInvocation (untyped)

CURL_EXIT = {"url": 3, "resolve": 6, "connect": 7, "timeout": 28, "ssl": 35, "cert": 60,
             "http": 22, "redirects": 47, "protocol": 1, "write": 23, "recv": 56, "usage": 2}
WGET_EXIT = {"usage": 2, "io": 3, "network": 4, "ssl": 5, "http": 8}


class _Failure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _classify(exc: BaseException) -> tuple[str, str]:
    """(kind, message) for an exception from connecting or talking to a server."""
    import socket
    import ssl

    text = str(exc)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "cert", "SSL certificate problem: %s" % text
    if isinstance(exc, ssl.SSLError):
        return "ssl", "SSL connect error: %s" % text
    if isinstance(exc, socket.gaierror):
        return "resolve", "Could not resolve host: %s" % text
    if isinstance(exc, TimeoutError):
        return "timeout", "Operation timed out: %s" % text
    if isinstance(exc, ConnectionRefusedError):
        return "connect", "Failed to connect: %s" % text
    if isinstance(exc, OSError):
        return "recv", "Failure when receiving data from the peer: %s" % text
    return "recv", text


class _Request:
    def __init__(self) -> None:
        self.method: str | None = None
        self.headers: list[tuple[str, str]] = []
        self.data: bytes | None = None
        self.follow = False
        self.max_redirs = 50
        self.timeout: float | None = None
        self.insecure = False
        self.head = False
        self.get = False


def _fetch(  # noqa: C901 (one HTTP exchange per hop, as curl makes it)
        url: str, req: _Request, verbose: Callable[[str], object] | None = None,
) -> tuple[int, str, list[tuple[str, str]], bytes, str, str]:
    """(status, reason, headers, body, final url, http version) following redirects if asked."""
    import http.client
    import ssl
    import urllib.parse

    method = req.method or ("HEAD" if req.head else "POST" if req.data is not None else "GET")
    data = req.data
    if req.get and data is not None:
        url += ("&" if "?" in url else "?") + data.decode("utf-8", "replace")
        data = None
        if req.method is None:
            method = "GET"
    for _hop in range(req.max_redirs + 1):
        if "://" not in url:
            url = "http://" + url
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise _Failure("protocol", "Protocol \"%s\" not supported" % parts.scheme)
        if not parts.hostname:
            raise _Failure("url", "URL rejected: No host part in the URL")
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            context = ssl._create_unverified_context() if req.insecure else ssl.create_default_context()
            conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=req.timeout,
                                               context=context)
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=req.timeout)
        target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        names = {k.lower() for k, _ in req.headers}
        headers: dict[str, str] = {}
        if "user-agent" not in names:
            headers["User-Agent"] = "curl/8.5.0"
        if "accept" not in names:
            headers["Accept"] = "*/*"
        if data is not None and "content-type" not in names:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.putrequest(method, target, skip_accept_encoding=True)
            for key, value in list(headers.items()) + req.headers:
                conn.putheader(key, value)
            if data is not None:
                conn.putheader("Content-Length", str(len(data)))
            conn.endheaders(data)
            resp = conn.getresponse()
            body = resp.read() if method != "HEAD" else b""
        except _Failure:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes curl's exit code
            raise _Failure(*_classify(exc)) from None
        finally:
            conn.close()
        if verbose is not None:
            verbose("> %s %s HTTP/1.1\n" % (method, target))
            verbose("< HTTP/1.1 %d %s\n" % (resp.status, resp.reason))
        if req.follow and resp.status in (301, 302, 303, 307, 308) and resp.getheader("Location"):
            url = urllib.parse.urljoin(url, resp.getheader("Location"))
            if resp.status in (301, 302, 303) and method not in ("GET", "HEAD"):
                method, data = "GET", None
            continue
        version = "1.1" if resp.version == 11 else "1.0"
        return resp.status, resp.reason, resp.getheaders(), body, url, version
    raise _Failure("redirects", "Maximum (%d) redirects followed" % req.max_redirs)


def _read_data(value: str, state: GuestState, stdin: Callable[[], bytes]) -> bytes:
    if value.startswith("@"):
        name = value[1:]
        if name == "-":
            return stdin()
        with open(state.resolve_path(name), "rb") as f:
            return f.read()
    return value.encode("utf-8", "surrogateescape")


def _stdin_reader(invocation: Invocation) -> Callable[[], bytes]:
    def read() -> bytes:
        if invocation.stdin_kind == InputKind.BYTES:
            return bytes(invocation.stdin or b"")
        if invocation.stdin_kind == InputKind.TEXT:
            return (invocation.stdin or "").encode("utf-8", "surrogateescape")
        return sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else b""
    return read


def _write_out(fmt: str, info: dict[str, Any]) -> str:
    out = []
    i = 0
    fmt = fmt.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r")
    while i < len(fmt):
        if fmt.startswith("%{", i) and "}" in fmt[i:]:
            end = fmt.index("}", i)
            out.append(str(info.get(fmt[i + 2:end], "")))
            i = end + 1
        else:
            out.append(fmt[i])
            i += 1
    return "".join(out)


class CurlCommand(Command):
    name = "curl"
    summary = "transfer a URL (HTTP and HTTPS, over the sandbox's network)"
    input_kinds = frozenset({InputKind.ARGUMENTS, InputKind.TEXT, InputKind.BYTES})
    output_kinds = frozenset({OutputKind.BYTES})

    WITH_VALUE = {"-o": "output", "--output": "output", "-X": "method", "--request": "method",
                  "-H": "header", "--header": "header", "-d": "data", "--data": "data",
                  "--data-raw": "data_raw", "--data-binary": "data_binary", "--data-ascii": "data",
                  "--data-urlencode": "data_urlencode", "-w": "write_out", "--write-out": "write_out",
                  "-m": "max_time", "--max-time": "max_time", "--connect-timeout": "connect_timeout",
                  "-u": "user", "--user": "user", "-A": "agent", "--user-agent": "agent",
                  "-e": "referer", "--referer": "referer", "--retry": "ignore", "--retry-delay": "ignore",
                  "--max-redirs": "max_redirs", "--cacert": "ignore", "--capath": "ignore",
                  "-b": "cookie", "--cookie": "cookie", "--json": "json", "-T": "upload",
                  "--upload-file": "upload", "--retry-max-time": "ignore", "-x": "proxy",
                  "--proxy": "proxy", "-F": "form", "--form": "form"}
    FLAGS = {"-s": "silent", "--silent": "silent", "-S": "show_error", "--show-error": "show_error",
             "-f": "fail", "--fail": "fail", "--fail-with-body": "fail_body", "-L": "location",
             "--location": "location", "-O": "remote_name", "--remote-name": "remote_name",
             "-I": "head", "--head": "head", "-i": "include", "--include": "include",
             "-k": "insecure", "--insecure": "insecure", "-v": "verbose", "--verbose": "verbose",
             "-G": "get", "--get": "get", "--compressed": "compressed", "-#": "ignore_flag",
             "--progress-bar": "ignore_flag", "-N": "ignore_flag", "--no-buffer": "ignore_flag",
             "-q": "ignore_flag", "--http1.1": "ignore_flag", "-4": "ignore_flag", "-6": "ignore_flag",
             "--tlsv1.2": "ignore_flag", "--ssl-reqd": "ignore_flag", "-g": "ignore_flag",
             "--globoff": "ignore_flag", "--create-dirs": "create_dirs"}

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        errors: list[str] = []
        try:
            return self._run(invocation, state, errors)
        except _Failure as failure:
            code = CURL_EXIT.get(failure.kind, 1)
            return CommandResult(stdout=b"", exit_code=code)

    def _parse(self, args: list[str]) -> dict[str, Any]:
        opts: dict[str, Any] = {"header": [], "data": [], "urls": [], "form": []}
        i = 0
        while i < len(args):
            arg = args[i]
            i += 1
            if arg.startswith("--") and "=" in arg and arg.split("=", 1)[0] in self.WITH_VALUE:
                arg, value = arg.split("=", 1)
                args.insert(i, value)
            if arg in self.WITH_VALUE:
                if i >= len(args):
                    raise _Failure("usage", "option %s: requires parameter" % arg)
                key, value = self.WITH_VALUE[arg], args[i]
                i += 1
                if key in ("header", "form"):
                    opts[key].append(value)
                elif key in ("data", "data_raw", "data_binary", "data_urlencode", "json"):
                    opts["data"].append((key, value))
                else:
                    opts[key] = value
            elif arg in self.FLAGS:
                opts[self.FLAGS[arg]] = True
            elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
                # combined short flags: -sSL, -fsSLo FILE
                for j, ch in enumerate(arg[1:]):
                    flag = "-" + ch
                    if flag in self.FLAGS:
                        opts[self.FLAGS[flag]] = True
                    elif flag in self.WITH_VALUE:
                        rest = arg[j + 2:]
                        if rest:
                            args.insert(i, rest)
                        args.insert(i, flag)
                        break
                    else:
                        raise _Failure("usage", "option %s: is unknown" % flag)
            elif arg.startswith("-") and arg != "-":
                raise _Failure("usage", "option %s: is unknown" % arg)
            else:
                opts["urls"].append(arg)
        return opts

    def _run(  # noqa: C901 (curl's options applied in order, then one fetch per URL)
            self, invocation: Invocation, state: GuestState, errors: list[str]) -> CommandResult:
        import base64
        import urllib.parse

        try:
            opts = self._parse(list(invocation.arguments))
        except _Failure as failure:
            state.write_error("curl: %s\ncurl: try 'curl --help' for more information\n" % failure)
            raise
        silent = opts.get("silent") and not opts.get("show_error")

        def fail(failure: _Failure) -> NoReturn:
            if not silent:
                state.write_error("curl: (%d) %s\n" % (CURL_EXIT.get(failure.kind, 1), failure))
            raise failure

        if not opts["urls"]:
            fail(_Failure("url", "no URL specified"))
        req = _Request()
        req.method = opts.get("method")
        req.follow = bool(opts.get("location"))
        req.insecure = bool(opts.get("insecure"))
        req.head = bool(opts.get("head"))
        req.get = bool(opts.get("get"))
        if opts.get("max_redirs"):
            req.max_redirs = int(opts["max_redirs"])
        timeout = opts.get("max_time") or opts.get("connect_timeout")
        req.timeout = float(timeout) if timeout else None
        for header in opts["header"]:
            key, _, value = header.partition(":")
            req.headers.append((key.strip(), value.strip()))
        if opts.get("user"):
            token = base64.b64encode(opts["user"].encode()).decode()
            req.headers.append(("Authorization", "Basic " + token))
        if opts.get("agent"):
            req.headers.append(("User-Agent", opts["agent"]))
        if opts.get("referer"):
            req.headers.append(("Referer", opts["referer"]))
        if opts.get("cookie") and "=" in opts["cookie"]:
            req.headers.append(("Cookie", opts["cookie"]))
        if opts.get("compressed"):
            req.headers.append(("Accept-Encoding", "gzip, deflate"))
        if opts.get("proxy") or opts["form"] or opts.get("upload"):
            fail(_Failure("protocol", "proxies, -F forms and -T uploads are not supported in the sandbox"))
        stdin = _stdin_reader(invocation)
        if opts["data"]:
            pieces = []
            for kind, value in opts["data"]:
                if kind == "data_raw":
                    pieces.append(value.encode("utf-8", "surrogateescape"))
                elif kind == "data_urlencode":
                    name, eq, content = value.partition("=")
                    encoded = name + "=" + urllib.parse.quote(content) if eq else urllib.parse.quote(name)
                    pieces.append(encoded.encode())
                elif kind == "json":
                    pieces.append(_read_data(value, state, stdin))
                    if not any(k.lower() == "content-type" for k, _ in req.headers):
                        req.headers.append(("Content-Type", "application/json"))
                        req.headers.append(("Accept", "application/json"))
                else:
                    data = _read_data(value, state, stdin)
                    if kind == "data" and value.startswith("@"):
                        data = data.replace(b"\r", b"").replace(b"\n", b"")
                    pieces.append(data)
            req.data = b"&".join(pieces)
        verbose = state.write_error if opts.get("verbose") else None
        out = io.BytesIO()
        code = 0
        for url in opts["urls"]:
            started = time.monotonic()
            try:
                status, reason, headers, body, final, version = _fetch(url, req, verbose)
            except _Failure as failure:
                fail(failure)
            if opts.get("compressed"):
                body = _decompress(headers, body)
            head = ("HTTP/%s %d %s\r\n" % (version, status, reason)).encode() + b"".join(
                ("%s: %s\r\n" % (k, v)).encode("latin-1", "replace") for k, v in headers) + b"\r\n"
            if (opts.get("fail") or opts.get("fail_body")) and status >= 400:
                if not silent:
                    state.write_error("curl: (22) The requested URL returned error: %d\n" % status)
                if opts.get("fail_body"):
                    out.write(body)
                code = CURL_EXIT["http"]
                continue
            payload = head if req.head else (head + body if opts.get("include") else body)
            target = opts.get("output")
            if opts.get("remote_name"):
                target = os.path.basename(urllib.parse.urlsplit(final).path) or "index.html"
            if target in ("/dev/null", "/dev/stderr"):
                if target == "/dev/stderr":
                    state.write_error(payload.decode("utf-8", "replace"))
            elif target and target not in ("-", "/dev/stdout"):
                path = state.resolve_path(target)
                if opts.get("create_dirs"):
                    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
                try:
                    with open(path, "wb") as f:
                        f.write(payload)
                except OSError as exc:
                    fail(_Failure("write", "Failed writing body: %s" % exc.strerror))
            else:
                out.write(payload)
            if opts.get("write_out"):
                info = {"http_code": "%03d" % status, "response_code": status, "url_effective": final,
                        "size_download": len(body), "time_total": "%.6f" % (time.monotonic() - started),
                        "content_type": next((v for k, v in headers if k.lower() == "content-type"), ""),
                        "http_version": version, "url": url}
                out.write(_write_out(opts["write_out"], info).encode())
        return CommandResult(stdout=out.getvalue(), exit_code=code)


def _decompress(headers: list[tuple[str, str]], body: bytes) -> bytes:
    import gzip
    import zlib

    coding = next((v for k, v in headers if k.lower() == "content-encoding"), "").lower()
    try:
        if coding == "gzip":
            return gzip.decompress(body)
        if coding == "deflate":
            return zlib.decompress(body)
    except (OSError, zlib.error):
        return body
    return body


class WgetCommand(Command):
    name = "wget"
    summary = "download a URL (HTTP and HTTPS, over the sandbox's network)"
    input_kinds = frozenset({InputKind.ARGUMENTS})
    output_kinds = frozenset({OutputKind.BYTES})

    def run(self, invocation: Invocation) -> CommandResult:  # noqa: C901 (wget's options, one flat loop)
        import urllib.parse

        state = invocation.state
        args = list(invocation.arguments)
        quiet = False
        output: str | None = None
        urls: list[str] = []
        req = _Request()
        i = 0
        while i < len(args):
            arg = args[i]
            i += 1
            name, eq, value = arg.partition("=")
            if arg in ("-q", "--quiet", "-nv", "--no-verbose", "--no-check-certificate", "-c",
                       "--continue", "-N", "--timestamping"):
                quiet = quiet or arg in ("-q", "--quiet")
                req.insecure = req.insecure or arg == "--no-check-certificate"
            elif arg.startswith("-O") and len(arg) > 2 and not arg.startswith("--"):
                output = arg[2:]
            elif arg in ("-O", "--output-document", "-T", "--timeout", "--header", "-U",
                         "--user-agent", "-t", "--tries") or (eq and name in (
                             "--output-document", "--timeout", "--header", "--user-agent", "--tries")):
                if not eq:
                    if i >= len(args):
                        state.write_error("wget: option requires an argument -- '%s'\n" % arg)
                        return CommandResult(stdout=b"", exit_code=WGET_EXIT["usage"])
                    value = args[i]
                    i += 1
                key = name if eq else arg
                if key in ("-O", "--output-document"):
                    output = value
                elif key in ("-T", "--timeout"):
                    req.timeout = float(value)
                elif key == "--header":
                    k, _, v = value.partition(":")
                    req.headers.append((k.strip(), v.strip()))
                elif key in ("-U", "--user-agent"):
                    req.headers.append(("User-Agent", value))
            elif arg.startswith("-"):
                state.write_error("wget: unrecognized option '%s'\n" % arg)
                return CommandResult(stdout=b"", exit_code=WGET_EXIT["usage"])
            else:
                urls.append(arg)
        if not urls:
            state.write_error("wget: missing URL\n")
            return CommandResult(stdout=b"", exit_code=WGET_EXIT["usage"])
        req.follow = True
        req.max_redirs = 20
        out = io.BytesIO()
        code = 0
        for url in urls:
            try:
                status, reason, headers, body, final, _version = _fetch(url, req)
            except _Failure as failure:
                state.write_error("wget: %s\n" % failure)
                code = WGET_EXIT["ssl"] if failure.kind in ("ssl", "cert") else WGET_EXIT["network"]
                continue
            if status >= 400:
                state.write_error("%s\nERROR %d: %s.\n" % (url, status, reason))
                code = WGET_EXIT["http"]
                continue
            if output in ("-", "/dev/stdout"):
                out.write(body)
                continue
            if output == "/dev/null":
                continue
            target = output or os.path.basename(urllib.parse.urlsplit(final).path) or "index.html"
            try:
                with open(state.resolve_path(target), "wb") as f:
                    f.write(body)
            except OSError as exc:
                state.write_error("wget: %s: %s\n" % (target, exc.strerror))
                code = WGET_EXIT["io"]
                continue
            if not quiet:
                state.write_error("'%s' saved [%d]\n" % (target, len(body)))
        return CommandResult(stdout=out.getvalue(), exit_code=code)


NET_COMMANDS = (CurlCommand, WgetCommand)
