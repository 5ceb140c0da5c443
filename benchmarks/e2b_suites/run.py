"""Run E2B's own public Python test suites against declaw_wasm and tabulate the outcome by cause.

    python benchmarks/e2b_suites/run.py --e2b PATH/TO/E2B --code-interpreter PATH/TO/code-interpreter

The tests come from local checkouts of github.com/e2b-dev/E2B (`packages/python-sdk/tests`) and
github.com/e2b-dev/code-interpreter (`python/tests`), pinned below (README.md says how to get
them). The selected files are copied, unchanged, with each suite's conftest.py and pytest.ini,
into a work folder and run by pytest with plugin.py: `import e2b` and `import
e2b_code_interpreter` resolve to declaw_wasm (shim.py), every test has a time limit (a hang is a
failure) and a watchdog reports async tests that blocked the event loop. Failures are grouped
by the first matching rule of CAUSES; the table is Markdown for README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
PINNED = {"e2b": "b8029973aa7da5f741f7bb1a9f833b38a0885438",
          "code-interpreter": "7df1757bfd5baa037f909ce97c2dbe014da973c0"}


@dataclass(frozen=True)
class Suite:
    name: str
    root: str                    # the folder of pytest.ini inside the checkout
    support: tuple[str, ...]     # files copied along (conftest, helpers), relative to root
    include: tuple[str, ...]     # test folders/files, relative to root
    exclude: dict[str, str]      # path relative to root -> why it is not run
    deselect: tuple[str, ...] = ()  # single tests not run (ids relative to root); why: KERNELS


SDK = Suite(
    name="e2b", root="packages/python-sdk",
    support=("pytest.ini", "tests/conftest.py", "tests/mock_volume_content.py",
             "tests/envd_frame_server.py"),
    include=("tests/sync/sandbox_sync", "tests/async/sandbox_async",
             "tests/sync/api_sync", "tests/async/api_async"),
    exclude={
        "tests/sync/sandbox_sync/test_config_propagation.py":
            "E2B's client: monkeypatches e2b.sandbox_sync.main to check ConnectionConfig plumbing",
        "tests/async/sandbox_async/test_config_propagation.py":
            "E2B's client: monkeypatches e2b.sandbox_async.main to check ConnectionConfig plumbing",
        "tests/sync/sandbox_sync/test_sync_client_lifecycle.py":
            "E2B's client: its httpx/pyqwest transports' lifecycle",
        "tests/sync/sandbox_sync/test_network.py":
            "needs the public internet (1.1.1.1, 8.8.8.8), unreachable from the test machine",
        "tests/async/sandbox_async/test_network.py":
            "needs the public internet (1.1.1.1, 8.8.8.8), unreachable from the test machine",
        "tests/sync/sandbox_sync/test_internet_access.py":
            "needs the public internet (connectivitycheck.gstatic.com)",
        "tests/async/sandbox_async/test_internet_access.py":
            "needs the public internet (connectivitycheck.gstatic.com)",
    })

CODE_INTERPRETER = Suite(
    name="code-interpreter", root="python",
    support=("pytest.ini", "tests/conftest.py"),
    include=("tests/sync", "tests/async", "tests/charts", "tests/images"),
    exclude={
        **{f"tests/{mode}/env_vars/test_{lang}.py": f"the {lang.upper()} kernel: declaw_wasm's "
           "run_code runs Python" for mode in ("sync", "async") for lang in ("java", "js", "r")},
    },
    deselect=tuple(
        [f"tests/sync/test_cwd.py::test_cwd_{k}" for k in ("java", "javascript", "r", "typescript")]
        + [f"tests/async/test_async_cwd.py::test_cwd_{k}" for k in ("java", "javascript", "r", "typescript")]
        + [f"tests/sync/test_default_kernels.py::test_{k}" for k in
           ("java_kernel", "js_kernel", "js_esm_imports", "js_top_level_await", "r_kernel", "ts_kernel")]
        + [f"tests/async/test_async_default_kernels.py::test_{k}" for k in
           ("js_kernel", "js_esm_imports", "js_top_level_await", "ts_kernel")]
        + [f"tests/{d}::test_list_contexts{s}" for d in ("sync/test_contexts.py", "async/test_async_contexts.py")
           for s in ("", "_secure_traffic")]))
KERNELS = ("E2B's Java, JavaScript/TypeScript and R kernels: declaw_wasm's run_code runs Python "
           "(its guest is CPython on WASI); test_list_contexts* assert a default JavaScript context")

# Failure causes, first match wins: (key, who fixes it, what, regex over id + message + traceback)
STATE, SHELL, OURS = "state branch", "shellport branch", "regression (fixed on e2bsuite)"
FIXED = "fixed (e2bfix)"
INTERNAL = "E2B-only: not counted"  # tests of E2B's client classes (README.md, "What the figure counts")
CAUSES: list[tuple[str, str, str, str]] = [
    ("inbound", "design", "a guest cannot accept connections (WASI sockets are outbound only): no "
     "`get_host(port)`, `python -m http.server` fails", r"get_host|http\.server"),
    ("internals", INTERNAL, "E2B's SDK internals: REST payload models, `ConnectionConfig` debug mode, "
     "private `_envd_*` attributes, IAM token payloads",
     r"NotInDeclawWasm|_envd_version|_envd_access_token|client_id|iam_token"),
    ("state", FIXED, "E2B's shapes of the state calls: `sbx.connect()`, `fork` answering a list (and by "
     "id), `Sandbox.delete_snapshot(id)` / `list_snapshots(sandbox_id=, name=)`, named snapshots, "
     "`create(snapshot_id)`, `pause(keep_memory=False)`, `on_timeout` as a dict, `set_timeout(0)`, "
     "`/proc/sys/kernel/random/boot_id`",
     r"test_snapshot|test_sbx_snapshot|test_fork\.py|beta_pause|'pause'|auto_pause|keep_memory|paused"),
    ("stdin", SHELL, "live stdin to a running `cat`: input without a newline is held (the test "
     "then times out), a multi-line string arrives cut", r"test_send_stdin\.py"),
    ("sudo", SHELL, "no `sudo` in the shell", r"sudo: command not found"),
    ("root", SHELL, "no `/root` in the sandbox (`create_code_context(cwd='/root')`)", r"/root does not exist"),
    ("printf", SHELL, "`printf '\\xe2'` writes U+00E2 as UTF-8 (c3 a2), not the byte; the host's "
     "decoding of broken UTF-8 is E2B's", r"test_run_with_broken_utf8"),
    ("declaw-rule", "declaw's rule", "a foreground `commands.run` returns a non-zero exit (declaw); "
     "E2B raises `CommandExitException` (`kill -0` of a killed pid)", r"DID NOT RAISE CommandExitException"),
    ("mcp", FIXED, "E2B's MCP gateway (`Sandbox.create(mcp=...)`): now refused (\"Failed to start MCP "
     "gateway\"), not ignored", r"test_mcp_gateway"),
    ("services", "n/a", "E2B's in-sandbox services (Jupyter server on port 49999, systemd restarts)",
     r"test_systemd\.py|wait_for_health"),
    ("urls", FIXED, "signed file URLs (`download_url`, `upload_url`): served on loopback by the sandbox's process",
     r"download_url|upload_url"),
    ("xattr", "design", "no extended attributes in WASI (metadata set by `os.setxattr` in the guest)",
     r"setxattr|xattr"),
    ("bash-kernel", FIXED, "`run_code(language='bash')`: no bash kernel", r"language 'bash'"),
    ("kernels", "deselected", KERNELS, r"language '(js|ts|java|r)'|'javascript' in"),
    ("started-after", OURS, "`SandboxQuery(started_after=t)` excluded a sandbox started at t", r"started_after"),
    ("metrics", OURS, "E2B's metric fields (`cpu_count`, `mem_total`, ...) and `get_metrics(start, end)` "
     "for a range before the sandbox", r"test_metrics\.py"),
    ("killed", OURS, "`run_code` on a sandbox killed meanwhile: E2B's message (\"killed while the "
     "request was in progress\")", r"killed while the request"),
    ("watch", OURS, "recursive watch: a file written into a new folder before the next read was "
     "reported as created, not written", r"test_watch\.py"),
    ("hang", "?", "hang: past the per-test limit", r"Timeout \(>"),
]


def copy_suite(checkout: Path, suite: Suite, dest: Path) -> list[str]:
    """Copy the suite's selected files into `dest`; the test paths to run (relative to dest)."""
    src = checkout / suite.root
    if not (src / "pytest.ini").is_file():
        raise SystemExit(f"{src}/pytest.ini not found: is {checkout} a checkout of {suite.name}?")
    shutil.rmtree(dest, ignore_errors=True)
    for rel in suite.support:
        if (src / rel).exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, dest / rel)
    targets = []
    for top in suite.include:
        for path in sorted((src / top).rglob("*.py")):
            rel = path.relative_to(src).as_posix()
            if rel in suite.exclude:
                continue
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest / rel)
            if path.name.startswith("test_"):
                targets.append(rel)
    return targets


