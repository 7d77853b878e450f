"""How many float values a layer holds after n tokens, with and without its boundary snapshots
(src/capture/payload.ts and boundary.ts, the same arithmetic), so the budget here counts exactly
the bytes the TypeScript session counts."""
from dataclasses import dataclass
from typing import List


@dataclass(frozen=True)
class PoolGeometry:
    ratio: int
    dim: int
    overlap: bool


@dataclass(frozen=True)
class LayerGeometry:
    head_dim: int
    window_rows: int
    pools: List[PoolGeometry]


def layer_geometries(js: dict) -> List[LayerGeometry]:
    out = []
    for layer in js['layers']:
        pools = []
        if layer['layerType'] == 'compressed_sparse_attention':
            r = js['compressRates']['csa']
            pools = [PoolGeometry(r, js['headDim'], True), PoolGeometry(r, js['indexHeadDim'], True)]
        elif layer['layerType'] == 'heavily_compressed_attention':
            pools = [PoolGeometry(js['compressRates']['hca'], js['headDim'], False)]
        out.append(LayerGeometry(js['headDim'], js['slidingWindow'] - 1, pools))
    return out


def layer_state_values(g: LayerGeometry, n: int) -> int:
    values = min(n, g.window_rows) * g.head_dim
    for p in g.pools:
        width = 2 * p.dim if p.overlap else p.dim
        values += (n // p.ratio) * p.dim + (n % p.ratio) * width * 2
        if p.overlap and n >= p.ratio:
            values += 2 * p.ratio * p.dim
    return values


def boundary_snapshot_values(g: LayerGeometry, b: int) -> int:
    values = min(b, g.window_rows) * g.head_dim
    for p in g.pools:
        width = 2 * p.dim if p.overlap else p.dim
        values += (b % p.ratio) * width * 2
        # the overlap carry [ratio, dim] and the previous window [ratio, 2 dim], kv and gate each
        if p.overlap and b >= p.ratio:
            values += 2 * p.ratio * p.dim + 2 * p.ratio * width
    return values


def layer_snapshot_values(g: LayerGeometry, n: int, block_size: int) -> int:
    return sum(boundary_snapshot_values(g, b) for b in range(block_size, n + 1, block_size))
