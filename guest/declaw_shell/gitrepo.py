"""The repository side of the sandbox's `git` (guest/declaw_shell/git.py): finding the repository,
its configuration, revisions, trees, the index and the working tree, over dulwich's object store,
refs, index file and ignore rules (the files are git's own formats, so a repository made here is
read by the host's git and the other way round). Everything is bytes inside; paths are relative to
the top of the working tree, with `/`."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dulwich.config import ConfigFile
from dulwich.index import Index, IndexEntry, commit_tree
from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tag, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

if TYPE_CHECKING:
    from collections.abc import Iterator

    from dulwich.ignore import IgnoreFilterManager

ZERO = b"0" * 40
MODE_FILE, MODE_EXEC, MODE_LINK, MODE_TREE, MODE_GITLINK = 0o100644, 0o100755, 0o120000, 0o40000, 0o160000


class GitError(Exception):
    """A git failure: its message (already `fatal: ...` or `error: ...`) and exit status."""

    def __init__(self, message: str, status: int = 128) -> None:
        super().__init__(message)
        self.message, self.status = message, status


def fatal(message: str, status: int = 128) -> GitError:
    return GitError("fatal: " + message, status)


@dataclass
class Identity:
    name: bytes
    email: bytes
    when: int
    tz: int  # seconds east of UTC

    def line(self) -> bytes:
        return b"%s <%s>" % (self.name, self.email)


def format_tz(tz: int) -> str:
    sign = "-" if tz < 0 else "+"
    tz = abs(tz)
    return "%s%02d%02d" % (sign, tz // 3600, tz // 60 % 60)


DATE_RE = re.compile(r"^@?(\d+)(?:\s+([+-]\d{4}))?$")
ISO_RE = re.compile(r"^(\d{4})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d))?)?\s*(Z|[+-]\d\d:?\d\d)?$")


def parse_tz(text: str) -> int:
    if text == "Z":
        return 0
    text = text.replace(":", "")
    value = int(text[1:3]) * 3600 + int(text[3:5]) * 60
    return -value if text[0] == "-" else value


def local_tz(when: float) -> int:
    return int(time.localtime(when).tm_gmtoff or 0)


def parse_date(text: str) -> tuple[int, int]:
    """GIT_AUTHOR_DATE / --date: `SECONDS [+-HHMM]`, `@SECONDS`, ISO 8601 or RFC 2822."""
    text = text.strip()
    match = DATE_RE.match(text)
    if match:
        when = int(match.group(1))
        return when, parse_tz(match.group(2)) if match.group(2) else local_tz(when)
    match = ISO_RE.match(text)
    if match:
        year, month, day, hour, minute, second, zone = match.groups()
        import calendar
        naive = calendar.timegm((int(year), int(month), int(day), int(hour or 0), int(minute or 0),
                                 int(second or 0), 0, 0, 0))
        if zone is None:
            tz = local_tz(naive)
        else:
            tz = parse_tz(zone)
        return naive - tz, tz
    try:
        from email.utils import parsedate_tz
        parsed = parsedate_tz(text)
    except (TypeError, ValueError):
        parsed = None
    if parsed:
        import calendar
        tz = parsed[9] or 0
        return calendar.timegm(parsed[:9]) - tz, tz
    raise fatal("invalid date format: %s" % text)


class Config:
    """git's configuration as `git config` reads it: the -c options, the repository's, the user's."""

    def __init__(self, env: dict[str, str], git_dir: str | None, overrides: list[tuple[bytes, bytes]]) -> None:
        self.env = env
        self.git_dir = git_dir
        self.overrides = overrides
        home = env.get("HOME", "/home/user")
        self.global_path = env.get("GIT_CONFIG_GLOBAL") or os.path.join(home, ".gitconfig")
        self.files: list[tuple[str, ConfigFile]] = []
        for path in [self.global_path] + ([os.path.join(git_dir, "config")] if git_dir else []):
            self.files.append((path, self._load(path)))

    @staticmethod
    def _load(path: str) -> ConfigFile:
        try:
            return ConfigFile.from_path(path)
        except FileNotFoundError:
            return ConfigFile()
        except (OSError, ValueError) as exc:
            raise fatal("bad config file %s: %s" % (path, exc)) from exc

    def get(self, key: str) -> bytes | None:
        section, name = split_key(key)
        wanted = key.lower().encode()
        for okey, value in reversed(self.overrides):
            if okey.lower() == wanted:
                return value
        for _, config in reversed(self.files):
            try:
                return config.get(section, name)
            except KeyError:
                continue
        return None

    def get_bool(self, key: str, default: bool) -> bool:
        value = self.get(key)
        if value is None:
            return default
        return value.lower() in (b"true", b"yes", b"on", b"1", b"")

    def items(self) -> Iterator[tuple[str, bytes]]:
        """Every setting, as `git config --list` prints them (file order, then -c)."""
        for _, config in self.files:
            for section in config.sections():
                for name, value in config.items(section):
                    yield key_name(section, name), value
        for okey, value in self.overrides:
            yield okey.decode("utf-8", "replace").lower(), value


