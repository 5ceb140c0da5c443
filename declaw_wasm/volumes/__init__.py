"""declaw's volumes: named file trees kept in the state store and attached to sandboxes.

As in declaw's `declaw/volumes/`: kept in the state store (`DECLAW_WASM_STATE`), attached to
sandboxes with `Sandbox.create(volumes=[...])`. See docs/volumes.md."""

from .async_main import AsyncVolumeFiles, AsyncVolumeLocks, AsyncVolumes
from .._volumes.attach import sync_volume
from .main import (
           GuestTreeSource,
           VolumeFiles,
           VolumeLocks,
           Volumes,
           set_guest_tree_source,
)
from .._volumes.models import FileEntry, Volume, VolumeAttachment, VolumeLimits

__all__ = ["AsyncVolumeFiles", "AsyncVolumeLocks", "AsyncVolumes", "FileEntry", "GuestTreeSource",
           "Volume", "VolumeAttachment", "VolumeFiles", "VolumeLimits", "VolumeLocks", "Volumes",
           "set_guest_tree_source", "sync_volume"]
