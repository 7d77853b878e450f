// The cache a block at B holds, computed by the mlx-cpu cache path (src/capture/mlx-cpu) from the
// attention inputs MLX recorded in a one-shot prefill of B tokens (harness/mlx/omlx_exact_native.py),
// placed into our ModelCache so the bridge's own mapping turns it into a block. Shared by
// harness/mlx/exact-blocks.ts and suites/mlx/omlx-blocks.test.ts.
import { mlxCpuCacheConfig, mlxCpuLayerCache, type MlxCpuCacheWeights, type MlxCpuPoolState } from '../../src/capture/mlx-cpu/index.ts'
import { viewAs, type Tensor } from '../../src/formats/safetensors/index.ts'
import type { DeepseekV4Config } from '../../src/model/config.ts'
import { ModelCache, type CompressorState } from '../../src/model/engine/index.ts'
import { decodeBf16 } from '../../src/numerics/bf16.ts'

/**
 * Layer i's attention input [B, hidden] (bf16, as MLX recorded it): `oneshot` from a one-shot record
 * (omlx_exact_native.py), `prefill` from oMLX's block-by-block prefill (omlx_prefix_cache.py).
 */
export function mlxAttnInput (tensors: Map<string, Tensor>, cfg: DeepseekV4Config, layer: number, B: number, pass: 'oneshot' | 'prefill' = 'oneshot'): Float32Array {
  const t = tensors.get(`${pass}.layers.${layer}.attn_input`)
  if (t === undefined) throw new Error(`mlx-cpu block: no attention input for layer ${layer}`)
  if (t.dtype !== 'BF16' || t.shape[0] !== B || t.shape[1] !== cfg.hiddenSize) throw new Error(`mlx-cpu block: layer ${layer} attention input is ${t.dtype} [${t.shape}], expected BF16 [${B}, ${cfg.hiddenSize}]`)
  return decodeBf16(viewAs(t, 'BF16'))
}

function fill (state: CompressorState, p: MlxCpuPoolState, where: string): void {
  if (state.ratio !== p.ratio || state.dim !== p.dim || state.width !== p.width) throw new Error(`${where}: ours ratio ${state.ratio} dim ${state.dim} width ${state.width}, mlx-cpu ${p.ratio}/${p.dim}/${p.width}`)
  const entries = p.pooled === null ? 0 : p.pooled.length / p.dim
  for (let r = 0; r < entries; r++) state.entries.append(p.pooled!.subarray(r * p.dim, (r + 1) * p.dim))
  const n = p.bufKv === null ? 0 : p.bufKv.length / p.width
  if (n > 0) { state.bufferKv.set(p.bufKv!); state.bufferGate.set(p.bufGate!) }
  state.bufferLength = n
  state.prevWindowKv = p.prevWinKv === null ? null : p.prevWinKv.slice()
  state.prevWindowGate = p.prevWinGate === null ? null : p.prevWinGate.slice()
  // overlapKv / overlapGate (the engine's derived carry) stay null: the block stores the raw window.
}

/** Every layer's cache after B tokens, by the mlx-cpu arithmetic. */
export function mlxCpuBlockCache (cfg: DeepseekV4Config, weights: MlxCpuCacheWeights, attnInput: (layer: number) => Float32Array, B: number): ModelCache {
  const mcfg = mlxCpuCacheConfig(cfg)
  const cache = ModelCache.empty(cfg)
  cache.tokenCount = B
  cache.layers.forEach((layer, i) => {
    const c = mlxCpuLayerCache(weights, mcfg, i, attnInput(i), B)
    const d = layer.headDim
    const keep = Math.min(c.windowRows, layer.windowRowsMax)
    layer.window.set(c.window.subarray((c.windowRows - keep) * d))
    layer.windowLength = keep
    const states = [layer.compressor, layer.indexer].filter((s): s is CompressorState => s !== null)
    if (states.length !== c.pools.length) throw new Error(`layer ${i}: ${states.length} compressors in our cache, ${c.pools.length} mlx-cpu pools`)
    states.forEach((s, j) => fill(s, c.pools[j], `layer ${i} pool ${j}`))
  })
  return cache
}
