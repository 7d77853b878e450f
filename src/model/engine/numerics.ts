// The numerics one model computes with under one profile, built once and carried by every layer
// object: where activations round, the rope tables, the reference-quant hooks on cached values.
import type { DeepseekV4Config } from '../config.ts'
import { referenceQuantHooks, type NumericsProfile, type ReferenceQuantHooks } from '../profiles/index.ts'
import { activationRounding, type ActivationRounding } from './activation.ts'
import { RopeTables } from './rope-tables.ts'

/** Reference-quant hooks on cached activations (DeepSeek's QAT round trips, src/model/profiles); null = all off. */
export type CacheQuantHooks = ReferenceQuantHooks

/** A model's numerics under one profile. */
export interface ModelNumerics {
  profile: NumericsProfile
  act: ActivationRounding
  rope: RopeTables
  quant: CacheQuantHooks | null
}

/**
 * The numerics of `profile` for a model with this rope pair, head dim and rope dim (a config's, or a
 * sidecar's: it carries just these). transformers' bf16 model holds inv_freq as a bf16 buffer and
 * casts cos/sin to the activation dtype.
 */
export function modelNumerics (profile: NumericsProfile, dims: Pick<DeepseekV4Config, 'rope' | 'headDim'> & { ropeDim: number }): ModelNumerics {
  const act = activationRounding(profile.activations)
  return {
    profile,
    act,
    rope: new RopeTables(dims, { invFreqBf16: profile.vectors === 'bf16', cosSinBf16: act.bf16 }),
    quant: referenceQuantHooks(profile.referenceQuant, dims.headDim, dims.ropeDim),
  }
}
