"""`--version` (and `-V`, `zip -v`...) for the programs that are ours rather than the real ones
(every registered program that had none: coreutils, grep, sed, find, the archivers, curl, wget):
agents probe `curl --version` or `tar --version` before using a tool, and an "unknown option"
there reads as "not installed".

Each banner keeps the first line's usual shape (`curl X.Y.Z (PLATFORM) ...`, `tar (...) X.Y`)
so scripts that parse it still work, and says plainly that this is declaw-wasm's implementation
running in the sandbox (wasm32-wasi), not libcurl or GNU's program. The version numbers are those
of the program whose options ours follow. `--help` is added where the command had none. Bash's
builtins (`echo --version` prints "--version") are left alone.
"""

from __future__ import annotations

from bash_purepython.command.command import Command, CommandResult, OutputKind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable
    from typing import Any

    # (argument lists that ask for the version, banner, help flags, help text)
    Banner = tuple[tuple[tuple[str, ...], ...], str, tuple[str, ...], "str | None"]
    Builtin = Callable[[list[str], Any, Any], Awaitable[int]]

OURS = "the sandbox's own implementation (declaw-wasm, wasm32-wasi)"

CURL_VERSION = """curl 8.5.0 (wasm32-wasi) declaw-wasm (the sandbox's own curl, not libcurl)
Release-Date: none
Protocols: http https
Features: IPv6 Largefile
"""

CURL_HELP = """Usage: curl [options...] <url>
 -d, --data <data>          HTTP POST data (also --data-raw, --data-binary, --data-urlencode, --json)
 -F, --form <name=content>  multipart form data
 -f, --fail                 fail silently (no output at all) on HTTP errors
 -H, --header <header>      pass custom header(s) to server
 -I, --head                 show document info only
 -i, --include              include the response headers in the output
 -k, --insecure             allow insecure server connections
 -L, --location             follow redirects
 -m, --max-time <seconds>   maximum time allowed for the transfer
 -o, --output <file>        write to file instead of stdout
 -O, --remote-name          write output to a file named as the remote file
 -s, --silent               silent mode;  -S, --show-error  show errors in silent mode
 -T, --upload-file <file>   transfer a local file to the URL
 -u, --user <user:password> server user and password
 -A, --user-agent <name>    send User-Agent <name> to server
 -v, --verbose              make the operation more talkative
 -w, --write-out <format>   use output format after completion
 -X, --request <method>     specify request method to use
 -V, --version              show version number and quit
HTTP and HTTPS only, through the sandbox's network policy (%s).
""" % OURS

WGET_VERSION = """GNU Wget 1.21.4 compatible (declaw-wasm): %s, not GNU Wget.
""" % OURS

WGET_HELP = """Usage: wget [OPTION]... [URL]...
  -O,  --output-document=FILE   write documents to FILE ('-' for stdout)
  -q,  --quiet                  quiet (no output)
  -nv, --no-verbose             turn off verboseness
  -T,  --timeout=SECONDS        set the network timeout to SECONDS
  -t,  --tries=NUMBER           set number of retries (accepted)
  -U,  --user-agent=AGENT       identify as AGENT
       --header=STRING          insert STRING among the headers
       --no-check-certificate   don't validate the server's certificate
  -V,  --version                display the version of Wget and exit
  -h,  --help                   print this help
HTTP and HTTPS only, through the sandbox's network policy (%s).
""" % OURS

# name -> (flags that ask for the version, banner, flags that ask for help, help text or None)
BANNERS = {
    "curl": (("--version", "-V"), CURL_VERSION, ("--help", "-h"), CURL_HELP),
    "wget": (("--version", "-V"), WGET_VERSION, ("--help", "-h"), WGET_HELP),
    "tar": (("--version",), "tar (declaw-wasm) 1.34\n%s of GNU tar's common options, not GNU tar.\n" % OURS, (), None),
    "zip": (("-v", "--version"), "This is Zip 3.0 (declaw-wasm): %s, not Info-ZIP's.\n" % OURS, (), None),
    "unzip": (("-v", "--version"), "UnZip 6.00 (declaw-wasm): %s, not Info-ZIP's.\n" % OURS, (), None),
    "gzip": (("--version", "-V"), "gzip 1.12 (declaw-wasm)\n%s, not GNU gzip.\n" % OURS, (), None),
    "gunzip": (("--version", "-V"), "gunzip (gzip) 1.12 (declaw-wasm)\n%s, not GNU gzip.\n" % OURS, (), None),
}

