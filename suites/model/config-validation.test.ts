// Every invalid config is refused with a ConfigError naming the field, what was expected and what was found.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/errors.ts'
import {
  loadDeepseekV4Config, parseDeepseekV4Config, ropeParamsForLayer, toHfConfigJson,
} from '../../src/model/config.ts'

// A valid 4-layer legacy config; each case changes one thing.
function base (): Record<string, unknown> {
  return {
    model_type: 'deepseek_v4',
    vocab_size: 512,
    hidden_size: 256,
    num_hidden_layers: 4,
    compress_ratios: [0, 4, 128, 4],
    rope_scaling: { type: 'yarn', factor: 16, original_max_position_embeddings: 1024, beta_fast: 32, beta_slow: 1 },
  }
}

function nested (): Record<string, unknown> {
  return {
    model_type: 'deepseek_v4',
    num_hidden_layers: 4,
    layer_types: ['sliding_attention', 'compressed_sparse_attention', 'heavily_compressed_attention', 'compressed_sparse_attention'],
    rope_parameters: {
      main: { rope_type: 'default', rope_theta: 10000, partial_rotary_factor: 0.125 },
      compress: { rope_type: 'yarn', rope_theta: 160000, factor: 16, original_max_position_embeddings: 65536, attention_factor: 1 },
    },
  }
}

function configError (action: () => unknown): ConfigError {
  try {
    action()
  } catch (err) {
    if (err instanceof ConfigError) return err
    throw err
  }
  throw new Error('expected a ConfigError, but the config was accepted')
}

// Assert the error names `field` and its message contains each fragment.
function expectRefused (json: unknown, field: string, ...fragments: string[]): void {
  const err = configError(() => parseDeepseekV4Config(json))
  expect(err.field).toBe(field)
  expect(err.message.startsWith(`${field}: `)).toBe(true)
  for (const fragment of fragments) expect(err.message).toContain(fragment)
}

describe('model_type must be deepseek_v4', () => {
  it('refuses another model type and a missing one', () => {
    expectRefused({ ...base(), model_type: 'deepseek_v3' }, 'model_type', 'expected "deepseek_v4"', 'found "deepseek_v3"')
    const missing = base()
    delete missing.model_type
    expectRefused(missing, 'model_type', 'found nothing (key missing)')
  })
})

describe('the config must be a JSON object', () => {
  it('refuses null, an array and a number', () => {
    expectRefused(null, '(root)', 'expected an object', 'found null')
    expectRefused([1], '(root)', 'expected an object', 'found [1]')
    expectRefused(5, '(root)', 'expected an object', 'found 5')
  })
})

describe('sizes must be positive integers', () => {
  it('refuses negative, zero, fractional, string and null sizes', () => {
    expectRefused({ ...base(), hidden_size: -1 }, 'hidden_size', 'expected a number > 0', 'found -1')
    expectRefused({ ...base(), num_hidden_layers: 0 }, 'num_hidden_layers', 'found 0')
    expectRefused({ ...base(), head_dim: 1.5 }, 'head_dim', 'expected an integer', 'found 1.5')
    expectRefused({ ...base(), vocab_size: '512' }, 'vocab_size', 'expected a number', 'found "512"')
    expectRefused({ ...base(), q_lora_rank: null }, 'q_lora_rank', 'found null')
    expectRefused({ ...base(), n_shared_experts: -1 }, 'n_shared_experts', 'expected a number >= 0', 'found -1')
  })

  it('refuses sliding_window <= 0', () => {
    expectRefused({ ...base(), sliding_window: 0 }, 'sliding_window', 'expected a number > 0', 'found 0')
  })

  it('refuses a negative eps', () => {
    expectRefused({ ...base(), rms_norm_eps: -1e-6 }, 'rms_norm_eps', 'found -0.000001')
  })
})

