// The cache path's weights as MLX holds them, made from an ordinary checkpoint without MLX: what
// harness/mlx/omlx_reference.py --dtype bfloat16 --quantize does to it (mlx_lm.convert's cast of
// every floating tensor to bf16 but the model's cast_predicate exclusions, none of which is on the
// cache path, then nn.quantize with the model's make_quantization_config: `.attn.w*` mxfp8 g32,
// the compressors' wkv/wgate affine 8-bit g64), with src/numerics/mlx-cpu/quantize.ts for
// mx.quantize. The result has the layout readMlxCpuCacheWeights reads from MLX's own file.
//
// Names: the checkpoint is read under our internal (transformers) names; oMLX's module names are
// DeepSeek's (naming.ts's LAYER_RULES) with the `model.` prefix, except the attention's kv norm,
// which save_pretrained writes as `attn.norm` and oMLX's module calls `attn.kv_norm`
// (omlx_reference.py hub_names). The CSA indexer's compressor is `attn.indexer.compressor`.
import type { LoadedCheckpoint as FullCheckpoint } from '../../model/checkpoint/load.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import { bf16Array } from '../../numerics/mlx-cpu/bf16-round.ts'
import { affineQuantize, mxfp8Quantize } from '../../numerics/mlx-cpu/quantize.ts'
import type { AffineWeight, Mxfp8Weight } from '../../numerics/mlx-cpu/quantized-matmul.ts'
import type { MlxCompressorWeights, MlxCpuCacheWeights, MlxCpuLayerWeights } from './weights.ts'

/** A checkpoint's config and (at least the cache path's) weights: a whole loaded one, or export-weights' kv-path read. */
type LoadedCheckpoint = Pick<FullCheckpoint, 'config' | 'weights'>

const MXFP8 = 'mxfp88/g32'
const MXFP4 = 'mxfp44/g32'
const AFFINE8 = 'affine8/g64'

/** A tensor cast to bf16 as `v.astype(mx.bfloat16)` does (round to nearest even), as values. */
function castBf16 (ckpt: LoadedCheckpoint, name: string): { values: Float32Array, shape: number[] } {
  const t = ckpt.weights.get(name)
  // f32() shares an F32 tensor's memory: copy before rounding in place.
  const values = t.dtype === 'F32' ? ckpt.weights.f32(name).slice() : ckpt.weights.f32(name)
  return { values: bf16Array(values), shape: [...t.shape] }
}

function linear2d (ckpt: LoadedCheckpoint, name: string): { values: Float32Array, rows: number, cols: number } {
  const { values, shape } = castBf16(ckpt, name)
  if (shape.length !== 2) throw new Error(`mlx-cpu weights from checkpoint: ${name} is [${shape}], not a 2-D linear weight`)
  return { values, rows: shape[0], cols: shape[1] }
}

function mxfp8 (ckpt: LoadedCheckpoint, name: string): Mxfp8Weight {
  const { values, rows, cols } = linear2d(ckpt, name)
  const q = mxfp8Quantize(values, rows, cols)
  return { codes: q.codes, scales: q.scales, n: rows, k: cols }
}

function affine8 (ckpt: LoadedCheckpoint, name: string): AffineWeight {
  const { values, rows, cols } = linear2d(ckpt, name)
  const q = affineQuantize(values, rows, cols, 8, 64)
  return { codes: q.codes, scales: q.scales, biases: q.biases, n: rows, k: cols, groupSize: 64 }
}

/** A compressor's weights; `internal` is `model.layers.N.self_attn.compressor` or its `.indexer`. */
function compressor (ckpt: LoadedCheckpoint, internal: string): MlxCompressorWeights | null {
  if (!ckpt.weights.has(`${internal}.position_bias`)) return null
  const wkv = affine8(ckpt, `${internal}.kv_proj.weight`)
  const wgate = affine8(ckpt, `${internal}.gate_proj.weight`)
  const ape = castBf16(ckpt, `${internal}.position_bias`)
  const norm = castBf16(ckpt, `${internal}.kv_norm.weight`).values
  return { wkv, wgate, ape: ape.values, norm, ratio: ape.shape[0], width: wkv.n, dim: norm.length }
}

/**
 * The quantization make_quantization_config gives every QuantizedLinear of oMLX's model for `cfg`
 * (module path → `mode bits/g group`, as omlx_reference.py records it): `.attn.w*` and
 * `.attn.indexer.wq*` and the shared experts mxfp8, the routed experts mxfp4, everything else
 * quantizable (compressors, the indexer's weights_proj, embedding, lm_head) affine 8-bit g64.
 */
export function mlxQuantizationModes (cfg: DeepseekV4Config): Map<string, string> {
  const modes = new Map<string, string>()
  modes.set('model.embed_tokens', AFFINE8)
  for (let i = 0; i < cfg.numHiddenLayers; i++) {
    const p = `model.layers.${i}`
    for (const m of ['wq_a', 'wq_b', 'wkv', 'wo_a', 'wo_b']) modes.set(`${p}.attn.${m}`, MXFP8)
    const type = cfg.layerTypes[i]
    if (type !== 'sliding_attention') {
      modes.set(`${p}.attn.compressor.wkv`, AFFINE8)
      modes.set(`${p}.attn.compressor.wgate`, AFFINE8)
    }
    if (type === 'compressed_sparse_attention') {
      modes.set(`${p}.attn.indexer.wq_b`, MXFP8)
      modes.set(`${p}.attn.indexer.weights_proj`, AFFINE8)
      modes.set(`${p}.attn.indexer.compressor.wkv`, AFFINE8)
      modes.set(`${p}.attn.indexer.compressor.wgate`, AFFINE8)
    }
    for (const m of ['gate_proj', 'up_proj', 'down_proj']) {
      modes.set(`${p}.ffn.shared_experts.${m}`, MXFP8)
      modes.set(`${p}.ffn.switch_mlp.${m}`, MXFP4)
    }
  }
  modes.set('lm_head', AFFINE8)
  return modes
}

/**
 * The cache path's weights (every layer's mxfp8 wkv and kv norm, each compressor's affine-8 wkv
 * and wgate, ape and norm) computed from `ckpt` as MLX would hold them after oMLX's bf16 cast and
 * quantization: bit for bit what readMlxCpuCacheWeights reads from omlx_reference.py's
 * --save-cache-weights file for the same checkpoint.
 */
export function mlxCpuCacheWeightsFromCheckpoint (ckpt: LoadedCheckpoint): MlxCpuCacheWeights {
  const cfg = ckpt.config
  const layers: MlxCpuLayerWeights[] = []
  for (let i = 0; i < cfg.numHiddenLayers; i++) {
    const attn = `model.layers.${i}.self_attn`
    layers.push({
      wkv: mxfp8(ckpt, `${attn}.kv_proj.weight`),
      kvNorm: castBf16(ckpt, `${attn}.kv_norm.weight`).values,
      compressor: compressor(ckpt, `${attn}.compressor`),
      indexerCompressor: compressor(ckpt, `${attn}.compressor.indexer`),
    })
  }
  const modes = mlxQuantizationModes(cfg)
  const table: Record<string, string[]> = {}
  for (const [path, mode] of modes) (table[mode] ??= []).push(path)
  for (const paths of Object.values(table)) paths.sort()
  const metadata = { producer: 'src/capture/mlx-cpu/from-checkpoint.ts', quantization: JSON.stringify(table) }
  return { metadata, layers, modes }
}
