#!/usr/bin/python3
"""What the torch capture hook's block segments cost the engine's own thread (docs/torch-rung.md,
*The engine's clock with the streamed write*). A child per leg replays seeded attention inputs
through a CaptureSession, chunk by chunk and layer by layer as a forward does, and times the calls
the engine thread makes (the hook, the flush between chunks, the seal); legs alternate between the
sides and modes given, so drift on a shared machine lands on every side alike.

  /usr/bin/python3 protocols/bench-segment-publish.py --sidecar DIR --tokens 4096 --chunk 1024 --rounds 5 \
      --side before=/tmp/before/src/engines/torch --side after=src/engines/torch \
      --modes hook,flush,none --out results/bench/NAME.json

A side is a directory holding pd_torch_hook (a tree of another commit works: git archive). Modes:
hook publishes as the session does; flush lets segments out only in flush() between chunks (the
session before 8cd5c70; run for the first side only); none is the write-after path (no segments). Every leg's capture directory
is removed after it is measured; the record keeps each leg's times and the sealed manifest's own
timings (hook, segmentWrite, layerWrite)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True


def child(a) -> None:
    sys.path.insert(0, a.side_dir)
    import torch
    from pd_torch_hook import CaptureSession, load_sidecar

    sidecar = load_sidecar(a.sidecar)
    g = torch.Generator().manual_seed(a.seed)
    session = CaptureSession.start(sidecar, a.root, 'bench', a.tokens, device='cpu', matmul=a.matmul, segments=a.mode != 'none')
    hidden = session.kv.hidden
    # bf16-exact rows, as a bf16 engine hands them over
    inputs = [torch.randn(a.tokens, hidden, generator=g).to(torch.bfloat16).to(torch.float32) for _ in range(sidecar.num_layers)]
    pub = session.segments
    if a.mode == 'flush':
        inline = pub.publish_ready
        gate = {'open': False}
        pub.publish_ready = lambda limit: inline(limit) if gate['open'] else 0
        plain_flush = session.flush

        def flush():
            gate['open'] = True
            try:
                plain_flush()
            finally:
                gate['open'] = False
        session.flush = flush
    hook_s = flush_s = 0.0
    t0 = time.perf_counter()
    for start in range(0, a.tokens, a.chunk):
        t = time.perf_counter()
        for layer, x in enumerate(inputs):
            session.on_attention_input(layer, start, x[start:start + a.chunk])
        t1 = time.perf_counter()
        session.flush()
        hook_s += t1 - t
        flush_s += time.perf_counter() - t1
    t = time.perf_counter()
    m = session.finish()
    end = time.perf_counter()
    segments = sorted(f for f in os.listdir(os.path.join(a.root, 'bench')) if f.startswith('segment-'))
    print(json.dumps({'engineMs': (end - t0) * 1000, 'hookCallsMs': hook_s * 1000, 'flushMs': flush_s * 1000,
                      'finishMs': (end - t) * 1000, 'state': m['state'], 'segments': len(segments),
                      'own': m.get('timings', {})}))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--sidecar', required=True)
    p.add_argument('--tokens', type=int, default=4096)
    p.add_argument('--chunk', type=int, default=1024)
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--side', action='append', default=[], help='NAME=DIR holding pd_torch_hook')
    p.add_argument('--modes', default='hook,flush,none')
    p.add_argument('--out')
    p.add_argument('--matmul', default='exact', choices=['exact', 'blas'], help="the kv path's matmul (blas: faster, another order; the costs measured are the segments')")
    p.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
    p.add_argument('--side-dir', help=argparse.SUPPRESS)
    p.add_argument('--mode', help=argparse.SUPPRESS)
    p.add_argument('--root', help=argparse.SUPPRESS)
    p.add_argument('--seed', type=int, default=1, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a)
        return 0
    sides = [s.split('=', 1) for s in a.side]
    if not sides or any(len(s) != 2 or not os.path.isdir(os.path.join(s[1], 'pd_torch_hook')) for s in sides):
        p.error('--side NAME=DIR, DIR holding pd_torch_hook, at least once')
    modes = a.modes.split(',')
    if any(m not in ('hook', 'flush', 'none') for m in modes):
        p.error(f'--modes: hook, flush or none, got {a.modes}')
    legs = [(name, d, mode) for name, d in sides for mode in modes if not (mode == 'flush' and name != sides[0][0])]
    runs = []
    for r in range(a.rounds):
        order = legs[r % len(legs):] + legs[:r % len(legs)]  # rotated per round
        for name, d, mode in order:
            root = tempfile.mkdtemp(prefix='pd-segbench-')
            try:
                out = subprocess.run([sys.executable, os.path.abspath(__file__), '--child', '--sidecar', a.sidecar, '--tokens', str(a.tokens),
                                      '--chunk', str(a.chunk), '--side-dir', os.path.abspath(d), '--mode', mode, '--root', root, '--seed', str(r + 1), '--matmul', a.matmul],
                                     capture_output=True, text=True)
                if out.returncode != 0:
                    raise SystemExit(f'leg {name}/{mode} failed:\n{out.stderr}')
            finally:
                shutil.rmtree(root, ignore_errors=True)
            leg = {'round': r, 'side': name, 'mode': mode, **json.loads(out.stdout.strip().splitlines()[-1])}
            runs.append(leg)
            print(json.dumps(leg), flush=True)
    summary = {}
    for name, _, mode in legs:
        xs = sorted(x['engineMs'] for x in runs if x['side'] == name and x['mode'] == mode)
        summary[f'{name}/{mode}'] = {'engineMsMin': xs[0], 'engineMsMedian': xs[len(xs) // 2], 'engineMsMax': xs[-1]}
    record = {'schema': 'pd-bridge/segment-publish-bench@1', 'tokens': a.tokens, 'chunk': a.chunk, 'sides': [s[0] for s in sides],
              'modes': modes, 'rounds': a.rounds, 'loadavg': os.getloadavg(), 'summary': summary, 'runs': runs}
    print(json.dumps(summary, indent=2))
    if a.out:
        os.makedirs(os.path.dirname(a.out) or '.', exist_ok=True)
        with open(a.out, 'w') as f:
            f.write(json.dumps(record, indent=2) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