describe('layer_types must list num_hidden_layers known kinds', () => {
  it('refuses a short list', () => {
    const json = nested()
    json.layer_types = ['sliding_attention', 'compressed_sparse_attention', 'heavily_compressed_attention']
    expectRefused(json, 'layer_types', 'expected 4 entries (num_hidden_layers)', 'found 3')
  })

  it('refuses an unknown kind, naming its index', () => {
    const json = nested()
    json.layer_types = ['sliding_attention', 'compressed_sparse_attention', 'full_attention', 'compressed_sparse_attention']
    expectRefused(json, 'layer_types[2]', '"heavily_compressed_attention"', 'found "full_attention"')
  })

  it('refuses a short or unknown mlp_layer_types', () => {
    expectRefused({ ...base(), mlp_layer_types: ['moe'] }, 'mlp_layer_types', 'expected 4 entries', 'found 1')
    expectRefused({ ...base(), mlp_layer_types: ['moe', 'dense', 'moe', 'moe'] }, 'mlp_layer_types[1]', '"hash_moe", "moe"', 'found "dense"')
  })
})

describe('compress_ratios entries must be 0, the CSA rate or the HCA rate', () => {
  it('refuses 64 with the default rates', () => {
    expectRefused({ ...base(), compress_ratios: [0, 4, 64, 4] }, 'compress_ratios[2]', 'expected 0, 4 (CSA rate) or 128 (HCA rate)', 'found 64')
  })

  it('reads the list by the configured rates, so 4 is refused once the CSA rate is 8', () => {
    expectRefused({ ...base(), compress_rate_csa: 8 }, 'compress_ratios[1]', 'expected 0, 8 (CSA rate) or 128 (HCA rate)', 'found 4')
  })

  it('refuses equal CSA and HCA rates when the list has to be read by them', () => {
    expectRefused({ ...base(), compress_rate_csa: 128 }, 'compress_rates', 'found both 128')
  })

  it('refuses a short list and a negative entry', () => {
    expectRefused({ ...base(), compress_ratios: [0, 4] }, 'compress_ratios', 'expected 4 entries', 'found 2')
    expectRefused({ ...base(), compress_ratios: [0, -4, 128, 4] }, 'compress_ratios[1]', 'found -4')
  })

  it('refuses compress_rates without both rates', () => {
    expectRefused({ ...base(), compress_rates: { compressed_sparse_attention: 4 } }, 'compress_rates.heavily_compressed_attention', 'found nothing')
  })
})

describe('the rope dim must be an even integer no larger than head_dim', () => {
  it('refuses head_dim * partial_rotary_factor that is not an integer', () => {
    expectRefused({ ...base(), head_dim: 100 }, 'head_dim', 'to be an even integer', 'found 12.5')
    expectRefused({ ...base(), partial_rotary_factor: 0.3 }, 'partial_rotary_factor', 'found 153.6')
  })

  it('refuses an odd rope dim', () => {
    expectRefused({ ...base(), qk_rope_head_dim: 63 }, 'qk_rope_head_dim', 'even integer', 'found 63')
  })

  it('refuses a qk rope dim larger than head_dim', () => {
    expectRefused({ ...base(), qk_rope_head_dim: 1024 }, 'qk_rope_head_dim', 'no larger than head_dim (512)', 'found 1024')
    expectRefused({ ...base(), partial_rotary_factor: 2 }, 'partial_rotary_factor', 'no larger than head_dim (512)', 'found 2')
  })

  it('refuses qk_rope_head_dim that disagrees with partial_rotary_factor', () => {
    expectRefused({ ...base(), partial_rotary_factor: 0.125, qk_rope_head_dim: 32 }, 'qk_rope_head_dim', 'expected head_dim * partial_rotary_factor = 64', 'found 32')
  })

  it('refuses a nested partial_rotary_factor that gives another rope dim', () => {
    const json = nested() as { rope_parameters: { compress: Record<string, unknown> } }
    json.rope_parameters.compress.partial_rotary_factor = 0.25
    expectRefused(json, 'rope_parameters.compress.partial_rotary_factor', 'expected 0.125', 'found 0.25')
  })

  it('refuses a nested default-rope dict without partial_rotary_factor when there is no top-level one', () => {
    // Seen on transformers 5.17 (fixtures/hf-rope-probe.json, config "trap"): such a main table is
    // built over all 512 head dims (256 frequencies), so the sliding layers would rotate the whole head.
    const json = nested() as { rope_parameters: { main: Record<string, unknown> } }
    delete json.rope_parameters.main.partial_rotary_factor
    expectRefused(json, 'rope_parameters.main.partial_rotary_factor', 'over the whole head_dim (512) instead of 64 dims', 'found nothing')
    // A top-level partial_rotary_factor is copied into the nested dicts, so then it is fine.
    expect(parseDeepseekV4Config({ ...json, partial_rotary_factor: 0.125 }).rope.main.ropeDim).toBe(64)
  })

  it('refuses an indexer head smaller than the rope dim', () => {
    expectRefused({ ...base(), index_head_dim: 32 }, 'index_head_dim', 'at least the rope dim (64)', 'found 32')
  })
})

