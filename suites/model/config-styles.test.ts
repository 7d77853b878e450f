// Both config styles (new nested, legacy flat) load to the same config, and the writer round-trips.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import {
  deepseekV4FlashConfigJson, parseDeepseekV4Config, ropeParamsForLayer, toHfConfigJson,
} from '../../src/model/config.ts'

const examplePath = new URL('./fixtures/hf-config-example.json', import.meta.url)
// What transformers 5.17 save_pretrained wrote for the legacy config below.
const example = JSON.parse(readFileSync(examplePath, 'utf8')) as Record<string, unknown>

// The legacy keys that example was created from (everything else at transformers' defaults).
function legacyOfExample (): Record<string, unknown> {
  return {
    model_type: 'deepseek_v4',
    vocab_size: 512,
    hidden_size: 256,
    num_hidden_layers: 4,
    compress_ratios: [0, 4, 128, 4],
    rope_scaling: { type: 'yarn', factor: 16, original_max_position_embeddings: 1024, beta_fast: 32, beta_slow: 1 },
  }
}

// The example minus the legacy `type` echo inside rope_parameters.compress (see toHfConfigJson's doc).
function exampleWithoutTypeEcho (): Record<string, unknown> {
  const copy = structuredClone(example) as { rope_parameters: { compress: Record<string, unknown> } }
  delete copy.rope_parameters.compress.type
  return copy as unknown as Record<string, unknown>
}

describe('new-style and legacy configs parse to the same config', () => {
  it('the save_pretrained example equals its legacy source', () => {
    const fromNew = parseDeepseekV4Config(example)
    const fromLegacy = parseDeepseekV4Config(legacyOfExample())
    expect(fromLegacy).toEqual(fromNew)
    expect(fromNew.layerTypes).toEqual(['sliding_attention', 'compressed_sparse_attention', 'heavily_compressed_attention', 'compressed_sparse_attention'])
    expect(fromNew.compressRatios).toEqual([0, 4, 128, 4])
    expect(fromNew.mlpLayerTypes).toEqual(['hash_moe', 'hash_moe', 'hash_moe', 'moe'])
    expect(fromNew.rope.compress).toEqual({
      ropeType: 'yarn', theta: 160000, factor: 16, originalMaxPositionEmbeddings: 1024, betaFast: 32, betaSlow: 1,
      attentionFactor: 1, partialRotaryFactor: 0.125, ropeDim: 64, truncate: true,
    })
    expect(fromNew.rope.main).toEqual({
      ropeType: 'default', theta: 10000, factor: 1, originalMaxPositionEmbeddings: null, betaFast: 32, betaSlow: 1,
      attentionFactor: 1, partialRotaryFactor: 0.125, ropeDim: 64, truncate: true,
    })
  })

  it('a flat rope_parameters dict is read like rope_scaling', () => {
    const legacy = legacyOfExample()
    legacy.rope_parameters = legacy.rope_scaling
    delete legacy.rope_scaling
    expect(parseDeepseekV4Config(legacy)).toEqual(parseDeepseekV4Config(example))
  })

  it('a non-empty rope_scaling wins over nested rope_parameters, as in transformers', () => {
    const json = structuredClone(example)
    json.rope_scaling = { rope_type: 'yarn', factor: 32, original_max_position_embeddings: 1024 }
    const cfg = parseDeepseekV4Config(json)
    expect(cfg.rope.compress.factor).toBe(32)
    // An empty rope_scaling is falsy in Python and leaves the nested dict in charge.
    json.rope_scaling = {}
    expect(parseDeepseekV4Config(json).rope.compress.factor).toBe(16)
  })

  it('the flat dict rope_theta is ignored: compress takes compress_rope_theta, main takes rope_theta', () => {
    const legacy = legacyOfExample()
    legacy.rope_scaling = { type: 'yarn', factor: 16, original_max_position_embeddings: 1024, rope_theta: 77 }
    legacy.rope_theta = 20000
    legacy.compress_rope_theta = 320000
    const cfg = parseDeepseekV4Config(legacy)
    expect(cfg.rope.main.theta).toBe(20000)
    expect(cfg.rope.compress.theta).toBe(320000)
  })
})

