// The geometry fingerprint: one hash of everything that makes a cached row mean what it means
// beyond the tokens: the rope tables of both rope kinds (their exact fp32 bits), the window, the
// layer pattern and the numerics profile. oMLX's key has none of these, so a block built under an
// old rope would otherwise be served as a hit; with the fingerprint in the signature it is a miss.
import { createHash } from 'node:crypto'
import { BlockStoreError } from '../errors.ts'
import type { DeepseekV4Config, RopeParams } from '../model/config.ts'
import { ropeFingerprint } from '../model/rope.ts'
import { pythonJsonDumps, type JsonValue } from './python-json.ts'

/** What the geometry fingerprint covers. */
export interface GeometryInputs {
  /** Rope parameters of sliding layers (`main`) and of compressed layers (`compress`). */
  rope: { main: RopeParams, compress: RopeParams }
  /** The table length the rope fingerprints cover. */
  maxPositionEmbeddings: number
  slidingWindow: number
  /** Per layer: 0, the CSA ratio or the HCA ratio. */
  compressRatios: readonly number[]
  /** The numerics profile as plain data (a named, versioned object), hashed as canonical JSON. */
  profile: JsonValue
}

/** Version tag hashed first, bumped if the fingerprint's inputs ever change. */
const TAG = 'pd-bridge/geometry-fingerprint/v1\n'

/** sha256 hex over the tag and canonical JSON of the rope table fingerprints, window, ratios and profile. */
export function geometryFingerprint (g: GeometryInputs): string {
  if (!Number.isSafeInteger(g.slidingWindow) || g.slidingWindow <= 0) {
    throw new BlockStoreError('geometry', `sliding window must be a positive integer, got ${g.slidingWindow}`)
  }
  const fields: JsonValue = {
    compressRatios: [...g.compressRatios],
    maxPositionEmbeddings: g.maxPositionEmbeddings,
    profile: g.profile,
    ropeCompress: ropeFingerprint(g.rope.compress, g.maxPositionEmbeddings),
    ropeMain: ropeFingerprint(g.rope.main, g.maxPositionEmbeddings),
    slidingWindow: g.slidingWindow,
  }
  return createHash('sha256').update(TAG).update(pythonJsonDumps(fields, { compact: true, sortKeys: true })).digest('hex')
}

/** The geometry fingerprint of a DeepSeek-V4 config under a numerics profile. */
export function deepseekV4GeometryFingerprint (cfg: DeepseekV4Config, profile: JsonValue): string {
  return geometryFingerprint({
    rope: cfg.rope,
    maxPositionEmbeddings: cfg.maxPositionEmbeddings,
    slidingWindow: cfg.slidingWindow,
    compressRatios: cfg.compressRatios,
    profile,
  })
}