describe('heads, groups and experts must fit together', () => {
  it('refuses heads not divisible by o_groups', () => {
    expectRefused({ ...base(), o_groups: 6 }, 'o_groups', 'divisor of num_attention_heads (64)', 'found 6')
  })

  it('refuses heads not divisible by num_key_value_heads', () => {
    expectRefused({ ...base(), num_key_value_heads: 3 }, 'num_key_value_heads', 'found 3')
  })

  it('refuses num_experts_per_tok > n_routed_experts', () => {
    expectRefused({ ...base(), num_experts_per_tok: 300 }, 'num_experts_per_tok', 'at most n_routed_experts (256)', 'found 300')
  })
})

describe('rope parameters must describe default rope or YaRN', () => {
  it('refuses an unknown rope_type, flat or nested, naming the key used', () => {
    expectRefused({ ...base(), rope_scaling: { rope_type: 'linear', factor: 2 } }, 'rope_scaling.rope_type', 'expected "default" or "yarn"', 'found "linear"')
    expectRefused({ ...base(), rope_scaling: { type: 'dynamic', factor: 2 } }, 'rope_scaling.type', 'found "dynamic"')
    const json = nested() as { rope_parameters: { main: Record<string, unknown> } }
    json.rope_parameters.main.rope_type = 'llama3'
    expectRefused(json, 'rope_parameters.main.rope_type', 'found "llama3"')
  })

  it('refuses yarn without factor or original_max_position_embeddings', () => {
    expectRefused({ ...base(), rope_scaling: { type: 'yarn', original_max_position_embeddings: 1024 } }, 'rope_scaling.factor', 'for rope_type "yarn"', 'found nothing')
    expectRefused({ ...base(), rope_scaling: { type: 'yarn', factor: 16 } }, 'rope_scaling.original_max_position_embeddings', 'positive integer', 'found nothing')
    const json = nested() as { rope_parameters: { compress: Record<string, unknown> } }
    json.rope_parameters.compress.factor = null
    expectRefused(json, 'rope_parameters.compress.factor', 'found null')
  })

  it('refuses factor <= 0', () => {
    expectRefused({ ...base(), rope_scaling: { type: 'yarn', factor: 0, original_max_position_embeddings: 1024 } }, 'rope_scaling.factor', 'expected a number > 0', 'found 0')
    expectRefused({ ...base(), rope_scaling: { type: 'yarn', factor: -16, original_max_position_embeddings: 1024 } }, 'rope_scaling.factor', 'found -16')
  })

  it('refuses beta_fast <= beta_slow and non-positive betas', () => {
    expectRefused({ ...base(), rope_scaling: { type: 'yarn', factor: 16, original_max_position_embeddings: 1024, beta_fast: 1, beta_slow: 1 } },
      'rope_scaling.beta_fast', 'expected beta_fast > beta_slow (1)', 'found 1')
    expectRefused({ ...base(), rope_scaling: { type: 'yarn', factor: 16, original_max_position_embeddings: 1024, beta_fast: 2, beta_slow: 4 } },
      'rope_scaling.beta_fast', 'beta_slow (4)', 'found 2')
    expectRefused({ ...base(), rope_scaling: { type: 'yarn', factor: 16, original_max_position_embeddings: 1024, beta_slow: -1 } },
      'rope_scaling.beta_slow', 'expected a number > 0', 'found -1')
  })

  it('refuses theta <= 0 at every place a theta can be given', () => {
    expectRefused({ ...base(), rope_theta: 0 }, 'rope_theta', 'expected a number > 0', 'found 0')
    expectRefused({ ...base(), compress_rope_theta: -1 }, 'compress_rope_theta', 'found -1')
    const json = nested() as { rope_parameters: { compress: Record<string, unknown> } }
    json.rope_parameters.compress.rope_theta = 0
    expectRefused(json, 'rope_parameters.compress.rope_theta', 'found 0')
  })

  it('refuses a nested dict with only one of main / compress', () => {
    expectRefused({ ...base(), rope_scaling: null, rope_parameters: { main: { rope_type: 'default' } } }, 'rope_parameters', 'found only "main"')
  })

  it('refuses a non-positive attention_factor', () => {
    const json = nested() as { rope_parameters: { compress: Record<string, unknown> } }
    json.rope_parameters.compress.attention_factor = 0
    expectRefused(json, 'rope_parameters.compress.attention_factor', 'found 0')
  })
})