describe('legacy keys fold as transformers __post_init__ does', () => {
  it('compress_ratios longer than num_hidden_layers is cut (the MTP slot)', () => {
    const legacy = legacyOfExample()
    legacy.compress_ratios = [0, 4, 128, 4, 0]
    expect(parseDeepseekV4Config(legacy).layerTypes).toHaveLength(4)
  })

  it('layer_types wins over compress_ratios when both are present', () => {
    const json = structuredClone(example)
    json.compress_ratios = [128, 128, 128, 128]
    expect(parseDeepseekV4Config(json).compressRatios).toEqual([0, 4, 128, 4])
  })

  it('num_hash_layers sets how many leading layers are hash_moe', () => {
    const legacy = { ...legacyOfExample(), num_hash_layers: 1 }
    expect(parseDeepseekV4Config(legacy).mlpLayerTypes).toEqual(['hash_moe', 'moe', 'moe', 'moe'])
    const none = { ...legacyOfExample(), num_hash_layers: 0 }
    expect(parseDeepseekV4Config(none).mlpLayerTypes).toEqual(['moe', 'moe', 'moe', 'moe'])
    const many = { ...legacyOfExample(), num_hash_layers: 9 }
    expect(parseDeepseekV4Config(many).mlpLayerTypes).toEqual(['hash_moe', 'hash_moe', 'hash_moe', 'hash_moe'])
  })

  it('compress_rate_csa / compress_rate_hca override the rates, and compress_ratios is read by them', () => {
    const legacy = { ...legacyOfExample(), compress_rate_csa: 8, compress_rate_hca: 64, compress_ratios: [0, 8, 64, 8] }
    const cfg = parseDeepseekV4Config(legacy)
    expect(cfg.compressRates).toEqual({ csa: 8, hca: 64 })
    expect(cfg.layerTypes).toEqual(['sliding_attention', 'compressed_sparse_attention', 'heavily_compressed_attention', 'compressed_sparse_attention'])
    expect(cfg.compressRatios).toEqual([0, 8, 64, 8])
  })

  it('qk_rope_head_dim sets partial_rotary_factor when that is absent', () => {
    const legacy = { ...legacyOfExample(), head_dim: 128, qk_rope_head_dim: 32 }
    const cfg = parseDeepseekV4Config(legacy)
    expect(cfg.qkRopeHeadDim).toBe(32)
    expect(cfg.rope.main.partialRotaryFactor).toBe(0.25)
    expect(cfg.rope.compress.ropeDim).toBe(32)
  })

  it('without either, partial_rotary_factor is 64/512 whatever head_dim is', () => {
    const cfg = parseDeepseekV4Config({ ...legacyOfExample(), head_dim: 256 })
    expect(cfg.qkRopeHeadDim).toBe(32)
  })

  it('a nested dict missing rope_theta takes the TOP-LEVEL rope_theta, even for compress (theta trap)', () => {
    const json = structuredClone(example) as { rope_parameters: { compress: Record<string, unknown> } }
    delete json.rope_parameters.compress.rope_theta
    const cfg = parseDeepseekV4Config(json)
    expect(cfg.rope.compress.theta).toBe(10000)
  })

  it('a nested dict with only the legacy "type" key reads it as rope_type', () => {
    const json = structuredClone(example) as { rope_parameters: { compress: Record<string, unknown> } }
    delete json.rope_parameters.compress.rope_type
    expect(parseDeepseekV4Config(json).rope.compress.ropeType).toBe('yarn')
  })

  it('missing betas take the YaRN defaults 32 and 1', () => {
    const legacy = legacyOfExample()
    legacy.rope_scaling = { type: 'yarn', factor: 4, original_max_position_embeddings: 2048 }
    const cfg = parseDeepseekV4Config(legacy)
    expect([cfg.rope.compress.betaFast, cfg.rope.compress.betaSlow]).toEqual([32, 1])
  })

  it('dtype and torch_dtype are both read, dtype first', () => {
    expect(parseDeepseekV4Config({ ...legacyOfExample(), torch_dtype: 'bfloat16' }).torchDtype).toBe('bfloat16')
    expect(parseDeepseekV4Config({ ...legacyOfExample(), torch_dtype: 'bfloat16', dtype: 'float32' }).torchDtype).toBe('float32')
    expect(parseDeepseekV4Config(legacyOfExample()).torchDtype).toBeNull()
  })

  it('a truncate key in a nested dict is ignored (transformers reads truncate from the outer dict)', () => {
    const json = structuredClone(example) as { rope_parameters: { compress: Record<string, unknown> } }
    json.rope_parameters.compress.truncate = false
    expect(parseDeepseekV4Config(json).rope.compress.truncate).toBe(true)
  })
})

