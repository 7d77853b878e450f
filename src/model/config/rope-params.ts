// Rope parameters per rope kind (`main` for sliding layers, `compress` for CSA/HCA), folded from
// nested `rope_parameters` or a flat legacy `rope_scaling` / `rope_parameters` as transformers does.
import { ConfigError } from '../../errors.ts'
import { DEFAULT_BETA_FAST, DEFAULT_BETA_SLOW } from './defaults.ts'
import { issueToConfigError, rawRopeDictSchema, showValue } from './schema.ts'
import type { RawConfig, RawRopeDict } from './schema.ts'
import type { RopeParams } from './types.ts'

/** What the rope dicts are resolved against: sizes and top-level thetas already validated. */
export interface RopeContext {
  headDim: number
  partialRotaryFactor: number
  ropeDim: number
  /** Whether config.json itself sets a top-level `partial_rotary_factor` (transformers copies it into nested dicts). */
  topLevelPartialRotaryFactor: boolean
}

/**
 * YaRN's attention factor when the config does not give one (transformers' `get_mscale`):
 * 0.1 * mscale * ln(factor) + 1 for factor > 1, else 1; with both `mscale` and `mscale_all_dim`
 * set, the ratio of the two. For V4 this is the "mscale trap": the reference uses 1.
 */
export function defaultYarnAttentionFactor (factor: number, mscale?: number | null, mscaleAllDim?: number | null): number {
  const getMscale = (scale: number, m = 1) => scale <= 1 ? 1 : 0.1 * m * Math.log(scale) + 1
  if (mscale && mscaleAllDim) return getMscale(factor, mscale) / getMscale(factor, mscaleAllDim)
  return getMscale(factor)
}

