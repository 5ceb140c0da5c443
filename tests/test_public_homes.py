"""Public names live in public modules: `Secret`, `Vault` and declaw's vault models
(declaw_wasm.secrets) and `AuditEvent` (declaw_wasm.security.audit) are defined where a user may
import them from, and every older import path (the egress relay's private modules) still gives the
same object. Their repr, pickling and the process pool's codec name them by that home. Pure."""

from __future__ import annotations

import importlib
import pickle
from datetime import datetime, timezone

import pytest

import declaw_wasm
from declaw_wasm import AuditEvent, Secret, Vault, VaultEvent, VaultPreset, VaultScope, VaultSecret
from declaw_wasm._pool import codec

NAMES = {"Secret": Secret, "Vault": Vault, "VaultEvent": VaultEvent, "VaultPreset": VaultPreset,
         "VaultScope": VaultScope, "VaultSecret": VaultSecret, "AuditEvent": AuditEvent}
OLD_PATHS = {  # where they used to be defined: still importable, the same objects
    "declaw_wasm._egress": list(NAMES),
    "declaw_wasm._egress.secrets": ["Secret"],
    "declaw_wasm._egress.vault": ["Vault", "VaultEvent", "VaultPreset", "VaultScope", "VaultSecret"],
    "declaw_wasm._egress.audit": ["AuditEvent"],
    "declaw_wasm.vault": ["Vault", "VaultEvent", "VaultPreset", "VaultScope", "VaultSecret"],
}


@pytest.mark.parametrize("name", list(NAMES))
def test_each_public_name_is_defined_in_a_public_module(name: str) -> None:
    obj = NAMES[name]
    module = obj.__module__
    assert not any(part.startswith("_") for part in module.split(".")), module
    assert getattr(importlib.import_module(module), name) is obj
    assert getattr(declaw_wasm, name) is obj
    assert name in declaw_wasm.__all__


@pytest.mark.parametrize("module, names", list(OLD_PATHS.items()))
def test_every_older_import_path_gives_the_same_object(module: str, names: list[str]) -> None:
    for name in names:
        assert getattr(importlib.import_module(module), name) is NAMES[name], (module, name)


def test_models_pickle_by_their_public_home() -> None:
    scope = VaultScope(domain_regex="api.example.com", injection_type="bearer")
    now = datetime.now(timezone.utc)
    for obj in (scope, AuditEvent(timestamp=now, url="https://x.example/"),
                VaultEvent(timestamp=now, action="create", secret_id="s", name="n"),
                VaultSecret(secret_id="s", name="n", scopes=[scope], created_at=now, updated_at=now),
                VaultPreset(key="k", name="n", category="c", key_hint="h", docs_url="d", scopes=[scope])):
        data = pickle.dumps(obj)
        assert type(obj).__module__.encode() in data and b"_egress" not in data
        assert pickle.loads(data) == obj


def test_a_secret_keeps_its_value_out_of_repr_and_pickles() -> None:
    secret = Secret("sk-very-secret", hosts=["api.example.com"])
    assert "sk-very-secret" not in repr(secret)
    assert repr(secret) == "Secret('***', hosts=['api.example.com'])"
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(secret)


def test_the_pool_codec_carries_audit_events_from_their_public_home() -> None:
    assert codec.MODELS["AuditEvent"] is AuditEvent
    event = AuditEvent(timestamp=datetime.now(timezone.utc), url="https://x.example/", kind="dns")
    assert codec.unpack(codec.pack(event)) == event
