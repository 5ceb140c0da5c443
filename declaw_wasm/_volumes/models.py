"""declaw 1.7.0's volume models, with its field names, order and defaults (pydantic dataclasses:
positional construction as in declaw, `VolumeAttachment(vid, "/corpus", mode="copy")`, plus
validation), and the per-volume quotas."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Dict, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field
from pydantic.dataclasses import dataclass

from ..settings import volume_max_bytes, volume_max_files, volume_max_upload

Mode = Literal["", "copy", "mount", "mount-ro"]
MODES = ("copy", "mount", "mount-ro")


@dataclass
class VolumeAttachment:
    """A volume attached to a sandbox: `Sandbox.create(volumes=[...])`.

    `mode`: "copy" (the default: a private copy made at boot), "mount" (a live folder shared by
    the sandboxes of this process that attach it, written back to the store), "mount-ro" (the
    same, read-only to the guest). `subpath`: a folder inside the volume, live mounts only.
    """

    volume_id: str
    mount_path: str
    mode: Optional[Mode] = None
    subpath: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"volume_id": self.volume_id, "mount_path": self.mount_path}
        if self.mode and self.mode != "copy":
            out["mode"] = self.mode
        if self.subpath:
            out["subpath"] = self.subpath
        return out

    @property
    def effective_mode(self) -> str:
        return self.mode or "copy"


@dataclass
class Volume:
    """A volume's metadata (declaw's fields; `blob_key` is the volume's folder in the state
    store, `backend` is "files": every volume here is file-granular)."""

    volume_id: str
    owner_id: str
    name: str
    blob_key: str
    size_bytes: int
    content_type: str
    created_at: str
    metadata: Dict[str, str] = field(default_factory=dict)
    backend: str = ""
    quota_bytes: int = 0
    updated_at: str = ""

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Volume":
        return cls(volume_id=data["volume_id"], owner_id=data.get("owner_id", ""),
                   name=data.get("name", ""), blob_key=data.get("blob_key", ""),
                   size_bytes=int(data.get("size_bytes", 0)),
                   content_type=data.get("content_type", ""), created_at=data.get("created_at", ""),
                   metadata=data.get("metadata") or {}, backend=data.get("backend", ""),
                   quota_bytes=int(data.get("quota_bytes", 0)), updated_at=data.get("updated_at", ""))

    def to_dict(self) -> Dict[str, Any]:
        return {"volume_id": self.volume_id, "owner_id": self.owner_id, "name": self.name,
                "blob_key": self.blob_key, "size_bytes": self.size_bytes,
                "content_type": self.content_type, "created_at": self.created_at,
                "metadata": dict(self.metadata), "backend": self.backend,
                "quota_bytes": self.quota_bytes, "updated_at": self.updated_at}

    def attach(self, mount_path: str, *, mode: Optional[Mode] = None,
               subpath: Optional[str] = None) -> VolumeAttachment:
        """`vol.attach("/data")` -> `VolumeAttachment(vol.volume_id, "/data", ...)`."""
        return VolumeAttachment(volume_id=self.volume_id, mount_path=mount_path, mode=mode, subpath=subpath)


@dataclass
class FileEntry:
    """An entry of `VolumeFiles.list`/`info`; `version` (from `info`) is the CAS token for
    `write(if_version=...)`."""

    name: str
    path: str
    is_dir: bool
    size: int
    mod_time: str
    mode: int
    version: str = ""

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "FileEntry":
        return cls(name=data.get("name", ""), path=data.get("path", ""),
                   is_dir=bool(data.get("is_dir", False)), size=int(data.get("size", 0)),
                   mod_time=data.get("mod_time", ""), mode=int(data.get("mode", 0)),
                   version=data.get("version", ""))


class VolumeLimits(BaseModel):
    """Quotas given to each new volume (recorded in it), and the upload bound. Set by
    `DECLAW_WASM_VOLUME_MAX_BYTES`, `..._MAX_FILES`, `..._MAX_UPLOAD`."""

    model_config = ConfigDict(frozen=True)

    max_bytes: int = Field(1 << 30, gt=0, description="bytes of file content per volume (quota_bytes)")
    max_files: int = Field(100_000, gt=0, description="files and folders per volume")
    max_upload_bytes: int = Field(500 << 20, gt=0, description="raw archive bytes per create/ingest")

    @classmethod
    def from_env(cls) -> "VolumeLimits":
        return cls(max_bytes=volume_max_bytes(), max_files=volume_max_files(),
                   max_upload_bytes=volume_max_upload())
