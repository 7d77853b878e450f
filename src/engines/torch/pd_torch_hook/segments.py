"""Block segments on the torch side (src/capture/segments.ts, ported). The format's one home is
src/wire/segment-file.ts (docs/capture.md, *Block segments*): after every chunk, one
`segment-{k:06d}.safetensors` per block k whose boundary b = (k+1)*bs every layer has passed, holding
each layer's boundary snapshot at b (the layer file's `layers.{i}.boundary.{b}.*` tensors, already
in file form) and each pool's pooled rows [k*bs/r, b/r) as `layers.{i}.{pool}.compressed_kv`, under
the layer files' dtype rule; then `segments.json` lists it (both atomic, the index after the file).
What is held until then is the snapshots of boundaries not yet passed by every layer and the pooled
rows not yet published; a published block's share is released."""
import hashlib
import json
import os
import time
from collections import deque
from typing import Deque, List

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
        self.landed: List[dict] = []
        self.write_s = 0.0

    def add_snapshot(self, layer: int, boundary: int, tensors: dict) -> None:
        """A snapshot layer `layer` just took at `boundary` (tensors in file form, state_tensors')."""
        self.snaps[layer].append((boundary, tensors))

    def take(self, layer: int, state: LayerState) -> None:
        """After a feed of layer `layer`: its pools' new rows (before the layer may be released)."""
        for pending, pool in zip(self.pools[layer], state.pools):
            pending.add(pool.entries)

    @property
    def published(self) -> int:
        return len(self.landed)

    @property
    def held_bytes(self) -> int:
        rows = sum(p.held_bytes for layer in self.pools for p in layer)
        snaps = sum(len(t[2]) for queue in self.snaps for _, tensors in queue for t in tensors.values())
        return rows + snaps

    def publish_ready(self, limit: int) -> int:
        """Write a segment for every block whose boundary every layer has passed, up to `limit` tokens; the count."""
        t0 = time.perf_counter()
        n = 0
        while True:
            k = len(self.landed)
            b = (k + 1) * self.block_size
            if b > limit or not all(q and q[0][0] == b for q in self.snaps):
                break
            self._publish(k)
            n += 1
        self.write_s += time.perf_counter() - t0
        return n

    def _publish(self, k: int) -> None:
        bs = self.block_size
        tensors = {}
        for i, queue in enumerate(self.snaps):
            _, snap = queue.popleft()
            tensors.update(snap)
            for p in self.pools[i]:
                tensors[f'layers.{i}.{p.name}.compressed_kv'] = _float(p.take(bs // p.ratio), self.bf16)
        meta = {'format': SEGMENT_FILE_FORMAT, 'block': str(k), 'block_size': str(bs), 'fingerprint': self.fingerprint,
                'profile': self.profile, 'num_layers': str(len(self.snaps))}
        data = st_format.encode(tensors, meta)
        name = segment_file_name(k)
        write_file_atomic(os.path.join(self.dir, name), data)
        self.landed.append({'block': k, 'file': name, 'bytes': len(data), 'sha256': hashlib.sha256(data).hexdigest()})
        # Listed only after it landed; the index is replaced whole (JSON.stringify(index, null, 2)'s bytes).
        index = {'format': SEGMENT_INDEX_FORMAT, 'requestId': self.request_id, 'blockSize': bs, 'firstBlock': 0, 'segments': self.landed}
        write_file_atomic(os.path.join(self.dir, SEGMENT_INDEX_FILE), (json.dumps(index, indent=2) + '\n').encode())
