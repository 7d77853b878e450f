"""A capture session (src/capture/session.ts, ported): the hook a forward calls with each layer's
attention input rows, the layer files it writes and the manifest it keeps. A layer that reaches the
sealed length is written (atomically) and released at once, and listed in the manifest right away;
past the memory budget the session seals a shorter valid prefix (budget.py) and finish() records
`partial`. Any error inside the hook is kept: finish() then seals `failed`, never `done`. Every
layer file carries the layer's boundary snapshots at each multiple of the sidecar's block size.
With `segments`, each block segment is cut (segments.py) the moment every layer has passed its
boundary, from inside the hook of the layer that passed it last, and handed to the publisher's
writer thread, which writes and lists it while the engine goes on; flush() (after every engine
chunk) hands over any still due, and finish() waits for the writer before the seal. So the front
door writes blocks while the engine runs, and the engine's thread does not wait on their writes."""
import hashlib
import os
import time
from typing import List, Optional, Sequence

import torch

from . import manifest as mf
from .budget import held_bytes, seal_point
from .geometry import layer_geometries
from .cache_math import make_kv_path
from .kv_path import LayerState
from .layer_file import encode_layer_file, state_tensors, write_file_atomic
from .segments import SegmentPublisher
from .sidecar import Sidecar


class CaptureError(RuntimeError):
    pass


