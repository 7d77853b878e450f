"""One layer's cache from its attention input, as Attention.updateCache (src/model/engine/attention.ts)
and compressTokens (compressor.ts) build it: kv_proj -> kv_norm -> rope -> the window's last
window-1 rows; for CSA/HCA layers the compressor (and CSA's indexer compressor): projections,
windows of `ratio` tokens aligned to position 0, per-channel softmax pooling with the position
bias (CSA: the previous window's Ca half as the first `ratio` slots), kv_norm, rope at the window's
first position. Whole windows of one chunk are pooled together; each is the same function of its
slots, so the bits are those of the sequential code. Only the fixed-size state (window, partial
window, carry) stays on the compute device; pooled entries move to the CPU as they are made."""
from dataclasses import dataclass, field
from typing import List, Optional

import torch

from .dot_order import matmul_in_order
from .numerics import Activations, softmax_pool, weighted_rms_norm
from .rope import RopeTable, rotate_trailing
from .sidecar import Sidecar


@dataclass
class PoolState:
    name: str  # 'compressor' or 'indexer'
    ratio: int
    dim: int
    overlap: bool
    buffer_kv: torch.Tensor
    buffer_gate: torch.Tensor
    entries: List[torch.Tensor] = field(default_factory=list)  # CPU, [m, dim] each
    entry_count: int = 0
    overlap_kv: Optional[torch.Tensor] = None
    overlap_gate: Optional[torch.Tensor] = None
    # CSA: the last complete window's kv and gate projections as buffered (both halves, gate
    # WITHOUT the position bias), [ratio, width]; None before one (boundary snapshots only).
    prev_window_kv: Optional[torch.Tensor] = None
    prev_window_gate: Optional[torch.Tensor] = None

    @property
    def width(self) -> int:
        return 2 * self.dim if self.overlap else self.dim


@dataclass
class LayerState:
    window: torch.Tensor  # [min(T, W-1), head_dim], oldest first
    pools: List[PoolState]


@dataclass
class _PoolWeights:
    position_bias: torch.Tensor  # [ratio, width]
    norm: torch.Tensor  # [dim]


