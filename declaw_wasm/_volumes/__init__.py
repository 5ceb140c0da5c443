"""Volumes' machinery below the local backend: the volume store, archives, trees, attaching.

The volume store over the state store, archives (hostile input), trees, and attaching a
volume to a sandbox's file tree. The public API (declaw's
`Volumes`, `VolumeFiles`, `VolumeLocks`, `AsyncVolumes`) is `declaw_wasm/volumes/`."""
