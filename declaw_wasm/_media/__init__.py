"""Media codecs the guest lacks, run by the host inside Wasm sandboxes of their own.

The guest's Pillow was built without a JPEG codec; its JPEG work comes to the host, where
`jpeg` decodes and encodes with libjpeg-turbo compiled to WebAssembly (`jpeg.wasm`, built by
tools/jpeg_wasm/build.py). Hostile bytes from guest code are only ever parsed inside that
module: a fresh instance per call, no WASI capability, bounded memory and bounded fuel.
"""
