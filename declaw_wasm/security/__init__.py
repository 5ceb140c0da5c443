"""declaw's security API (config models, wire format) and the host-side guard engine."""
