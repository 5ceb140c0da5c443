"""The in-process backend: sandboxes in this process.

A confined host folder each, commands and code contexts as guests, the door ops guests may
ask for, the disk-quota watcher."""
