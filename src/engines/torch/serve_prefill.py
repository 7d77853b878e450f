#!/usr/bin/env python3
"""A transformers prefill engine with pd-bridge's prefill API and the torch capture hook.

  python3 src/engines/torch/serve_prefill.py --model DIR --sidecar DIR --capture-root DIR
      [--host 127.0.0.1] [--port 0] [--device cuda] [--dtype bf16|f32] [--max-queue 16]
      [--max-tokens N] [--memory-budget BYTES] [--max-chunk 4096] [--max-body-bytes N]

Prints one JSON ready line on stdout, logs JSON lines on stderr. Needs torch, transformers and
aiohttp (the CUDA machine); see docs/torch-rung.md."""
import argparse
import asyncio
import json
import os
import signal
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from aiohttp import web  # noqa: E402

from pd_torch_hook import load_sidecar  # noqa: E402
from prefill_server.app import Engine, make_app  # noqa: E402
from prefill_server.root_lock import recover, release_lock, take_lock  # noqa: E402


def load_model(path: str, dtype: str, device: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    # Loading straight into bf16 left a module in fp32 (research/real-engines.md): load fp32, then cast.
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if dtype == 'bf16':
        model = model.to(torch.bfloat16)
    model = model.to(device).eval()
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError):
        tokenizer = None
    return model, tokenizer


def device_name(device: str) -> str:
    if device.startswith('cuda') and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return ''


def check_agreement(model, sidecar) -> None:
    """The sidecar must describe this model's geometry (the rope tables' own check is not ported yet)."""
    cfg, js = model.config, sidecar.json
    pairs = [('layers', cfg.num_hidden_layers, len(js['layers'])), ('hiddenSize', cfg.hidden_size, js['hiddenSize']),
             ('slidingWindow', cfg.sliding_window, js['slidingWindow']),
             ('maxPositionEmbeddings', cfg.max_position_embeddings, js['maxPositionEmbeddings'])]
    for field, ours, theirs in pairs:
        if ours != theirs:
            raise SystemExit(f'{sidecar.dir}/sidecar.json: {field} is {theirs} in the sidecar but {ours} in the model')
    types = getattr(cfg, 'layer_types', None)
    if types is not None and list(types) != [l['layerType'] for l in js['layers']]:
        raise SystemExit(f'{sidecar.dir}/sidecar.json: layer types {[l["layerType"] for l in js["layers"]]} differ from the model\'s {list(types)}')


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--model', required=True)
    p.add_argument('--sidecar', required=True)
    p.add_argument('--capture-root', required=True)
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--port', type=int, default=0)
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--dtype', default='bf16', choices=['bf16', 'f32'])
    p.add_argument('--max-queue', type=int, default=16)
    p.add_argument('--max-tokens', type=int)
    p.add_argument('--memory-budget', type=int)
    p.add_argument('--max-chunk', type=int, default=4096, help='tokens per forward (one-shot 16K ran out of memory at V4-Flash geometry)')
    p.add_argument('--max-body-bytes', type=int)
    a = p.parse_args()
    lock = take_lock(a.capture_root)
    try:
        recovered = recover(a.capture_root)
        sidecar = load_sidecar(a.sidecar)
        model, tokenizer = load_model(a.model, a.dtype, a.device)
        check_agreement(model, sidecar)
        a.max_tokens = a.max_tokens or model.config.max_position_embeddings
        if a.max_tokens > model.config.max_position_embeddings:
            raise SystemExit(f'--max-tokens {a.max_tokens} exceeds the model\'s max_position_embeddings {model.config.max_position_embeddings}')
        a.max_body_bytes = a.max_body_bytes or (1 << 20) + 16 * a.max_tokens
        a.model_name = os.path.basename(os.path.normpath(a.model))
        asyncio.run(serve(a, model, tokenizer, sidecar, recovered))
    finally:
        release_lock(lock)
    return 0


async def serve(a, model, tokenizer, sidecar, recovered) -> None:
    engine = Engine(model, tokenizer, sidecar, a.capture_root, a)
    runner = web.AppRunner(make_app(engine), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, a.host, a.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(json.dumps({'event': 'ready', 'url': f'http://{a.host}:{port}', 'pid': os.getpid(), 'model': a.model_name,
                      'profile': 'transformers', 'sidecar_fingerprint': sidecar.fingerprint, 'max_tokens': a.max_tokens,
                      'recovered_failed': recovered, 'device_name': device_name(a.device)}), flush=True)
    done = asyncio.Event()

    def stop(signame: str) -> None:
        if engine.stopping:
            os._exit(1)  # a second signal: exit at once; the next start seals the running capture
        engine.stopping = True
        for job in list(engine.queue):
            job.state, job.error = 'failed', f'engine shut down ({signame}) before this request ran'
        engine.queue.clear()
        engine.wake.set()
        done.set()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(s, stop, s.name)
    worker = asyncio.create_task(engine.worker())
    await done.wait()
    await worker  # the running prefill stops at its next chunk boundary and seals failed
    await runner.cleanup()
    print(json.dumps({'event': 'stopped'}), file=sys.stderr, flush=True)


if __name__ == '__main__':
    sys.exit(main())
