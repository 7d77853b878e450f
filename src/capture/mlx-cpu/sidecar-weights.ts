// The mlx-cpu sidecar's weights.safetensors: the cache path's weights in the layout MLX holds them
// (harness/fixtures/mlx/*-mxq-cache-weights.safetensors, oMLX's module names): per layer
//   model.layers.{i}.attn.wkv.weight U32 [head_dim, hidden/4], .scales U8 [head_dim, hidden/32]  (mxfp8 g32)
//   model.layers.{i}.attn.kv_norm.weight BF16 [head_dim]
//   per compressor (`attn.compressor`, a CSA layer's `attn.indexer.compressor`):
//     wkv / wgate .weight U32 [width, hidden/4], .scales / .biases BF16 [width, hidden/64]  (affine 8-bit g64)
//     ape BF16 [ratio, width], norm.weight BF16 [dim]
// and the safetensors metadata `quantization` (mode -> module paths) that readMlxCpuCacheWeights checks.
import type { Dtype, Tensor } from '../../formats/safetensors/index.ts'
import { tensorFrom } from '../../formats/safetensors/index.ts'
import { layerCacheLayout, type CacheDims } from '../../model/engine/cache-layout.ts'
import type { LayerType } from '../../model/config.ts'
import { f32ToBf16 } from '../../numerics/bf16.ts'
import type { AffineWeight, Mxfp8Weight } from '../../numerics/mlx-cpu/quantized-matmul.ts'
import type { MlxCompressorWeights, MlxCpuCacheWeights } from './weights.ts'

/** One tensor the mlx-cpu sidecar must hold. */
export interface MlxWeightSpec {
  name: string
  dtype: Dtype
  shape: number[]
}

/** What the specs follow from (a sidecar's JSON). */
export interface MlxWeightShapeInputs extends CacheDims {
  hiddenSize: number
  layers: ReadonlyArray<{ index: number, layerType: LayerType }>
}

/** The mlx-cpu sidecar's tensors, in a fixed order; the hidden size must be a multiple of 64 (affine groups). */
export function mlxCpuWeightSpecs (s: MlxWeightShapeInputs): MlxWeightSpec[] {
  const h = s.hiddenSize
  if (h % 64 !== 0) throw new Error(`mlx-cpu cache math: hidden_size ${h} is not a multiple of 64, the affine group MLX quantizes the compressors in`)
  const specs: MlxWeightSpec[] = []
  for (const { index, layerType } of s.layers) {
    const p = `model.layers.${index}.attn`
    specs.push(
      { name: `${p}.wkv.weight`, dtype: 'U32', shape: [s.headDim, h / 4] },
      { name: `${p}.wkv.scales`, dtype: 'U8', shape: [s.headDim, h / 32] },
      { name: `${p}.kv_norm.weight`, dtype: 'BF16', shape: [s.headDim] },
    )
    for (const pool of layerCacheLayout(layerType, s).pools) {
      const c = pool.name === 'indexer' ? `${p}.indexer.compressor` : `${p}.compressor`
      for (const m of ['wkv', 'wgate']) {
        specs.push(
          { name: `${c}.${m}.weight`, dtype: 'U32', shape: [pool.width, h / 4] },
          { name: `${c}.${m}.scales`, dtype: 'BF16', shape: [pool.width, h / 64] },
          { name: `${c}.${m}.biases`, dtype: 'BF16', shape: [pool.width, h / 64] },
        )
      }
      specs.push(
        { name: `${c}.ape`, dtype: 'BF16', shape: [pool.ratio, pool.width] },
        { name: `${c}.norm.weight`, dtype: 'BF16', shape: [pool.dim] },
      )
    }
  }
  return specs
}

function bf16Tensor (values: Float32Array, shape: number[]): Tensor {
  return tensorFrom('BF16', shape, Uint16Array.from(values, f32ToBf16))
}

/** The packed words are the code bytes in k order read as little-endian uint32 (MLX's layout). */
function codesTensor (codes: Uint8Array, n: number, k: number): Tensor {
  return tensorFrom('U32', [n, k / 4], codes.slice())
}

/** The weights as the tensors of an mlx-cpu sidecar (names and layout of MLX's own file). */
export function mlxCpuWeightTensors (w: MlxCpuCacheWeights): Map<string, Tensor> {
  const out = new Map<string, Tensor>()
  const mx8 = (m: string, q: Mxfp8Weight): void => {
    out.set(`${m}.weight`, codesTensor(q.codes, q.n, q.k))
    out.set(`${m}.scales`, tensorFrom('U8', [q.n, q.k / 32], q.scales.slice()))
  }
  const aff = (m: string, q: AffineWeight): void => {
    out.set(`${m}.weight`, codesTensor(q.codes, q.n, q.k))
    out.set(`${m}.scales`, bf16Tensor(q.scales, [q.n, q.k / q.groupSize]))
    out.set(`${m}.biases`, bf16Tensor(q.biases, [q.n, q.k / q.groupSize]))
  }
  const comp = (p: string, c: MlxCompressorWeights | null): void => {
    if (c === null) return
    aff(`${p}.wkv`, c.wkv)
    aff(`${p}.wgate`, c.wgate)
    out.set(`${p}.ape`, bf16Tensor(c.ape, [c.ratio, c.width]))
    out.set(`${p}.norm.weight`, bf16Tensor(c.norm, [c.dim]))
  }
  w.layers.forEach((l, i) => {
    const p = `model.layers.${i}.attn`
    mx8(`${p}.wkv`, l.wkv)
    out.set(`${p}.kv_norm.weight`, bf16Tensor(l.kvNorm, [l.kvNorm.length]))
    comp(`${p}.compressor`, l.compressor)
    comp(`${p}.indexer.compressor`, l.indexerCompressor)
  })
  return out
}