describe('toHfConfigJson writes what save_pretrained writes', () => {
  it('matches the example key for key and value for value (bar the legacy type echo)', () => {
    const written = toHfConfigJson(parseDeepseekV4Config(legacyOfExample()))
    const expected = exampleWithoutTypeEcho()
    expect(Object.keys(written)).toEqual(Object.keys(expected))
    expect(written).toEqual(expected)
  })

  it('round-trips through the parser for the example, the Flash config and a config with a dtype', () => {
    for (const json of [example, deepseekV4FlashConfigJson(), { ...legacyOfExample(), torch_dtype: 'bfloat16', eos_token_id: [1, 2] }]) {
      const cfg = parseDeepseekV4Config(json)
      const again = parseDeepseekV4Config(JSON.parse(JSON.stringify(toHfConfigJson(cfg))))
      expect(again).toEqual(cfg)
    }
  })

  it('writes the dtype under "dtype" only when one is set', () => {
    expect(toHfConfigJson(parseDeepseekV4Config({ ...legacyOfExample(), torch_dtype: 'bfloat16' })).dtype).toBe('bfloat16')
    expect('dtype' in toHfConfigJson(parseDeepseekV4Config(legacyOfExample()))).toBe(false)
  })

  it('writes keys sorted at every level', () => {
    const written = toHfConfigJson(parseDeepseekV4Config(example)) as { rope_parameters: { compress: object } }
    const keys = Object.keys(written)
    expect(keys).toEqual([...keys].sort())
    const inner = Object.keys(written.rope_parameters.compress)
    expect(inner).toEqual([...inner].sort())
  })
})

describe('ropeParamsForLayer picks main for sliding layers and compress for CSA/HCA', () => {
  it('follows the layer types', () => {
    const cfg = parseDeepseekV4Config(example)
    expect(ropeParamsForLayer(cfg, 0)).toBe(cfg.rope.main)
    expect(ropeParamsForLayer(cfg, 1)).toBe(cfg.rope.compress)
    expect(ropeParamsForLayer(cfg, 2)).toBe(cfg.rope.compress)
    expect(ropeParamsForLayer(cfg, 3)).toBe(cfg.rope.compress)
  })
})

describe('the V4-Flash config', () => {
  it('has the real layer pattern: sliding 0-1, CSA on even 2..42, HCA on odd 3..41', () => {
    const cfg = parseDeepseekV4Config(deepseekV4FlashConfigJson())
    expect(cfg.numHiddenLayers).toBe(43)
    cfg.layerTypes.forEach((type, layer) => {
      const expected = layer < 2 ? 'sliding_attention' : layer % 2 === 0 ? 'compressed_sparse_attention' : 'heavily_compressed_attention'
      expect(type, `layer ${layer}`).toBe(expected)
    })
    expect(cfg.rope.compress).toMatchObject({ ropeType: 'yarn', theta: 160000, factor: 16, originalMaxPositionEmbeddings: 65536, attentionFactor: 1 })
    expect(cfg.rope.main).toMatchObject({ ropeType: 'default', theta: 10000 })
  })
})
