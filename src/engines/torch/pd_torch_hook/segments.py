"""Block segments on the torch side (src/capture/segments.ts, ported). The format's one home is
src/wire/segment-file.ts (docs/capture.md, *Block segments*): after every chunk, one
`segment-{k:06d}.safetensors` per block k whose boundary b = (k+1)*bs every layer has passed, holding
each layer's boundary snapshot at b (the layer file's `layers.{i}.boundary.{b}.*` tensors, already
in file form) and each pool's pooled rows [k*bs/r, b/r) as `layers.{i}.{pool}.compressed_kv`, under
the layer files' dtype rule; then `segments.json` lists it (both atomic, the index after the file).
What is held until then is the snapshots of boundaries not yet passed by every layer and the pooled
rows not yet published; a published block's share is released.

The file and index writes (encode, sha256, write + fsync, the index rewritten whole) run on a
background writer thread, not on the engine's: a taken segment is immutable, so the engine only cuts
its tensors and goes on (on the GPU the hook is the engine's only thread; the writes used to stall it
between layers). The writer lists every segment it has landed in one index write per batch, so the
index's O(blocks) rewrite is paid once per wake, not once per block. drain() waits for it (the seal),
close() abandons what is queued (a failed seal); a write's error fails the next call."""
import hashlib
import json
import os
import threading
import time
from collections import deque
from typing import Deque, List, Optional

import torch

from . import st_format
from .kv_path import LayerState
from .layer_file import _float, write_file_atomic

SEGMENT_FILE_FORMAT = 'pd-bridge-capture-segment/1'
SEGMENT_INDEX_FORMAT = 'pd-bridge-capture-segments/1'
SEGMENT_INDEX_FILE = 'segments.json'


def segment_file_name(block: int) -> str:
    if not 0 <= block <= 999_999:
        raise ValueError(f'segment: block {block} is not an integer in 0..999999')
    return f'segment-{block:06d}.safetensors'


class _PendingRows:
    """One pool's pooled rows not yet published (the pool's own CPU tensors, not copies)."""

    def __init__(self, name: str, ratio: int, dim: int):
        self.name, self.ratio, self.dim = name, ratio, dim
        self.parts: Deque[torch.Tensor] = deque()
        self.rows = 0
        self.seen_parts = 0  # how many of the pool's entry tensors were taken

    def add(self, entries: List[torch.Tensor]) -> None:
        for t in entries[self.seen_parts:]:
            self.parts.append(t)
            self.rows += int(t.shape[0])
        self.seen_parts = len(entries)

    def take(self, n: int) -> torch.Tensor:
        if n > self.rows:
            raise RuntimeError(f'block segments: the {self.name} pool holds {self.rows} unpublished rows, a block needs {n}')
        out, need = [], n
        while need > 0:
            head = self.parts[0]
            if head.shape[0] <= need:
                out.append(self.parts.popleft())
                need -= int(head.shape[0])
            else:
                out.append(head[:need])
                self.parts[0] = head[need:]
                need = 0
        self.rows -= n
        return torch.cat(out, 0)

    @property
    def held_bytes(self) -> int:
        return self.rows * self.dim * 4


