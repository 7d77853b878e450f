"""The kv path of an mlx-cpu sidecar: one layer's cache as oMLX's DeepSeek-V4 model computes it on
MLX 0.32.2's CPU, fed in chunks, kept in the same LayerState the decoder math fills (so the
session, the boundary snapshots and the layer files need no second code path). The TypeScript hook's
MlxCpuKvLayer (src/capture/mlx-cpu/kv-layer.ts) step for step:
  window:      x rounded to bf16; wkv (mxfp8 g32); kv_norm (rms_norm); rope at the rows' absolute
               positions with the layer's freqs (sliding: rope_theta; compressed: the compress
               theta with YaRN); the last window-1 rows are kept
  compressor:  wkv, wgate (affine 8-bit g64) per row; complete windows of `ratio` rows pooled the
               moment they complete (ratio 4: the previous window's lane A, then its own lane B;
               ratio 128: its own rows), normalised, roped at entry positions 0, 1, ... with the
               freqs divided by the ratio; the rest buffered raw
Chunking changes no bit: every step is per row or per window."""
from typing import List

import numpy as np
import torch

from . import st_format
from .fp32 import canonical_nan
from .kv_path import LayerState, PoolState
from .mlx_math import bf16_round, check_rounding, mlx_exp, rounder
from .mlx_quant import AffineWeight, Mxfp8Weight, affine_matmul, affine_weight, code_bytes, mxfp8_matmul, mxfp8_weight
from .mlx_rope_norm import deepseek_v4_rope_freqs, mlx_rms_norm, mlx_rope, rope_inv_freqs

CACHE_MATH = 'mlx-cpu'
# The modes mlx_lm.convert gives these modules (the weights' `quantization` metadata).
MXFP8_MODE = 'mxfp88/g32'
AFFINE_MODE = 'affine8/g64'


class MlxCpuConfigError(ValueError):
    pass


class _Pool:
    def __init__(self, name: str, ratio: int, dim: int, wkv: AffineWeight, wgate: AffineWeight, ape: torch.Tensor,
                 norm: torch.Tensor, inv: torch.Tensor):
        self.name, self.ratio, self.dim = name, ratio, dim
        self.overlap = ratio == 4
        self.wkv, self.wgate, self.ape, self.norm, self.inv = wkv, wgate, ape, norm, inv


class _Layer:
    def __init__(self, wkv: Mxfp8Weight, kv_norm: torch.Tensor, inv: torch.Tensor, pools: List[_Pool]):
        self.wkv, self.kv_norm, self.inv, self.pools = wkv, kv_norm, inv, pools


def _yarn(p: dict):
    if p['ropeType'] == 'yarn' and p['originalMaxPositionEmbeddings'] is not None:
        return {k: p[k] for k in ('factor', 'originalMaxPositionEmbeddings', 'betaFast', 'betaSlow')}
    return None