class KvPath:
    """The sidecar's kv path on one device."""

    def __init__(self, sidecar: Sidecar, device: torch.device, matmul: str = 'exact'):
        """matmul 'exact': the profile's accumulation order, emulated (dot_order.py; bit-exact);
        'blas': torch.matmul in fp32 with TF32 off (fast, but another order: not bit-exact)."""
        if matmul not in ('exact', 'blas'):
            raise ValueError(f"matmul {matmul!r} is not 'exact' or 'blas'")
        self.matmul = matmul
        js = sidecar.json
        self.sidecar = sidecar
        self.device = device
        self.order = js['profile']['matmulOrder']
        self.act = Activations(js['profile']['activations'])
        self.head_dim = js['headDim']
        self.rope_dim = js['ropeDim']
        self.eps = float(js['rmsNormEps'])
        self.window_rows = js['slidingWindow'] - 1
        self.hidden = js['hiddenSize']
        inv_bf16 = js['profile']['vectors'] == 'bf16'
        rp = js['ropeParameters']
        self.tables = {
            'main': RopeTable(rp['sliding_attention'], inv_bf16, self.act.bf16, device),
            'compress': RopeTable(rp['compressed_sparse_attention'], inv_bf16, self.act.bf16, device),
        }
        w = {k: torch.from_numpy(v.copy()).to(device) for k, v in sidecar.weights.items()}
        self.layers = []
        for layer in js['layers']:
            i, kind = layer['index'], layer['layerType']
            attn = f'model.layers.{i}.self_attn'
            pools = []
            if kind == 'compressed_sparse_attention':
                pools = [('compressor', f'{attn}.compressor', js['compressRates']['csa'], self.head_dim, True),
                         ('indexer', f'{attn}.compressor.indexer', js['compressRates']['csa'], js['indexHeadDim'], True)]
            elif kind == 'heavily_compressed_attention':
                pools = [('compressor', f'{attn}.compressor', js['compressRates']['hca'], self.head_dim, False)]
            # One fused weight per layer: every output column is its own dot product, so fusing changes no bit.
            mats = [w[f'{attn}.kv_proj.weight']]
            for _, base, _, _, _ in pools:
                mats += [w[f'{base}.kv_proj.weight'], w[f'{base}.gate_proj.weight']]
            self.layers.append({
                'kind': kind,
                'rope': 'main' if kind == 'sliding_attention' else 'compress',
                'fused': torch.cat(mats, 0),
                'splits': [m.shape[0] for m in mats],
                'kv_norm': w[f'{attn}.kv_norm.weight'],
                'pools': [(name, ratio, dim, overlap, _PoolWeights(w[f'{base}.position_bias'], w[f'{base}.kv_norm.weight']))
                          for name, base, ratio, dim, overlap in pools],
            })

    def empty_state(self, layer: int) -> LayerState:
        z = lambda width: torch.zeros((0, width), dtype=torch.float32, device=self.device)  # noqa: E731
        pools = [PoolState(name, ratio, dim, overlap, z(2 * dim if overlap else dim), z(2 * dim if overlap else dim))
                 for name, ratio, dim, overlap, _ in self.layers[layer]['pools']]
        return LayerState(window=z(self.head_dim), pools=pools)

    def update(self, layer: int, state: LayerState, x: torch.Tensor, start: int) -> None:
        """Feed rows x [n, hidden] (float32, on the device) for positions start..start+n-1."""
        spec = self.layers[layer]
        n = x.shape[0]
        act = self.act
        outs = torch.split(act(self._project(x, spec['fused'])), spec['splits'], 1)
        kv = weighted_rms_norm(outs[0], spec['kv_norm'], self.eps, act)
        cos, sin = self.tables[spec['rope']].rows(start, n)
        kv = act(rotate_trailing(kv, self.rope_dim, cos, sin))
        state.window = torch.cat([state.window, kv], 0)[-self.window_rows:]
        for j, (pool, (_, _, _, _, pw)) in enumerate(zip(state.pools, spec['pools'])):
            self._compress(pool, pw, outs[1 + 2 * j], outs[2 + 2 * j])

    def _project(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if self.matmul == 'exact':
            return matmul_in_order(x, w, self.order)
        # TF32 off for this product only: the model's own matmuls keep whatever the engine set.
        saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            return torch.matmul(x, w.t())
        finally:
            torch.backends.cuda.matmul.allow_tf32 = saved

    def _compress(self, s: PoolState, pw: _PoolWeights, kv: torch.Tensor, gate: torch.Tensor) -> None:
        act = self.act
        all_kv = torch.cat([s.buffer_kv, kv], 0)
        all_gate = torch.cat([s.buffer_gate, gate], 0)
        windows = all_kv.shape[0] // s.ratio
        done = windows * s.ratio
        s.buffer_kv, s.buffer_gate = all_kv[done:], all_gate[done:]
        if windows == 0:
            return
        wk = all_kv[:done].reshape(windows, s.ratio, s.width)
        biased = act(all_gate[:done].reshape(windows, s.ratio, s.width) + pw.position_bias[None])
        d = s.dim
        if s.overlap:
            first_kv = s.overlap_kv if s.overlap_kv is not None else torch.zeros((s.ratio, d), device=self.device)
            first_gate = s.overlap_gate if s.overlap_gate is not None else torch.full((s.ratio, d), float('-inf'), device=self.device)
            prev_kv = torch.cat([first_kv[None], wk[:-1, :, :d]], 0)
            prev_gate = torch.cat([first_gate[None], biased[:-1, :, :d]], 0)
            slot_kv = torch.cat([prev_kv, wk[:, :, d:]], 1)
            slot_gate = torch.cat([prev_gate, biased[:, :, d:]], 1)
            s.overlap_kv, s.overlap_gate = wk[-1, :, :d].clone(), biased[-1, :, :d].clone()
            s.prev_window_kv = wk[-1].clone()
            s.prev_window_gate = all_gate[done - s.ratio:done].clone()
        else:
            slot_kv, slot_gate = wk, biased
        pooled = softmax_pool(slot_kv, slot_gate, act.bf16)
        entry = weighted_rms_norm(pooled, pw.norm, self.eps, act)
        positions = torch.arange(s.entry_count, s.entry_count + windows, device=self.device) * s.ratio
        cos, sin = self.tables['compress'].rows(0, int(positions[-1]) + 1)
        entry = act(rotate_trailing(entry, self.rope_dim, cos[positions], sin[positions]))
        s.entries.append(entry.cpu())
        s.entry_count += windows
