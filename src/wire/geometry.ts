// The geometry fingerprint: one hash of everything that makes a cached row mean what it means
// beyond the tokens: the rope tables of both rope kinds (their exact fp32 bits), the window, the
// layer pattern and the numerics profile. oMLX's key has none of these, so a block built under an
// old rope would otherwise be served as a hit; with the fingerprint in the signature it is a miss.
import { createHash } from 'node:crypto'
import { BlockStoreError } from '../errors.ts'
import type { DeepseekV4Config, RopeParams } from '../model/config.ts'
import type { NumericsProfile } from '../model/profiles/types.ts'
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
  return Geometry.fromConfig(cfg, profile).fingerprint
}

/** What a sidecar.json says about geometry (src/wire/sidecar-format.ts has the whole format). */
export interface SidecarGeometryFields {
  ropeParameters: { sliding_attention: RopeParams, compressed_sparse_attention: RopeParams }
  maxPositionEmbeddings: number
  slidingWindow: number
  layers: ReadonlyArray<{ compressRatio: number }>
  profile: object
  /** The cache arithmetic when it is not the decoder profile's own (sidecar-format.ts). */
  cacheMath?: object
}

/** The rope parameters of a sidecar's main (sliding) and compress (CSA/HCA) tables. */
export function sidecarRope (json: Pick<SidecarGeometryFields, 'ropeParameters'>): { main: RopeParams, compress: RopeParams } {
  return { main: json.ropeParameters.sliding_attention, compress: json.ropeParameters.compressed_sparse_attention }
}

/**
 * The profile field of the fingerprint: the profile alone for the `decoder` cache math (so every
 * fingerprint made before cache maths existed is unchanged), else the profile beside the cache
 * math, so a block computed with one arithmetic is never served to a deployment of the other.
 */
function withCacheMath (profile: JsonValue, cacheMath: object | undefined): JsonValue {
  return cacheMath === undefined ? profile : { profile, cacheMath: cacheMath as JsonValue }
}

/**
 * One geometry, from a decoder's config and profile or from a sidecar, with its fingerprint computed
 * once. Every part that compares geometries (store, writer, decoder, doctor, gate, sidecar) builds one
 * of these instead of assembling the inputs itself.
 */
export class Geometry {
  private memo: string | undefined

  private constructor (readonly inputs: GeometryInputs) {}

  /**
   * A decoder's geometry: its config under its numerics profile, and the cache math its blocks are
   * computed with when that is not the profile's own (a deployment served by MLX's arithmetic).
   */
  static fromConfig (cfg: DeepseekV4Config, profile: NumericsProfile | JsonValue, cacheMath?: object): Geometry {
    return new Geometry({
      rope: cfg.rope,
      maxPositionEmbeddings: cfg.maxPositionEmbeddings,
      slidingWindow: cfg.slidingWindow,
      compressRatios: cfg.compressRatios,
      profile: withCacheMath(profile as JsonValue, cacheMath),
    })
  }

  /**
   * The store geometry a sidecar was exported for (its decoder profile); with `exportedWeightsSha256`,
   * the sidecar's own fingerprint, which also covers the exported weights.
   */
  static fromSidecar (json: SidecarGeometryFields, exportedWeightsSha256?: string): Geometry {
    const profile = withCacheMath(json.profile as JsonValue, json.cacheMath)
    return new Geometry({
      rope: sidecarRope(json),
      maxPositionEmbeddings: json.maxPositionEmbeddings,
      slidingWindow: json.slidingWindow,
      compressRatios: json.layers.map((l) => l.compressRatio),
      profile: exportedWeightsSha256 === undefined ? profile : { profile, exportedWeightsSha256 },
    })
  }

  /** sha256 hex of the inputs (geometryFingerprint), computed on first use. */
  get fingerprint (): string {
    this.memo ??= geometryFingerprint(this.inputs)
    return this.memo
  }
}
