// The parameter list: exact transformers names and shapes, dtypes by _keep_in_fp32_modules_strict.
import { describe, it, expect } from 'vitest'
import { expectedParameters, paramDtype, presetConfig, presetConfigJson } from '../../src/model/checkpoint/index.ts'
import { LONG_PRESET_WINDOW } from '../../src/model/checkpoint/presets.ts'
import { parseDeepseekV4Config } from '../../src/model/config.ts'

const tiny = presetConfig('tiny')
const specs = expectedParameters(tiny)
const byName = new Map(specs.map((s) => [s.name, s]))

// Shapes for hidden 256, heads 4, head_dim 128, q_lora 128, o_groups 2, o_lora 64, 8 experts,
// intermediate 128, index 4 x 128, hc_mult 4, vocab 512, top-2 routing: written out by hand from
// research/transformers-v4-facts.md, not computed by the code under test.
const TINY_TABLE: Array<[string, number[]]> = [
  ['model.embed_tokens.weight', [512, 256]],
  ['model.layers.0.attn_hc.fn', [24, 1024]],
  ['model.layers.0.attn_hc.base', [24]],
  ['model.layers.0.attn_hc.scale', [3]],
  ['model.layers.0.ffn_hc.fn', [24, 1024]],
  ['model.layers.0.ffn_hc.base', [24]],
  ['model.layers.0.ffn_hc.scale', [3]],
  ['model.layers.0.input_layernorm.weight', [256]],
  ['model.layers.0.post_attention_layernorm.weight', [256]],
  ['model.layers.0.self_attn.q_a_proj.weight', [128, 256]],
  ['model.layers.0.self_attn.q_a_norm.weight', [128]],
  ['model.layers.0.self_attn.q_b_proj.weight', [512, 128]],
  ['model.layers.0.self_attn.kv_proj.weight', [128, 256]],
  ['model.layers.0.self_attn.kv_norm.weight', [128]],
  ['model.layers.0.self_attn.o_a_proj.weight', [128, 256]],
  ['model.layers.0.self_attn.o_b_proj.weight', [256, 128]],
  ['model.layers.0.self_attn.sinks', [4]],
  ['model.layers.0.mlp.gate.weight', [8, 256]],
  ['model.layers.0.mlp.gate.tid2eid', [512, 2]],
  ['model.layers.0.mlp.experts.gate_up_proj', [8, 256, 256]],
  ['model.layers.0.mlp.experts.down_proj', [8, 256, 128]],
  ['model.layers.0.mlp.shared_experts.gate_proj.weight', [128, 256]],
  ['model.layers.0.mlp.shared_experts.up_proj.weight', [128, 256]],
  ['model.layers.0.mlp.shared_experts.down_proj.weight', [256, 128]],
  ['model.layers.1.self_attn.compressor.kv_proj.weight', [256, 256]],
  ['model.layers.1.self_attn.compressor.gate_proj.weight', [256, 256]],
  ['model.layers.1.self_attn.compressor.position_bias', [4, 256]],
  ['model.layers.1.self_attn.compressor.kv_norm.weight', [128]],
  ['model.layers.1.self_attn.compressor.indexer.kv_proj.weight', [256, 256]],
  ['model.layers.1.self_attn.compressor.indexer.gate_proj.weight', [256, 256]],
  ['model.layers.1.self_attn.compressor.indexer.position_bias', [4, 256]],
  ['model.layers.1.self_attn.compressor.indexer.kv_norm.weight', [128]],
  ['model.layers.1.self_attn.compressor.indexer.q_b_proj.weight', [512, 128]],
  ['model.layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight', [4, 256]],
  ['model.layers.1.mlp.gate.e_score_correction_bias', [8]],
  ['model.layers.2.self_attn.compressor.kv_proj.weight', [128, 256]],
  ['model.layers.2.self_attn.compressor.gate_proj.weight', [128, 256]],
  ['model.layers.2.self_attn.compressor.position_bias', [128, 128]],
  ['model.layers.2.self_attn.compressor.kv_norm.weight', [128]],
  ['model.norm.weight', [256]],
  ['model.hc_head.hc_fn', [4, 1024]],
  ['model.hc_head.hc_base', [4]],
  ['model.hc_head.hc_scale', [1]],
  ['lm_head.weight', [512, 256]],
]

