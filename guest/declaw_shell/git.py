"""`git` in the sandbox's shell: agents keep their work in a repository (`git init`, `git add -A`,
`git commit -m`, `git diff`, `git status --porcelain`, `git log --oneline`, `git checkout -b`), and
E2B's SDK wraps the same command lines. There is no git binary for WASI, so this is git's porcelain
written over dulwich's object store, refs and index file (git's own formats: a repository made here
is read by the host's git, and one made by git is read here), printing what git 2.39 prints: the
same commit ids for the same author, date and content, byte-identical patches
(guest/declaw_shell/gitdiff.py is xdiff), git's status, log and stat layouts (gitout.py).

The commands: init, config, add, rm, mv, commit, status, diff, log, show, branch, checkout, switch,
restore, reset, rev-parse, ls-files, tag, cat-file, stash, merge (fast-forward) and --version.
Renames are detected when exact (100%). Networks (clone, fetch, push), hooks, merges that need a
three-way merge and rebase are not here: such a command ends with an error naming what is missing
(status 1), never a wrong result."""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from typing import TYPE_CHECKING, Any

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind
from dulwich.objects import ObjectID

from . import gitout
from .gitout import FilePair, PrettyContext, Stat, quote
from .gitrepo import (MODE_LINK, Config, GitError, Identity, Repository, blob_id, fatal,
                      local_tz, parse_date)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from dulwich.objects import Commit

    Invocation = Any

VERSION = "git version 2.39.5 (declaw-wasm's git, over dulwich)"
SUBCOMMANDS = ("add", "branch", "cat-file", "checkout", "commit", "config", "diff", "init", "log", "ls-files",
               "merge", "mv", "reset", "restore", "rev-parse", "rm", "show", "stash", "status", "switch", "tag")
NOT_HERE = ("clone", "rebase", "cherry-pick", "revert", "fetch", "pull", "push", "remote", "bisect", "blame", "am",
            "apply", "submodule", "worktree", "gc", "fsck", "reflog", "describe", "grep", "clean", "notes",
            "archive", "format-patch", "shortlog", "mergetool", "difftool", "gui", "daemon")
LABELS = {"A": "new file:", "M": "modified:", "D": "deleted:", "R": "renamed:", "T": "typechange:",
          "C": "copied:"}


class Out:
    """A command's stdout and stderr, collected."""

    def __init__(self) -> None:
        self.stdout: list[str] = []
        self.stderr: list[str] = []

    def out(self, text: str) -> None:
        self.stdout.append(text)

    def err(self, text: str) -> None:
        self.stderr.append(text)


def _usage(message: str) -> GitError:
    return GitError(message, 129)


