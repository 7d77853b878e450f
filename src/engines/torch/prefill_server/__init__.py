"""A prefill engine around transformers with the embedded engine's HTTP API (docs/prefill-engine.md):
submit, status, health, models, the same 4xx refusals, a FIFO queue, chunked prefill into a fresh
cache per request (prefix caching off), the torch capture hook attached, a crash-safe capture root.
Needs aiohttp and transformers (the CUDA machine has both); untested where they are absent."""