function isPlainObject (value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

// Type-check one rope dict, reporting errors under `path`.
function checkRopeDict (value: unknown, path: string[], root: unknown): RawRopeDict {
  const result = rawRopeDictSchema.safeParse(value, { reportInput: true })
  if (!result.success) {
    const issue = result.error.issues[0]
    throw issueToConfigError({ ...issue, path: [...path, ...issue.path] }, root)
  }
  return result.data
}

// A beta: absent/null takes the YaRN default; otherwise it must be a positive number.
function beta (value: number | null | undefined, fallback: number, field: string): number {
  if (value == null) return fallback
  if (!(value > 0)) throw new ConfigError(field, `expected a number > 0, found ${showValue(value)}`)
  return value
}

/** Resolve one rope dict into RopeParams; `field` is its JSON path, `fallbackTheta` fills a missing rope_theta. */
export function resolveRopeDict (dict: RawRopeDict, field: string, fallbackTheta: number, ctx: RopeContext): RopeParams {
  const ropeType = dict.rope_type ?? dict.type ?? 'default'
  if (ropeType !== 'default' && ropeType !== 'yarn') {
    const key = dict.rope_type != null ? 'rope_type' : 'type'
    throw new ConfigError(`${field}.${key}`, `expected "default" or "yarn" (the rope types DeepSeek-V4 uses), found ${showValue(ropeType)}`)
  }
  const theta = dict.rope_theta ?? fallbackTheta
  if (dict.partial_rotary_factor == null && ropeType === 'default' && !ctx.topLevelPartialRotaryFactor) {
    // transformers builds a default-rope table from the nested dict alone, with 1.0 for a missing
    // factor: it would rotate the whole head (seen on transformers 5.17; the file it saves back has the key).
    throw new ConfigError(`${field}.partial_rotary_factor`,
      `expected a value here or a top-level partial_rotary_factor: without one transformers 5.17 builds this default-rope table over the whole head_dim (${ctx.headDim}) instead of ${ctx.ropeDim} dims; found nothing (key missing)`)
  }
  const partialRotaryFactor = dict.partial_rotary_factor ?? ctx.partialRotaryFactor
  if (ctx.headDim * partialRotaryFactor !== ctx.ropeDim) {
    throw new ConfigError(`${field}.partial_rotary_factor`,
      `expected ${ctx.ropeDim / ctx.headDim} (rope dim ${ctx.ropeDim} of head_dim ${ctx.headDim}, shared by every layer), found ${showValue(partialRotaryFactor)}`)
  }
  const common = { theta, partialRotaryFactor, ropeDim: ctx.ropeDim, truncate: true }
  if (ropeType === 'default') {
    return { ropeType, factor: 1, originalMaxPositionEmbeddings: null, betaFast: DEFAULT_BETA_FAST, betaSlow: DEFAULT_BETA_SLOW, attentionFactor: 1, ...common }
  }
  if (dict.factor == null) {
    throw new ConfigError(`${field}.factor`, `expected a number > 0 for rope_type "yarn", found ${showValue(dict.factor)}`)
  }
  if (dict.original_max_position_embeddings == null) {
    throw new ConfigError(`${field}.original_max_position_embeddings`,
      `expected a positive integer for rope_type "yarn", found ${showValue(dict.original_max_position_embeddings)}`)
  }
  const betaFast = beta(dict.beta_fast, DEFAULT_BETA_FAST, `${field}.beta_fast`)
  const betaSlow = beta(dict.beta_slow, DEFAULT_BETA_SLOW, `${field}.beta_slow`)
  if (!(betaFast > betaSlow)) {
    throw new ConfigError(`${field}.beta_fast`, `expected beta_fast > beta_slow (${betaSlow}), found ${betaFast}`)
  }
  const attentionFactor = dict.attention_factor ?? defaultYarnAttentionFactor(dict.factor, dict.mscale, dict.mscale_all_dim)
  return {
    ropeType,
    factor: dict.factor,
    originalMaxPositionEmbeddings: dict.original_max_position_embeddings,
    betaFast,
    betaSlow,
    attentionFactor,
    ...common,
  }
}

/**
 * Both rope kinds of a config. Source: a non-empty `rope_scaling` wins over `rope_parameters`
 * (transformers' `rope_scaling or rope_parameters`). Nested {main, compress} is taken as is, a
 * missing rope_theta filled from the top-level `rope_theta`. A flat dict becomes `compress` with
 * theta = `compress_rope_theta` (and attention_factor 1.0 when yarn), `main` is plain rope with
 * theta = `rope_theta`.
 */
export function foldRopeParameters (raw: RawConfig, ctx: RopeContext): { main: RopeParams, compress: RopeParams } {
  const scaling = raw.rope_scaling
  const useScaling = scaling != null && Object.keys(scaling).length > 0
  const name = useScaling ? 'rope_scaling' : 'rope_parameters'
  const source: Record<string, unknown> = (useScaling ? scaling : raw.rope_parameters) ?? {}

  const hasMain = isPlainObject(source.main)
  const hasCompress = isPlainObject(source.compress)
  if (hasMain && hasCompress) {
    const main = checkRopeDict(source.main, [name, 'main'], raw)
    const compress = checkRopeDict(source.compress, [name, 'compress'], raw)
    return {
      main: resolveRopeDict(main, `${name}.main`, raw.rope_theta, ctx),
      compress: resolveRopeDict(compress, `${name}.compress`, raw.rope_theta, ctx),
    }
  }
  if (hasMain || hasCompress) {
    throw new ConfigError(name, `expected both "main" and "compress" rope dicts, found only ${hasMain ? '"main"' : '"compress"'}`)
  }

  const flat = checkRopeDict(source, [name], raw)
  const ropeType = flat.rope_type ?? flat.type ?? 'default'
  const compressDict: RawRopeDict = {
    ...flat,
    rope_theta: raw.compress_rope_theta,
    partial_rotary_factor: ctx.partialRotaryFactor,
  }
  // transformers injects attention_factor = 1.0 only here (flat -> nested), and only for yarn.
  if (ropeType === 'yarn' && !('attention_factor' in flat)) compressDict.attention_factor = 1
  const mainDict: RawRopeDict = { rope_type: 'default', rope_theta: raw.rope_theta, partial_rotary_factor: ctx.partialRotaryFactor }
  return {
    main: resolveRopeDict(mainDict, 'rope_theta', raw.rope_theta, ctx),
    compress: resolveRopeDict(compressDict, name, raw.compress_rope_theta, ctx),
  }
}