describe('tiny preset parameters have transformers names and shapes', () => {
  it.each(TINY_TABLE)('%s has shape %j', (name, shape) => {
    expect(byName.get(name)?.shape).toEqual(shape)
  })

  it('has exactly the per-layer sets the layer types imply (122 tensors in all)', () => {
    // Per layer: 8 attention + 7 MoE (router buffer included) + 2 norms + 6 hyper-connection = 23;
    // CSA adds 10 (compressor 4, indexer 6), HCA adds 4. Globals: embedding, norm, 3 hc_head, lm_head.
    const perLayer = (n: number) => specs.filter((s) => s.name.startsWith(`model.layers.${n}.`)).length
    expect([0, 1, 2, 3].map(perLayer)).toEqual([23, 33, 27, 33])
    expect(specs.length).toBe(1 + 23 + 33 + 27 + 33 + 1 + 3 + 1)
  })

  it('gives hash layers tid2eid and top-k layers e_score_correction_bias, never both', () => {
    for (let n = 0; n < 4; n++) {
      const hash = tiny.mlpLayerTypes[n] === 'hash_moe'
      expect(byName.has(`model.layers.${n}.mlp.gate.tid2eid`)).toBe(hash)
      expect(byName.has(`model.layers.${n}.mlp.gate.e_score_correction_bias`)).toBe(!hash)
    }
  })

  it('has no compressor on the sliding layer and no non-persistent buffers anywhere', () => {
    expect(specs.some((s) => s.name.startsWith('model.layers.0.self_attn.compressor'))).toBe(false)
    expect(specs.some((s) => /inv_freq|rotary_emb|q_b_norm|input_norm/.test(s.name))).toBe(false)
  })

  it('has unique names', () => {
    expect(new Set(specs.map((s) => s.name)).size).toBe(specs.length)
  })
})

describe('dtypes follow _keep_in_fp32_modules_strict', () => {
  it.each([
    ['model.layers.3.attn_hc.fn', 'F32'],
    ['model.layers.3.ffn_hc.scale', 'F32'],
    ['model.hc_head.hc_fn', 'F32'],
    ['model.layers.1.self_attn.sinks', 'F32'],
    ['model.layers.1.self_attn.compressor.position_bias', 'F32'],
    ['model.layers.1.self_attn.compressor.indexer.position_bias', 'F32'],
    ['model.layers.1.mlp.gate.e_score_correction_bias', 'F32'],
    ['model.layers.1.self_attn.q_a_norm.weight', 'F32'],
    ['model.layers.1.self_attn.kv_norm.weight', 'F32'],
    ['model.layers.1.self_attn.compressor.kv_norm.weight', 'F32'],
    ['model.layers.1.self_attn.compressor.indexer.kv_norm.weight', 'F32'],
    ['model.layers.1.input_layernorm.weight', 'F32'],
    ['model.layers.1.post_attention_layernorm.weight', 'F32'],
    ['model.norm.weight', 'F32'],
    ['model.layers.0.mlp.gate.tid2eid', 'I64'],
    ['model.layers.1.self_attn.q_a_proj.weight', 'BF16'],
    ['model.layers.1.self_attn.compressor.kv_proj.weight', 'BF16'],
    ['model.layers.1.mlp.gate.weight', 'BF16'],
    ['model.layers.1.mlp.experts.gate_up_proj', 'BF16'],
    ['model.embed_tokens.weight', 'BF16'],
    ['lm_head.weight', 'BF16'],
  ])('%s is %s', (name, dtype) => {
    expect(paramDtype(name)).toBe(dtype)
    expect(byName.get(name)?.dtype).toBe(dtype)
  })

  it('matches whole name components only (a module named "norms" or "xnorm" is not kept in fp32)', () => {
    expect(paramDtype('model.norms.weight')).toBe('BF16')
    expect(paramDtype('model.xnorm.weight')).toBe('BF16')
  })
})