class SegmentPublisher:
    """Publishes the block segments of one capture as every layer passes each boundary."""

    def __init__(self, directory: str, request_id: str, block_size: int, fingerprint: str, profile: str, bf16: bool,
                 states: List[LayerState]):
        self.dir, self.request_id, self.block_size = directory, request_id, block_size
        self.fingerprint, self.profile, self.bf16 = fingerprint, profile, bf16
        self.snaps: List[Deque[tuple]] = [deque() for _ in states]
        self.pools = [[_PendingRows(p.name, p.ratio, p.dim) for p in s.pools] for s in states]
        self.taken = 0  # blocks cut and handed to the writer
        self.landed: List[dict] = []  # the writer's alone
        self.listed = 0  # how many of them the index lists
        self.write_s = 0.0  # the caller's (engine's) time: cutting segments, waiting in drain()
        self.writer_s = 0.0  # the writer thread's time
        self._queue: Deque[tuple] = deque()
        self._queued_bytes = 0
        self._cv = threading.Condition()
        self._busy = False
        self._stop = False
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None

    def add_snapshot(self, layer: int, boundary: int, tensors: dict) -> None:
        """A snapshot layer `layer` just took at `boundary` (tensors in file form, state_tensors')."""
        self.snaps[layer].append((boundary, tensors))

    def take(self, layer: int, state: LayerState) -> None:
        """After a feed of layer `layer`: its pools' new rows (before the layer may be released)."""
        for pending, pool in zip(self.pools[layer], state.pools):
            pending.add(pool.entries)

    @property
    def published(self) -> int:
        """Segments landed and listed in the index."""
        return self.listed

    @property
    def held_bytes(self) -> int:
        rows = sum(p.held_bytes for layer in self.pools for p in layer)
        snaps = sum(len(t[2]) for queue in self.snaps for _, tensors in queue for t in tensors.values())
        return rows + snaps + self._queued_bytes

    def publish_ready(self, limit: int) -> int:
        """Hand the writer a segment for every block whose boundary every layer has passed, up to
        `limit` tokens; the count. Raises the writer's error, if it had one."""
        t0 = time.perf_counter()
        self._raise_failed()
        n = 0
        while True:
            b = (self.taken + 1) * self.block_size
            if b > limit or not all(q and q[0][0] == b for q in self.snaps):
                break
            self._enqueue(self.taken, self._cut())
            self.taken += 1
            n += 1
        self.write_s += time.perf_counter() - t0
        return n

    def drain(self) -> None:
        """Wait until every segment handed over has landed and is listed; raises the writer's error."""
        t0 = time.perf_counter()
        with self._cv:
            while (self._queue or self._busy) and self._error is None:
                self._cv.wait()
        self.write_s += time.perf_counter() - t0
        self._raise_failed()

    def close(self) -> None:
        """Abandon what is queued (a failed seal): the writer finishes the file in hand and stops."""
        with self._cv:
            self._stop = True
            self._queue.clear()
            self._queued_bytes = 0
            self._cv.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _raise_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(f'block segments: writing a segment failed: {self._error}') from self._error

    def _cut(self) -> dict:
        # On the caller's thread: the snapshots and pooled rows leave the shared queues in order.
        bs = self.block_size
        tensors = {}
        for i, queue in enumerate(self.snaps):
            _, snap = queue.popleft()
            tensors.update(snap)
            for p in self.pools[i]:
                tensors[f'layers.{i}.{p.name}.compressed_kv'] = _float(p.take(bs // p.ratio), self.bf16)
        return tensors

    def _enqueue(self, k: int, tensors: dict) -> None:
        size = sum(len(t[2]) for t in tensors.values())
        with self._cv:
            if self._stop:
                raise RuntimeError('block segments: the publisher was closed')
            self._queue.append((k, tensors, size))
            self._queued_bytes += size
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f'segments-{self.request_id}', daemon=True)
                self._thread.start()
            self._cv.notify_all()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                batch = list(self._queue)
                self._queue.clear()
                self._busy = True
            t0 = time.perf_counter()
            try:
                for k, tensors, size in batch:
                    self._write(k, tensors)
                    with self._cv:
                        self._queued_bytes -= size
                        if self._stop:
                            return  # abandoned: no index after the failed seal's close()
                self._write_index()
            except BaseException as e:  # noqa: B902 - kept; the engine's next call raises it
                with self._cv:
                    self._error = e
                try:
                    if self.listed < len(self.landed):
                        self._write_index()  # what landed before the failure stays listed, a prefix
                except BaseException:  # noqa: B902 - the first error is the one reported
                    pass
            finally:
                self.writer_s += time.perf_counter() - t0
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()
            if self._error is not None:
                return

    def _write(self, k: int, tensors: dict) -> None:
        meta = {'format': SEGMENT_FILE_FORMAT, 'block': str(k), 'block_size': str(self.block_size), 'fingerprint': self.fingerprint,
                'profile': self.profile, 'num_layers': str(len(self.snaps))}
        data = st_format.encode(tensors, meta)
        name = segment_file_name(k)
        write_file_atomic(os.path.join(self.dir, name), data)
        self.landed.append({'block': k, 'file': name, 'bytes': len(data), 'sha256': hashlib.sha256(data).hexdigest()})

    def _write_index(self) -> None:
        # Listed only after they landed; the index is replaced whole (JSON.stringify(index, null, 2)'s bytes).
        index = {'format': SEGMENT_INDEX_FORMAT, 'requestId': self.request_id, 'blockSize': self.block_size, 'firstBlock': 0,
                 'segments': self.landed}
        write_file_atomic(os.path.join(self.dir, SEGMENT_INDEX_FILE), (json.dumps(index, indent=2) + '\n').encode())
        self.listed = len(self.landed)
