"""Capture layer files (src/wire/layer-file.ts): one layer's cache for the sealed prefix plus its
boundary snapshots, under ModelCache.tensors' names; float tensors BF16 when the profile's
activations are bf16 and every value is a bf16 value, else F32; entry counts I64 [1]. Written to a
temporary sibling, fsynced, renamed, the directory fsynced: it appears whole or not at all."""
import os
import secrets
from typing import Dict, List, Optional

import numpy as np
import torch

from . import st_format
from .fp32 import bf16_exact
from .kv_path import LayerState, PoolState

LAYER_FILE_FORMAT = 'pd-bridge-capture-layer/1'


def _float(t: torch.Tensor, bf16: bool):
    t = t.detach().to('cpu', torch.float32).contiguous()
    shape = tuple(t.shape)
    if bf16 and bf16_exact(t):
        codes = (t.view(torch.int32).numpy().view(np.uint32) >> 16).astype('<u2')
        return ('BF16', shape, codes.tobytes())
    return ('F32', shape, t.numpy().astype('<f4').tobytes())


def _count(n: int):
    return ('I64', (1,), np.array([n], dtype='<i8').tobytes())


def _pool_tensors(out: dict, base: str, p: PoolState, bf16: bool, with_entries: bool) -> None:
    if with_entries:
        entries = torch.cat(p.entries, 0) if p.entries else torch.zeros((0, p.dim))
        out[f'{base}.compressed_kv'] = _float(entries, bf16)
    out[f'{base}.entry_count'] = _count(p.entry_count)
    out[f'{base}.buffer_kv'] = _float(p.buffer_kv, bf16)
    out[f'{base}.buffer_gate'] = _float(p.buffer_gate, bf16)
    if p.overlap_kv is not None and p.overlap_gate is not None:
        out[f'{base}.overlap_kv'] = _float(p.overlap_kv, bf16)
        out[f'{base}.overlap_gate'] = _float(p.overlap_gate, bf16)
    if not with_entries and p.prev_window_kv is not None and p.prev_window_gate is not None:
        # snapshots only (boundary.ts): the raw previous window [ratio, width], gate without bias
        out[f'{base}.prev_window_kv'] = _float(p.prev_window_kv, bf16)
        out[f'{base}.prev_window_gate'] = _float(p.prev_window_gate, bf16)


def state_tensors(prefix: str, state: LayerState, bf16: bool, with_entries: bool = True) -> dict:
    """`prefix.window` and `prefix.{compressor|indexer}.*`; for a snapshot (with_entries=False)
    without compressed_kv and with prev_window_kv/prev_window_gate once a window completed."""
    out = {f'{prefix}.window': _float(state.window, bf16)}
    for p in state.pools:
        _pool_tensors(out, f'{prefix}.{p.name}', p, bf16, with_entries)
    return out


def encode_layer_file(layer: int, layer_type: str, tokens: int, fingerprint: str, profile: str,
                      state: LayerState, bf16: bool, snapshots: List[tuple], block_size: Optional[int]) -> bytes:
    """snapshots: (boundary, tensors of state_tensors(..., with_entries=False)) in boundary order."""
    if snapshots and block_size is None:
        raise ValueError(f'layer {layer}: boundary snapshots need the block size in the metadata')
    tensors = state_tensors(f'layers.{layer}', state, bf16)
    for _, snap in snapshots:
        tensors.update(snap)
    meta: Dict[str, str] = {'format': LAYER_FILE_FORMAT, 'layer': str(layer), 'layer_type': layer_type,
                            'tokens': str(tokens), 'fingerprint': fingerprint, 'profile': profile}
    if block_size is not None:
        meta['block_size'] = str(block_size)
    return st_format.encode(tensors, meta)


def write_file_atomic(path: str, data: bytes) -> None:
    temp = f'{path}.partial-{os.getpid()}-{secrets.token_hex(6)}'
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(temp)
        raise
    os.close(fd)
    os.rename(temp, path)
    try:
        dfd = os.open(os.path.dirname(path) or '.', os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass  # some platforms cannot fsync a directory; the rename already happened