describe('config variations change the list as transformers would', () => {
  it('drops lm_head.weight when embeddings are tied', () => {
    const cfg = parseDeepseekV4Config({ ...presetConfigJson('tiny'), tie_word_embeddings: true })
    const names = expectedParameters(cfg).map((s) => s.name)
    expect(names).not.toContain('lm_head.weight')
    expect(names.length).toBe(specs.length - 1)
  })

  it('sizes position biases by the configured compress rates', () => {
    const cfg = parseDeepseekV4Config({ ...presetConfigJson('tiny'), compress_rates: { compressed_sparse_attention: 8, heavily_compressed_attention: 64 } })
    const list = new Map(expectedParameters(cfg).map((s) => [s.name, s.shape]))
    expect(list.get('model.layers.1.self_attn.compressor.position_bias')).toEqual([8, 256])
    expect(list.get('model.layers.2.self_attn.compressor.position_bias')).toEqual([64, 128])
  })
})

describe('the small preset builds its config and parameter list', () => {
  it('has the documented sizes and about 138M parameters', () => {
    const cfg = presetConfig('small')
    expect([cfg.vocabSize, cfg.hiddenSize, cfg.numHiddenLayers, cfg.numAttentionHeads, cfg.headDim, cfg.qkRopeHeadDim]).toEqual([4096, 1024, 8, 8, 256, 64])
    expect(cfg.layerTypes.map((t) => t[0])).toEqual(['s', 's', 'c', 'h', 'c', 'h', 'c', 's'])
    expect(cfg.mlpLayerTypes.filter((t) => t === 'hash_moe').length).toBe(2)
    expect([cfg.nRoutedExperts, cfg.numExpertsPerTok, cfg.moeIntermediateSize, cfg.indexTopk]).toEqual([16, 4, 256, 64])
    expect([cfg.rope.compress.factor, cfg.rope.compress.originalMaxPositionEmbeddings, cfg.maxPositionEmbeddings]).toEqual([16, 4096, 65536])
    const list = expectedParameters(cfg)
    expect(list.reduce((a, s) => a + s.shape.reduce((x, y) => x * y, 1), 0)).toBe(138_453_205)
    expect(list.find((s) => s.name === 'model.layers.0.self_attn.o_a_proj.weight')?.shape).toEqual([512, 512])
  })
})

describe('the long preset serves a million positions on the tiny architecture', () => {
  it('is tiny with the documented window, YaRN and a one-head indexer (docs/long-runs.md)', () => {
    const cfg = presetConfig('long')
    const tiny = presetConfig('tiny')
    expect([cfg.hiddenSize, cfg.numHiddenLayers, cfg.headDim, cfg.vocabSize]).toEqual([tiny.hiddenSize, tiny.numHiddenLayers, tiny.headDim, tiny.vocabSize])
    expect(cfg.layerTypes).toEqual(['sliding_attention', 'compressed_sparse_attention', 'heavily_compressed_attention', 'sliding_attention'])
    expect([cfg.indexNHeads, cfg.indexHeadDim]).toEqual([1, 64])
    expect(cfg.maxPositionEmbeddings).toBe(LONG_PRESET_WINDOW)
    expect(LONG_PRESET_WINDOW).toBe(1_048_576)
    expect([cfg.rope.compress.factor, cfg.rope.compress.originalMaxPositionEmbeddings]).toEqual([32, 32_768])
    expect(cfg.rope.compress.factor * (cfg.rope.compress.originalMaxPositionEmbeddings ?? 0)).toBe(cfg.maxPositionEmbeddings)
    // It round-trips through the parser as transformers' config.json.
    expect(parseDeepseekV4Config(presetConfigJson('long')).maxPositionEmbeddings).toBe(LONG_PRESET_WINDOW)
  })
})
