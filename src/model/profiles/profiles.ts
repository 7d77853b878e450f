// The named numerics profiles. docs/profiles.md explains each choice; suites/profiles checks that
// the page's table and this data agree.
import { ConfigError } from '../../errors.ts'
import type { NumericsProfile, ReferenceQuant, WeightFormat, WeightGroup } from './types.ts'

/** The four base profile names. */
export const PROFILE_NAMES = ['f32', 'hf-bf16', 'decoder', 'prefill'] as const

/** One of the four base profile names. */
export type ProfileName = typeof PROFILE_NAMES[number]

/** Appended to a profile name (`decoder+refquant`): the same profile with every reference round trip on. */
export const REFERENCE_QUANT_SUFFIX = '+refquant'

const NO_REFERENCE_QUANT: ReferenceQuant = { windowFp8: false, mainPoolFp8: false, indexerFp4: false }
const ALL_REFERENCE_QUANT: ReferenceQuant = { windowFp8: true, mainPoolFp8: true, indexerFp4: true }

function every (format: WeightFormat): Record<WeightGroup, WeightFormat> {
  return {
    embedding: format, lmHead: format, attention: format, compressor: format,
    indexerQ: format, router: format, experts: format, sharedExperts: format,
  }
}

function deepFreeze<T extends object> (value: T): T {
  for (const v of Object.values(value)) if (typeof v === 'object' && v !== null) deepFreeze(v)
  return Object.freeze(value)
}

const PROFILES: Readonly<Record<ProfileName, NumericsProfile>> = deepFreeze({
  // Everything in float32: the parity target for transformers' fp32 model.
  f32: {
    name: 'f32', version: 1, activations: 'f32', vectors: 'f32', weights: every('f32'),
    matmulOrder: 'lanes8', referenceQuant: NO_REFERENCE_QUANT,
  },
  // transformers' fp32 model cast with .to(torch.bfloat16): every parameter bf16, bf16 activations.
  'hf-bf16': {
    name: 'hf-bf16', version: 1, activations: 'bf16', vectors: 'bf16', weights: every('bf16'),
    matmulOrder: 'lanes8', referenceQuant: NO_REFERENCE_QUANT,
  },
  // The MLX decoder: MX-quantised attention and experts, bf16 where the real checkpoint is bf16.
  decoder: {
    name: 'decoder', version: 1, activations: 'bf16', vectors: 'f32',
    weights: {
      embedding: 'bf16', lmHead: 'bf16', attention: 'mxfp8', compressor: 'bf16',
      indexerQ: 'bf16', router: 'bf16', experts: 'mxfp4', sharedExperts: 'mxfp8',
    },
    matmulOrder: 'lanes8', referenceQuant: NO_REFERENCE_QUANT,
  },
  // The prefill engine: DeepSeek's fp8 checkpoint layout (128x128 tiles, ue8m0 scales), blocked sums.
  prefill: {
    name: 'prefill', version: 1, activations: 'bf16', vectors: 'f32',
    weights: {
      embedding: 'bf16', lmHead: 'bf16', attention: 'fp8-block128', compressor: 'bf16',
      indexerQ: 'bf16', router: 'bf16', experts: 'fp8-block128', sharedExperts: 'fp8-block128',
    },
    matmulOrder: 'blocks128', referenceQuant: NO_REFERENCE_QUANT,
  },
})

/** `profile` with the given reference round trips (default: all on), named `<name>+refquant`. */
export function withReferenceQuant (profile: NumericsProfile, referenceQuant: ReferenceQuant = ALL_REFERENCE_QUANT): NumericsProfile {
  const base = profile.name.endsWith(REFERENCE_QUANT_SUFFIX) ? profile.name.slice(0, -REFERENCE_QUANT_SUFFIX.length) : profile.name
  return deepFreeze({
    ...profile,
    name: `${base}${REFERENCE_QUANT_SUFFIX}`,
    weights: { ...profile.weights },
    referenceQuant: { windowFp8: referenceQuant.windowFp8, mainPoolFp8: referenceQuant.mainPoolFp8, indexerFp4: referenceQuant.indexerFp4 },
  })
}

function isProfileName (name: string): name is ProfileName {
  return (PROFILE_NAMES as readonly string[]).includes(name)
}

/**
 * The profile called `name`: one of PROFILE_NAMES, optionally followed by `+refquant` (all three
 * DeepSeek reference round trips on). Returns frozen data. Unknown names throw a ConfigError
 * that lists the known ones.
 */
export function getProfile (name: string): NumericsProfile {
  if (typeof name !== 'string') {
    throw new ConfigError('profile', `a numerics profile name must be a string, got ${name === null ? 'null' : typeof name}`)
  }
  const refquant = name.endsWith(REFERENCE_QUANT_SUFFIX)
  const base = refquant ? name.slice(0, -REFERENCE_QUANT_SUFFIX.length) : name
  if (!isProfileName(base)) {
    throw new ConfigError('profile', `unknown numerics profile ${JSON.stringify(name)}; known: ${PROFILE_NAMES.join(', ')} (each optionally with ${REFERENCE_QUANT_SUFFIX})`)
  }
  return refquant ? withReferenceQuant(PROFILES[base]) : PROFILES[base]
}