class MlxCpuKvPath:
    """The sidecar's mlx-cpu kv path on one device (the interface of kv_path.KvPath)."""

    def __init__(self, sidecar, device: torch.device):
        js = sidecar.json
        math = js.get('cacheMath')
        if not isinstance(math, dict) or math.get('name') != CACHE_MATH:
            raise MlxCpuConfigError(f'{sidecar.dir}: cacheMath is {math!r}, not {CACHE_MATH}')
        self.rounding = check_rounding(math.get('rounding'), f'{sidecar.dir}/sidecar.json: cacheMath.rounding')
        if js['profile']['activations'] != 'bf16':
            raise MlxCpuConfigError(f"{sidecar.dir}: profile.activations is {js['profile']['activations']}, but the mlx-cpu cache math computes bf16 values")
        main = js['ropeParameters']['sliding_attention']
        comp = js['ropeParameters']['compressed_sparse_attention']
        if main['ropeType'] != 'default':
            raise MlxCpuConfigError(f"{sidecar.dir}: the sliding layers' rope is {main['ropeType']}; oMLX applies YaRN only to the compressed layers' rope")
        self.sidecar = sidecar
        self.device = device
        self.hidden = js['hiddenSize']
        self.head_dim = js['headDim']
        self.eps = float(np.float32(js['rmsNormEps']))
        self.window_rows = js['slidingWindow'] - 1
        q = self.rounding['quantizedMatmul']
        modes = self._modes(sidecar.metadata)
        w = sidecar.raw
        rope_dim = js['ropeDim']

        def inv_of(base, yarn, scale, dim):
            return torch.from_numpy(rope_inv_freqs(deepseek_v4_rope_freqs(rope_dim, base, yarn, scale, dim))).to(device)

        def bf16(name):
            return torch.from_numpy(st_format.bf16_codes_to_f32(w[name]).copy()).to(device)

        def expect(module, mode):
            if modes.get(module) != mode:
                raise MlxCpuConfigError(f'{sidecar.dir}: {module} is quantized as {modes.get(module) or "nothing"}, this path reads {mode}')

        def affine(module):
            expect(module, AFFINE_MODE)
            return affine_weight(code_bytes(w[f'{module}.weight'], module), st_format.bf16_codes_to_f32(w[f'{module}.scales']),
                                 st_format.bf16_codes_to_f32(w[f'{module}.biases']), 64, q['dequantized'], module, device)

        self.layers: List[_Layer] = []
        for layer in js['layers']:
            i, ratio = layer['index'], layer['compressRatio']
            p = f'model.layers.{i}.attn'
            expect(f'{p}.wkv', MXFP8_MODE)
            wkv = mxfp8_weight(code_bytes(w[f'{p}.wkv.weight'], f'{p}.wkv'), w[f'{p}.wkv.scales'], f'{p}.wkv', device)
            window_inv = inv_of(main['theta'], None, 1, self.head_dim) if ratio == 0 else inv_of(comp['theta'], _yarn(comp), 1, self.head_dim)
            pools = []
            for name, base in (('compressor', f'{p}.compressor'), ('indexer', f'{p}.indexer.compressor')):
                if f'{base}.ape' not in w:
                    continue
                ape_ratio = w[f'{base}.ape'].shape[0]
                if ape_ratio != ratio:
                    raise MlxCpuConfigError(f'{sidecar.dir}: layer {i} {name} has ratio {ape_ratio}, the layer {ratio}')
                norm = bf16(f'{base}.norm.weight')
                dim = norm.shape[0]
                pools.append(_Pool(name, ratio, dim, affine(f'{base}.wkv'), affine(f'{base}.wgate'), bf16(f'{base}.ape'), norm,
                                   inv_of(comp['theta'], _yarn(comp), ratio, dim)))
            self.layers.append(_Layer(wkv, bf16(f'{p}.kv_norm.weight'), window_inv, pools))

    @staticmethod
    def _modes(metadata: dict) -> dict:
        import json
        table = json.loads(metadata.get('quantization', '{}'))
        return {path: mode for mode, paths in table.items() for path in paths}

    def empty_state(self, layer: int) -> LayerState:
        z = lambda width: torch.zeros((0, width), dtype=torch.float32, device=self.device)  # noqa: E731
        pools = [PoolState(p.name, p.ratio, p.dim, p.overlap, z(2 * p.dim if p.overlap else p.dim), z(2 * p.dim if p.overlap else p.dim))
                 for p in self.layers[layer].pools]
        return LayerState(window=z(self.head_dim), pools=pools)

    def update(self, layer: int, state: LayerState, x: torch.Tensor, start: int) -> None:
        """Feed rows x [n, hidden] (float32, on the device) for positions start..start+n-1."""
        spec = self.layers[layer]
        n = x.shape[0]
        xb = bf16_round(x)
        r = self.rounding
        # Norm and rope are per row: only the rows the window keeps need them.
        keep = min(n, self.window_rows)
        kv = mlx_rms_norm(mxfp8_matmul(xb[n - keep:], spec.wkv, r['quantizedMatmul']), spec.kv_norm, self.eps, r['rmsNorm'])
        positions = torch.arange(start + n - keep, start + n, device=self.device)
        kv = mlx_rope(kv, spec.inv, positions, r['rope'])
        state.window = torch.cat([state.window, kv], 0)[-self.window_rows:]
        for s, p in zip(state.pools, spec.pools):
            q = r['quantizedMatmul']
            self._pool(s, p, affine_matmul(xb, p.wkv, q), affine_matmul(xb, p.wgate, q))

    def _pool(self, s: PoolState, p: _Pool, kv: torch.Tensor, gate: torch.Tensor) -> None:
        rp = self.rounding['pooling']
        all_kv = torch.cat([s.buffer_kv, kv], 0)
        all_gate = torch.cat([s.buffer_gate, gate], 0)
        windows = all_kv.shape[0] // s.ratio
        done = windows * s.ratio
        s.buffer_kv, s.buffer_gate = all_kv[done:], all_gate[done:]
        if windows == 0:
            return
        wk = all_kv[:done].reshape(windows, s.ratio, s.width)
        d = s.dim
        if s.overlap:
            biased = rounder(rp['overlapGate'])(all_gate[:done].reshape(windows, s.ratio, s.width) + p.ape[None])
            # The first window ever reads zeros gated -inf as its lane A; later ones the carry.
            first_kv = s.overlap_kv if s.overlap_kv is not None else torch.zeros((s.ratio, d), device=self.device)
            first_gate = s.overlap_gate if s.overlap_gate is not None else torch.full((s.ratio, d), float('-inf'), device=self.device)
            slot_kv = torch.cat([torch.cat([first_kv[None], wk[:-1, :, :d]], 0), wk[:, :, d:]], 1)
            slot_gate = torch.cat([torch.cat([first_gate[None], biased[:-1, :, :d]], 0), biased[:, :, d:]], 1)
            s.overlap_kv, s.overlap_gate = wk[-1, :, :d].clone(), canonical_nan(biased[-1, :, :d])
            s.prev_window_kv = wk[-1].clone()
            s.prev_window_gate = all_gate[done - s.ratio:done].clone()
        else:
            slot_kv = wk
            slot_gate = rounder(rp['simpleGate'])(all_gate[:done].reshape(windows, s.ratio, s.width) + p.ape[None])
        pooled = self._softmax_pool(slot_kv, slot_gate, rp)
        entry = mlx_rms_norm(pooled, p.norm, self.eps, self.rounding['rmsNorm'])
        positions = torch.arange(s.entry_count, s.entry_count + windows, device=self.device)
        entry = mlx_rope(entry, p.inv, positions, self.rounding['rope'])
        s.entries.append(entry.cpu())
        s.entry_count += windows

    @staticmethod
    def _softmax_pool(kv: torch.Tensor, gate: torch.Tensor, rp: dict) -> torch.Tensor:
        """Per window and channel over the slots [W, slots, d]: softmax (max, Cephes exp of f32(g - max),
        sequential f32 sum, true divide), weights rounded by `weights`, then sum(sum + product(kv w)) in slot order."""
        slots = gate.shape[1]
        m = torch.full_like(gate[:, 0], float('-inf'))
        for r in range(slots):
            m = torch.where(gate[:, r] > m, gate[:, r], m)
        e = mlx_exp(gate - m[:, None])
        total = torch.zeros_like(m)
        for r in range(slots):
            total = total + e[:, r]
        w = rounder(rp['weights'])(e / total[:, None])
        product, add = rounder(rp['product']), rounder(rp['sum'])
        acc = torch.zeros_like(m)
        for r in range(slots):
            acc = add(acc + product(kv[:, r] * w[:, r]))
        return acc
