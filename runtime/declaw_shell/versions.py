"""`--version` (and `-V`, `zip -v`...) for the programs that are ours rather than the real ones:
agents probe `curl --version` or `tar --version` before using a tool, and an "unknown option"
there reads as "not installed".

Each banner keeps the first line's usual shape (`curl X.Y.Z (PLATFORM) ...`, `tar (...) X.Y`)
so scripts that parse it still work, and says plainly that this is declaw-wasm's implementation
running in the sandbox (wasm32-wasi), not libcurl or GNU's program. The version numbers are those
of the program whose options ours follow. `--help` is added where the command had none.
"""

from bash_purepython.command.command import Command, CommandResult, OutputKind

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


def _as_output(text, kind):
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

    def __init__(self, inner, version_flags, banner, help_flags, help_text):
        self.inner = inner
        self.name = inner.name
        self.summary = inner.summary
        self.input_kinds = inner.input_kinds
        self.output_kinds = inner.output_kinds
        self.version_flags, self.banner = version_flags, banner
        self.help_flags, self.help_text = help_flags, help_text

    def run(self, invocation):
        args = invocation.arguments
        if len(args) == 1 and args[0] in self.version_flags:
            return CommandResult(stdout=_as_output(self.banner, invocation.stdout_kind), exit_code=0)
        if self.help_text is not None and len(args) == 1 and args[0] in self.help_flags:
            return CommandResult(stdout=_as_output(self.help_text, invocation.stdout_kind), exit_code=0)
        return self.inner.run(invocation)


def install(commands):
    """Wrap the registry's commands that have a banner here."""
    for name, (version_flags, banner, help_flags, help_text) in BANNERS.items():
        inner = commands.get(name)
        if inner is not None and not isinstance(inner, Versioned):
            commands.register(Versioned(inner, version_flags, banner, help_flags, help_text))
