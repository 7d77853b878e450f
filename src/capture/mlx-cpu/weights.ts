// The cache path's weights exactly as MLX held them (harness/mlx/omlx_reference.py --save-cache-weights):
// QuantizedLinear codes packed in uint32 words (little-endian, so the bytes are the codes in k
// order), mxfp8 scales as e8m0 bytes, affine scales and biases as bf16; bf16 norms and ape.
import { readSafetensors, viewAs, type Tensor } from '../../formats/safetensors/index.ts'
import { decodeBf16 } from '../../numerics/bf16.ts'
import type { AffineWeight, Mxfp8Weight } from '../../numerics/mlx-cpu/quantized-matmul.ts'

/** A Compressor's weights (the attention's, or a CSA indexer's). */
export interface MlxCompressorWeights {
  wkv: AffineWeight
  wgate: AffineWeight
  /** [ratio, width] bf16 values (the position bias). */
  ape: Float32Array
  /** [dim] bf16. */
  norm: Float32Array
  ratio: number
  /** Output width of the projections: 2·dim with the ratio-4 overlap, dim otherwise. */
  width: number
  dim: number
}

export interface MlxCpuLayerWeights {
  wkv: Mxfp8Weight
  kvNorm: Float32Array
  compressor: MlxCompressorWeights | null
  indexerCompressor: MlxCompressorWeights | null
}

export interface MlxCpuCacheWeights {
  metadata: Record<string, string>
  layers: MlxCpuLayerWeights[]
  /** Module path → `mode bits/g group` as the file's metadata lists it (e.g. `affine8/g64`). */
  modes: Map<string, string>
}

/** A module's quantization, read from the metadata's `{"affine8/g64": [paths], ...}`. */
function modesOf (metadata: Record<string, string>): Map<string, string> {
  const modes = new Map<string, string>()
  const table = JSON.parse(metadata.quantization ?? '{}') as Record<string, string[]>
  for (const [mode, paths] of Object.entries(table)) for (const p of paths) modes.set(p, mode)
  return modes
}

class WeightFile {
  constructor (readonly tensors: ReadonlyMap<string, Tensor>, readonly modes: Map<string, string>) {}

  get (name: string): Tensor {
    const t = this.tensors.get(name)
    if (t === undefined) throw new Error(`mlx-cpu cache weights: no tensor ${name}`)
    return t
  }

  has (name: string): boolean {
    return this.tensors.has(name)
  }

  bf16 (name: string): Float32Array {
    return decodeBf16(viewAs(this.get(name), 'BF16'))
  }

  /** The code bytes of a uint32-packed weight, [n, k] with k = 4 · words (8-bit codes). */
  codes (module: string): { codes: Uint8Array, n: number, k: number } {
    const t = this.get(`${module}.weight`)
    if (t.dtype !== 'U32' || t.shape.length !== 2) throw new Error(`mlx-cpu cache weights: ${module}.weight is ${t.dtype} [${t.shape}], not packed U32 [n, words]`)
    return { codes: t.data, n: t.shape[0], k: t.shape[1] * 4 }
  }

  expectMode (module: string, mode: string): void {
    const got = this.modes.get(module)
    if (got !== mode) throw new Error(`mlx-cpu cache path: ${module} is quantized as ${got ?? 'nothing'}, this path reads ${mode}`)
  }

  mxfp8 (module: string): Mxfp8Weight {
    this.expectMode(module, 'mxfp88/g32')
    const { codes, n, k } = this.codes(module)
    const s = this.get(`${module}.scales`)
    if (s.dtype !== 'U8' || s.shape[0] !== n || s.shape[1] * 32 !== k) throw new Error(`mlx-cpu cache weights: ${module}.scales is ${s.dtype} [${s.shape}]`)
    return { codes, scales: s.data, n, k }
  }

  affine8 (module: string): AffineWeight {
    this.expectMode(module, 'affine8/g64')
    const { codes, n, k } = this.codes(module)
    const scales = this.bf16(`${module}.scales`)
    const biases = this.bf16(`${module}.biases`)
    if (scales.length * 64 !== n * k || biases.length !== scales.length) throw new Error(`mlx-cpu cache weights: ${module} scales/biases do not fit [${n}, ${k}] in groups of 64`)
    return { codes, scales, biases, n, k, groupSize: 64 }
  }

  compressor (prefix: string): MlxCompressorWeights | null {
    if (!this.has(`${prefix}.ape`)) return null
    const wkv = this.affine8(`${prefix}.wkv`)
    const wgate = this.affine8(`${prefix}.wgate`)
    const apeT = this.get(`${prefix}.ape`)
    const norm = this.bf16(`${prefix}.norm.weight`)
    return { wkv, wgate, ape: this.bf16(`${prefix}.ape`), norm, ratio: apeT.shape[0], width: wkv.n, dim: norm.length }
  }
}

/** Reads an MLX cache-weights file (harness/fixtures/mlx/<model>-mxq-cache-weights.safetensors). */
export async function readMlxCpuCacheWeights (path: string): Promise<MlxCpuCacheWeights> {
  const { metadata, tensors } = await readSafetensors(path)
  return mlxCpuCacheWeightsFromTensors(metadata, tensors)
}

/** The cache path's weights from tensors in MLX's layout (a cache-weights file's, or an mlx-cpu sidecar's). */
export function mlxCpuCacheWeightsFromTensors (metadata: Record<string, string>, tensors: ReadonlyMap<string, Tensor>): MlxCpuCacheWeights {
  const file = new WeightFile(tensors, modesOf(metadata))
  const layers: MlxCpuLayerWeights[] = []
  for (let i = 0; file.has(`model.layers.${i}.attn.wkv.weight`); i++) {
    const p = `model.layers.${i}.attn`
    layers.push({
      wkv: file.mxfp8(`${p}.wkv`),
      kvNorm: file.bf16(`${p}.kv_norm.weight`),
      compressor: file.compressor(`${p}.compressor`),
      indexerCompressor: file.compressor(`${p}.indexer.compressor`),
    })
  }
  return { metadata, layers, modes: file.modes }
}
