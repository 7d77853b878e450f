#!/usr/bin/env python3
"""The GPU hook on a real forward, and the inputs it saw: transformers prefills N seeded token ids
(chunked, as the prefill engine does) with the torch capture hook attached on the device, while a
second pre-hook records each layer's attention input. Writes, under --out:
  gpu/<request-id>/            the torch hook's capture (layer files, manifest)
  attn-inputs.safetensors      oneshot.layers.{i}.attn_input [T, hidden], in the model's dtype
  tokens.json                  the ids
so hook-distance.ts can run the TypeScript hook on the very same inputs and compare
(docs/torch-rung.md). Prints one JSON line.

  python3 protocols/cuda-rung/hook_inputs.py --model DIR --sidecar DIR --out DIR --tokens N
      [--seed S] [--device cuda] [--dtype bf16|f32] [--max-chunk 4096] [--cache-math decoder|mlx-cpu]

The hook computes with the sidecar's cache math; --cache-math makes a sidecar of another one an
error before the model loads (hook-mlx:T passes mlx-cpu with an mlx-cpu sidecar)."""
import argparse
import json
import os
import random
import sys
import time

sys.dont_write_bytecode = True
ENGINES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'src', 'engines', 'torch')
sys.path.insert(0, ENGINES)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from pd_torch_hook import CaptureSession, attach, load_sidecar  # noqa: E402
from pd_torch_hook import st_format  # noqa: E402
from serve_prefill import load_model  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--model', required=True)
    p.add_argument('--sidecar', required=True)
    p.add_argument('--out', required=True)
    p.add_argument('--tokens', type=int, required=True)
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--device', default='cuda')
    p.add_argument('--dtype', default='bf16', choices=['bf16', 'f32'])
    p.add_argument('--max-chunk', type=int, default=4096)
    p.add_argument('--cache-math', choices=['decoder', 'mlx-cpu'], help="the cache math the sidecar must have (default: the sidecar's)")
    a = p.parse_args()
    os.makedirs(os.path.join(a.out, 'gpu'), exist_ok=True)
    sidecar = load_sidecar(a.sidecar)
    if a.cache_math is not None and a.cache_math != sidecar.cache_math:
        raise SystemExit(f'{a.sidecar}: the sidecar was exported for the {sidecar.cache_math} cache math, --cache-math says {a.cache_math}')
    model, _ = load_model(a.model, a.dtype, a.device)
    cfg = model.config
    rng = random.Random(a.seed)
    # Ordinary ids (the first 16 hold the specials), as the benchmark documents would be.
    ids = [rng.randrange(16, cfg.vocab_size) for _ in range(a.tokens)]
    rid = f'hook-{a.tokens}-seed{a.seed}'
    session = CaptureSession.start(sidecar, os.path.join(a.out, 'gpu'), rid, len(ids), tokens=ids, device=a.device, cache_math=a.cache_math)
    recorded = [[] for _ in model.model.layers]

    def recorder(i):
        def hook(_m, args, kwargs=None):
            x = args[0] if args else (kwargs or {}).get('hidden_states')
            recorded[i].append(x[0].detach().to('cpu'))
        return hook
    handles = [layer.self_attn.register_forward_pre_hook(recorder(i), with_kwargs=True) for i, layer in enumerate(model.model.layers)]
    hooks = attach(model, session)
    x = torch.tensor([ids], device=a.device)
    t0 = time.perf_counter()
    cache = None
    with torch.inference_mode():
        for c0 in range(0, len(ids), a.max_chunk):
            cache = model.model(input_ids=x[:, c0:c0 + a.max_chunk], past_key_values=cache, use_cache=True).past_key_values
    if a.device.startswith('cuda'):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    hooks.remove()
    for h in handles:
        h.remove()
    manifest = session.finish({'prefill': seconds * 1000})
    tensors = {}
    for i, parts in enumerate(recorded):
        full = torch.cat(parts, 0)
        if full.dtype == torch.bfloat16:
            tensors[f'oneshot.layers.{i}.attn_input'] = ('BF16', tuple(full.shape), full.view(torch.int16).numpy().astype('<i2').tobytes())
        else:
            tensors[f'oneshot.layers.{i}.attn_input'] = ('F32', tuple(full.shape), full.float().numpy().astype('<f4').tobytes())
    with open(os.path.join(a.out, 'attn-inputs.safetensors'), 'wb') as f:
        f.write(st_format.encode(tensors, {'model_dtype': a.dtype, 'device': a.device}))
    with open(os.path.join(a.out, 'tokens.json'), 'w') as f:
        json.dump(ids, f)
    name = torch.cuda.get_device_name(torch.device(a.device)) if a.device.startswith('cuda') else 'cpu'
    print(json.dumps({'requestId': rid, 'state': manifest['state'], 'sealedLength': manifest['sealedLength'], 'tokens': len(ids),
                      'prefillWithHookSeconds': seconds, 'device': name, 'torch': torch.__version__, 'dtype': a.dtype,
                      'cacheMath': sidecar.cache_math}), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
