// The llama.cpp decoder's geometry fingerprint: what a state file in its store must have been made
// under. Stable across runs (JSON of fixed-order fields), different whenever a file would not fit.
import { createHash } from 'node:crypto'
import type { LlamaCppStateGeometry } from '../state/geometry.ts'

/** sha256 hex of {engine, modelName, blockSize, geometry} as JSON. */
export function llamaCppGeometryFingerprint (geometry: LlamaCppStateGeometry, blockSize: number, modelName: string): string {
  const g = geometry
  // Fields listed explicitly, so a reordered interface does not change the string.
  const geometryJson = { vocabSize: g.vocabSize, layerRatios: g.layerRatios, headDim: g.headDim, indexHeadDim: g.indexHeadDim, slidingWindow: g.slidingWindow, cacheType: g.cacheType, vTrans: g.vTrans }
  return createHash('sha256').update(JSON.stringify({ engine: 'llama.cpp', modelName, blockSize, geometry: geometryJson })).digest('hex')
}
