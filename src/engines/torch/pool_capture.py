#!/usr/bin/python3
"""Run the torch capture hook alone on recorded attention inputs and write a capture directory, as
the TypeScript CaptureSession would (the parity suite's child process, suites/torch-hook/).

  /usr/bin/python3 src/engines/torch/pool_capture.py --sidecar DIR --attn-inputs FILE \
      --capture-root DIR --request-id ID [--tokens FILE.json] [--chunks 128 | 100,37,... | whole]
      [--budget BYTES] [--device cpu|cuda] [--matmul exact|blas] [--via-attach]
      [--segments [--step] [--fail-after N]] [--cache-math decoder|mlx-cpu] [--mutate-rounding GROUP.POINT=bf16|f32]

--attn-inputs holds `oneshot.layers.{i}.attn_input` [T, hidden] (F32 or BF16), the file
`pd-bridge pool` reads. Chunks are replayed in a forward's order: each chunk through layers
0..L-1. Prints one JSON line: state, sealedLength, peakHeldBytes, seconds (and segments).

With --segments the session publishes block segments as every layer passes a boundary, as serve_prefill.py does
(`stream_blocks`). --step then prints {"chunk": i, "fed": tokens, "segments": n, "fromHook": h} after
each chunk, once the writer has listed them (h: how many the hook had handed to the writer before the chunk's flush) and
waits for a line on stdin before the next, so a reader can write blocks between chunks; --fail-after N
seals the capture failed after chunk N ("engine died after chunk N"), as an engine dying mid-prefill.

--cache-math names the arithmetic the caller expects (refused when the sidecar says another).
--mutate-rounding is a probe for the parity suite: it changes one rounding point of an mlx-cpu
sidecar in this process only (the sidecar on disk and its fingerprint stay as they are), so the
suite can show that its comparison sees a single rounding point."""
import argparse
import json
import os
import sys
import time

# No __pycache__ inside the source tree (it is not ignored by git).
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from pd_torch_hook import CaptureSession, load_sidecar  # noqa: E402
from pd_torch_hook import st_format  # noqa: E402


def chunk_sizes(spec: str, total: int):
    if spec == 'whole':
        return [total]
    if ',' in spec:
        sizes = [int(s) for s in spec.split(',')]
        if sum(sizes) != total:
            raise SystemExit(f'--chunks {spec}: the sizes add up to {sum(sizes)}, not T = {total}')
        return sizes
    n = int(spec)
    return [min(n, total - s) for s in range(0, total, n)]


class _StandInAttention(torch.nn.Module):
    def forward(self, hidden_states):
        return hidden_states


class _StandInModel(torch.nn.Module):
    """model.model.layers[i].self_attn, as transformers nests them; each layer's attention is
    called with that layer's recorded input, which is what the pre-hook sees in a real forward."""

    def __init__(self, layers: int):
        super().__init__()
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList()
        for _ in range(layers):
            layer = torch.nn.Module()
            layer.self_attn = _StandInAttention()
            self.model.layers.append(layer)


def replay_through_attach(session, inputs, sizes) -> None:
    from pd_torch_hook import attach
    model = _StandInModel(len(inputs))
    hooks = attach(model, session)
    start = 0
    for size in sizes:
        for layer, x in zip(model.model.layers, inputs):
            layer.self_attn(x[None, start:start + size])
        start += size
    hooks.remove()


def mutate_rounding(sidecar, spec: str) -> None:
    where, _, to = spec.partition('=')
    group, _, point = where.partition('.')
    rounding = (sidecar.json.get('cacheMath') or {}).get('rounding')
    if rounding is None or point not in rounding.get(group, {}) or to not in ('bf16', 'f32'):
        raise SystemExit(f'--mutate-rounding {spec}: expected GROUP.POINT=bf16|f32 of an mlx-cpu sidecar\'s rounding points')
    rounding[group][point] = to


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--sidecar', required=True)
    p.add_argument('--attn-inputs', required=True)
    p.add_argument('--capture-root', required=True)
    p.add_argument('--request-id', required=True)
    p.add_argument('--tokens')
    p.add_argument('--chunks', default='whole')
    p.add_argument('--budget', type=int)
    p.add_argument('--device', default='cpu')
    p.add_argument('--matmul', default='exact', choices=['exact', 'blas'],
                   help="exact: the profile's accumulation order (bit-exact); blas: torch.matmul (fast, another order)")
    p.add_argument('--segments', action='store_true', help='publish block segments as every layer passes a block boundary (stream_blocks)')
    p.add_argument('--step', action='store_true', help='after each chunk, print a JSON line and wait for a line on stdin')
    p.add_argument('--fail-after', type=int, help='seal the capture failed after this many chunks')
    p.add_argument('--via-attach', action='store_true',
                   help='feed the rows through attach() on a stand-in model (layers[i].self_attn pre-hooks) instead of calling the session')
    p.add_argument('--cache-math', choices=['decoder', 'mlx-cpu'], help="the cache math expected of the sidecar (default: the sidecar's)")
    p.add_argument('--mutate-rounding', metavar='GROUP.POINT=TO',
                   help='probe: change one of an mlx-cpu sidecar\'s rounding points in this process (e.g. pooling.sum=f32)')
    a = p.parse_args()
    if (a.step or a.fail_after is not None) and not a.segments:
        p.error('--step and --fail-after go with --segments')
    if a.segments and a.via_attach:
        p.error('--segments replays chunk by chunk through the session, not --via-attach')
    sidecar = load_sidecar(a.sidecar)
    if a.mutate_rounding:
        mutate_rounding(sidecar, a.mutate_rounding)
    _, raw = st_format.read(a.attn_inputs)
    inputs = []
    for i in range(sidecar.num_layers):
        x = raw[f'oneshot.layers.{i}.attn_input']
        x = st_format.bf16_codes_to_f32(x) if x.dtype.kind == 'u' else x.astype('float32')
        inputs.append(torch.from_numpy(x.copy()))
    total = inputs[0].shape[0]
    tokens = None
    if a.tokens:
        with open(a.tokens) as f:
            tokens = json.load(f)
    t0 = time.perf_counter()
    session = CaptureSession.start(sidecar, a.capture_root, a.request_id, total, tokens=tokens,
                                   memory_budget_bytes=a.budget, device=a.device, matmul=a.matmul,
                                   cache_math=a.cache_math, segments=a.segments)
    try:
        sizes = chunk_sizes(a.chunks, total)
        if a.via_attach:
            replay_through_attach(session, inputs, sizes)
        else:
            start = 0
            for n, size in enumerate(sizes, 1):
                for layer, x in enumerate(inputs):
                    session.on_attention_input(layer, start, x[start:start + size])
                start += size
                from_hook = session.segments_taken  # handed over by the hook itself, before the chunk's flush
                session.flush()
                if a.step:
                    session.drain_segments()  # the reader looks at what is listed
                    print(json.dumps({'chunk': n, 'fed': start, 'segments': session.segments_published, 'fromHook': from_hook}), flush=True)
                    sys.stdin.readline()
                if n == a.fail_after:
                    session.fail(RuntimeError(f'engine died after chunk {n}'))
                    print(json.dumps({'state': 'failed', 'segments': session.segments_published}))
                    return 1
        m = session.finish()
    except BaseException as e:
        session.fail(e)
        raise
    print(json.dumps({'state': m['state'], 'sealedLength': m['sealedLength'], 'peakHeldBytes': session.peak_held_bytes,
                      'seconds': time.perf_counter() - t0, **({'segments': session.segments_published} if a.segments else {})}))
    return 0


if __name__ == '__main__':
    sys.exit(main())
