"""The host-side media codecs (declaw_wasm/_media/)."""
