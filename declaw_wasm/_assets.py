"""Where the package's data folders are: in an installed wheel, or beside the package in a checkout.

An installed wheel has them mapped into the package by pyproject.toml; a source checkout or
editable install has them beside the package."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _asset(installed_name: str, checkout_name: str) -> Path:
    # A wheel maps the design card's top-level folders into the package (pyproject.toml);
    # a source checkout or editable install has them beside the package.
    installed = _PACKAGE / installed_name
    return installed if installed.is_dir() else _PACKAGE.parent / checkout_name


def guest_code_dir() -> Path:
    """guest/: the guest code, the Python the guest runs (start-up, shell, kernel), mounted
    read-only at /usr/local/lib/declaw; installed as declaw_wasm/guest/."""
    return _asset("guest", "guest")


def rootfs_dir() -> Path:
    """wasi-fs/: the skeleton of every sandbox's root folder (/etc and friends)."""
    return _asset("rootfs", "wasi-fs")


def bundle_source_dir() -> Path:
    """packages-bundle/: the bundle's requirements, lock and E2B comparison list."""
    return _asset("packages_bundle", "packages-bundle")


def examples_dir() -> Path:
    return _asset("examples", "examples")
