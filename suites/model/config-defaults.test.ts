// Absent keys take transformers 5.17's DeepseekV4Config defaults.
import { describe, expect, it } from 'vitest'
import { defaultDeepseekV4Config, parseDeepseekV4Config } from '../../src/model/config.ts'

describe('a config with only model_type gets transformers defaults', () => {
  const cfg = parseDeepseekV4Config({ model_type: 'deepseek_v4' })

  it('sizes are V4-Flash sizes', () => {
    expect(cfg).toMatchObject({
      vocabSize: 129280, hiddenSize: 4096, numHiddenLayers: 43, numAttentionHeads: 64, numKeyValueHeads: 1,
      headDim: 512, qkRopeHeadDim: 64, qLoraRank: 1024, oGroups: 8, oLoraRank: 1024, slidingWindow: 128,
      indexNHeads: 64, indexHeadDim: 128, indexTopk: 512, hcMult: 4, hcSinkhornIters: 20, hcEps: 1e-6,
      rmsNormEps: 1e-6, nRoutedExperts: 256, numExpertsPerTok: 6, nSharedExperts: 1, moeIntermediateSize: 2048,
      scoringFunc: 'sqrtsoftplus', routedScalingFactor: 1.5, swigluLimit: 10, normTopkProb: true,
      maxPositionEmbeddings: 1048576, tieWordEmbeddings: false, bosTokenId: 0, eosTokenId: 1, padTokenId: null,
      numNextnPredictLayers: 1, initializerRange: 0.02, torchDtype: null,
      compressRates: { csa: 4, hca: 128 },
    })
  })

  it('layer types follow the V4-Pro fallback: HCA, HCA, then HCA/CSA alternating', () => {
    expect(cfg.layerTypes).toHaveLength(43)
    expect(cfg.layerTypes.slice(0, 6)).toEqual([
      'heavily_compressed_attention', 'heavily_compressed_attention',
      'heavily_compressed_attention', 'compressed_sparse_attention',
      'heavily_compressed_attention', 'compressed_sparse_attention',
    ])
    expect(cfg.layerTypes.includes('sliding_attention')).toBe(false)
    expect(parseDeepseekV4Config({ model_type: 'deepseek_v4', num_hidden_layers: 1 }).layerTypes).toEqual(['heavily_compressed_attention'])
  })

  it('the first three layers are hash_moe', () => {
    expect(cfg.mlpLayerTypes.slice(0, 4)).toEqual(['hash_moe', 'hash_moe', 'hash_moe', 'moe'])
    expect(cfg.mlpLayerTypes.filter(t => t === 'hash_moe')).toHaveLength(3)
  })

  it('rope is plain on both kinds (no rope_scaling means no YaRN): theta 10000 main, 160000 compress', () => {
    expect(cfg.rope.main).toMatchObject({ ropeType: 'default', theta: 10000, ropeDim: 64, originalMaxPositionEmbeddings: null })
    expect(cfg.rope.compress).toMatchObject({ ropeType: 'default', theta: 160000, ropeDim: 64, originalMaxPositionEmbeddings: null })
  })

  it('defaultDeepseekV4Config is the same thing, with overrides in config.json keys', () => {
    expect(defaultDeepseekV4Config()).toEqual(cfg)
    const small = defaultDeepseekV4Config({ num_hidden_layers: 2, hidden_size: 256 })
    expect(small.numHiddenLayers).toBe(2)
    expect(small.hiddenSize).toBe(256)
    expect(small.layerTypes).toHaveLength(2)
  })
})
