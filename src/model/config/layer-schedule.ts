// Per-layer schedules (attention kind, compress ratio, MoE routing), folded from new or legacy keys
// exactly as transformers' DeepseekV4Config.__post_init__ does.
import { ConfigError } from '../../errors.ts'
import { DEFAULT_COMPRESS_RATES, DEFAULT_NUM_HASH_LAYERS } from './defaults.ts'
import type { RawConfig } from './schema.ts'
import { showValue } from './schema.ts'
import { LAYER_TYPES, MLP_LAYER_TYPES } from './types.ts'
import type { LayerType, MlpLayerType } from './types.ts'

/** The attention schedule of a config: kinds, per-layer ratios and the two rates. */
export interface AttentionSchedule {
  layerTypes: LayerType[]
  compressRatios: number[]
  compressRates: { csa: number, hca: number }
}

/** Resolve `compress_rates` (+ legacy `compress_rate_csa` / `compress_rate_hca` overrides). */
export function foldCompressRates (raw: RawConfig): { csa: number, hca: number } {
  const given = raw.compress_rates
  const rates = given
    ? { csa: given.compressed_sparse_attention, hca: given.heavily_compressed_attention }
    : { ...DEFAULT_COMPRESS_RATES }
  if (raw.compress_rate_csa != null) rates.csa = raw.compress_rate_csa
  if (raw.compress_rate_hca != null) rates.hca = raw.compress_rate_hca
  return rates
}

// transformers' V4-Pro fallback: two HCA layers, then HCA/CSA alternating (HCA first).
function proDefaultLayerTypes (n: number): LayerType[] {
  const types: LayerType[] = []
  for (let i = 0; i < Math.min(n, 2); i++) types.push('heavily_compressed_attention')
  for (let i = 0; i < n - 2; i++) types.push(i % 2 === 1 ? 'compressed_sparse_attention' : 'heavily_compressed_attention')
  return types
}

// Map legacy per-layer ratios to kinds: 0 -> sliding, csa rate -> CSA, hca rate -> HCA.
function layerTypesFromRatios (ratios: number[], rates: { csa: number, hca: number }): LayerType[] {
  if (rates.csa === rates.hca) {
    throw new ConfigError('compress_rates', `expected different CSA and HCA rates to read compress_ratios by, found both ${rates.csa}`)
  }
  return ratios.map((ratio, i) => {
    if (ratio === 0) return 'sliding_attention'
    if (ratio === rates.csa) return 'compressed_sparse_attention'
    if (ratio === rates.hca) return 'heavily_compressed_attention'
    throw new ConfigError(`compress_ratios[${i}]`, `expected 0, ${rates.csa} (CSA rate) or ${rates.hca} (HCA rate), found ${showValue(ratio)}`)
  })
}

// Lists longer than num_hidden_layers are cut (the tail is the MTP slots); shorter ones are an error.
function cutToLayers<T> (list: T[], n: number, field: string): T[] {
  if (list.length < n) {
    throw new ConfigError(field, `expected ${n} entries (num_hidden_layers), found ${list.length}`)
  }
  return list.slice(0, n)
}

/**
 * `layer_types` wins; else legacy `compress_ratios`; else transformers' V4-Pro default pattern.
 * The result is cut to `num_hidden_layers`.
 */
export function foldAttentionSchedule (raw: RawConfig): AttentionSchedule {
  const n = raw.num_hidden_layers
  const compressRates = foldCompressRates(raw)
  let layerTypes: LayerType[]
  if (raw.layer_types != null) {
    raw.layer_types.forEach((type, i) => {
      if (!(LAYER_TYPES as readonly string[]).includes(type)) {
        throw new ConfigError(`layer_types[${i}]`, `expected one of ${LAYER_TYPES.map(showValue).join(', ')}, found ${showValue(type)}`)
      }
    })
    layerTypes = cutToLayers(raw.layer_types as LayerType[], n, 'layer_types')
  } else if (raw.compress_ratios != null) {
    layerTypes = cutToLayers(layerTypesFromRatios(raw.compress_ratios, compressRates), n, 'compress_ratios')
  } else {
    layerTypes = proDefaultLayerTypes(n)
  }
  const compressRatios = layerTypes.map(type =>
    type === 'sliding_attention' ? 0 : type === 'compressed_sparse_attention' ? compressRates.csa : compressRates.hca)
  return { layerTypes, compressRatios, compressRates }
}

/** `mlp_layer_types` wins; else the first `num_hash_layers` (default 3) are hash_moe, the rest moe. */
export function foldMlpLayerTypes (raw: RawConfig): MlpLayerType[] {
  const n = raw.num_hidden_layers
  if (raw.mlp_layer_types != null) {
    raw.mlp_layer_types.forEach((type, i) => {
      if (!(MLP_LAYER_TYPES as readonly string[]).includes(type)) {
        throw new ConfigError(`mlp_layer_types[${i}]`, `expected one of ${MLP_LAYER_TYPES.map(showValue).join(', ')}, found ${showValue(type)}`)
      }
    })
    return cutToLayers(raw.mlp_layer_types as MlpLayerType[], n, 'mlp_layer_types')
  }
  const nHash = raw.num_hash_layers ?? DEFAULT_NUM_HASH_LAYERS
  const types: MlpLayerType[] = []
  for (let i = 0; i < n; i++) types.push(i < nHash ? 'hash_moe' : 'moe')
  return types
}