describe('features the bridge does not implement are refused', () => {
  it('refuses another activation, attention or mlp bias, and an unknown router', () => {
    expectRefused({ ...base(), hidden_act: 'gelu' }, 'hidden_act', 'expected "silu"', 'found "gelu"')
    expectRefused({ ...base(), attention_bias: true }, 'attention_bias', 'expected false', 'found true')
    expectRefused({ ...base(), mlp_bias: true }, 'mlp_bias', 'found true')
    expectRefused({ ...base(), scoring_func: 'relu' }, 'scoring_func', '"sqrtsoftplus", "softmax", "sigmoid"', 'found "relu"')
  })

  it('refuses a malformed token id', () => {
    expectRefused({ ...base(), eos_token_id: 'x' }, 'eos_token_id', 'found "x"')
    expectRefused({ ...base(), bos_token_id: -1 }, 'bos_token_id', 'found -1')
  })
})

describe('errors carry the file they came from', () => {
  it('prefixes the message with the file given to parse', () => {
    const err = configError(() => parseDeepseekV4Config({ ...base(), o_groups: 6 }, 'ckpt/config.json'))
    expect(err.file).toBe('ckpt/config.json')
    expect(err.message.startsWith('ckpt/config.json: o_groups: ')).toBe(true)
  })

  it('loadDeepseekV4Config reads a directory or a file, and names the file on failure', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pd-bridge-config-'))
    writeFileSync(join(dir, 'config.json'), JSON.stringify(base()))
    expect((await loadDeepseekV4Config(dir)).numHiddenLayers).toBe(4)
    expect((await loadDeepseekV4Config(join(dir, 'config.json'))).numHiddenLayers).toBe(4)

    writeFileSync(join(dir, 'bad.json'), '{"model_type": ')
    await expect(loadDeepseekV4Config(join(dir, 'bad.json'))).rejects.toThrow(/bad\.json: \(root\): expected valid JSON/)
    writeFileSync(join(dir, 'wrong.json'), JSON.stringify({ ...base(), o_groups: 6 }))
    await expect(loadDeepseekV4Config(join(dir, 'wrong.json'))).rejects.toThrow(/wrong\.json: o_groups: /)
    await expect(loadDeepseekV4Config(join(dir, 'absent'))).rejects.toThrow(ConfigError)
    await expect(loadDeepseekV4Config(join(dir, 'absent'))).rejects.toThrow(/absent: config\.json: cannot read the file/)
  })
})

describe('ropeParamsForLayer and toHfConfigJson refuse what they cannot do', () => {
  it('refuses a layer index out of range', () => {
    const cfg = parseDeepseekV4Config(base())
    expect(configError(() => ropeParamsForLayer(cfg, 4)).message).toBe('layer: expected an integer layer index in [0, 3], found 4')
    expect(configError(() => ropeParamsForLayer(cfg, 1.5)).field).toBe('layer')
  })

  it('refuses to write truncate = false, which transformers would silently ignore', () => {
    const cfg = parseDeepseekV4Config(base())
    cfg.rope.compress = { ...cfg.rope.compress, truncate: false }
    expect(configError(() => toHfConfigJson(cfg)).field).toBe('rope.compress.truncate')
  })
})