def checkout_commit(checkout: Path) -> Optional[str]:
    found = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"],
                           capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else None


def run_suite(checkout: Path, suite: Suite, work: Path, args: argparse.Namespace) -> Path:
    dest = work / suite.name
    targets = copy_suite(checkout, suite, dest)
    report = work / f"{suite.name}.xml"
    cmd = [sys.executable, "-m", "pytest", "-p", "plugin", "-p", "no:cacheprovider",
           "-o", "addopts=--import-mode=importlib", "-o", "junit_family=xunit1",
           "-o", f"timeout={args.timeout}", "--timeout-method=signal",
           f"--loop-threshold={args.loop_threshold}",
           f"--junitxml={report}", "-q", "-rN", *args.pytest_args, *targets,
           *[f"--deselect={test}" for test in suite.deselect]]
    env = {k: v for k, v in os.environ.items() if k != "E2B_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    # E2B's tests pause sandboxes and leave snapshots behind: a state store of the run's own,
    # never the user's (listing its paused sandboxes would show them)
    state = work / f"{suite.name}-state"
    shutil.rmtree(state, ignore_errors=True)
    env["DECLAW_WASM_STATE"] = str(state)
    print(f"== {suite.name}: {len(targets)} files, pytest in {dest}", flush=True)
    try:
        subprocess.run(cmd, cwd=dest, env=env, timeout=args.suite_timeout)
    except subprocess.TimeoutExpired:
        print(f"!! {suite.name}: the whole suite passed {args.suite_timeout}s; partial results", flush=True)
    return report


def outcomes(report: Path, suite: str) -> list[dict[str, str]]:
    """One row per test from pytest's JUnit XML: id, outcome, message, traceback, loop stall."""
    if not report.is_file():
        return []
    rows: list[dict[str, str]] = []
    for case in ET.parse(report).getroot().iter("testcase"):
        row = {"id": f"{suite}::{case.get('file')}::{case.get('name')}", "outcome": "passed",
               "message": "", "detail": "", "loop_blocked": ""}
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                row["outcome"] = {"failure": "failed", "error": "failed"}.get(child.tag, "skipped")
                row["message"] = child.get("message") or ""
                row["detail"] = child.text or ""
            if child.tag == "properties":
                for prop in child:
                    if prop.get("name") == "loop_blocked":
                        row["loop_blocked"] = prop.get("value") or ""
        if row["outcome"] == "failed" or not any(r["id"] == row["id"] for r in rows):
            rows = [r for r in rows if r["id"] != row["id"]] + [row]
    return rows


def cause_of(row: dict[str, str]) -> tuple[str, str, str]:
    text = f"{row['id']}\n{row['message']}\n{row['detail'][-4000:]}"
    for key, owner, what, pattern in CAUSES:
        if re.search(pattern, text, re.S):
            return key, owner, what
    return "unclassified", "?", "not yet classified: " + row["message"][:100]


def table(rows: list[dict[str, str]], deselected: int = 0) -> str:
    count = Counter(r["outcome"] for r in rows)
    internal = sum(1 for r in rows if r["outcome"] == "failed" and cause_of(r)[1] == INTERNAL)
    counted = len(rows) - internal
    share = f"{100 * count['passed'] / counted:.1f} %" if counted else "n/a"
    lines = [f"**{len(rows)} tests: {count['passed']} passed, {count['failed']} failed, "
             f"{count['skipped']} skipped** ({deselected} more deselected: {KERNELS}).", "",
             f"**Without the {internal} tests of E2B's own client classes: {count['passed']} of {counted} pass "
             f"({share}).**", "",
             "| cause | fixed by | failures | example |", "|---|---|---|---|"]
    groups: dict[tuple[str, str, str], list[str]] = {}
    for r in rows:
        if r["outcome"] == "failed":
            groups.setdefault(cause_of(r), []).append(r["id"])
    for (_key, owner, what), ids in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        lines.append(f"| {what} | {owner} | {len(ids)} | `{ids[0].split('::', 1)[1]}` |")
    blocked = [r for r in rows if r["loop_blocked"] and "test code: " not in r["loop_blocked"]]
    own = sum(1 for r in rows if "test code: " in r["loop_blocked"])
    lines += ["", f"Event loop blocked in declaw_wasm past the threshold: {len(blocked)} tests"
              + (f" (and {own} blocked by the test's own `time.sleep`)" if own else "")]
    lines += [f"- `{r['id'].split('::', 1)[1]}` ({r['outcome']}): {r['loop_blocked']}" for r in blocked]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--e2b", type=Path, help="checkout of github.com/e2b-dev/E2B")
    parser.add_argument("--code-interpreter", type=Path, help="checkout of github.com/e2b-dev/code-interpreter")
    parser.add_argument("--work", type=Path, default=Path("/tmp/declaw-e2b-suites"),
                        help="where the tests are copied and run (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=60, help="per-test limit in s (E2B's: 30)")
    parser.add_argument("--loop-threshold", type=float, default=1.0, help="event-loop stall to report (s)")
    parser.add_argument("--suite-timeout", type=float, default=3600, help="limit for a whole suite (s)")
    parser.add_argument("--json", type=Path, help="write every test's outcome and cause here")
    parser.add_argument("--report-only", action="store_true", help="tabulate the last run's XML again")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --), e.g. -k run")
    args = parser.parse_args()
    if not args.e2b and not args.code_interpreter:
        parser.error("give --e2b and/or --code-interpreter (README.md says how to get them)")
    args.work.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, str]] = []
    deselected = 0
    for checkout, suite, pin in ((args.e2b, SDK, PINNED["e2b"]),
                                 (args.code_interpreter, CODE_INTERPRETER, PINNED["code-interpreter"])):
        if checkout is None:
            continue
        commit = checkout_commit(checkout)
        if commit and commit != pin:
            print(f"note: {checkout} is at {commit[:12]}, the figures in README.md are for {pin[:12]}")
        report = args.work / f"{suite.name}.xml" if args.report_only else run_suite(checkout, suite, args.work, args)
        rows += outcomes(report, suite.name)
        deselected += len(suite.deselect)
    if args.json:
        args.json.write_text(json.dumps([{**r, "cause": cause_of(r)[0] if r["outcome"] == "failed" else ""}
                                         for r in rows], indent=1))
    print(table(rows, deselected))


if __name__ == "__main__":
    main()