# GNU's families: every such program of ours answers `NAME --version` in GNU's shape, naming
# declaw-wasm where GNU's name stands (`ls (declaw-wasm coreutils) 9.1`)
FAMILIES = {
    ("coreutils", "9.1"): ("base64", "basename", "cat", "chmod", "comm", "cp", "cut", "date", "df", "dirname",
                           "du", "env", "expr", "fold", "head", "id", "ln", "ls", "md5sum", "mkdir", "mktemp",
                           "mv", "nl", "nproc", "od", "paste", "printenv", "readlink", "realpath", "rm", "rmdir",
                           "seq", "sha1sum", "sha256sum", "sha512sum", "shuf", "sleep", "sort", "stat", "tac",
                           "tail", "tee", "touch", "tr", "uname", "uniq", "wc", "whoami", "yes", "arch"),
    ("grep", "3.8"): ("grep", "egrep", "fgrep"),
    ("sed", "4.9"): ("sed",),
    ("findutils", "4.9.0"): ("find", "xargs"),  # both are not in the registry: shells.py answers
    ("diffutils", "3.8"): ("diff", "cmp"),
    ("util-linux", "2.38.1"): ("column", "rev"),
}
OTHERS = {
    "awk": ((("--version",), ("-W", "version"), ("-Wversion",), ("-V",)),
            "awk version 20240728 (declaw-wasm: %s, a POSIX awk)\n" % OURS),
    "file": ((("--version", ), ("-v",)), "file-5.44 (declaw-wasm)\n%s.\n" % OURS),
    "hostname": ((("--version",), ("-V",)), "hostname 3.23 (declaw-wasm)\n%s.\n" % OURS),
    "tree": ((("--version",), ("-v", )), "tree v2.1.0 (declaw-wasm) %s.\n" % OURS),
    "xxd": ((("--version",), ("-v",)), "xxd 2022-01-14 (declaw-wasm) %s.\n" % OURS),
}

FIND_VERSION = "find (declaw-wasm findutils) 4.9.0\n%s, following GNU findutils' options.\n" % OURS
XARGS_VERSION = "xargs (declaw-wasm findutils) 4.9.0\n%s, following GNU findutils' options.\n" % OURS


def answering_version(builtin: Builtin, banner: str) -> Builtin:
    """A library builtin that is a program on Linux (`xargs`), with `--version`."""
    async def run(arguments: list[str], stdin: Any, state: Any) -> int:
        if list(arguments) == ["--version"]:
            await state.output_sink.write(banner)
            return 0
        return await builtin(arguments, stdin, state)
    return run


def _banners() -> dict[str, Banner]:
    """name -> (argument lists that ask for the version, banner, help flags, help text)."""
    table: dict[str, Banner] = {name: (tuple((flag,) for flag in flags), banner, help_flags, help_text)
             for name, (flags, banner, help_flags, help_text) in BANNERS.items()}
    for (family, version), names in FAMILIES.items():
        for name in names:
            table.setdefault(name, ((("--version",),), "%s (declaw-wasm %s) %s\n%s, following GNU %s' options.\n"
                                    % (name, family, version, OURS, family), (), None))
    for name, (flags, banner) in OTHERS.items():
        table.setdefault(name, (flags, banner, (), None))
    return table


def _as_output(text: str, kind: Any) -> Any:
    """Text in the output kind the shell chose for this command."""
    if kind == OutputKind.BYTES:
        return text.encode()
    if kind == OutputKind.STREAM_TEXT:
        return iter([text])
    if kind == OutputKind.STREAM_BYTES:
        return iter([text.encode()])
    return text


class Versioned(Command):
    """A command with a `--version` banner (and maybe `--help`) answered before it runs; any
    other call goes to the command itself."""

    def __init__(self, inner: Any, version_flags: tuple[tuple[str, ...], ...], banner: str,
                 help_flags: tuple[str, ...], help_text: str | None) -> None:
        self.inner = inner
        self.name = inner.name
        self.summary = inner.summary
        self.input_kinds = inner.input_kinds
        self.output_kinds = inner.output_kinds
        self.version_flags, self.banner = version_flags, banner
        self.help_flags, self.help_text = help_flags, help_text

    def run(self, invocation: Any) -> Any:
        args = invocation.arguments
        if tuple(args) in self.version_flags:
            return CommandResult(stdout=_as_output(self.banner, invocation.stdout_kind), exit_code=0)
        if self.help_text is not None and len(args) == 1 and args[0] in self.help_flags:
            return CommandResult(stdout=_as_output(self.help_text, invocation.stdout_kind), exit_code=0)
        return self.inner.run(invocation)


def install(commands: Any, names: Iterable[str] | None = None) -> None:
    """Wrap the registry's commands that have a banner here (`names`: only these)."""
    table = _table()
    for name in table if names is None else names:
        inner = commands.get(name)
        if inner is not None and name in table and not isinstance(inner, Versioned):
            commands.register(Versioned(inner, *table[name]))


_TABLE: dict[str, Banner] = {}


def _table() -> dict[str, Banner]:
    """_banners(), made once."""
    if not _TABLE:
        _TABLE.update(_banners())
    return _TABLE
