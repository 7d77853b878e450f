// What the embedded stack computes in for a decoder kind: the numerics profile of its sidecar and
// prefill engine, and the sidecar's cache math where the kind's caches are not that profile's own kv
// path (oMLX's: MLX's CPU arithmetic). The kind's record says which (its cacheMath, and for an
// external decoder its stackProfile); this is the one place the stack reads them.
import type { DecoderKind } from '../decoders/kind.ts'
import { CACHE_MATHS, type CacheMathName } from '../wire/sidecar-format.ts'

export interface StackNumerics {
  /** The sidecar's and the prefill engine's numerics profile. */
  profile: string
  /** The sidecar's cache math record (export-weights --cache-math); absent: the profile's own kv path. */
  cacheMath?: CacheMathName
}

/**
 * A kind whose cacheMath is a profile (ours, llama.cpp) runs the stack in it with no cache math
 * record; one whose cacheMath names a cache math other than its stack profile (omlx: mlx-cpu) gets
 * that profile plus a sidecar exported under that cache math.
 */
export function stackNumerics (kind: Pick<DecoderKind, 'cacheMath' | 'external'>): StackNumerics {
  const profile = kind.external?.stackProfile ?? kind.cacheMath
  if (kind.cacheMath === profile) return { profile }
  if (!(CACHE_MATHS as readonly string[]).includes(kind.cacheMath)) {
    throw new Error(`decoder kind record: cacheMath ${JSON.stringify(kind.cacheMath)} is neither its stack profile ${JSON.stringify(profile)} nor a cache math (${CACHE_MATHS.join(', ')})`)
  }
  return { profile, cacheMath: kind.cacheMath as CacheMathName }
}
