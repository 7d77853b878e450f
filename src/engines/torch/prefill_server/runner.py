"""One request: a fresh cache (prefix caching off: every request from position 0), the torch capture
hook attached, chunked prefill through the base model (no logits are wanted), finish or fail. Each
chunk runs in a worker thread so status polls are answered between chunks; a shutdown abandons the
prefill at the next chunk boundary and seals the capture failed. With `stream_blocks`, the hook
hands each block segment to the session's writer thread as every layer passes its boundary (and
after every chunk any still due), so the front door writes those blocks while the engine runs."""
import asyncio
import time

import torch

from pd_torch_hook import CaptureSession, attach


class Job:
    def __init__(self, request_id: str, tokens, budget, tokens_sha256: str, stream_blocks: bool = False):
        self.id, self.tokens, self.budget, self.tokens_sha256 = request_id, tokens, budget, tokens_sha256
        self.stream_blocks = stream_blocks
        self.state = 'queued'
        self.error = None
        self.prefilled = 0
        self.session = None  # only while running: its rows_seen moves once per layer inside a chunk
        self.hook_rows = 0
        self.sealed_length = 0
        self.submitted = time.perf_counter()
        self.timings = {}
        # Wall-clock stamps of the clock's start and stop (epoch ms) for the sealed manifest: the front
        # door, on the same host, places the engine's clock in its own stage (engine_start, seal_seen).
        self.stamps = {}


async def run_job(job: Job, model, sidecar, root: str, max_chunk: int, device, stopping) -> None:
    t0 = time.perf_counter()
    job.stamps['prefillStartAt'] = time.time() * 1000
    job.timings['queue'] = (t0 - job.submitted) * 1000
    job.state = 'running'
    session = None
    try:
        session = CaptureSession.start(sidecar, root, job.id, len(job.tokens), tokens=job.tokens,
                                       memory_budget_bytes=job.budget, device=device, segments=job.stream_blocks)
        job.session = session
        ids = torch.tensor([job.tokens], device=device)
        hooks = attach(model, session)
        cache = None
        try:
            for c0 in range(0, len(job.tokens), max_chunk):
                if stopping():
                    raise RuntimeError(f'engine shut down after {job.prefilled} of {len(job.tokens)} tokens')
                if session.layers_written == sidecar.num_layers:
                    break  # a budget sealed a prefix every layer reached: the rest would feed nothing
                chunk = ids[:, c0:c0 + max_chunk]

                def step(chunk=chunk, cache=cache):
                    with torch.inference_mode():
                        return model.model(input_ids=chunk, past_key_values=cache, use_cache=True).past_key_values
                cache = await asyncio.to_thread(step)
                job.prefilled = c0 + chunk.shape[1]
                if job.stream_blocks:
                    await asyncio.to_thread(session.flush)
        finally:
            hooks.remove()
        t1 = time.perf_counter()
        job.stamps['prefillEndAt'] = time.time() * 1000
        job.timings['prefill'] = (t1 - t0) * 1000
        m = session.finish({'queue': job.timings['queue'], 'prefill': job.timings['prefill'], **job.stamps})
        job.timings['finish'] = (time.perf_counter() - t1) * 1000
        job.state, job.sealed_length = m['state'], m['sealedLength']
    except BaseException as e:  # noqa: B902 - every failure seals the capture failed
        job.state, job.error = 'failed', str(e) or type(e).__name__
        if session is not None:
            session.fail(e)
    finally:
        if session is not None:
            job.hook_rows, job.session = session.rows_seen, None  # a finished job keeps the count, not the session
        job.timings['total'] = (time.perf_counter() - job.submitted) * 1000
        if device != 'cpu' and torch.cuda.is_available():
            torch.cuda.empty_cache()