def split_key(key: str) -> tuple[tuple[bytes, ...], bytes]:
    parts = key.split(".")
    if len(parts) < 2 or not parts[0] or not parts[-1]:
        raise GitError("error: key does not contain a section: %s" % key, 2)
    if len(parts) == 2:
        return (parts[0].encode(),), parts[1].encode()
    return (parts[0].encode(), ".".join(parts[1:-1]).encode()), parts[-1].encode()


def key_name(section: tuple[bytes, ...], name: bytes) -> str:
    head = section[0].decode("utf-8", "replace").lower()
    if len(section) > 1:
        head += "." + section[1].decode("utf-8", "replace")
    return head + "." + name.decode("utf-8", "replace").lower()


def blob_id(data: bytes) -> bytes:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest().encode()


class Repository:
    """An open repository and its working tree."""

    def __init__(self, top: str, env: dict[str, str], overrides: list[tuple[bytes, bytes]]) -> None:
        self.top = top
        self.git_dir = os.path.join(top, ".git")
        self.repo = Repo(top)
        self.env = env
        self.config = Config(env, self.git_dir, overrides)
        self._index: Index | None = None
        self._ignore: IgnoreFilterManager | None = None
        self._objects: list[bytes] | None = None

    # -- dulwich's typed ids (NewTypes of bytes) at one place -------------------------------------
    def set_ref(self, name: bytes, sha: bytes, message: bytes | None = None) -> None:
        self.repo.refs.set_if_equals(Ref(name), None, ObjectID(sha), message=message)

    def remove_ref(self, name: bytes) -> None:
        self.repo.refs.remove_if_equals(Ref(name), None)

    def set_head_to(self, target: bytes, message: bytes | None = None) -> None:
        """HEAD names the branch `target` (b'refs/heads/x')."""
        self.repo.refs.set_symbolic_ref(Ref(b"HEAD"), Ref(target), message=message)

    def ref_names(self, base: bytes | None = None) -> list[bytes]:
        """Every ref (full names), or those under `base` with `base` taken off."""
        names = self.repo.refs.keys(base=Ref(base)) if base else self.repo.refs.allkeys()
        return sorted(bytes(name) for name in names)

    def add(self, obj: ShaFile) -> bytes:
        self.repo.object_store.add_object(obj)
        return bytes(obj.id)

    def object_ids(self) -> list[bytes]:
        return [bytes(sha) for sha in self.repo.object_store]

    def has(self, sha: bytes) -> bool:
        return ObjectID(sha) in self.repo.object_store

    def load(self, sha: bytes) -> ShaFile:
        return self.repo.object_store[ObjectID(sha)]

    # -- refs and revisions -------------------------------------------------------------------------
    def head_ref(self) -> bytes | None:
        """The branch HEAD names (b'refs/heads/x'), or None when detached."""
        symrefs = self.repo.refs.get_symrefs()
        target = symrefs.get(Ref(b"HEAD"))
        return bytes(target) if target is not None else None

    def branch(self) -> str | None:
        ref = self.head_ref()
        return ref[len(b"refs/heads/"):].decode("utf-8", "replace") if ref else None

    def head(self) -> bytes | None:
        return self.ref(b"HEAD")

    def ref(self, name: bytes) -> bytes | None:
        try:
            return bytes(self.repo.refs[Ref(name)])
        except KeyError:
            return None

    def obj(self, sha: bytes) -> ShaFile:
        return self.load(sha)

    def commit(self, sha: bytes) -> Commit:
        obj = self.load(sha)
        while isinstance(obj, Tag):
            obj = self.load(obj.object[1])
        if not isinstance(obj, Commit):
            raise fatal("%s is not a commit" % sha.decode())
        return obj

    def resolve(self, spec: str, kind: str = "commit") -> bytes:
        """A revision (sha, abbreviation, ref, HEAD, @, with ~N ^N ^{type}) → sha of that kind."""
        sha = self.try_resolve(spec)
        if sha is None:
            raise fatal("ambiguous argument '%s': unknown revision or path not in the working tree.\n"
                        "Use '--' to separate paths from revisions, like this:\n"
                        "'git <command> [<revision>...] -- [<file>...]'" % spec)
        if kind == "commit":
            return self.commit(sha).id
        return sha

    def try_resolve(self, spec: str) -> bytes | None:  # noqa: C901 - the revision grammar
        if ":" in spec and not spec.startswith(":"):
            rev, _, path = spec.partition(":")
            base = self.try_resolve(rev or "HEAD")
            if base is None:
                return None
            tree = self.tree_of(base)
            found = self.lookup(tree, path.strip("/").encode())
            return found[1] if found else None
        match = re.match(r"^(.*?)((?:[~^][0-9]*|\^\{[a-z]*\})*)$", spec)
        if not match:
            return None
        name, suffix = match.group(1), match.group(2)
        sha = self._base(name)
        if sha is None:
            return None
        for op in re.findall(r"~[0-9]*|\^\{[a-z]*\}|\^[0-9]*", suffix):
            try:
                if op.startswith("^{"):
                    wanted = op[2:-1]
                    if wanted in ("", "commit"):
                        sha = self.commit(sha).id if wanted else sha
                    elif wanted == "tree":
                        sha = self.tree_of(sha)
                    continue
                count = int(op[1:]) if len(op) > 1 else 1
                commit = self.commit(sha)
                if op[0] == "~":
                    for _ in range(count):
                        if not commit.parents:
                            return None
                        commit = self.commit(commit.parents[0])
                    sha = commit.id
                elif count == 0:
                    sha = commit.id
                else:
                    if len(commit.parents) < count:
                        return None
                    sha = commit.parents[count - 1]
            except (KeyError, GitError):
                return None
        return sha

    def _base(self, name: str) -> bytes | None:
        if name in ("HEAD", "@", ""):
            return self.head()
        raw = name.encode()
        for candidate in (raw, b"refs/" + raw, b"refs/tags/" + raw, b"refs/heads/" + raw,
                          b"refs/remotes/" + raw, b"refs/remotes/" + raw + b"/HEAD"):
            if candidate.startswith(b"refs/") or candidate == b"HEAD":
                sha = self.ref(candidate)
                if sha is not None:
                    return sha
        if re.fullmatch(r"[0-9a-fA-F]{4,40}", name):
            lower = raw.lower()
            if len(lower) == 40:
                return lower if self.has(lower) else None
            found = [sha for sha in self.known_objects() if sha.startswith(lower)]
            if len(found) == 1:
                return found[0]
        return None

    def known_objects(self) -> list[bytes]:
        """Every object id in the store, listed once per command (abbreviations and prefixes)."""
        if self._objects is None:
            self._objects = self.object_ids()
        return self._objects

    def abbrev(self, sha: bytes, length: int = 7) -> str:
        """The shortest prefix of at least `length` digits no other object shares."""
        objects = self.known_objects()
        while length < 40 and sum(1 for o in objects if o.startswith(sha[:length])) > 1:
            length += 1
        return sha[:length].decode()

    def tree_of(self, sha: bytes) -> bytes:
        obj = self.load(sha)
        while isinstance(obj, Tag):
            obj = self.load(obj.object[1])
        if isinstance(obj, Commit):
            return obj.tree
        if isinstance(obj, Tree):
            return obj.id
        raise fatal("%s is not a tree-ish" % sha.decode())

    def lookup(self, tree: bytes, path: bytes) -> tuple[int, bytes] | None:
        if not path:
            return MODE_TREE, tree
        current = tree
        mode = MODE_TREE
        for part in path.split(b"/"):
            obj = self.load(current)
            if not isinstance(obj, Tree) or part not in obj:
                return None
            mode, current = obj[part]
        return mode, current

    def flatten(self, tree: bytes | None, prefix: bytes = b"") -> dict[bytes, tuple[int, bytes]]:
        """path → (mode, sha) of every file under a tree."""
        out: dict[bytes, tuple[int, bytes]] = {}
        if tree is None:
            return out
        stack = [(prefix, tree)]
        while stack:
            base, sha = stack.pop()
            obj = self.load(sha)
            assert isinstance(obj, Tree)
            for entry in obj.iteritems():
                path = base + entry.path
                if stat.S_ISDIR(entry.mode):
                    stack.append((path + b"/", entry.sha))
                else:
                    out[path] = (entry.mode, entry.sha)
        return out

    def head_files(self) -> dict[bytes, tuple[int, bytes]]:
        head = self.head()
        return self.flatten(self.commit(head).tree) if head else {}

    def blob(self, sha: bytes) -> bytes:
        obj = self.load(sha)
        assert isinstance(obj, Blob)
        return obj.as_raw_string()

    def store_blob(self, data: bytes) -> bytes:
        return self.add(Blob.from_string(data))

    # -- the index ----------------------------------------------------------------------------------
    @property
    def index(self) -> Index:
        if self._index is None:
            self._index = self.repo.open_index()
        return self._index

    def index_files(self) -> dict[bytes, tuple[int, bytes]]:
        out: dict[bytes, tuple[int, bytes]] = {}
        for path, entry in self.index.items():
            if isinstance(entry, IndexEntry):
                out[path] = (entry.mode, entry.sha)
        return out

    def write_index(self) -> None:
        if self._index is not None:
            self._index.write()

    def write_tree(self) -> bytes:
        return self.tree_from(self.index_files())

    def tree_from(self, files: dict[bytes, tuple[int, bytes]]) -> bytes:
        """Store the trees of these files; the top tree's id."""
        return bytes(commit_tree(self.repo.object_store,
                                 ((path, ObjectID(sha), mode) for path, (mode, sha) in sorted(files.items()))))

    def stage(self, path: bytes) -> None:
        """Put the working tree's file at `path` in the index (its content stored as a blob)."""
        full = self.full(path)
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            data, mode = os.readlink(full).encode(), MODE_LINK
        else:
            with open(full, "rb") as handle:
                data = handle.read()
            old = self.index[path] if path in self.index else None
            mode = old.mode if isinstance(old, IndexEntry) and old.mode in (MODE_FILE, MODE_EXEC) else MODE_FILE
        sha = self.store_blob(data)
        self.index[path] = IndexEntry(ctime=(int(st.st_ctime), 0), mtime=(int(st.st_mtime), 0), dev=0, ino=0,
                                      mode=mode, uid=0, gid=0, size=st.st_size & 0xFFFFFFFF, sha=ObjectID(sha))

    def set_mode(self, path: bytes, mode: int) -> None:
        entry = self.index[path]
        if isinstance(entry, IndexEntry):
            entry.mode = mode

    def set_entry(self, path: bytes, mode: int, sha: bytes) -> None:
        self.index[path] = IndexEntry(ctime=(0, 0), mtime=(0, 0), dev=0, ino=0, mode=mode, uid=0, gid=0,
                                      size=0, sha=ObjectID(sha))

    # -- the working tree ---------------------------------------------------------------------------
    def full(self, path: bytes) -> str:
        return os.path.join(self.top, os.fsdecode(path))

    def work_state(self, path: bytes, index_entry: tuple[int, bytes] | None = None) -> tuple[int, bytes] | None:
        """(mode, blob sha) of the working tree's file, or None when it is not there."""
        full = self.full(path)
        try:
            st = os.lstat(full)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return MODE_LINK, blob_id(os.readlink(full).encode())
        if not stat.S_ISREG(st.st_mode):
            return None
        try:
            with open(full, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        mode = index_entry[0] if index_entry and index_entry[0] in (MODE_FILE, MODE_EXEC) else MODE_FILE
        return mode, blob_id(data)

    def read_work(self, path: bytes) -> bytes:
        full = self.full(path)
        if os.path.islink(full):
            return os.readlink(full).encode()
        with open(full, "rb") as handle:
            return handle.read()

    def ignored(self, path: str, is_dir: bool = False) -> bool:
        if self._ignore is None:
            from dulwich.ignore import IgnoreFilterManager
            self._ignore = IgnoreFilterManager.from_repo(self.repo)
        return bool(self._ignore.is_ignored(path + ("/" if is_dir else "")))

    def walk(self, tracked: set[bytes]) -> tuple[list[bytes], list[bytes]]:
        """(untracked files, ignored files and folders) of the working tree, git's order."""
        untracked: list[bytes] = []
        ignored: list[bytes] = []
        stack = [""]
        while stack:
            rel = stack.pop()
            try:
                names = sorted(os.listdir(os.path.join(self.top, rel)))
            except OSError:
                continue
            for name in names:
                if not rel and name == ".git":
                    continue
                path = rel + name
                full = os.path.join(self.top, path)
                is_dir = os.path.isdir(full) and not os.path.islink(full)
                raw = os.fsencode(path)
                if is_dir:
                    if os.path.exists(os.path.join(full, ".git")):
                        if raw not in tracked:
                            untracked.append(raw + b"/")
                        continue
                    if self.ignored(path, True) and not any(t.startswith(raw + b"/") for t in tracked):
                        ignored.append(raw + b"/")
                        continue
                    stack.append(path + "/")
                elif raw not in tracked:
                    (ignored if self.ignored(path) else untracked).append(raw)
        return sorted(untracked), sorted(ignored)