class Git:
    def __init__(self, cwd: str, env: dict[str, str], out: Out, stdin: Callable[[], str] | None = None) -> None:
        self.stdin = stdin if stdin is not None else (lambda: "")
        self.cwd = cwd
        self.env = env
        self.io = out
        self.overrides: list[tuple[bytes, bytes]] = []
        self._repo: Repository | None = None
        self.work_blobs: dict[bytes, bytes] = {}

    # -- plumbing of the command itself -------------------------------------------------------------
    def main(self, args: list[str]) -> int:
        while args and args[0].startswith("-"):
            arg = args.pop(0)
            if arg in ("--version", "-v"):
                self.io.out(VERSION + "\n")
                return 0
            if arg == "-C" and args:
                self.cwd = os.path.normpath(os.path.join(self.cwd, args.pop(0)))
                if not os.path.isdir(self.cwd):
                    raise fatal("cannot change to '%s': No such file or directory" % self.cwd)
            elif arg == "-c" and args:
                key, _, value = args.pop(0).partition("=")
                self.overrides.append((key.encode(), value.encode()))
            elif arg in ("--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects"):
                continue
            elif arg in ("--help", "-h"):
                self.io.out(self._help())
                return 0
            else:
                raise _usage("unknown option: %s\n%s" % (arg, self._usage_text()))
        if not args:
            self.io.out(self._usage_text() + "\n")
            return 1
        name, rest = args[0], args[1:]
        if name == "help" or (rest and rest[0] in ("-h", "--help")) and name in SUBCOMMANDS:
            self.io.out(self._help())
            return 0
        if name == "version":
            self.io.out(VERSION + "\n")
            return 0
        handler = getattr(self, "cmd_" + name.replace("-", "_"), None)
        if handler is None or name not in SUBCOMMANDS:
            if name in NOT_HERE:
                self.io.err("git: '%s' is not available in this sandbox: declaw-wasm's git (over dulwich) has %s\n"
                            % (name, ", ".join(SUBCOMMANDS)))
                return 1
            self.io.err("git: '%s' is not a git command. See 'git --help'.\n" % name)
            return 1
        return int(handler(rest) or 0)

    @staticmethod
    def _usage_text() -> str:
        return ("usage: git [-v | --version] [-h | --help] [-C <path>] [-c <name>=<value>]\n"
                "           <command> [<args>]")

    def _help(self) -> str:
        return (self._usage_text() + "\n\ndeclaw-wasm's git (git's porcelain over dulwich, in the sandbox) has:\n   "
                + "\n   ".join(SUBCOMMANDS) + "\n")

    @property
    def repo(self) -> Repository:
        if self._repo is None:
            top = self._find_top(self.cwd)
            if top is None:
                raise fatal("not a git repository (or any of the parent directories): .git")
            self._repo = Repository(top, self.env, self.overrides)
        return self._repo

    @staticmethod
    def _find_top(start: str) -> str | None:
        current = os.path.abspath(start)
        while True:
            if os.path.isdir(os.path.join(current, ".git")):
                return current
            parent = os.path.dirname(current)
            if parent == current:
                return None
            current = parent

    def abbrev(self, sha: bytes, length: int = 7) -> str:
        return self.repo.abbrev(sha, length)

    def content(self, sha: bytes) -> bytes:
        data = self.work_blobs.get(sha)
        if data is not None:
            return data
        return self.repo.blob(sha)

    def rel(self, path: bytes) -> bytes:
        """A repository path as the user sees it from the current folder."""
        full = os.path.join(self.repo.top, os.fsdecode(path))
        return os.fsencode(os.path.relpath(full, self.cwd)) + (b"/" if path.endswith(b"/") else b"")

    def to_repo_path(self, spec: str) -> bytes:
        full = os.path.normpath(os.path.join(self.cwd, spec))
        rel = os.path.relpath(full, self.repo.top)
        if rel.startswith(".."):
            raise fatal("%s: '%s' is outside repository at '%s'" % (spec, spec, self.repo.top))
        return b"" if rel == "." else os.fsencode(rel)

    def matcher(self, specs: list[str]) -> Callable[[bytes], bool]:
        """A pathspec: a path, a folder (everything under it) or a glob (`*` crosses `/`)."""
        if not specs:
            return lambda path: True
        tests = []
        for spec in specs:
            path = self.to_repo_path(spec)
            if any(ch in spec for ch in "*?["):
                import fnmatch
                pattern = re.compile(fnmatch.translate(os.fsdecode(path)).encode())
                tests.append(lambda p, pattern=pattern: bool(pattern.match(p)))
            elif not path:
                return lambda p: True
            else:
                tests.append(lambda p, path=path: p == path or p.startswith(path.rstrip(b"/") + b"/"))
        return lambda p: any(test(p) for test in tests)

    def work_state(self, path: bytes, entry: tuple[int, bytes] | None) -> tuple[int, bytes] | None:
        state = self.repo.work_state(path, entry)
        if state is not None and state[1] not in self.work_blobs and (entry is None or entry[1] != state[1]):
            self.work_blobs[state[1]] = self.repo.read_work(path)
        return state

    def identity(self, who: str) -> Identity:
        upper = who.upper()
        config = self.repo.config if self._find_top(self.cwd) else Config(self.env, None, self.overrides)
        name = self.env.get("GIT_%s_NAME" % upper) or (config.get("user.name") or b"").decode()
        email = self.env.get("GIT_%s_EMAIL" % upper) or (config.get("user.email") or b"").decode() \
            or self.env.get("EMAIL", "")
        if not email:
            host = self.env.get("HOSTNAME") or "sandbox"
            user = self.env.get("USER") or "user"
            raise GitError("Author identity unknown\n\n*** Please tell me who you are.\n\nRun\n\n"
                           "  git config --global user.email \"you@example.com\"\n"
                           "  git config --global user.name \"Your Name\"\n\n"
                           "to set your account's default identity.\n"
                           "Omit --global to set the identity only in this repository.\n\n"
                           "fatal: unable to auto-detect email address (got '%s@%s.(none)')" % (user, host))
        if not name:
            name = self.env.get("USER") or "user"
        date = self.env.get("GIT_%s_DATE" % upper)
        if date:
            when, tz = parse_date(date)
        else:
            when = int(time.time())
            tz = local_tz(when)
        return Identity(name.encode(), email.encode(), when, tz)

    # -- init and config ----------------------------------------------------------------------------
    def cmd_init(self, args: list[str]) -> int:
        quiet, branch, target, bare = False, None, None, False
        it = iter(args)
        for arg in it:
            if arg in ("-q", "--quiet"):
                quiet = True
            elif arg in ("-b", "--initial-branch"):
                branch = next(it, None)
                if branch is None:
                    raise _usage("error: option `initial-branch' requires a value")
            elif arg.startswith("--initial-branch="):
                branch = arg.split("=", 1)[1]
            elif arg == "--bare":
                bare = True
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                target = arg
        if bare:
            raise GitError("git init --bare: bare repositories are not available in this sandbox", 1)
        top = os.path.normpath(os.path.join(self.cwd, target or "."))
        os.makedirs(top, exist_ok=True)
        git_dir = os.path.join(top, ".git")
        existed = os.path.isdir(git_dir)
        if not existed:
            config = Config(self.env, None, self.overrides)
            configured = config.get("init.defaultBranch")
            if branch is None and configured is None and not quiet:
                self.io.err(INIT_HINT)
            name = (branch or (configured.decode() if configured else "master"))
            from dulwich.repo import Repo
            Repo.init(top, mkdir=False, default_branch=name.encode())
            self._tidy_new_repo(git_dir)
        if not quiet:
            word = "Reinitialized existing" if existed else "Initialized empty"
            self.io.out("%s Git repository in %s/\n" % (word, git_dir))
        return 0

    @staticmethod
    def _tidy_new_repo(git_dir: str) -> None:
        """The config git init writes (dulwich adds keys git does not)."""
        with open(os.path.join(git_dir, "config"), "w") as handle:
            handle.write("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
                         "\tlogallrefupdates = true\n")
        with open(os.path.join(git_dir, "description"), "w") as handle:
            handle.write("Unnamed repository; edit this file 'description' to name the repository.\n")
        for folder in ("refs/heads", "refs/tags", "objects/info", "objects/pack", "info", "hooks"):
            os.makedirs(os.path.join(git_dir, folder), exist_ok=True)

    def cmd_config(self, args: list[str]) -> int:  # noqa: C901 - git config's modes
        scope, action, values, show_names = None, "auto", [], False
        for arg in args:
            if arg in ("--global", "--local", "--system"):
                scope = arg[2:]
            elif arg in ("--list", "-l"):
                action = "list"
            elif arg == "--get":
                action = "get"
            elif arg == "--get-all":
                action = "get"
            elif arg in ("--unset", "--unset-all"):
                action = "unset"
            elif arg == "--add":
                action = "add"
            elif arg == "--bool":
                continue
            elif arg == "--name-only":
                show_names = True
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                values.append(arg)
        if scope == "system":
            raise GitError("error: the system configuration is not available in this sandbox", 1)
        in_repo = self._find_top(self.cwd) is not None
        config = self.repo.config if in_repo else Config(self.env, None, self.overrides)
        if action == "list":
            items = list(config.items()) if scope is None else self._scope_items(config, scope)
            for key, value in items:
                self.io.out(key + "\n" if show_names else "%s=%s\n" % (key, value.decode("utf-8", "replace")))
            return 0
        if not values:
            raise _usage("error: no action specified")
        key = values[0]
        if action in ("get", "auto") and len(values) == 1:
            found = config.get(key)
            if found is None:
                return 1
            self.io.out(found.decode("utf-8", "replace") + "\n")
            return 0
        if scope == "local" or (scope is None and in_repo):
            path = os.path.join(self.repo.git_dir, "config")
        elif scope == "global" or scope is None:
            if scope is None and not in_repo:
                raise fatal("not in a git directory")
            path = config.global_path
        else:
            path = config.global_path
        from dulwich.config import ConfigFile

        from .gitrepo import split_key
        try:
            file = ConfigFile.from_path(path)
        except FileNotFoundError:
            file = ConfigFile()
        section, name = split_key(key)
        if action == "unset":
            try:
                del file[section][name]
            except KeyError:
                return 5
        elif len(values) != 2:
            raise _usage("error: wrong number of arguments, should be 2")
        else:
            file.set(section, name, values[1].encode())
        file.write_to_path(path)
        return 0

    @staticmethod
    def _scope_items(config: Config, scope: str) -> list[tuple[str, bytes]]:
        wanted = config.global_path if scope == "global" else os.path.join(config.git_dir or "", "config")
        items = []
        for path, file in config.files:
            if path == wanted:
                for section in file.sections():
                    for name, value in file.items(section):
                        items.append((gitout.text(b".".join(section)).split(".")[0].lower()
                                      + ("." + gitout.text(section[1]) if len(section) > 1 else "")
                                      + "." + gitout.text(name).lower(), value))
        return items


    # -- add, rm, mv --------------------------------------------------------------------------------
    def cmd_add(self, args: list[str]) -> int:  # noqa: C901 - git add's options
        everything = update = dry = verbose = force = False
        specs: list[str] = []
        for arg in self._split_dashdash(args, specs):
            if arg in ("-A", "--all"):
                everything = True
            elif arg in ("-u", "--update"):
                update = True
            elif arg in ("-n", "--dry-run"):
                dry = True
            elif arg in ("-v", "--verbose"):
                verbose = True
            elif arg in ("-f", "--force"):
                force = True
            elif arg in ("--", "-N", "--intent-to-add", "--ignore-errors", "--no-all"):
                continue
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                specs.append(arg)
        repo = self.repo
        if not specs and not (everything or update):
            self.io.err("Nothing specified, nothing added.\nhint: Maybe you wanted to say 'git add .'?\n"
                        "hint: Turn this message off by running\nhint: \"git config advice.addEmptyPathspec false\"\n")
            return 0
        match = self.matcher(specs)  # no pathspec (-A, -u): everything
        index = repo.index_files()
        tracked = set(index)
        untracked, ignored = repo.walk(tracked)
        changed: list[tuple[str, bytes]] = []
        # tracked files: modified or deleted
        for path, entry in sorted(index.items()):
            if not match(path):
                continue
            state = repo.work_state(path, entry)
            if state is None:
                if everything or update or specs:
                    changed.append(("remove", path))
            elif state != entry:
                changed.append(("add", path))
        if not update:
            for path in untracked:
                if path.endswith(b"/"):
                    continue
                if match(path):
                    changed.append(("add", path))
        unmatched = []
        ignored_hits = []
        for spec in specs:
            path = self.to_repo_path(spec)
            if any(ch in spec for ch in "*?["):
                continue
            full = os.path.join(repo.top, os.fsdecode(path))
            if not path:
                continue
            if path in tracked or any(t.startswith(path + b"/") for t in tracked):
                continue
            if not os.path.lexists(full):
                unmatched.append(spec)
            elif os.path.isfile(full) and repo.ignored(os.fsdecode(path)):
                if force:
                    changed.append(("add", path))
                else:
                    ignored_hits.append(spec)
            elif os.path.isdir(full) and repo.ignored(os.fsdecode(path), True):
                if not force:
                    ignored_hits.append(spec)
        if unmatched:
            raise fatal("pathspec '%s' did not match any files" % unmatched[0])
        seen: set[bytes] = set()
        for what, path in changed:
            if path in seen:
                continue
            seen.add(path)
            if verbose or dry:
                self.io.out("%s '%s'\n" % (what, gitout.text(self.rel(path))))
            if dry:
                continue
            if what == "add":
                repo.stage(path)
            else:
                del repo.index[path]
        if not dry:
            repo.write_index()
        if ignored_hits:
            self.io.err("The following paths are ignored by one of your .gitignore files:\n%s\n"
                        "hint: Use -f if you really want to add them.\n"
                        "hint: Turn this message off by running\n"
                        "hint: \"git config advice.addIgnoredFile false\"\n" % "\n".join(ignored_hits))
            return 1
        return 0

    @staticmethod
    def _split_dashdash(args: list[str], specs: list[str]) -> list[str]:
        """The options before `--`; what follows it goes to specs."""
        if "--" in args:
            at = args.index("--")
            specs.extend(args[at + 1:])
            return args[:at]
        return args

    def cmd_rm(self, args: list[str]) -> int:  # noqa: C901 - git rm's checks
        cached = recursive = force = quiet = dry = False
        specs: list[str] = []
        for arg in self._split_dashdash(args, specs):
            if arg == "--cached":
                cached = True
            elif arg == "-r":
                recursive = True
            elif arg in ("-f", "--force"):
                force = True
            elif arg in ("-q", "--quiet"):
                quiet = True
            elif arg in ("-n", "--dry-run"):
                dry = True
            elif re.fullmatch(r"-[rfqn]+", arg):
                recursive |= "r" in arg
                force |= "f" in arg
                quiet |= "q" in arg
                dry |= "n" in arg
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                specs.append(arg)
        if not specs:
            raise _usage("usage: git rm [<options>] [--] <file>...")
        repo = self.repo
        index = repo.index_files()
        targets: list[bytes] = []
        for spec in specs:
            path = self.to_repo_path(spec)
            hits = [p for p in index if p == path or (p.startswith(path + b"/") if path else True)]
            if not hits:
                raise fatal("pathspec '%s' did not match any files" % spec)
            if any(p != path for p in hits) and not recursive:
                raise fatal("not removing '%s' recursively without -r" % spec)
            targets.extend(h for h in hits if h not in targets)
        if not force and not self._rm_allowed(targets, cached):
            return 1
        for path in targets:
            if not quiet:
                self.io.out("rm '%s'\n" % gitout.text(path))
            if dry:
                continue
            del repo.index[path]
            if not cached:
                full = repo.full(path)
                if os.path.lexists(full):
                    os.remove(full)
                    self._prune_empty(os.path.dirname(full))
        if not dry:
            repo.write_index()
        return 0

    def _rm_allowed(self, targets: list[bytes], cached: bool) -> bool:
        """git rm's safety check: nothing staged or changed is lost without -f (its three lists)."""
        repo = self.repo
        index = repo.index_files()
        head = repo.head_files()
        both, staged, local = [], [], []
        for path in targets:
            entry = index[path]
            state = repo.work_state(path, entry)
            local_changes = state is not None and state != entry
            staged_changes = head.get(path) != entry
            if local_changes and staged_changes:
                both.append(path)
            elif not cached:
                if staged_changes:
                    staged.append(path)
                if local_changes:
                    local.append(path)
        for paths, what, hint in ((both, "staged content different from both the\nfile and the HEAD",
                                   "(use -f to force removal)"),
                                  (staged, "changes staged in the index",
                                   "(use --cached to keep the file, or -f to force removal)"),
                                  (local, "local modifications",
                                   "(use --cached to keep the file, or -f to force removal)")):
            if paths:
                self.io.err("error: the following file%s %s:\n%s%s\n" % (
                    "s have" if len(paths) > 1 else " has", what,
                    "".join("    %s\n" % gitout.text(self.rel(p)) for p in paths), hint))
        return not (both or staged or local)

    def _prune_empty(self, folder: str) -> None:
        while folder.startswith(self.repo.top + os.sep):
            try:
                os.rmdir(folder)
            except OSError:
                return
            folder = os.path.dirname(folder)

    def cmd_mv(self, args: list[str]) -> int:
        force = verbose = False
        operands = []
        for arg in args:
            if arg in ("-f", "--force"):
                force = True
            elif arg in ("-v", "--verbose"):
                verbose = True
            elif arg == "--":
                continue
            elif arg.startswith("-") and arg != "-":
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                operands.append(arg)
        if len(operands) < 2:
            raise _usage("usage: git mv [<options>] <source>... <destination>")
        repo = self.repo
        index = repo.index_files()
        *sources, dest = operands
        dest_full = os.path.normpath(os.path.join(self.cwd, dest))
        into = os.path.isdir(dest_full)
        if len(sources) > 1 and not into:
            raise fatal("destination '%s' is not a directory" % dest)
        for source in sources:
            src = self.to_repo_path(source)
            target_full = os.path.join(dest_full, os.path.basename(source.rstrip("/"))) if into else dest_full
            target = os.fsencode(os.path.relpath(target_full, repo.top))
            members = [p for p in index if p == src or p.startswith(src + b"/")]
            if not os.path.lexists(repo.full(src)):
                raise fatal("bad source, source=%s, destination=%s" % (source, gitout.text(self.rel(target))))
            if not members:
                raise fatal("not under version control, source=%s, destination=%s"
                            % (source, gitout.text(self.rel(target))))
            if os.path.lexists(target_full) and not force and not into:
                raise fatal("destination exists, source=%s, destination=%s" % (source, dest))
            if verbose:
                self.io.out("Renaming %s to %s\n" % (source, gitout.text(self.rel(target))))
            os.makedirs(os.path.dirname(target_full) or ".", exist_ok=True)
            os.replace(repo.full(src), target_full)
            for path in members:
                entry = repo.index[path]
                del repo.index[path]
                repo.index[target + path[len(src):]] = entry
        repo.write_index()
        return 0

    # -- status -------------------------------------------------------------------------------------
    def staged_pairs(self, base: dict[bytes, tuple[int, bytes]] | None = None,
                     renames: bool = True) -> list[FilePair]:
        head = self.repo.head_files() if base is None else base
        index = self.repo.index_files()
        pairs = []
        for path in sorted(set(head) | set(index)):
            old, new = head.get(path), index.get(path)
            if old != new:
                pairs.append(FilePair(path, path, old, new))
        return gitout.detect_renames(pairs) if renames else pairs

    def unstaged_pairs(self, match: Callable[[bytes], bool] | None = None) -> list[FilePair]:
        pairs = []
        for path, entry in sorted(self.repo.index_files().items()):
            if match is not None and not match(path):
                continue
            state = self.work_state(path, entry)
            if state != entry:
                pairs.append(FilePair(path, path, entry, state))
        return pairs

    def untracked(self, all_files: bool = False) -> list[bytes]:
        tracked = set(self.repo.index_files())
        files, _ = self.repo.walk(tracked)
        if all_files:
            return [f for f in files if not f.endswith(b"/")]
        folders_with_tracked = set()
        for path in tracked:
            parts = path.split(b"/")[:-1]
            for n in range(1, len(parts) + 1):
                folders_with_tracked.add(b"/".join(parts[:n]))
        out: list[bytes] = []
        for path in files:
            parts = path.rstrip(b"/").split(b"/")
            shown = path
            for n in range(1, len(parts)):
                folder = b"/".join(parts[:n])
                if folder not in folders_with_tracked:
                    shown = folder + b"/"
                    break
            if shown not in out:
                out.append(shown)
        return sorted(out)

    def cmd_status(self, args: list[str]) -> int:  # noqa: C901 - the formats
        short = porcelain = branch = show_ignored = False
        untracked_mode = "normal"
        specs: list[str] = []
        for arg in self._split_dashdash(args, specs):
            if arg in ("-s", "--short"):
                short = True
            elif arg in ("--porcelain", "--porcelain=v1", "--porcelain=1"):
                porcelain = True
            elif arg.startswith("--porcelain="):
                raise fatal("unsupported porcelain version '%s'" % arg.split("=", 1)[1])
            elif arg in ("-b", "--branch"):
                branch = True
            elif arg in ("-sb", "-bs"):
                short = branch = True
            elif arg in ("--long", "--no-ahead-behind", "--ahead-behind", "--no-renames", "--renames"):
                continue
            elif arg in ("--ignored", "--ignored=traditional"):
                show_ignored = True
            elif arg in ("-u", "-uall", "--untracked-files", "--untracked-files=all"):
                untracked_mode = "all"
            elif arg in ("-uno", "--untracked-files=no"):
                untracked_mode = "no"
            elif arg in ("-unormal", "--untracked-files=normal"):
                untracked_mode = "normal"
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                specs.append(arg)
        match = self.matcher(specs)
        repo = self.repo
        staged = [p for p in self.staged_pairs() if match(p.new_path) or match(p.old_path)]
        unstaged = self.unstaged_pairs(match)
        untracked = [] if untracked_mode == "no" else [
            p for p in self.untracked(untracked_mode == "all") if match(p.rstrip(b"/"))]
        ignored = self.repo.walk(set(self.repo.index_files()))[1] if show_ignored else []
        if short or porcelain:
            self._status_short(staged, unstaged, untracked, branch, porcelain)
            for path in ignored:
                self.io.out("!! %s\n" % quote(path if porcelain else self.rel(path), True))
        else:
            self._status_long(staged, unstaged, untracked, untracked_mode)
        del repo
        return 0

    def _branch_line(self) -> str:
        repo = self.repo
        name = repo.branch()
        if name is None:
            return "## HEAD (no branch)"
        if repo.head() is None:
            return "## No commits yet on %s" % name
        return "## %s" % name

    def _status_short(self, staged: list[FilePair], unstaged: list[FilePair], untracked: list[bytes],
                      branch: bool, porcelain: bool) -> None:
        entries: dict[bytes, list[str]] = {}
        names: dict[bytes, str] = {}
        show = (lambda p: p) if porcelain else self.rel
        for pair in staged:
            key = pair.new_path if pair.new is not None else pair.old_path
            entries.setdefault(key, [" ", " "])[0] = pair.status
            if pair.status == "R":
                names[key] = "%s -> %s" % (quote(show(pair.old_path), True), quote(show(pair.new_path), True))
        for pair in unstaged:
            key = pair.new_path
            status = "D" if pair.new is None else ("T" if pair.status == "T" else "M")
            entries.setdefault(key, [" ", " "])[1] = status
        if branch:
            self.io.out(self._branch_line() + "\n")
        for key in sorted(entries):
            x, y = entries[key]
            self.io.out("%s%s %s\n" % (x, y, names.get(key) or quote(show(key), True)))
        for path in untracked:
            self.io.out("?? %s\n" % quote(show(path), True))

    def _status_long(self, staged: list[FilePair], unstaged: list[FilePair],  # noqa: C901 - git's sections
                     untracked: list[bytes],
                     untracked_mode: str, committing: bool = False) -> None:
        repo = self.repo
        out = self.io.out
        name = repo.branch()
        head = repo.head()
        if name is not None:
            out("On branch %s\n" % name)
        else:
            out("HEAD detached at %s\n" % self.abbrev(head or b""))
        if head is None:
            out("\nInitial commit\n\n" if committing else "\nNo commits yet\n\n")
        if staged:
            out("Changes to be committed:\n")
            out('  (use "git rm --cached <file>..." to unstage)\n' if head is None else
                '  (use "git restore --staged <file>..." to unstage)\n')
            for pair in staged:
                label = LABELS[pair.status]
                if pair.status == "R":
                    what = "%s -> %s" % (quote(self.rel(pair.old_path)), quote(self.rel(pair.new_path)))
                else:
                    what = quote(self.rel(pair.new_path if pair.new is not None else pair.old_path))
                out("\t%-12s%s\n" % (label, what))
            out("\n")
        if unstaged:
            out("Changes not staged for commit:\n")
            if any(p.new is None for p in unstaged):
                out('  (use "git add/rm <file>..." to update what will be committed)\n')
            else:
                out('  (use "git add <file>..." to update what will be committed)\n')
            out('  (use "git restore <file>..." to discard changes in working directory)\n')
            for pair in unstaged:
                label = "deleted:" if pair.new is None else ("typechange:" if pair.status == "T" else "modified:")
                out("\t%-12s%s\n" % (label, quote(self.rel(pair.new_path))))
            out("\n")
        if untracked:
            out("Untracked files:\n")
            out('  (use "git add <file>..." to include in what will be committed)\n')
            for path in untracked:
                out("\t%s\n" % quote(self.rel(path)))
            out("\n")
        if staged:
            return
        if unstaged:
            out('no changes added to commit (use "git add" and/or "git commit -a")\n')
        elif untracked:
            out('nothing added to commit but untracked files present (use "git add" to track)\n')
        elif untracked_mode == "no":
            out("nothing to commit (use -u to show untracked files)\n" if head is not None else
                'nothing to commit (create/copy files and use "git add" to track)\n')
        elif head is None:
            out('nothing to commit (create/copy files and use "git add" to track)\n')
        else:
            out("nothing to commit, working tree clean\n")

    # -- commit -------------------------------------------------------------------------------------
    def cmd_commit(self, args: list[str]) -> int:  # noqa: C901 - git commit's options
        messages: list[str] = []
        message_file = None
        every = quiet = allow_empty = amend = no_edit = allow_empty_message = False
        author_override = date_override = None
        specs: list[str] = []
        it = iter(self._split_dashdash(args, specs))
        for arg in it:
            if arg in ("-m", "--message"):
                value = next(it, None)
                if value is None:
                    raise _usage("error: switch `m' requires a value")
                messages.append(value)
            elif arg.startswith("--message="):
                messages.append(arg.split("=", 1)[1])
            elif arg.startswith("-m") and len(arg) > 2 and not arg.startswith("--"):
                messages.append(arg[2:])
            elif arg in ("-F", "--file"):
                message_file = next(it, None)
            elif arg.startswith("--file="):
                message_file = arg.split("=", 1)[1]
            elif arg in ("-a", "--all"):
                every = True
            elif arg in ("-q", "--quiet"):
                quiet = True
            elif arg == "--allow-empty":
                allow_empty = True
            elif arg == "--allow-empty-message":
                allow_empty_message = True
            elif arg == "--amend":
                amend = True
            elif arg == "--no-edit":
                no_edit = True
            elif arg.startswith("--author="):
                author_override = arg.split("=", 1)[1]
            elif arg == "--author":
                author_override = next(it, None)
            elif arg.startswith("--date="):
                date_override = arg.split("=", 1)[1]
            elif arg in ("--no-verify", "-n", "--no-gpg-sign", "-s", "--signoff", "-v", "--verbose"):
                continue
            elif re.fullmatch(r"-[aqm]+", arg):
                every |= "a" in arg
                quiet |= "q" in arg
                if arg.endswith("m"):
                    value = next(it, None)
                    if value is None:
                        raise _usage("error: switch `m' requires a value")
                    messages.append(value)
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                specs.append(arg)
        repo = self.repo
        head = repo.head()
        if amend and head is None:
            raise fatal("You have nothing to amend.")
        if every:
            for pair in self.unstaged_pairs():
                if pair.new is None:
                    del repo.index[pair.old_path]
                else:
                    repo.stage(pair.new_path)
        if specs:
            match = self.matcher(specs)
            index = repo.index_files()
            hits = [p for p in index if match(p)]
            for spec in specs:
                path = self.to_repo_path(spec)
                if not any(p == path or p.startswith(path + b"/") for p in index) and path:
                    raise GitError("error: pathspec '%s' did not match any file(s) known to git" % spec, 1)
            for path in hits:
                if repo.work_state(path, index[path]) is None:
                    del repo.index[path]
                else:
                    repo.stage(path)
        if message_file == "-":
            messages.append(self.stdin())
        elif message_file is not None:
            try:
                with open(os.path.join(self.cwd, message_file), encoding="utf-8", errors="surrogateescape") as handle:
                    messages.append(handle.read())
            except OSError as exc:
                raise fatal("could not read log file '%s': %s" % (message_file, exc.strerror)) from exc
        parent_commit = repo.commit(head) if head else None
        if amend and parent_commit is not None and not messages:
            message = gitout.text(parent_commit.message)
        elif not messages:
            if no_edit:
                message = ""
            else:
                raise GitError("error: Terminal is dumb, but EDITOR unset\n"
                               "Please supply the message using either -m or -F option.", 1)
        else:
            message = cleanup("\n\n".join(m.rstrip("\n") if len(messages) > 1 else m for m in messages))
        if not message.strip() and not allow_empty_message:
            self.io.err("Aborting commit due to empty commit message.\n")
            return 1
        tree = repo.write_tree()
        parents: list[bytes] = ([bytes(p) for p in parent_commit.parents] if amend and parent_commit
                                else ([head] if head else []))
        base_tree = repo.commit(parents[0]).tree if parents else None
        if not amend and not allow_empty and head is not None and tree == (parent_commit.tree if parent_commit
                                                                           else None):
            self._status_long([], self.unstaged_pairs(), self.untracked(), "normal", True)
            return 1
        if head is None and not allow_empty and not repo.index_files():
            self._status_long([], [], self.untracked(), "normal", True)
            return 1
        author = self.identity("author")
        committer = self.identity("committer")
        if amend and parent_commit is not None and author_override is None:
            name, email = gitout.split_ident(parent_commit.author)
            author = Identity(name.encode(), email.encode(), parent_commit.author_time,
                              parent_commit.author_timezone)
        if author_override:
            found = re.match(r"^(.*?)\s*<(.*)>$", author_override)
            if not found:
                raise fatal("--author '%s' is not 'Name <email>' and matches no existing author" % author_override)
            author = Identity(found.group(1).encode(), found.group(2).encode(), author.when, author.tz)
        if date_override:
            author.when, author.tz = parse_date(date_override)
        from dulwich.objects import Commit as DulwichCommit
        commit = DulwichCommit()
        commit.tree = ObjectID(tree)
        commit.parents = [ObjectID(p) for p in parents]
        commit.author = author.line()
        commit.committer = committer.line()
        commit.author_time, commit.author_timezone = author.when, author.tz
        commit.commit_time, commit.commit_timezone = committer.when, committer.tz
        commit.encoding = None
        commit.message = message.encode("utf-8", "surrogateescape")
        repo.add(commit)
        ref = repo.head_ref()
        reflog = ("commit (amend): " if amend else "commit (initial): " if head is None else "commit: ")
        reflog_message = (reflog + gitout.subject(commit.message)).encode()
        if ref is not None:
            repo.set_ref(ref, commit.id, message=reflog_message)
        else:
            repo.set_ref(b"HEAD", commit.id, message=reflog_message)
        repo.write_index()
        if not quiet:
            where = repo.branch() or "detached HEAD"
            root = " (root-commit)" if head is None else ""
            self.io.out("[%s%s %s] %s\n" % (where, root, self.abbrev(commit.id), gitout.subject(commit.message)))
            if author.line() != committer.line():
                self.io.out(" Author: %s\n" % gitout.text(author.line()))
            if amend or date_override:
                self.io.out(" Date: %s\n" % gitout.format_date(author.when, author.tz))
            pairs = self.tree_pairs(base_tree, tree)
            if pairs:
                stats = self.stats(pairs)
                self.io.out(gitout.shortstat(stats) + "\n")
                for line in gitout.summary_lines(pairs):
                    self.io.out(line + "\n")
        return 0

    def tree_pairs(self, old_tree: bytes | None, new_tree: bytes | None,
                   match: Callable[[bytes], bool] | None = None, renames: bool = True) -> list[FilePair]:
        old = self.repo.flatten(old_tree)
        new = self.repo.flatten(new_tree)
        return self.file_pairs(old, new, match, renames)

    @staticmethod
    def file_pairs(old: Mapping[bytes, tuple[int, bytes]], new: Mapping[bytes, tuple[int, bytes] | None],
                   match: Callable[[bytes], bool] | None = None, renames: bool = True) -> list[FilePair]:
        pairs = []
        for path in sorted(set(old) | set(new)):
            if match is not None and not match(path):
                continue
            a, b = old.get(path), new.get(path)
            if a != b:
                pairs.append(FilePair(path, path, a, b))
        return gitout.detect_renames(pairs) if renames else pairs

    def stats(self, pairs: list[FilePair]) -> list[Stat]:
        out = []
        for pair in pairs:
            added, deleted, binary = gitout.line_counts(pair, self.content)
            out.append(Stat(gitout.stat_name(pair), added, deleted, binary))
        return out


    # -- diff ---------------------------------------------------------------------------------------
    def _diff_options(self, args: list[str]) -> tuple[dict[str, Any], list[str], list[str]]:  # noqa: C901
        opts: dict[str, Any] = {"format": "patch", "context": 3, "renames": True, "exit_code": False,
                                "quiet": False, "cached": False, "no_index": False, "reverse": False,
                                "patch": False, "summary": False}
        revs: list[str] = []
        specs: list[str] = []
        seen_dashdash = False
        for arg in args:
            if seen_dashdash:
                specs.append(arg)
            elif arg == "--":
                seen_dashdash = True
            elif arg in ("--cached", "--staged"):
                opts["cached"] = True
            elif arg == "--stat" or arg.startswith("--stat="):
                opts["format"] = "stat" if opts["format"] != "patch+stat" else opts["format"]
            elif arg in ("--shortstat", "--numstat", "--name-only", "--name-status", "--raw"):
                opts["format"] = arg[2:]
            elif arg in ("-p", "-u", "--patch"):
                opts["patch"] = True
            elif arg == "--summary":
                opts["summary"] = True
            elif arg.startswith("-U") and arg[2:].isdigit():
                opts["context"] = int(arg[2:])
            elif arg.startswith("--unified="):
                opts["context"] = int(arg.split("=", 1)[1])
            elif arg in ("--no-renames",):
                opts["renames"] = False
            elif arg in ("-M", "--find-renames") or arg.startswith("-M") or arg.startswith("--find-renames="):
                opts["renames"] = True
            elif arg == "--exit-code":
                opts["exit_code"] = True
            elif arg in ("--quiet", "-q"):
                opts["quiet"] = opts["exit_code"] = True
            elif arg == "--no-index":
                opts["no_index"] = True
            elif arg == "-R":
                opts["reverse"] = True
            elif arg in ("--no-color", "--color=never", "--no-ext-diff", "--text", "-a", "--full-index",
                         "--color", "--color=auto", "--no-prefix", "--minimal", "--indent-heuristic"):
                continue
            elif arg.startswith("-") and arg != "-":
                raise _usage("error: invalid option: %s" % arg)
            else:
                revs.append(arg)
        return opts, revs, specs

    def _split_revs(self, revs: list[str], specs: list[str]) -> list[str]:
        """Arguments before `--` are revisions while they resolve, then paths (git's rule)."""
        out = []
        for index, rev in enumerate(revs):
            base = re.split(r"\.\.\.?", rev)
            if all((not part) or self.repo.try_resolve(part) is not None for part in base) and \
                    any(base) and not (os.path.exists(os.path.join(self.cwd, rev)) and len(base) == 1
                                       and self.repo.try_resolve(rev) is None):
                out.append(rev)
            else:
                rest = revs[index:]
                for path in rest:
                    if not os.path.lexists(os.path.join(self.cwd, path)):
                        raise fatal("ambiguous argument '%s': unknown revision or path not in the working tree.\n"
                                    "Use '--' to separate paths from revisions, like this:\n"
                                    "'git <command> [<revision>...] -- [<file>...]'" % path)
                specs.extend(rest)
                break
        return out

    def cmd_diff(self, args: list[str]) -> int:  # noqa: C901 - git diff's forms
        opts, revs, specs = self._diff_options(args)
        if opts["no_index"] or (self._find_top(self.cwd) is None and len(revs) == 2):
            return self._diff_no_index(revs + specs, opts)
        revs = self._split_revs(revs, specs)
        repo = self.repo
        match = self.matcher(specs)
        if len(revs) == 1 and ".." in revs[0]:
            left, _, right = revs[0].partition("...") if "..." in revs[0] else revs[0].partition("..")
            if "..." in revs[0]:
                base = self.merge_base(repo.resolve(left or "HEAD"), repo.resolve(right or "HEAD"))
                revs = [base.decode() if base else left or "HEAD", right or "HEAD"]
            else:
                revs = [left or "HEAD", right or "HEAD"]
        if len(revs) > 2:
            raise _usage("usage: git diff [<options>] [<commit>] [--] [<path>...]")
        if len(revs) == 2:
            old = repo.flatten(repo.tree_of(repo.resolve(revs[0], "any")))
            new: dict[bytes, tuple[int, bytes] | None] = dict(repo.flatten(repo.tree_of(repo.resolve(revs[1], "any"))))
        elif opts["cached"]:
            base = repo.resolve(revs[0]) if revs else repo.head()
            old = repo.flatten(repo.commit(base).tree) if base else {}
            new = dict(repo.index_files())
        elif revs:
            old = repo.flatten(repo.tree_of(repo.resolve(revs[0], "any")))
            index = repo.index_files()
            new = {}
            for path in set(old) | set(index):
                state = self.work_state(path, index.get(path) or old.get(path))
                if state is not None or path in old:
                    new[path] = state
            new = {p: v for p, v in new.items() if v is not None}
        else:
            index = repo.index_files()
            old = dict(index)
            new = {}
            for path, entry in index.items():
                state = self.work_state(path, entry)
                if state is not None:
                    new[path] = state
        if opts["reverse"]:
            old, new = {p: v for p, v in new.items() if v is not None}, dict(old)
        pairs = self.file_pairs(old, new, match, opts["renames"] and (len(revs) == 2 or opts["cached"] or bool(revs)))
        return self.emit_pairs(pairs, opts)

    def emit_pairs(self, pairs: list[FilePair], opts: dict[str, Any], leading: str = "") -> int:  # noqa: C901
        changed = bool(pairs)
        if opts["quiet"]:
            return 1 if changed and opts["exit_code"] else 0
        fmt = opts["format"]
        out = self.io.out
        if pairs and leading:
            out(leading)
        if fmt == "name-only":
            for pair in pairs:
                out(quote(pair.new_path if pair.new is not None else pair.old_path) + "\n")
        elif fmt == "name-status":
            for pair in pairs:
                if pair.status == "R":
                    out("R%03d\t%s\t%s\n" % (pair.score, quote(pair.old_path), quote(pair.new_path)))
                else:
                    out("%s\t%s\n" % (pair.status, quote(pair.new_path if pair.new is not None else pair.old_path)))
        elif fmt == "numstat":
            for pair in pairs:
                added, deleted, binary = gitout.line_counts(pair, self.content)
                name = (gitout.rename_name(quote(pair.old_path), quote(pair.new_path))
                        if pair.old_path != pair.new_path else quote(pair.new_path))
                out("-\t-\t%s\n" % name if binary else "%d\t%d\t%s\n" % (added, deleted, name))
        elif fmt in ("stat", "shortstat"):
            stats = self.stats(pairs)
            if fmt == "stat":
                for line in gitout.stat_lines(stats):
                    out(line + "\n")
            if stats:
                out(gitout.shortstat(stats) + "\n")
            if opts.get("summary"):
                for line in gitout.summary_lines(pairs):
                    out(line + "\n")
            if opts.get("patch") and pairs:
                out("\n")
                self._patches(pairs, opts)
        else:
            self._patches(pairs, opts)
        return 1 if changed and opts["exit_code"] else 0

    def _patches(self, pairs: list[FilePair], opts: dict[str, Any]) -> None:
        for pair in pairs:
            chunk = b"".join(gitout.patch(pair, self.content, self.abbrev, opts["context"]))
            self.io.out(chunk.decode("utf-8", "surrogateescape"))

    def _diff_no_index(self, paths: list[str], opts: dict[str, Any]) -> int:
        if len(paths) != 2:
            raise _usage("usage: git diff --no-index [<options>] <path> <path>")
        data = []
        for path in paths:
            full = os.path.join(self.cwd, path)
            try:
                with open(full, "rb") as handle:
                    data.append(handle.read())
            except OSError as exc:
                raise GitError("error: Could not access '%s'" % path, 1) from exc
        shas = [blob_id(d) for d in data]
        for sha, d in zip(shas, data, strict=True):
            self.work_blobs[sha] = d
        if shas[0] == shas[1]:
            return 0
        pair = FilePair(paths[0].lstrip("./").encode(), paths[1].lstrip("./").encode(),
                        (0o100644, shas[0]), (0o100644, shas[1]))
        opts["exit_code"] = True
        old_abbrev = self.abbrev
        self.abbrev = lambda sha, length=7: sha[:length].decode()  # type: ignore[method-assign]
        try:
            return self.emit_pairs([pair], opts)
        finally:
            self.abbrev = old_abbrev  # type: ignore[method-assign]

    def merge_base(self, a: bytes, b: bytes) -> bytes | None:
        ancestors = set(self.ancestors([a]))
        for sha in self.ancestors([b]):
            if sha in ancestors:
                return sha
        return None

    def ancestors(self, starts: list[bytes]) -> Iterable[bytes]:
        """Commits reachable from `starts`, newest first by commit date (git's default order)."""
        import heapq
        seen: set[bytes] = set()
        heap: list[tuple[int, int, bytes]] = []
        counter = 0
        for sha in starts:
            if sha not in seen:
                seen.add(sha)
                heapq.heappush(heap, (-self.repo.commit(sha).commit_time, counter, sha))
                counter += 1
        while heap:
            _, _, sha = heapq.heappop(heap)
            yield sha
            for parent in self.repo.commit(sha).parents:
                if parent not in seen:
                    seen.add(parent)
                    counter += 1
                    heapq.heappush(heap, (-self.repo.commit(parent).commit_time, counter, parent))

    # -- log and show -------------------------------------------------------------------------------
    def _decorations(self) -> Callable[[bytes], list[str]]:
        repo = self.repo
        refs: dict[bytes, list[str]] = {}
        current = repo.head_ref()
        head = repo.head()
        for name in sorted(repo.ref_names()):
            if not name.startswith(b"refs/"):
                continue
            sha = repo.ref(name)
            if sha is None:
                continue
            try:
                target = repo.commit(sha).id
            except (GitError, KeyError):
                continue
            short = name.decode()
            for prefix in ("refs/heads/", "refs/remotes/"):
                if short.startswith(prefix):
                    short = short[len(prefix):]
            if short.startswith("refs/tags/"):
                short = "tag: " + short[len("refs/tags/"):]
            if name == current:
                refs.setdefault(target, []).insert(0, "HEAD -> " + short)
            else:
                refs.setdefault(target, []).append(short)
        if current is None and head is not None:
            refs.setdefault(head, []).insert(0, "HEAD")
        return lambda sha: refs.get(sha, [])

    def cmd_log(self, args: list[str], show: bool = False) -> int:  # noqa: C901 - git log's options
        limit: int | None = None
        fmt: str | None = None
        separator = False
        reverse = decorate = first_parent = graph = False
        date_style = "default"
        diff_opts: dict[str, Any] = {"format": None, "context": 3, "renames": True, "exit_code": False,
                                     "quiet": False, "patch": False, "summary": False}
        revs: list[str] = []
        specs: list[str] = []
        author = grep = None
        it = iter(self._split_dashdash(args, specs))
        for arg in it:
            if re.fullmatch(r"-\d+", arg):
                limit = int(arg[1:])
            elif arg in ("-n", "--max-count"):
                limit = int(next(it, "0"))
            elif arg.startswith("-n") and arg[2:].isdigit():
                limit = int(arg[2:])
            elif arg.startswith("--max-count="):
                limit = int(arg.split("=", 1)[1])
            elif arg == "--oneline":
                fmt = "@oneline"
            elif arg.startswith(("--pretty=", "--format=")):
                value = arg.split("=", 1)[1]
                named = {"oneline": "%H %s", "short": None, "medium": None, "full": None, "raw": None}
                if value in named:
                    fmt = named[value] if value == "oneline" else None
                    if value in ("short", "full"):
                        fmt = "@" + value
                elif value.startswith("format:"):
                    fmt, separator = value[7:], True
                elif value.startswith("tformat:"):
                    fmt = value[8:]
                else:
                    fmt = value
            elif arg == "--pretty":
                fmt = None
            elif arg in ("-p", "-u", "--patch"):
                diff_opts["format"] = "patch"
            elif arg in ("--stat", "--shortstat", "--name-only", "--name-status", "--numstat"):
                diff_opts["format"] = arg[2:]
            elif arg == "--summary":
                diff_opts["summary"] = True
            elif arg == "--reverse":
                reverse = True
            elif arg in ("--decorate", "--decorate=short", "--decorate=full"):
                decorate = True
            elif arg == "--graph":
                graph = True
            elif arg in ("--no-decorate", "--no-color", "--color=never", "--no-merges", "--all",
                         "--abbrev-commit", "--no-abbrev-commit", "--no-patch", "-s", "--no-renames",
                         "--follow", "--topo-order", "--date-order", "--no-walk"):
                if arg == "--all":
                    revs.extend(r.decode() for r in self.repo.ref_names() if r.startswith(b"refs/"))
                if arg in ("--no-patch", "-s"):
                    diff_opts["format"] = None
                if arg == "--first-parent":
                    first_parent = True
                continue
            elif arg == "--first-parent":
                first_parent = True
            elif arg.startswith("--date="):
                date_style = arg.split("=", 1)[1]
                date_style = {"iso8601": "iso", "iso8601-strict": "iso-strict", "rfc2822": "rfc"}.get(
                    date_style, date_style)
            elif arg.startswith("--author="):
                author = arg.split("=", 1)[1]
            elif arg.startswith("--grep="):
                grep = arg.split("=", 1)[1]
            elif arg.startswith("-U") and arg[2:].isdigit():
                diff_opts["context"] = int(arg[2:])
            elif arg.startswith("-") and arg != "-":
                raise fatal("unrecognized argument: %s" % arg)
            else:
                revs.append(arg)
        repo = self.repo
        if show:
            return self._show(revs, specs, fmt, separator, diff_opts, date_style)
        revs = self._split_revs(revs, specs)
        head = repo.head()
        if not revs:
            if head is None:
                name = repo.branch() or "HEAD"
                raise fatal("your current branch '%s' does not have any commits yet" % name)
            revs = ["HEAD"]
        include: list[bytes] = []
        exclude: list[bytes] = []
        for rev in revs:
            if ".." in rev:
                left, _, right = rev.partition("..")
                exclude.append(repo.resolve(left or "HEAD"))
                include.append(repo.resolve(right or "HEAD"))
            elif rev.startswith("^"):
                exclude.append(repo.resolve(rev[1:]))
            else:
                include.append(repo.resolve(rev))
        hidden = set(self.ancestors(exclude)) if exclude else set()
        match = self.matcher(specs) if specs else None
        chosen: list[bytes] = []
        walk = self._first_parent(include) if first_parent else self.ancestors(include)
        for sha in walk:
            if sha in hidden:
                continue
            commit = repo.commit(sha)
            if match is not None and not self._touches(commit, match):
                continue
            if author and not re.search(author, gitout.text(commit.author)):
                continue
            if grep and not re.search(grep, gitout.text(commit.message)):
                continue
            chosen.append(sha)
            if limit is not None and len(chosen) >= limit and not reverse:
                break
        if limit is not None:
            chosen = chosen[:limit]
        if reverse:
            chosen.reverse()
        wants_refs = decorate or bool(fmt and ("%d" in fmt or "%D" in fmt))
        ctx = PrettyContext(self.abbrev, self._decorations() if wants_refs else (lambda s: []), date_style)
        if graph:
            return self._graph(chosen, fmt, separator, ctx, diff_opts, decorate, match)
        for number, sha in enumerate(chosen):
            commit = repo.commit(sha)
            self._log_entry(commit, fmt, separator, number, ctx, diff_opts, decorate, match)
        return 0

    def _graph(self, chosen: list[bytes], fmt: str | None, separator: bool, ctx: PrettyContext,
               diff_opts: dict[str, Any], decorate: bool, match: Callable[[bytes], bool] | None) -> int:
        """--graph of a line of history (each commit the parent of the one before): `* ` and `| `."""
        repo = self.repo
        commits = [repo.commit(sha) for sha in chosen]
        for before, after in zip(commits, commits[1:], strict=False):
            if len(before.parents) != 1 or bytes(before.parents[0]) != bytes(after.id):
                raise GitError("error: git log --graph draws a straight line of commits here; this history "
                               "branches or merges (declaw-wasm's git)", 1)
        if commits and len(commits[-1].parents) > 1:
            raise GitError("error: git log --graph draws a straight line of commits here; this history merges "
                           "(declaw-wasm's git)", 1)
        shown = self.io.stdout
        for number, commit in enumerate(commits):
            self.io.stdout = []
            try:
                self._log_entry(commit, fmt, False, 0, ctx, diff_opts, decorate, match)
                text = "".join(self.io.stdout)
            finally:
                self.io.stdout = shown
            medium = fmt is None or (fmt.startswith("@") and fmt != "@oneline")
            if medium and number + 1 < len(commits):
                text += "\n"
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            rail = "| " if number + 1 < len(commits) or commit.parents else "  "
            for index, line in enumerate(lines):
                shown.append(("* " if index == 0 else rail) + line + "\n")
        return 0

    def _first_parent(self, starts: list[bytes]) -> Iterable[bytes]:
        sha: bytes | None = starts[0]
        while sha is not None:
            yield sha
            parents = self.repo.commit(sha).parents
            sha = parents[0] if parents else None

    def _touches(self, commit: Commit, match: Callable[[bytes], bool]) -> bool:
        parent = self.repo.commit(commit.parents[0]).tree if commit.parents else None
        return bool(self.tree_pairs(parent, commit.tree, match, renames=False))

    def _log_entry(self, commit: Commit, fmt: str | None, separator: bool, number: int,  # noqa: C901
                   ctx: PrettyContext, diff_opts: dict[str, Any], decorate: bool,
                   match: Callable[[bytes], bool] | None) -> None:
        out = self.io.out
        has_diff = diff_opts["format"] is not None and len(commit.parents) <= 1
        if fmt is not None and (fmt == "@oneline" or not fmt.startswith("@")):
            if separator and number:
                out("\n")
            if fmt == "@oneline":
                names = ctx.decorations(commit.id) if decorate else []
                text = "%s%s %s" % (self.abbrev(commit.id), " (%s)" % ", ".join(names) if names else "",
                                    gitout.subject(commit.message))
            else:
                text = gitout.pretty(fmt, commit, ctx)
            out(text + ("" if separator else "\n"))
            if has_diff:
                self._entry_diff(commit, diff_opts, match, "" if fmt == "@oneline" else "\n")
            return
        if number:
            out("\n")
        names = ctx.decorations(commit.id) if decorate else []
        out("commit %s%s\n" % (commit.id.decode(), " (%s)" % ", ".join(names) if names else ""))
        if len(commit.parents) > 1:
            out("Merge: %s\n" % " ".join(self.abbrev(p) for p in commit.parents))
        style = fmt[1:] if fmt else "medium"
        out("Author: %s\n" % gitout.text(commit.author))
        if style == "full":
            out("Commit: %s\n" % gitout.text(commit.committer))
        elif style == "medium":
            out("Date:   %s\n" % gitout.format_date(commit.author_time, commit.author_timezone, ctx.date_style))
        out("\n")
        lines = gitout.text(commit.message).rstrip("\n").split("\n")
        if style == "short":
            lines = [gitout.subject(commit.message)]
        for line in lines:
            out("    %s\n" % line if line else "    \n")
        if has_diff:
            self._entry_diff(commit, diff_opts, match, "\n")

    def _entry_diff(self, commit: Commit, opts: dict[str, Any], match: Callable[[bytes], bool] | None,
                    leading: str) -> None:
        parent = self.repo.commit(commit.parents[0]).tree if commit.parents else None
        pairs = self.tree_pairs(parent, commit.tree, match)
        if opts["format"] == "patch":
            if pairs:
                self.io.out(leading)
            self._patches(pairs, opts)
        else:
            self.emit_pairs(pairs, opts, leading=leading)

    def cmd_show(self, args: list[str]) -> int:
        return self.cmd_log(args, show=True)

    def _show(self, revs: list[str], specs: list[str], fmt: str | None, separator: bool,  # noqa: C901
              diff_opts: dict[str, Any], date_style: str) -> int:
        repo = self.repo
        from dulwich.objects import Blob, Tag, Tree
        if diff_opts["format"] is None:
            diff_opts["format"] = "patch"
        ctx = PrettyContext(self.abbrev, lambda s: [], date_style)
        for number, rev in enumerate(revs or ["HEAD"]):
            sha = repo.try_resolve(rev)
            if sha is None:
                if rev == "HEAD" and repo.head() is None:
                    raise fatal("your current branch '%s' does not have any commits yet" % (repo.branch() or "HEAD"))
                if ":" in rev:
                    spec, _, path = rev.partition(":")
                    raise fatal("path '%s' does not exist in '%s'" % (path, spec or "HEAD"))
                raise fatal("ambiguous argument '%s': unknown revision or path not in the working tree.\n"
                            "Use '--' to separate paths from revisions, like this:\n"
                            "'git <command> [<revision>...] -- [<file>...]'" % rev)
            obj = repo.obj(sha)
            if isinstance(obj, Blob):
                self.io.out(obj.as_raw_string().decode("utf-8", "surrogateescape"))
                continue
            if isinstance(obj, Tree):
                self.io.out("tree %s\n\n" % rev)
                for entry in obj.iteritems():
                    self.io.out(gitout.text(entry.path) + ("/" if stat.S_ISDIR(entry.mode) else "") + "\n")
                continue
            if isinstance(obj, Tag):
                self.io.out("tag %s\nTagger: %s\nDate:   %s\n\n%s\n" % (
                    gitout.text(obj.name), gitout.text(obj.tagger),
                    gitout.format_date(obj.tag_time, obj.tag_timezone), gitout.text(obj.message).rstrip("\n")))
            commit = repo.commit(sha)
            match = self.matcher(specs) if specs else None
            self._log_entry(commit, fmt, separator, number, ctx, diff_opts, False, match)
        return 0


    # -- branches -----------------------------------------------------------------------------------
    def branches(self) -> list[bytes]:
        return self.repo.ref_names(b"refs/heads/")

    @staticmethod
    def valid_ref_name(name: str) -> bool:
        return bool(name) and not (name.startswith(("-", "/", ".")) or name.endswith((".", "/", ".lock"))
                                   or ".." in name or "//" in name or "@{" in name or name == "@"
                                   or any(c in name for c in " ~^:?*[\\\x7f") or any(ord(c) < 32 for c in name))

    def cmd_branch(self, args: list[str]) -> int:  # noqa: C901 - git branch's modes
        mode, force, verbose, fmt = "list", False, 0, None
        operands: list[str] = []
        for arg in args:
            if arg in ("-d", "--delete"):
                mode = "delete"
            elif arg == "-D":
                mode, force = "delete", True
            elif arg in ("-m", "--move"):
                mode = "move"
            elif arg == "-M":
                mode, force = "move", True
            elif arg in ("-c", "--copy"):
                mode = "copy"
            elif arg == "--show-current":
                mode = "current"
            elif arg in ("-v", "-vv", "--verbose"):
                verbose = 2 if arg == "-vv" else 1
            elif arg in ("-f", "--force"):
                force = True
            elif arg in ("-l", "--list", "-a", "--all", "--no-color", "--color=never", "-r", "--remotes"):
                if arg in ("-r", "--remotes"):
                    mode = "remotes"
                continue
            elif arg.startswith("--format="):
                fmt = arg.split("=", 1)[1]
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                operands.append(arg)
        repo = self.repo
        current = repo.branch()
        if mode == "current":
            if current:
                self.io.out(current + "\n")
            return 0
        if mode == "remotes":
            return 0
        if mode == "list" and (not operands or fmt is not None or verbose):
            return self._list_branches(current, verbose, fmt, operands)
        if mode == "list":
            name = operands[0]
            start = repo.resolve(operands[1]) if len(operands) > 1 else repo.head()
            if start is None:
                raise fatal("not a valid object name: '%s'" % (operands[1] if len(operands) > 1 else
                                                                  (current or "HEAD")))
            if not self.valid_ref_name(name):
                raise fatal("'%s' is not a valid branch name" % name)
            ref = b"refs/heads/" + name.encode()
            if repo.ref(ref) is not None and not force:
                raise fatal("a branch named '%s' already exists" % name)
            repo.set_ref(ref, start, message=b"branch: Created from " +
                                         (operands[1] if len(operands) > 1 else "HEAD").encode())
            return 0
        if mode == "delete":
            if not operands:
                raise fatal("branch name required")
            status = 0
            for name in operands:
                ref = b"refs/heads/" + name.encode()
                sha = repo.ref(ref)
                if sha is None:
                    self.io.err("error: branch '%s' not found.\n" % name)
                    status = 1
                    continue
                if name == current:
                    self.io.err("error: Cannot delete branch '%s' checked out at '%s'\n" % (name, repo.top))
                    status = 1
                    continue
                head = repo.head()
                if not force and head is not None and sha not in set(self.ancestors([head])):
                    self.io.err("error: The branch '%s' is not fully merged.\nIf you are sure you want to delete "
                                "it, run 'git branch -D %s'.\n" % (name, name))
                    status = 1
                    continue
                repo.remove_ref(ref)
                self.io.out("Deleted branch %s (was %s).\n" % (name, self.abbrev(sha)))
            return status
        if mode in ("move", "copy"):
            if len(operands) == 1:
                if current is None:
                    raise fatal("cannot rename the current branch while not on any.")
                old, new = current, operands[0]
            elif len(operands) == 2:
                old, new = operands
            else:
                raise fatal("too many arguments for a rename operation")
            old_ref, new_ref = b"refs/heads/" + old.encode(), b"refs/heads/" + new.encode()
            sha = repo.ref(old_ref)
            if sha is None and not (old == current and repo.head() is None):
                raise fatal("no branch named '%s'" % old)
            if not self.valid_ref_name(new):
                raise fatal("'%s' is not a valid branch name" % new)
            if repo.ref(new_ref) is not None and not force and new != old:
                raise fatal("a branch named '%s' already exists" % new)
            if sha is not None:
                repo.set_ref(new_ref, sha)
                if mode == "move" and new != old:
                    repo.remove_ref(old_ref)
            if mode == "move" and old == current:
                repo.set_head_to(new_ref)
            return 0
        return 0

    def _list_branches(self, current: str | None, verbose: int, fmt: str | None, patterns: list[str]) -> int:
        import fnmatch
        repo = self.repo
        names = [b[len(b"refs/heads/"):].decode() if b.startswith(b"refs/heads/") else b.decode()
                 for b in self.branches()]
        if patterns:
            names = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
        rows: list[tuple[str, str, bytes]] = []
        head = repo.head()
        if current is None and head is not None:
            rows.append(("(HEAD detached at %s)" % self.abbrev(head), "*", head))
        for name in names:
            sha = repo.ref(b"refs/heads/" + name.encode())
            if sha is None:
                continue
            rows.append((name, "*" if name == current else " ", sha))
        if fmt is not None:
            for name, mark, sha in rows:
                commit = repo.commit(sha)
                text = (fmt.replace("%(refname:short)", name).replace("%(refname)", "refs/heads/" + name)
                        .replace("%(HEAD)", mark).replace("%(objectname:short)", self.abbrev(sha))
                        .replace("%(objectname)", sha.decode())
                        .replace("%(subject)", gitout.subject(commit.message)))
                self.io.out(text + "\n")
            return 0
        width = max((len(r[0]) for r in rows), default=0)
        for name, mark, sha in rows:
            if verbose:
                commit = repo.commit(sha)
                self.io.out("%s %-*s %s %s\n" % (mark, width, name, self.abbrev(sha), gitout.subject(commit.message)))
            else:
                self.io.out("%s %s\n" % (mark, name))
        return 0

    # -- checkout, switch, restore, reset ---------------------------------------------------------
    def _checked(self, path: bytes) -> str:
        """A tree's path as a file of the working tree, refused as git refuses it: an empty, `.`,
        `..` or `.git` component, or a folder on the way that is a symbolic link."""
        parts = path.split(b"/")
        if any(part in (b"", b".", b"..") or part.lower() == b".git" for part in parts):
            raise GitError("error: invalid path '%s'" % gitout.text(path), 128)
        folder = self.repo.top
        for part in parts[:-1]:
            folder = os.path.join(folder, os.fsdecode(part))
            if os.path.islink(folder):
                raise GitError("error: invalid path '%s': %s is a symbolic link" % (
                    gitout.text(path), os.path.relpath(folder, self.repo.top)), 128)
        return self.repo.full(path)

    def _write_file(self, path: bytes, mode: int, sha: bytes) -> None:
        full = self._checked(path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.lexists(full) and (os.path.isdir(full) and not os.path.islink(full)):
            shutil.rmtree(full)
        data = self.repo.blob(sha)
        if mode == MODE_LINK:
            if os.path.lexists(full):
                os.remove(full)
            os.symlink(data.decode("utf-8", "surrogateescape"), full)
            return
        if os.path.islink(full):
            os.remove(full)
        with open(full, "wb") as handle:
            handle.write(data)

    def _remove_file(self, path: bytes) -> None:
        full = self.repo.full(path)
        if os.path.lexists(full) and not (os.path.isdir(full) and not os.path.islink(full)):
            os.remove(full)
            self._prune_empty(os.path.dirname(full))

    def _switch_tree(self, target: bytes | None, verb: str = "checkout",  # noqa: C901 - git's two-way merge
                     force: bool = False) -> bool:
        """Move the index and working tree from HEAD's tree to target's, keeping local changes that do not
        collide (git's two-way merge); False (after git's error) when one would be lost."""
        repo = self.repo
        old = repo.head_files()
        new = repo.flatten(repo.commit(target).tree) if target else {}
        index = repo.index_files()
        differing = [p for p in sorted(set(old) | set(new)) if old.get(p) != new.get(p)]
        blocked, untracked_hits = [], []
        for path in differing:
            entry = index.get(path)
            if force:
                continue
            if entry is None and path in new and path not in old:
                full = repo.full(path)
                if os.path.isdir(full) and not os.path.islink(full):
                    if self._holds_untracked(path, index):
                        untracked_hits.append(path)
                elif os.path.lexists(full) and self.work_state(path, None) != new[path]:
                    untracked_hits.append(path)
                continue
            if entry != old.get(path) and entry != new.get(path):
                blocked.append(path)
            elif entry is not None and self.work_state(path, entry) != entry and entry == old.get(path):
                blocked.append(path)
        for path in differing:  # a tree naming `..` or `.git` is refused before anything changes
            if path in new:
                self._checked(path)
        if blocked:
            self.io.err("error: Your local changes to the following files would be overwritten by %s:\n%s"
                        "Please commit your changes or stash them before you switch branches.\nAborting\n"
                        % (verb, "".join("\t%s\n" % gitout.text(self.rel(p)) for p in blocked)))
            return False
        if untracked_hits:
            self.io.err("error: The following untracked working tree files would be overwritten by %s:\n%s"
                        "Please move or remove them before you switch branches.\nAborting\n"
                        % (verb, "".join("\t%s\n" % gitout.text(self.rel(p)) for p in untracked_hits)))
            return False
        # removals first: a folder that becomes a file (or a file a folder) is out of the way
        for path in sorted(differing, key=lambda p: p in new):
            entry = index.get(path)
            if entry == new.get(path) and not force:
                continue
            if path in new:
                mode, sha = new[path]
                self._write_file(path, mode, sha)
                repo.stage(path)
                repo.set_mode(path, mode)
            else:
                if path in repo.index:
                    del repo.index[path]
                self._remove_file(path)
        if force:
            for path in list(repo.index_files()):
                if path not in new:
                    del repo.index[path]
                    self._remove_file(path)
                elif index.get(path) != new[path] or self.work_state(path, new[path]) != new[path]:
                    self._write_file(path, *new[path])
                    repo.stage(path)
        repo.write_index()
        return True

    def _holds_untracked(self, folder: bytes, index: dict[bytes, tuple[int, bytes]]) -> bool:
        """Whether the working tree's folder holds a file the index does not track."""
        top = self.repo.full(folder)
        for root, _, files in os.walk(top):
            for name in files:
                rel = os.fsencode(os.path.relpath(os.path.join(root, name), self.repo.top))
                if rel not in index:
                    return True
        return False

    def _local_changes(self) -> None:
        """The `M\tpath` lines git checkout prints for local changes it carried over."""
        staged = {p.new_path if p.new is not None else p.old_path: p.status for p in self.staged_pairs(renames=False)}
        for pair in self.unstaged_pairs():
            staged.setdefault(pair.new_path, "D" if pair.new is None else "M")
        for path in sorted(staged):
            self.io.out("%s\t%s\n" % (staged[path], quote(self.rel(path))))

    def cmd_checkout(self, args: list[str]) -> int:  # noqa: C901 - checkout's two jobs
        new_branch = None
        force = quiet = detach = False
        specs: list[str] = []
        has_dashdash = "--" in args
        it = iter(self._split_dashdash(args, specs))
        operands: list[str] = []
        reset_branch = False
        for arg in it:
            if arg in ("-b", "-B"):
                new_branch = next(it, None)
                reset_branch = arg == "-B"
                if new_branch is None:
                    raise _usage("error: switch `%s' requires a value" % arg[1])
            elif arg in ("-f", "--force"):
                force = True
            elif arg in ("-q", "--quiet"):
                quiet = True
            elif arg == "--detach":
                detach = True
            elif arg.startswith("-") and arg != "-":
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                operands.append(arg)
        repo = self.repo
        if has_dashdash or (operands and new_branch is None and len(operands) > 1):
            source = operands[0] if operands and has_dashdash else None
            paths = specs if has_dashdash else operands[1:]
            if not has_dashdash and operands:
                source = operands[0]
            return self._checkout_paths(source, paths)
        target_name = operands[0] if operands else None
        if new_branch is not None:
            return self._switch(target_name, new_branch, force, quiet, detach, reset_branch, "checkout")
        if target_name is None:
            self._local_changes()
            return 0
        if target_name == "-":
            target_name = self._previous_branch()
        if (repo.ref(b"refs/heads/" + target_name.encode()) is None and repo.try_resolve(target_name) is None):
            if os.path.lexists(os.path.join(self.cwd, target_name)) or any(
                    self.matcher([target_name])(p) for p in repo.index_files()):
                return self._checkout_paths(None, [target_name])
            self.io.err("error: pathspec '%s' did not match any file(s) known to git\n" % target_name)
            return 1
        return self._switch(target_name, None, force, quiet, detach, False, "checkout")

    def _previous_branch(self) -> str:
        path = os.path.join(self.repo.git_dir, "logs", "HEAD")
        try:
            with open(path, "rb") as handle:
                lines = handle.read().decode("utf-8", "replace").splitlines()
        except OSError:
            lines = []
        for line in reversed(lines):
            found = re.search(r"checkout: moving from (\S+) to (\S+)$", line)
            if found:
                return found.group(1)
        raise fatal("invalid reference: @{-1}")

    def _switch(self, target_name: str | None, new_branch: str | None, force: bool,  # noqa: C901
                quiet: bool, detach: bool, reset_branch: bool, verb: str) -> int:
        repo = self.repo
        current = repo.branch()
        old_head = repo.head()
        if new_branch is not None:
            if not self.valid_ref_name(new_branch):
                raise fatal("'%s' is not a valid branch name" % new_branch)
            ref = b"refs/heads/" + new_branch.encode()
            if repo.ref(ref) is not None and not reset_branch:
                raise fatal("a branch named '%s' already exists" % new_branch)
            target = repo.resolve(target_name) if target_name else old_head
            if target is not None and target != old_head and not self._switch_tree(target, verb, force):
                return 1
            if target is not None:
                repo.set_ref(ref, target, message=b"branch: Created from " +
                                             (target_name or "HEAD").encode())
            self._set_head(ref, "moving from %s to %s" % (current or self._short(old_head), new_branch))
            if not quiet:
                if target != old_head:
                    self._local_changes()
                self.io.err("Switched to a new branch '%s'\n" % new_branch)
            return 0
        assert target_name is not None
        ref = b"refs/heads/" + target_name.encode()
        is_branch = repo.ref(ref) is not None and not detach
        target = repo.ref(ref) if is_branch else repo.resolve(target_name)
        if is_branch and target_name == current:
            if not quiet:
                self._local_changes()
                self.io.err("Already on '%s'\n" % target_name)
            return 0
        if target != old_head and not self._switch_tree(target, verb, force):
            return 1
        if is_branch:
            self._set_head(ref, "moving from %s to %s" % (current or self._short(old_head), target_name))
        else:
            self._set_detached(target, "moving from %s to %s" % (current or self._short(old_head), target_name))
        if quiet:
            return 0
        self._local_changes()
        if current is None and old_head is not None and old_head != target:
            commit = repo.commit(old_head)
            self.io.err("Previous HEAD position was %s %s\n" % (self.abbrev(old_head), gitout.subject(commit.message)))
        if is_branch:
            self.io.err("Switched to branch '%s'\n" % target_name)
        else:
            assert target is not None
            commit = repo.commit(target)
            if current is not None:
                self.io.err(DETACHED_ADVICE % target_name)
            self.io.err("HEAD is now at %s %s\n" % (self.abbrev(target), gitout.subject(commit.message)))
        return 0

    def _short(self, sha: bytes | None) -> str:
        return self.abbrev(sha) if sha else "HEAD"

    def _set_head(self, ref: bytes, message: str) -> None:
        self.repo.set_head_to(ref, message=("checkout: " + message).encode())

    def _set_detached(self, sha: bytes | None, message: str) -> None:
        assert sha is not None
        path = os.path.join(self.repo.git_dir, "HEAD")
        with open(path, "wb") as handle:
            handle.write(sha + b"\n")

    def _checkout_paths(self, source: str | None, specs: list[str]) -> int:
        repo = self.repo
        if source is not None and repo.try_resolve(source) is None:
            specs = [source] + specs
            source = None
        tree = repo.flatten(repo.tree_of(repo.resolve(source, "any"))) if source else None
        index = repo.index_files()
        pool = tree if tree is not None else index
        for spec in specs:
            match = self.matcher([spec])
            hits = [p for p in pool if match(p)]
            if not hits:
                self.io.err("error: pathspec '%s' did not match any file(s) known to git\n" % spec)
                return 1
            for path in hits:
                mode, sha = pool[path]
                self._write_file(path, mode, sha)
                if tree is not None:
                    repo.stage(path)
                    repo.set_mode(path, mode)
        repo.write_index()
        return 0

    def cmd_switch(self, args: list[str]) -> int:
        new_branch, force, quiet, detach, operands = None, False, False, False, []
        it = iter(args)
        reset_branch = False
        for arg in it:
            if arg in ("-c", "--create", "-C", "--force-create"):
                new_branch = next(it, None)
                reset_branch = arg in ("-C", "--force-create")
            elif arg in ("-f", "--force", "--discard-changes"):
                force = True
            elif arg in ("-q", "--quiet"):
                quiet = True
            elif arg in ("-d", "--detach"):
                detach = True
            elif arg.startswith("-") and arg != "-":
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                operands.append(arg)
        if new_branch is None and not operands:
            raise fatal("missing branch or commit argument")
        target = operands[0] if operands else None
        if target == "-":
            target = self._previous_branch()
        if new_branch is None and target is not None and not detach and \
                self.repo.ref(b"refs/heads/" + target.encode()) is None:
            if self.repo.try_resolve(target) is not None:
                raise fatal("a branch is expected, got commit '%s'" % target)
            raise fatal("invalid reference: %s" % target)
        return self._switch(target, new_branch, force, quiet, detach, reset_branch, "switch")

    def cmd_restore(self, args: list[str]) -> int:  # noqa: C901
        staged = worktree = False
        source = None
        specs: list[str] = []
        it = iter(self._split_dashdash(args, specs))
        for arg in it:
            if arg in ("-S", "--staged"):
                staged = True
            elif arg in ("-W", "--worktree"):
                worktree = True
            elif arg in ("-s", "--source"):
                source = next(it, None)
            elif arg.startswith("--source="):
                source = arg.split("=", 1)[1]
            elif arg in ("-q", "--quiet"):
                continue
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                specs.append(arg)
        if not specs:
            raise fatal("you must specify path(s) to restore")
        if not staged:
            worktree = True
        repo = self.repo
        if source is not None:
            tree = repo.flatten(repo.tree_of(repo.resolve(source, "any")))
        elif staged:
            tree = repo.head_files()
        else:
            tree = None
        index = repo.index_files()
        for spec in specs:
            match = self.matcher([spec])
            pool = set(index) | set(tree or {})
            hits = sorted(p for p in pool if match(p))
            if not hits:
                self.io.err("error: pathspec '%s' did not match any file(s) known to git\n" % spec)
                return 1
            for path in hits:
                wanted = (tree if tree is not None else index).get(path)
                if staged:
                    if wanted is None:
                        if path in repo.index:
                            del repo.index[path]
                    else:
                        repo.set_entry(path, *wanted)
                if worktree:
                    got = wanted if tree is not None else index.get(path)
                    if got is None:
                        self._remove_file(path)
                    else:
                        self._write_file(path, *got)
                        if not staged and tree is None:
                            repo.stage(path)
        repo.write_index()
        return 0

    def cmd_reset(self, args: list[str]) -> int:  # noqa: C901 - reset's modes
        mode = "mixed"
        quiet = False
        specs: list[str] = []
        operands: list[str] = []
        for arg in self._split_dashdash(args, specs):
            if arg in ("--soft", "--mixed", "--hard", "--merge", "--keep"):
                mode = arg[2:]
            elif arg in ("-q", "--quiet"):
                quiet = True
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                operands.append(arg)
        repo = self.repo
        rev = None
        if operands and repo.try_resolve(operands[0]) is not None:
            rev = operands.pop(0)
        known = repo.index_files()
        for operand in operands:  # without `--`, what is neither a revision nor a path is git's error
            path = self.to_repo_path(operand)
            if not os.path.lexists(os.path.join(self.cwd, operand)) and not any(
                    p == path or p.startswith(path + b"/") for p in known):
                raise fatal("ambiguous argument '%s': unknown revision or path not in the working tree.\n"
                            "Use '--' to separate paths from revisions, like this:\n"
                            "'git <command> [<revision>...] -- [<file>...]'" % operand)
        specs = operands + specs
        target = repo.resolve(rev) if rev else repo.head()
        if specs:
            if mode != "mixed":
                raise fatal("Cannot do %s reset with paths." % mode)
            tree = repo.flatten(repo.commit(target).tree) if target else {}
            for spec in specs:
                match = self.matcher([spec])
                for path in sorted(set(tree) | set(repo.index_files())):
                    if match(path):
                        if path in tree:
                            repo.set_entry(path, *tree[path])
                        elif path in repo.index:
                            del repo.index[path]
            repo.write_index()
            self._unstaged_after_reset(quiet)
            return 0
        if target is None:
            tree = {}
        else:
            tree = repo.flatten(repo.commit(target).tree)
        if mode == "hard":
            for path in tree:  # a tree naming `..` or `.git` is refused before anything changes
                self._checked(path)
        old_head = repo.head()
        if target is not None and target != old_head:
            ref = repo.head_ref() or b"HEAD"
            message = ("reset: moving to %s" % (rev or "HEAD")).encode()
            if ref == b"HEAD":
                self._set_detached(target, "")
            else:
                repo.set_ref(ref, target, message=message)
        if mode == "soft":
            return 0
        if mode == "hard":
            index = repo.index_files()
            for path in sorted(set(index) | set(tree)):
                if path in tree:
                    if index.get(path) != tree[path] or self.work_state(path, tree[path]) != tree[path]:
                        self._write_file(path, *tree[path])
                    repo.stage(path)
                    repo.set_mode(path, tree[path][0])
                else:
                    if path in repo.index:
                        del repo.index[path]
                    self._remove_file(path)
            repo.write_index()
            if not quiet and target is not None:
                self.io.out("HEAD is now at %s %s\n" % (self.abbrev(target),
                                                        gitout.subject(repo.commit(target).message)))
            return 0
        keep = repo.index_files()
        repo.index.clear()
        for path, (entry_mode, sha) in tree.items():
            if keep.get(path) == (entry_mode, sha):
                repo.stage(path) if self.work_state(path, keep[path]) == keep[path] else repo.set_entry(
                    path, entry_mode, sha)
                repo.set_mode(path, entry_mode)
                if self.work_state(path, keep[path]) != keep[path]:
                    repo.set_entry(path, entry_mode, sha)
            else:
                repo.set_entry(path, entry_mode, sha)
        repo.write_index()
        self._unstaged_after_reset(quiet)
        return 0

    def _unstaged_after_reset(self, quiet: bool) -> None:
        if quiet:
            return
        pairs = self.unstaged_pairs()
        if pairs:
            self.io.out("Unstaged changes after reset:\n")
            for pair in pairs:
                self.io.out("%s\t%s\n" % ("D" if pair.new is None else "M", quote(pair.new_path)))

    # -- plumbing agents use ------------------------------------------------------------------------
    def cmd_rev_parse(self, args: list[str]) -> int:  # noqa: C901 - rev-parse's options
        short: int | None = None
        abbrev_ref = verify = quiet = False
        status = 0
        for arg in args:
            if arg == "--show-toplevel":
                self.io.out(self.repo.top + "\n")
            elif arg == "--git-dir":
                top = self.repo.top
                self.io.out(".git\n" if os.path.abspath(self.cwd) == top else self.repo.git_dir + "\n")
            elif arg == "--absolute-git-dir":
                self.io.out(self.repo.git_dir + "\n")
            elif arg == "--is-inside-work-tree":
                self.io.out("true\n" if self._find_top(self.cwd) else "false\n")
                if not self._find_top(self.cwd):
                    raise fatal("not a git repository (or any of the parent directories): .git")
            elif arg == "--is-inside-git-dir":
                self.io.out("false\n")
            elif arg == "--is-bare-repository":
                self.io.out("false\n")
            elif arg == "--show-prefix":
                rel = os.path.relpath(os.path.abspath(self.cwd), self.repo.top)
                self.io.out("\n" if rel == "." else rel + "/\n")
            elif arg == "--show-cdup":
                rel = os.path.relpath(self.repo.top, os.path.abspath(self.cwd))
                self.io.out("\n" if rel == "." else rel + "/\n")
            elif arg == "--abbrev-ref" or arg == "--symbolic-full-name":
                abbrev_ref = True
                full_name = arg == "--symbolic-full-name"
            elif arg == "--short":
                short = 7
            elif arg.startswith("--short="):
                short = int(arg.split("=", 1)[1])
            elif arg == "--verify":
                verify = True
            elif arg in ("-q", "--quiet"):
                quiet = True
            elif arg.startswith("-"):
                self.io.out(arg + "\n")
            else:
                rev = arg
                if abbrev_ref and rev in ("HEAD", "@"):
                    name = self.repo.head_ref()
                    if self.repo.head() is None:
                        raise fatal("ambiguous argument 'HEAD': unknown revision or path not in the working tree.\n"
                                    "Use '--' to separate paths from revisions, like this:\n"
                                    "'git <command> [<revision>...] -- [<file>...]'")
                    if name is None:
                        self.io.out("HEAD\n")
                    elif locals().get("full_name"):
                        self.io.out(name.decode() + "\n")
                    else:
                        self.io.out(name[len(b"refs/heads/"):].decode() + "\n")
                    continue
                if abbrev_ref and rev.startswith("@{u") or rev.endswith("@{upstream}") or rev.endswith("@{u}"):
                    raise fatal("no upstream configured for branch '%s'" % (self.repo.branch() or "HEAD"))
                sha = self.repo.try_resolve(rev)
                if sha is None:
                    if verify:
                        if quiet:
                            return 1
                        raise fatal("Needed a single revision")
                    self.io.out(rev + "\n")
                    raise fatal("ambiguous argument '%s': unknown revision or path not in the working tree.\n"
                                "Use '--' to separate paths from revisions, like this:\n"
                                "'git <command> [<revision>...] -- [<file>...]'" % rev)
                if abbrev_ref:
                    self.io.out(rev + "\n")
                    continue
                self.io.out((self.abbrev(sha, short) if short else sha.decode()) + "\n")
        return status

    def cmd_ls_files(self, args: list[str]) -> int:  # noqa: C901
        stage = others = modified = deleted = exclude_standard = zero = False
        specs: list[str] = []
        for arg in self._split_dashdash(args, specs):
            if arg in ("-s", "--stage"):
                stage = True
            elif arg in ("-o", "--others"):
                others = True
            elif arg in ("-m", "--modified"):
                modified = True
            elif arg in ("-d", "--deleted"):
                deleted = True
            elif arg == "--exclude-standard":
                exclude_standard = True
            elif arg == "-z":
                zero = True
            elif arg in ("-c", "--cached", "--full-name"):
                continue
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                specs.append(arg)
        repo = self.repo
        prefix = os.path.relpath(os.path.abspath(self.cwd), repo.top)
        prefix_b = b"" if prefix == "." else os.fsencode(prefix) + b"/"
        match = self.matcher(specs)
        end = "\0" if zero else "\n"
        show = (lambda p: gitout.text(p)) if zero else (lambda p: quote(p))
        index = repo.index_files()
        lines: list[str] = []
        if others:
            files = self.untracked(True) if exclude_standard else repo.walk(set(index))[0] + repo.walk(set(index))[1]
            for path in sorted(set(files)):
                if path.startswith(prefix_b) and match(path):
                    lines.append(show(path[len(prefix_b):]))
        else:
            for path, (mode, sha) in sorted(index.items()):
                if not path.startswith(prefix_b) or not match(path):
                    continue
                if modified or deleted:
                    state = repo.work_state(path, (mode, sha))
                    if not ((deleted and state is None) or (modified and state != (mode, sha))):
                        continue
                rel = show(path[len(prefix_b):])
                lines.append("%o %s 0\t%s" % (mode, sha.decode(), rel) if stage else rel)
        for line in lines:
            self.io.out(line + end)
        return 0

    def cmd_tag(self, args: list[str]) -> int:  # noqa: C901
        annotate = delete = force = False
        message = None
        operands = []
        it = iter(args)
        for arg in it:
            if arg in ("-a", "--annotate"):
                annotate = True
            elif arg in ("-m", "--message"):
                message = next(it, None)
                annotate = True
            elif arg in ("-d", "--delete"):
                delete = True
            elif arg in ("-f", "--force"):
                force = True
            elif arg in ("-l", "--list", "-n"):
                continue
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                operands.append(arg)
        repo = self.repo
        if delete:
            status = 0
            for name in operands:
                ref = b"refs/tags/" + name.encode()
                sha = repo.ref(ref)
                if sha is None:
                    self.io.err("error: tag '%s' not found.\n" % name)
                    status = 1
                    continue
                repo.remove_ref(ref)
                self.io.out("Deleted tag '%s' (was %s)\n" % (name, self.abbrev(sha)))
            return status
        if not operands or (len(operands) == 1 and any(c in operands[0] for c in "*?[") and not annotate):
            import fnmatch
            for ref in repo.ref_names(b"refs/tags/"):
                name = ref.decode()
                if operands and not fnmatch.fnmatchcase(name, operands[0]):
                    continue
                self.io.out(name + "\n")
            return 0
        name = operands[0]
        if not self.valid_ref_name(name):
            raise fatal("'%s' is not a valid tag name." % name)
        target = repo.resolve(operands[1], "any") if len(operands) > 1 else repo.head()
        if target is None:
            raise fatal("Failed to resolve 'HEAD' as a valid ref.")
        ref = b"refs/tags/" + name.encode()
        if repo.ref(ref) is not None and not force:
            raise fatal("tag '%s' already exists" % name)
        if annotate:
            if message is None:
                raise GitError("error: Terminal is dumb, but EDITOR unset\n"
                               "Please supply the message using either -m or -F option.", 1)
            from dulwich.objects import Tag
            tagger = self.identity("committer")
            tag = Tag()
            tag.name = name.encode()
            tag.object = (type(repo.obj(target)), ObjectID(target))
            tag.tagger = tagger.line()
            tag.tag_time, tag.tag_timezone = tagger.when, tagger.tz
            tag.message = cleanup(message).encode()
            repo.add(tag)
            target = tag.id
        repo.set_ref(ref, target)
        return 0

    def cmd_cat_file(self, args: list[str]) -> int:
        if len(args) != 2 or args[0] not in ("-t", "-s", "-p", "-e"):
            raise _usage("usage: git cat-file (-t | -s | -e | -p) <object>")
        flag, rev = args
        sha = self.repo.try_resolve(rev)
        if sha is None:
            if flag == "-e":
                return 1
            raise fatal("Not a valid object name %s" % rev)
        obj: Any = self.repo.obj(sha)
        raw = obj.as_raw_string()
        if flag == "-e":
            return 0
        if flag == "-t":
            self.io.out(obj.type_name.decode() + "\n")
        elif flag == "-s":
            self.io.out("%d\n" % len(raw))
        elif obj.type_name == b"tree":
            for entry in obj.iteritems():
                kind = "tree" if stat.S_ISDIR(entry.mode) else "commit" if entry.mode == 0o160000 else "blob"
                self.io.out("%06o %s %s\t%s\n" % (entry.mode, kind, entry.sha.decode(), quote(entry.path)))
        else:
            self.io.out(raw.decode("utf-8", "surrogateescape"))
        return 0

    def cmd_merge(self, args: list[str]) -> int:  # noqa: C901 - fast-forwards and trivial merges
        ff_only = no_ff = quiet = False
        operands = []
        it = iter(args)
        for arg in it:
            if arg == "--ff-only":
                ff_only = True
            elif arg == "--no-ff":
                no_ff = True
            elif arg in ("-q", "--quiet"):
                quiet = True
            elif arg in ("-m", "--message"):
                next(it, None)  # a merge commit's message: only fast-forwards are made here
            elif arg in ("--ff", "--no-edit", "--stat", "-n", "--no-stat", "--no-verify"):
                continue
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                operands.append(arg)
        repo = self.repo
        if len(operands) != 1:
            raise GitError("declaw-wasm's git merges one branch at a time", 1)
        name = operands[0]
        theirs = repo.try_resolve(name)
        if theirs is None:
            raise GitError("merge: %s - not something we can merge" % name, 1)
        theirs = repo.commit(theirs).id
        ours = repo.head()
        if ours is not None and theirs in set(self.ancestors([ours])):
            self.io.out("Already up to date.\n")
            return 0
        if ours is None or (ours in set(self.ancestors([theirs])) and not no_ff):
            if ours is not None:
                self.io.out("Updating %s..%s\n" % (self.abbrev(ours), self.abbrev(theirs)))
            if not self._switch_tree(theirs, "merge"):
                return 1
            ref = repo.head_ref()
            if ref is not None:
                repo.set_ref(ref, theirs, message=("merge %s: Fast-forward" % name).encode())
            else:
                self._set_detached(theirs, "")
            if not quiet:
                self.io.out("Fast-forward\n")
                pairs = self.tree_pairs(repo.commit(ours).tree if ours else None, repo.commit(theirs).tree)
                stats = self.stats(pairs)
                for line in gitout.stat_lines(stats):
                    self.io.out(line + "\n")
                if stats:
                    self.io.out(gitout.shortstat(stats) + "\n")
                for line in gitout.summary_lines(pairs):
                    self.io.out(line + "\n")
            return 0
        if ff_only:
            raise fatal("Not possible to fast-forward, aborting.")
        raise GitError("error: merging '%s' needs a three-way merge, which declaw-wasm's git does not do yet "
                       "(fast-forward merges work)" % name, 1)


    # -- stash --------------------------------------------------------------------------------------
    def _stash_log(self) -> str:
        return os.path.join(self.repo.git_dir, "logs", "refs", "stash")

    def stash_entries(self) -> list[tuple[bytes, str, str]]:
        """(commit, message, the reflog line) of each stash, newest first."""
        try:
            with open(self._stash_log(), "rb") as handle:
                lines = handle.read().decode("utf-8", "surrogateescape").splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            head, _, message = line.partition("\t")
            parts = head.split(" ")
            if len(parts) >= 2:
                out.append((parts[1].encode(), message, line))
        out.reverse()
        return out

    def _write_stash(self, entries: list[tuple[bytes, str, str]]) -> None:
        log = self._stash_log()
        ref = os.path.join(self.repo.git_dir, "refs", "stash")
        if not entries:
            for path in (log, ref):
                if os.path.exists(path):
                    os.remove(path)
            return
        os.makedirs(os.path.dirname(log), exist_ok=True)
        with open(log, "wb") as handle:
            handle.write("".join(line + "\n" for _, _, line in reversed(entries)).encode("utf-8", "surrogateescape"))
        with open(ref, "wb") as handle:
            handle.write(entries[0][0] + b"\n")

    def _stash_index(self, spec: str | None, entries: list[tuple[bytes, str, str]]) -> tuple[int, str]:
        if spec is None:
            return 0, "refs/stash@{0}"
        found = re.fullmatch(r"(?:(?:refs/)?stash@\{(\d+)\}|(\d+))", spec)
        if not found:
            raise fatal("'%s' is not a stash-like commit" % spec)
        number = int(found.group(1) or found.group(2))
        if number >= len(entries):
            raise fatal("log for 'stash' only has %d entries" % len(entries))
        return number, spec if found.group(1) else "stash@{%d}" % number

    def _commit_object(self, tree: bytes, parents: list[bytes], message: str) -> bytes:
        from dulwich.objects import Commit as DulwichCommit
        author = self.identity("author")
        committer = self.identity("committer")
        commit = DulwichCommit()
        commit.tree, commit.parents = ObjectID(tree), [ObjectID(p) for p in parents]
        commit.author, commit.committer = author.line(), committer.line()
        commit.author_time, commit.author_timezone = author.when, author.tz
        commit.commit_time, commit.commit_timezone = committer.when, committer.tz
        commit.message = message.encode("utf-8", "surrogateescape")
        self.repo.add(commit)
        return commit.id

    def cmd_stash(self, args: list[str]) -> int:  # noqa: C901 - stash's subcommands
        action = args[0] if args and not args[0].startswith("-") else "push"
        rest = args[1:] if args and not args[0].startswith("-") else args
        entries = self.stash_entries()
        if action in ("push", "save"):
            return self._stash_push(rest, action == "save")
        if action == "list":
            for number, (_, message, _) in enumerate(entries):
                self.io.out("stash@{%d}: %s\n" % (number, message))
            return 0
        if action == "clear":
            self._write_stash([])
            return 0
        quiet = "-q" in rest or "--quiet" in rest
        operands = [a for a in rest if not a.startswith("-")]
        if not entries:
            self.io.err("No stash entries found.\n")
            return 1
        number, name = self._stash_index(operands[0] if operands else None, entries)
        sha = entries[number][0]
        if action == "show":
            commit = self.repo.commit(sha)
            base = self.repo.commit(commit.parents[0]).tree
            opts: dict[str, Any] = {"format": "patch" if ("-p" in rest or "--patch" in rest) else "stat",
                                    "context": 3, "renames": True, "exit_code": False, "quiet": False,
                                    "patch": False, "summary": False}
            self.emit_pairs(self.tree_pairs(base, commit.tree), opts)
            return 0
        if action == "drop":
            del entries[number]
            self._write_stash(entries)
            if not quiet:
                self.io.out("Dropped %s (%s)\n" % (name, sha.decode()))
            return 0
        if action in ("apply", "pop"):
            if not self._stash_apply(sha):
                return 1
            if not quiet:
                self._status_long(self.staged_pairs(), self.unstaged_pairs(), self.untracked(), "normal")
            if action == "pop":
                entries = self.stash_entries()
                del entries[number]
                self._write_stash(entries)
                if not quiet:
                    self.io.out("Dropped %s (%s)\n" % (name, sha.decode()))
            return 0
        raise _usage("usage: git stash list | show | drop | pop | apply | push | clear")

    def _stash_push(self, args: list[str], save: bool) -> int:  # noqa: C901
        message = None
        untracked = quiet = False
        it = iter(args)
        words = []
        for arg in it:
            if arg in ("-m", "--message"):
                message = next(it, None)
            elif arg.startswith("--message="):
                message = arg.split("=", 1)[1]
            elif arg in ("-u", "--include-untracked"):
                untracked = True
            elif arg in ("-q", "--quiet"):
                quiet = True
            elif arg in ("-k", "--keep-index", "-p", "--patch", "-a", "--all"):
                raise GitError("error: git stash %s is not available in this sandbox" % arg, 1)
            elif arg.startswith("-"):
                raise _usage("error: unknown option `%s'" % arg.lstrip("-"))
            else:
                words.append(arg)
        if save and words:
            message = " ".join(words)
        repo = self.repo
        head = repo.head()
        if head is None:
            raise GitError("You do not have the initial commit yet", 1)
        staged = self.staged_pairs(renames=False)
        unstaged = self.unstaged_pairs()
        new_files = [p for p in self.untracked(True)] if untracked else []
        if not staged and not unstaged and not new_files:
            if not quiet:
                self.io.out("No local changes to save\n")
            return 0
        base = repo.commit(head)
        summary = "%s: %s %s" % (repo.branch() or "(no branch)", self.abbrev(head), gitout.subject(base.message))
        index_commit = self._commit_object(repo.write_tree(), [head], "index on %s\n" % summary)
        files = dict(repo.index_files())
        for pair in unstaged:
            if pair.new is None:
                files.pop(pair.new_path, None)
            else:
                repo.store_blob(repo.read_work(pair.new_path))
                files[pair.new_path] = pair.new
        work_tree = repo.tree_from(files)
        parents = [head, index_commit]
        if new_files:
            blobs = {p: (0o100644, repo.store_blob(repo.read_work(p))) for p in new_files}
            parents.append(self._commit_object(repo.tree_from(blobs), [], "untracked files on %s\n" % summary))
        text = ("On %s: %s" % (repo.branch() or "(no branch)", message)) if message else "WIP on %s" % summary
        stash = self._commit_object(work_tree, parents, text)  # git's stash message has no newline
        committer = self.identity("committer")
        entries = self.stash_entries()
        old = entries[0][0] if entries else b"0" * 40
        line = "%s %s %s %d %s\t%s" % (old.decode(), stash.decode(), gitout.text(committer.line()), committer.when,
                                       gitout.format_tz(committer.tz), text)
        entries.insert(0, (stash, text, line))
        self._write_stash(entries)
        self.cmd_reset(["--hard", "-q"])
        for path in new_files:
            self._remove_file(path)
        if not quiet:
            self.io.out("Saved working directory and index state %s\n" % text)
        return 0

    def _stash_apply(self, sha: bytes) -> bool:
        repo = self.repo
        stash = repo.commit(sha)
        base = repo.flatten(repo.commit(stash.parents[0]).tree)
        work = repo.flatten(stash.tree)
        staged = repo.flatten(repo.commit(stash.parents[1]).tree) if len(stash.parents) > 1 else base
        index = repo.index_files()
        changed = [p for p in sorted(set(base) | set(work)) if base.get(p) != work.get(p)]
        blocked = [p for p in changed if (index.get(p) != base.get(p) and index.get(p) != work.get(p))
                   or (index.get(p) is not None and self.work_state(p, index.get(p)) != index.get(p))]
        if not changed:
            self.io.out("Already up to date.\n")
        if blocked:
            self.io.err("error: Your local changes to the following files would be overwritten by merge:\n%s"
                        "Please commit your changes or stash them before you merge.\nAborting\n"
                        % "".join("\t%s\n" % gitout.text(self.rel(p)) for p in blocked))
            return False
        for path in changed:
            if path in work:
                self._write_file(path, *work[path])
                if path not in base and path in staged:
                    repo.stage(path)
            else:
                self._remove_file(path)
                if path in repo.index:
                    del repo.index[path]
        if len(stash.parents) > 2:
            for path, (mode, blob) in repo.flatten(repo.commit(stash.parents[2]).tree).items():
                self._write_file(path, mode, blob)
        repo.write_index()
        return True


def cleanup(message: str) -> str:
    """--cleanup=whitespace: trailing spaces and leading, trailing and repeated blank lines go."""
    lines = [line.rstrip() for line in message.split("\n")]
    out: list[str] = []
    for line in lines:
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n" if out else ""


DETACHED_ADVICE = """Note: switching to '%s'.

You are in 'detached HEAD' state. You can look around, make experimental
changes and commit them, and you can discard any commits you make in this
state without impacting any branches by switching back to a branch.

If you want to create a new branch to retain commits you create, you may
do so (now or later) by using -c with the switch command. Example:

  git switch -c <new-branch-name>

Or undo this operation with:

  git switch -

Turn off this advice by setting config variable advice.detachedHead to false

"""


class GitCommand(Command):
    """`git` (module docstring)."""

    name = "git"
    input_kinds = frozenset({InputKind.TEXT, InputKind.ARGUMENTS})
    output_kinds = frozenset({OutputKind.TEXT})
    summary = "the stupid content tracker"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        out = Out()
        env = dict(state.exported_variables())
        stdin = invocation.stdin if invocation.stdin_kind == InputKind.TEXT and invocation.stdin else ""
        git = Git(str(state.resolve_path(".")), env, out, lambda: str(stdin))
        try:
            status = git.main(list(invocation.arguments))
        except GitError as exc:
            out.err(exc.message.rstrip("\n") + "\n")
            status = exc.status
        except OSError as exc:
            out.err("fatal: %s\n" % (exc.strerror or exc))
            status = 128
        for text in out.stderr:
            state.write_error(text)
        return CommandResult(stdout="".join(out.stdout), exit_code=status)


INIT_HINT = "".join("hint: %s\n" % line for line in (
    "Using 'master' as the name for the initial branch. This default branch name",
    "is subject to change. To configure the initial branch name to use in all",
    "of your new repositories, which will suppress this warning, call:", "",
    "\tgit config --global init.defaultBranch <name>", "",
    "Names commonly chosen instead of 'master' are 'main', 'trunk' and",
    "'development'. The just-created branch can be renamed via this command:", "",
    "\tgit branch -m <name>"))
