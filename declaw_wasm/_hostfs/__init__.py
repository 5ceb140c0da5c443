"""Host folders that guests write, worked on by file descriptor: the one home for it.

A sandbox's writable folders, a live `mount` volume's folder and a tree read back from the state
store are written by guests (or by whoever can write the store), which can leave symlinks
(absolute ones, or ones climbing out) where folders were, swap a folder for a link while the
host works, and nest folders past PATH_MAX. So nothing here follows a link or names a host path
below a folder we own; every walk goes from a folder fd down with `O_NOFOLLOW`, iteratively.

- `walk`: walks by descriptor (`Walk`, `walk_entries`), removal (`remove_tree`), what a tree
  counts toward a disk quota (`counted_bytes`, `usage`), a volume folder's `scan`;
- `beneath`: opening, making, writing and removing below a folder (`open_dir`, `create_file`);
- `copies`: copying a file or one of our own folders in (reflink, `copy_file_range`);
- `exports`: the budget every export keeps to (`ExportBudget`, `Exactly`);
- `tarstream`: tar streams written and read one member at a time (`TarWriter`, `members`);
- `trees`: a sandbox's folders as a tar stream and back, or copied (snapshots, forks).

Used by the local backend (`_local`: files, quota, snapshots, checkpoints, watches), volumes
(`_volumes`, `volumes`) and pip's install quota (`_packages`); it imports nothing of theirs.
The constants every part shares are here.
"""

from __future__ import annotations

import os

# How every folder below one we own is opened: a folder, never through a link.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# The longest path a guest (WASI) or a host call by path can name, in bytes: a sandbox's tree can
# hold longer ones (folders renamed into folders), which no path-taking call reaches.
PATH_MAX = 4096
# A file's metadata (E2B's `metadata=`): one extended attribute on the host file, JSON. It follows
# the inode (a guest's `mv` keeps it), and a guest cannot see or change it (WASI has no xattrs).
META_XATTR = "user.declaw-wasm.metadata"