class CaptureSession:
    def __init__(self, sidecar: Sidecar, directory: str, m: dict, budget: Optional[int], kv, segments: bool = False):
        js = sidecar.json
        self.sidecar = sidecar
        self.dir = directory
        self.request_id = m['requestId']
        self.token_count = m['tokenCount']
        self.budget = budget
        self.kv = kv
        self.block_size = js['blockSize']
        self.bf16 = js['profile']['activations'] == 'bf16'
        self.geometries = layer_geometries(js)
        n = sidecar.num_layers
        self.states: List[Optional[LayerState]] = [kv.empty_state(i) for i in range(n)]
        self.positions = [0] * n
        self.snapshots: List[list] = [[] for _ in range(n)]
        self.written = [False] * n
        self.sealed = self.token_count
        self.frontier = 0
        self.peak = 0
        self.error: Optional[BaseException] = None
        self.closed = False
        self.hook_s = 0.0
        self.write_s = 0.0
        # Rows fed, summed over layers (ignored ones included): the engine's progress within a chunk.
        self.rows_seen = 0
        self._manifest = m
        self.segments = None if not segments else SegmentPublisher(
            directory, self.request_id, self.block_size, sidecar.fingerprint, js['profile']['name'], self.bf16, self.states)

    @staticmethod
    def start(sidecar: Sidecar, capture_root: str, request_id: str, token_count: int, tokens: Optional[Sequence[int]] = None,
              memory_budget_bytes: Optional[int] = None, device='cpu', matmul: str = 'exact',
              cache_math: Optional[str] = None, segments: bool = False) -> 'CaptureSession':
        """cache_math: the arithmetic the caller expects (decoder or mlx-cpu); None takes the sidecar's."""
        js = sidecar.json
        if not isinstance(token_count, int) or token_count < 1:
            raise CaptureError(f'capture: tokenCount must be a positive integer, got {token_count!r}')
        if token_count > js['maxPositionEmbeddings']:
            raise CaptureError(f"capture: {token_count} tokens exceed the sidecar's max_position_embeddings ({js['maxPositionEmbeddings']})")
        if memory_budget_bytes is not None and (not isinstance(memory_budget_bytes, int) or memory_budget_bytes < 1):
            raise CaptureError(f'capture: memoryBudgetBytes must be a positive integer, got {memory_budget_bytes!r}')
        if tokens is not None and len(tokens) != token_count:
            raise CaptureError(f'capture: {len(tokens)} token ids given for a {token_count}-token capture')
        digest = None if tokens is None else mf.token_ids_sha256(tokens)
        try:
            kv = make_kv_path(sidecar, torch.device(device), matmul, cache_math)
        except (ValueError, KeyError) as e:
            raise CaptureError(f'capture: {e}') from None
        m = mf.start(capture_root, request_id, token_count, sidecar.fingerprint, js['profile']['name'], sidecar.num_layers,
                     memory_budget_bytes, digest)
        return CaptureSession(sidecar, os.path.join(capture_root, request_id), m, memory_budget_bytes, kv, segments)

    @property
    def sealed_length(self) -> int:
        return self.sealed

    @property
    def held_bytes(self) -> int:
        return held_bytes(self._live()) + (self.segments.held_bytes if self.segments is not None else 0)

    @property
    def segments_published(self) -> int:
        """Segments landed and listed (the writer may be behind segments_taken)."""
        return self.segments.published if self.segments is not None else 0

    @property
    def segments_taken(self) -> int:
        """Segments cut and handed to the writer."""
        return self.segments.taken if self.segments is not None else 0

    def drain_segments(self) -> None:
        """Wait until every segment handed over is written and listed (a failure is kept: finish() seals failed)."""
        if self.segments is None or self.error is not None or self.closed:
            return
        try:
            self.segments.drain()
        except BaseException as e:
            self.error = e
            raise

    @property
    def peak_held_bytes(self) -> int:
        return self.peak

    @property
    def layers_written(self) -> int:
        return sum(self.written)

    def position(self, layer: int) -> int:
        return self.positions[layer]

    def on_attention_input(self, layer: int, start: int, rows: torch.Tensor) -> None:
        """Layer `layer`'s attention input rows [count, hidden] for positions start.. (only read). Rows
        past the sealed length are ignored. A layer reaching the sealed length is written before this returns."""
        if self.closed:
            raise CaptureError(f'capture {self.request_id}: the session is already sealed; no more attention inputs')
        if self.error is not None:
            raise CaptureError(f'capture {self.request_id}: the session already failed ({self.error})')
        self.rows_seen += int(rows.shape[0]) if rows.dim() >= 1 else 0
        try:
            t0 = time.perf_counter()
            published = self.segments.write_s if self.segments is not None else 0.0
            wrote = self._take(layer, start, rows)
            if self.segments is not None:
                wrote += self.segments.write_s - published  # segments written from the hook count as segment writes
            self.hook_s += max(0.0, time.perf_counter() - t0 - wrote)
        except BaseException as e:
            self.error = e
            raise

    def _take(self, layer: int, start: int, rows: torch.Tensor) -> float:
        n_layers = len(self.written)
        if not isinstance(layer, int) or not 0 <= layer < n_layers:
            raise CaptureError(f'capture {self.request_id}: layer {layer!r} is not a layer index in [0, {n_layers})')
        hidden = self.kv.hidden
        if rows.dim() != 2 or rows.shape[1] != hidden or rows.shape[0] < 1:
            raise CaptureError(f'capture {self.request_id}: layer {layer}: expected rows [count >= 1, {hidden}], found {list(rows.shape)}')
        count = rows.shape[0]
        end = start + count
        if not isinstance(start, int) or start < 0:
            raise CaptureError(f'capture {self.request_id}: layer {layer}: startPos {start!r} must be a non-negative integer')
        if end > self.token_count:
            raise CaptureError(f"capture {self.request_id}: layer {layer}: rows up to position {end} exceed the capture's {self.token_count} tokens")
        position = self.positions[layer]
        if position == self.sealed and start >= self.sealed:
            return 0.0
        if self.written[layer]:
            raise CaptureError(f'capture {self.request_id}: layer {layer} was already written and released')
        if start != position:
            raise CaptureError(f"capture {self.request_id}: layer {layer}: rows start at position {start} but the layer holds {position} tokens; one layer's chunks must be contiguous")
        reach = min(end, self.sealed)
        if reach > self.frontier and self.budget is not None:
            cut = seal_point(self._live(), self.frontier, reach, self.sealed, self.budget)
            if cut < self.sealed and cut < reach:
                self.sealed = cut
            reach = min(reach, self.sealed)
        if reach > start:
            self._feed(layer, start, rows[:reach - start].to(self.kv.device, torch.float32))
            if self.segments is not None:
                # Before the layer may be written and released below.
                self.segments.take(layer, self.states[layer])
        self.frontier = max(self.frontier, self.positions[layer])
        self.peak = max(self.peak, self.held_bytes)
        spent = 0.0
        for i in range(n_layers):
            if not self.written[i] and self.positions[i] == self.sealed:
                spent += self._write_layer(i)
        return spent

    def _feed(self, layer: int, start: int, x: torch.Tensor) -> None:
        # Cut at every multiple of the block size and copy the state there (exact: chunk invariance).
        state = self.states[layer]
        bs = self.block_size
        at, end = start, start + x.shape[0]
        while at < end:
            stop = min(end, (at // bs + 1) * bs)
            self.kv.update(layer, state, x[at - start:stop - start], at)
            at = stop
            self.positions[layer] = at
            if at % bs == 0:
                snap = state_tensors(f'layers.{layer}.boundary.{at}', state, self.bf16, with_entries=False)
                self.snapshots[layer].append((at, snap))
                if self.segments is not None:
                    self.segments.add_snapshot(layer, at, snap)
                    # With its pools' rows up to here, every block all layers have now passed goes out
                    # at once: the last layer passes its boundaries one by one, so the front door writes
                    # the chunk's blocks while that layer and the rest of the chunk still run.
                    self.segments.take(layer, state)
                    self.segments.publish_ready(self.sealed)

    def _live(self):
        return [None if self.written[i] else (g, self.positions[i], self.block_size) for i, g in enumerate(self.geometries)]

    def _write_layer(self, i: int) -> float:
        t0 = time.perf_counter()
        js = self.sidecar.json
        snapshots = self.snapshots[i]
        state = self.states[i]
        data = encode_layer_file(i, js['layers'][i]['layerType'], self.sealed, self.sidecar.fingerprint, js['profile']['name'],
                                 state, self.bf16, snapshots, self.block_size if snapshots else None)
        # Released before the write: nothing of this layer stays referenced here.
        self.states[i] = None
        self.snapshots[i] = []
        name = mf.layer_file_name(i)
        write_file_atomic(os.path.join(self.dir, name), data)
        self.written[i] = True
        entry = {'index': i, 'file': name, 'bytes': len(data), 'sha256': hashlib.sha256(data).hexdigest()}
        self._manifest = mf.list_layers(self.dir, self._manifest, [entry])
        spent = time.perf_counter() - t0
        self.write_s += spent
        return spent

    def _own_timings(self) -> dict:
        own = {'hook': self.hook_s * 1000, 'layerWrite': self.write_s * 1000}
        if self.segments is not None:
            own['segmentWrite'] = self.segments.write_s * 1000  # the engine thread's share
            own['segmentWriter'] = self.segments.writer_s * 1000  # the writer thread's, beside the engine
        return own

    def flush(self) -> None:
        """Between engine chunks: publish the block segments every layer has reached (with `segments`).
        A failure is kept, so finish() seals failed."""
        if self.segments is None or self.error is not None or self.closed:
            return
        try:
            self.segments.publish_ready(self.sealed)
        except BaseException as e:
            self.error = e
            raise

    def finish(self, timings: Optional[dict] = None) -> dict:
        """Seal: done when every layer holds all T tokens, partial when the budget sealed a shorter
        prefix; failed (and raise) when the hook failed or a layer never reached the sealed length."""
        if self.closed:
            raise CaptureError(f'capture {self.request_id}: the session is already sealed')
        try:
            self.flush()  # the last segments land before the manifest is sealed
            self.drain_segments()
        except BaseException:  # noqa: B902 - kept in self.error; sealed failed below
            pass
        own = self._own_timings()
        if self.error is not None:
            why = str(self.error) or 'unknown error'
            self._seal_failed(why, own)
            raise CaptureError(f'capture {self.request_id} failed: {why}')
        behind = [f'layer {i} at {self.positions[i]}' for i, w in enumerate(self.written) if not w]
        if behind:
            why = f'finish before every layer reached the sealed length {self.sealed}: {", ".join(behind)}'
            self._seal_failed(why, own)
            raise CaptureError(f'capture {self.request_id} failed: {why}')
        self.closed = True
        if self.segments is not None:
            self.segments.close()  # drained above: only its idle writer thread stops
        state = 'done' if self.sealed == self.token_count else 'partial'
        self._manifest = mf.finish(self.dir, self._manifest, state, sealed_length=self.sealed, timings={**own, **(timings or {})})
        return self._manifest

    def fail(self, err, timings: Optional[dict] = None) -> None:
        """Seal the capture as failed with the error's message (a no-op once sealed)."""
        if self.closed:
            return
        if self.error is None:
            self.error = err if isinstance(err, BaseException) else CaptureError(str(err))
        self._seal_failed(str(err) or 'unknown error', {**self._own_timings(), **(timings or {})})

    def _seal_failed(self, why: str, timings: dict) -> None:
        self.closed = True
        if self.segments is not None:
            self.segments.close()  # nothing lands after the failed seal
        self.states = [None] * len(self.states)
        self.snapshots = [[] for _ in self.snapshots]
        if self._manifest['state'] == 'running':
            self._manifest = mf.finish(self.dir, self._manifest, 'failed', error=why, timings=timings)
