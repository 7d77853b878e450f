"""pd-bridge's torch capture hook: the decoder's caches computed from a torch model's attention
inputs with the sidecar's weights and the sidecar's cache math (the decoder profile's arithmetic,
or with `--cache-math mlx-cpu` sidecars MLX 0.32.2's CPU arithmetic: mlx_kv_path.py), written as our
capture layer files and manifest (the TypeScript hook's format, byte for byte). Needs only torch and numpy.

    sidecar = load_sidecar(dir)
    session = CaptureSession.start(sidecar, capture_root, request_id, token_count, tokens=ids,
                                   memory_budget_bytes=None, device='cuda')
    hooks = attach(model, session)        # forward pre-hooks on model.model.layers[i].self_attn
    model(ids[:, :4096]); ...             # any chunking; layers land as they reach T'
    hooks.remove(); session.finish()
"""
from .sidecar import Sidecar, load_sidecar
from .session import CaptureSession, CaptureError
from .attach import attach

__all__ = ['Sidecar', 'load_sidecar', 'CaptureSession', 'CaptureError', 'attach']
